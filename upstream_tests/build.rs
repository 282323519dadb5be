//! Generates the upstream test suites into `OUT_DIR`, from sources already on this machine:
//!
//! - parking_lot 0.13's own unit tests: the `mod tests` (and `mod webkit_queue_test`) of its
//!   `src/mutex.rs`, `src/condvar.rs` and `src/remutex.rs`, from the crate cargo downloaded as
//!   this package's dependency (found with `cargo metadata`). Written to
//!   `parking_lot_tests.rs`.
//! - Rust std's `Mutex` and `Condvar` tests, `library/std/tests/sync/{mutex,condvar}.rs` of the
//!   toolchain's `rust-src` component (`rustup component add rust-src`), non-poisoning tests
//!   only. Written to `std_tests.rs`.
//! - `left_out.rs`: every upstream test (or helper) that is not generated, with the reason.
//!
//! The only changes to the upstream text: parking_lot's `use crate::...` names the types of a
//! module `locks` of the including crate (which renames one lock's types to parking_lot's
//! names); std's `std::sync::nonpoison` becomes that same module, and std's
//! `nonpoison_and_poison_unwrap_test!` is expanded here into its `nonpoison_` test only (its
//! `${concat}` needs a nightly feature). Nothing of the upstream code is copied into the
//! repository.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote};

/// Why a test is not generated (the list `left_out_tests_are_listed` checks).
const POISON: &str =
    "poisoning: lock_api's mutexes do not poison (a panic while locked just unlocks)";
const POISON_HELPER: &str = "helper used only by the poisoning tests";
const NO_LOCK: &str = "tests std's test types (mem::needs_drop), no lock";
const SERDE: &str = "needs parking_lot's own `serde` feature and postcard; numa_locks' serde \
     passthrough is tested in tests/features.rs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let mut left_out = Vec::new();

    let parking_lot = parking_lot_dir();
    let mut suite = String::new();
    for (file, module) in [
        ("src/mutex.rs", "mutex"),
        ("src/condvar.rs", "condvar"),
        ("src/remutex.rs", "remutex"),
    ] {
        suite += &parking_lot_module(&parking_lot.join(file), module, &mut left_out);
    }
    fs::write(out.join("parking_lot_tests.rs"), suite).expect("write parking_lot_tests.rs");

    let std_sync = std_sync_tests_dir();
    let mut suite = String::new();
    for (file, module) in [("mutex.rs", "std_mutex"), ("condvar.rs", "std_condvar")] {
        suite += &std_module(&std_sync.join(file), module, &mut left_out);
    }
    fs::write(out.join("std_tests.rs"), suite).expect("write std_tests.rs");

    let mut list = String::from("&[\n");
    for (test, reason) in &left_out {
        writeln!(list, "    ({test:?}, {reason:?}),").unwrap();
    }
    list += "]\n";
    fs::write(out.join("left_out.rs"), list).expect("write left_out.rs");
}

/// The directory of the parking_lot package in this workspace's resolve (its downloaded source).
fn parking_lot_dir() -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(&env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.toml");
    let host = env::var("HOST").expect("HOST");
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata --offline failed (a build script's cargo must not download; run \
         `cargo fetch` first, as .ci/run does): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("metadata JSON");
    let package = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "parking_lot")
        .expect("parking_lot in cargo metadata's packages (a dependency of upstream_tests)");
    let manifest_path = package["manifest_path"].as_str().expect("manifest_path");
    let dir = Path::new(manifest_path).parent().unwrap().to_path_buf();
    println!("cargo:rerun-if-changed={}", dir.join("src").display());
    dir
}

/// `library/std/tests/sync` in the toolchain's rust-src component.
fn std_sync_tests_dir() -> PathBuf {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc --print sysroot");
    let sysroot = String::from_utf8(output.stdout).expect("sysroot path");
    let dir = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library/std/tests/sync");
    assert!(
        dir.join("mutex.rs").is_file() && dir.join("condvar.rs").is_file(),
        "std's sync tests not found at {}: install the toolchain's sources with \
         `rustup component add rust-src`",
        dir.display()
    );
    println!("cargo:rerun-if-changed={}", dir.display());
    dir
}

fn parse(path: &Path) -> syn::File {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Whether `attrs` hold `#[cfg(...)]` whose tokens contain `needle`.
fn has_cfg(attrs: &[syn::Attribute], needle: &str) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains(needle))
}

/// The `#[cfg(test)]` modules of one parking_lot file, as `pub mod <module> { ... }`, with
/// `crate::` turned into `super::super::locks::` (from `<module>::tests`, the including
/// module's `locks`). The `serde` tests (and their imports) are left out.
fn parking_lot_module(path: &Path, module: &str, left_out: &mut Vec<(String, &str)>) -> String {
    let file = parse(path);
    let mut mods = TokenStream::new();
    for item in file.items {
        let syn::Item::Mod(mut test_mod) = item else {
            continue;
        };
        if !has_cfg(&test_mod.attrs, "test") {
            continue;
        }
        test_mod.attrs.retain(|a| {
            !(a.path().is_ident("cfg") && a.meta.to_token_stream().to_string() == "cfg (test)")
        });
        let name = test_mod.ident.to_string();
        let (_, items) = test_mod.content.as_mut().expect("inline test module");
        items.retain(|item| {
            let attrs = match item {
                syn::Item::Fn(f) => &f.attrs,
                syn::Item::Use(u) => &u.attrs,
                _ => return true,
            };
            if !has_cfg(attrs, "serde") {
                return true;
            }
            if let syn::Item::Fn(f) = item {
                left_out.push((
                    format!("parking_lot {module}::{name}::{}", f.sig.ident),
                    SERDE,
                ));
            }
            false
        });
        mods.extend(test_mod.into_token_stream());
    }
    let text = mods.to_string();
    assert!(
        text.contains("crate ::"),
        "{}: no `crate::` to rename",
        path.display()
    );
    let text = text.replace("crate ::", "super :: super :: locks ::");
    // Upstream code, printed on one line from its tokens: clippy's judgement is not asked.
    format!("pub mod {module} {{ #![allow(clippy::all)] {text} }}\n")
}

/// One std test file as `pub mod <module> { ... }`: the non-poisoning tests, with
/// `std::sync::nonpoison` turned into `super::locks` (the including module's `locks`).
fn std_module(path: &Path, module: &str, left_out: &mut Vec<(String, &str)>) -> String {
    let file = parse(path);
    let mut items = TokenStream::new();
    for item in file.items {
        match item {
            syn::Item::Use(ref u)
                if u.to_token_stream()
                    .to_string()
                    .contains("nonpoison_and_poison_unwrap_test") =>
            {
                // The macro is expanded below instead.
            }
            syn::Item::Macro(ref m) if m.mac.path.is_ident("nonpoison_and_poison_unwrap_test") => {
                let (name, body) = unwrap_test_parts(m.mac.tokens.clone());
                left_out.push((format!("std {module}::poison_{name}"), POISON));
                let attrs = &m.attrs;
                let test = format_ident!("nonpoison_{}", name);
                items.extend(quote! {
                    #(#attrs)*
                    #[test]
                    fn #test() {
                        #[allow(unused_imports)]
                        use ::std::convert::identity as maybe_unwrap;
                        use super::locks as locks;
                        #body
                    }
                });
            }
            syn::Item::Fn(ref f) => {
                let name = f.sig.ident.to_string();
                let is_test = f.attrs.iter().any(|a| a.path().is_ident("test"));
                if name == "test_needs_drop" {
                    left_out.push((format!("std {module}::{name}"), NO_LOCK));
                } else if name.contains("poison") && !name.starts_with("nonpoison") {
                    let reason = if is_test { POISON } else { POISON_HELPER };
                    left_out.push((format!("std {module}::{name}"), reason));
                } else {
                    items.extend(item.into_token_stream());
                }
            }
            syn::Item::Use(mut u) => {
                drop_std_poisoning_locks(&mut u.tree);
                items.extend(u.into_token_stream());
            }
            item => items.extend(item.into_token_stream()),
        }
    }
    let text = items.to_string();
    let text = text.replace("std :: sync :: nonpoison", "super :: locks");
    format!(
        "pub mod {module} {{ #![allow(unused_imports, dead_code, clippy::all)] \
         use upstream_tests::std_names::*; {text} }}\n"
    )
}

/// Removes std's poisoning lock types from a file-level `use std::sync::{...}`: only the
/// poisoning tests use them there (the others import theirs from `locks`), and some are
/// unstable (`MappedMutexGuard`).
fn drop_std_poisoning_locks(tree: &mut syn::UseTree) {
    const POISONING: &[&str] = &[
        "Mutex",
        "MutexGuard",
        "MappedMutexGuard",
        "Condvar",
        "TryLockError",
    ];
    let syn::UseTree::Path(std) = tree else {
        return;
    };
    let syn::UseTree::Path(sync) = &mut *std.tree else {
        return;
    };
    if std.ident != "std" || sync.ident != "sync" {
        return;
    }
    if let syn::UseTree::Group(group) = &mut *sync.tree {
        group.items = std::mem::take(&mut group.items)
            .into_iter()
            .filter(|t| !matches!(t, syn::UseTree::Name(n) if POISONING.contains(&n.ident.to_string().as_str())))
            .collect();
    }
}

/// `name: <ident>, test_body: { <body> }` of std's `nonpoison_and_poison_unwrap_test!`.
fn unwrap_test_parts(tokens: TokenStream) -> (String, TokenStream) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut name = None;
    let mut body = None;
    for (i, tree) in trees.iter().enumerate() {
        // `key : value`: the value is two trees on.
        match (tree, trees.get(i + 2)) {
            (TokenTree::Ident(key), Some(TokenTree::Ident(n))) if key == "name" => {
                name = Some(n.to_string());
            }
            (TokenTree::Ident(key), Some(TokenTree::Group(g))) if key == "test_body" => {
                body = Some(g.stream());
            }
            _ => {}
        }
    }
    (
        name.expect("nonpoison_and_poison_unwrap_test!: name"),
        body.expect("nonpoison_and_poison_unwrap_test!: test_body"),
    )
}
