//! Runs the `numasim` example binary: bad command lines exit with code 2 and say what is wrong and
//! what is allowed; tiny simulated runs print well-formed, repeatable CSV and draw SVG charts.
//!
//! Run with
//! `RUSTFLAGS="--cfg numa_sim" cargo test --release --test numasim_cli --target-dir target/sim`.
#![cfg(numa_sim)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use numa_bench::cli_checks::{
    assert_rejected_output, assert_svg_chart, csv_rows, number, scratch_dir,
};

const CSV_HEADER: &str = "machine,lock,workload,threads,sim_ops_per_sec,speedup_vs_mcs,\
                          fairness_factor,max_min,remote_handoff_pct,wait_p99_us,host_ms";

/// The example binary, built once per test process into the target directory this test binary
/// came from (target/<dir>/<profile>/deps/numasim_cli-<hash>), with the same profile and
/// `--cfg numa_sim`, so that it runs the code under test and never rebuilds another directory.
fn numasim_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let test_binary = std::env::current_exe().expect("the test binary's path");
        let profile_dir = test_binary
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps/<test>");
        let target_dir = profile_dir.parent().expect("target/<profile>");
        let release = profile_dir
            .file_name()
            .is_some_and(|name| name == "release");
        let rustflags = std::env::var("RUSTFLAGS")
            .ok()
            .filter(|flags| flags.contains("numa_sim"))
            .unwrap_or_else(|| "--cfg numa_sim".to_string());
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args(["build", "--quiet", "--example", "numasim", "--target-dir"])
            .arg(target_dir)
            .env("RUSTFLAGS", rustflags)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if release {
            cargo.arg("--release");
        }
        let status = cargo.status().expect("cannot run cargo build");
        assert!(status.success(), "cargo build --example numasim failed");
        profile_dir
            .join("examples")
            .join(format!("numasim{}", std::env::consts::EXE_SUFFIX))
    })
}

fn numasim(args: &[&str]) -> Output {
    Command::new(numasim_binary())
        .args(args)
        .output()
        .expect("cannot start the numasim example")
}

/// Asserts exit code 2, no panic, nothing on stdout, and a stderr that contains every one of
/// `needles`.
fn assert_rejected(args: &[&str], needles: &[&str]) {
    assert_rejected_output(args, &numasim(args), needles);
}

/// A run that must succeed; returns its stdout.
fn run_ok(args: &[&str]) -> String {
    let output = numasim(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "args {args:?}; stderr:\n{stderr}"
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn unknown_machine_lists_the_presets() {
    assert_rejected(
        &["--machine", "vax"],
        &[
            "vax",
            "--machine",
            "x5-4",
            "kunpeng920",
            "epyc-2s",
            "2s-generic",
        ],
    );
}

#[test]
fn too_many_threads_names_both_numbers() {
    assert_rejected(
        &["--machine", "x5-4", "--threads", "1,145"],
        &["145", "144", "x5-4", "--threads"],
    );
    assert_rejected(
        &["--machine", "2s-generic", "--threads", "65"],
        &["65", "64", "2s-generic"],
    );
}

#[test]
fn bad_thread_lists_are_rejected() {
    assert_rejected(&["--threads", "0"], &["'0'", "--threads"]);
    assert_rejected(&["--threads", "1,,2"], &["'1,,2'", "--threads", "empty"]);
    assert_rejected(&["--threads", "-3"], &["-3", "--threads"]);
}

#[test]
fn unknown_lock_and_workload_are_rejected() {
    assert_rejected(
        &["--locks", "mcs,foo"],
        &[
            "'foo'",
            "--locks",
            "mcs, cna, hq, qspinlock, cna-kernel, cna-kernel-wo-sro, cna-kernel-v13, cna-kernel-v13-wo-sro, std, \
             pthread, ttas, spin-mcs, mcs-rw, cna-rw, \
             hq-rw, pl-rwlock, std-rwlock, sharded-rw, mcs-delegate, cna-delegate, hq-delegate",
        ],
    );
    assert_rejected(
        &["--workload", "counter,bar"],
        &[
            "'bar'",
            "--workload",
            "counter, kv, freelist, locktorture, lockbench, rw",
        ],
    );
}

#[test]
fn other_bad_values_are_rejected() {
    assert_rejected(
        &["--stealing", "maybe"],
        &["'maybe'", "--stealing", "on", "off"],
    );
    assert_rejected(
        &["--rwlock-handover", "yes"],
        &["'yes'", "--rwlock-handover", "on", "off"],
    );
    assert_rejected(
        &["--rwlock-write-mode", "always"],
        &["'always'", "--rwlock-write-mode", "on", "off"],
    );
    assert_rejected(
        &["--format", "json"],
        &["'json'", "--format", "table", "csv"],
    );
    assert_rejected(
        &["--placement", "close"],
        &[
            "'close'",
            "--placement",
            "spread",
            "packed",
            "linux",
            "linux-5.12",
        ],
    );
    assert_rejected(
        &["--placement", "linux-5.12", "--machine", "kunpeng920"],
        &[
            "'linux-5.12'",
            "--placement",
            "kunpeng920",
            "one NUMA level",
            "2 nodes per socket",
        ],
    );
    assert_rejected(
        &[
            "--placement",
            "packed",
            "--machine",
            "epyc-2s",
            "--threads",
            "193",
        ],
        &["'193'", "192"],
    );
    assert_rejected(&["--duration-us", "0"], &["'0'", "--duration-us"]);
    assert_rejected(
        &["--lockbench-locks", "0"],
        &["'0'", "--lockbench-locks", "1..=4096"],
    );
    assert_rejected(
        &["--lockbench-locks", "4097"],
        &["'4097'", "--lockbench-locks", "1..=4096"],
    );
    assert_rejected(
        &["--lockbench-ops", "1000001"],
        &["'1000001'", "--lockbench-ops", "0..=1000000"],
    );
    assert_rejected(
        &["--store-buffers", "maybe"],
        &["'maybe'", "--store-buffers", "on", "off"],
    );
    assert_rejected(&["--seed", "x"], &["'x'", "--seed"]);
    assert_rejected(
        &["--locktorture-stutter", "1001"],
        &["'1001'", "--locktorture-stutter", "0..=1000"],
    );
    for ns in ["0", "999", "1000000001", "1ms"] {
        let quoted = format!("'{ns}'");
        assert_rejected(
            &["--cna-kernel-threshold-ns", ns],
            &[&quoted, "--cna-kernel-threshold-ns"],
        );
    }
    assert_rejected(
        &["--cna-kernel-threshold-ns", "999"],
        &["1000..=1000000000"],
    );
    for pct in ["101", "-1", "9.5", "all", ""] {
        let quoted = format!("'{pct}'");
        assert_rejected(
            &["--workload", "rw", "--read-pct", pct],
            &[&quoted, "--read-pct", "an integer from 0 to 100"],
        );
    }
    assert_rejected(
        &["--store-forwarding", "word"],
        &["'word'", "--store-forwarding", "line", "address"],
    );
    for option in ["--snoop-window", "--wake-phase"] {
        assert_rejected(&[option, "maybe"], &["'maybe'", option, "on", "off"]);
    }
    assert_rejected(&["--frobnicate"], &["'--frobnicate'"]);
    for window in ["5-3", "5", "a-b", "-1-2", "4-4"] {
        assert_rejected(&["--trace", window], &["--trace", "FROM-TO", "FROM < TO"]);
    }
}

#[test]
fn trace_writes_the_window_accesses_to_stderr_and_changes_nothing() {
    let args = [
        "--threads",
        "4",
        "--locks",
        "mcs,ttas",
        "--machine",
        "kunpeng920",
    ];
    let plain = tiny(&args);
    let window = [&args[..], &["--trace", "100-101.5"]].concat();
    let full: Vec<&str> = TINY.iter().chain(&window).copied().collect();
    let output = numasim(&full);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(without_host_ms(&stdout, ','), without_host_ms(&plain, ','));
    let stderr = String::from_utf8(output.stderr).unwrap();
    for lock in ["mcs", "ttas"] {
        let header = format!("trace: {lock} counter 4 threads: ");
        let at = stderr
            .find(&header)
            .unwrap_or_else(|| panic!("no trace of {lock}:\n{stderr}"));
        let lines: Vec<&str> = stderr[at..]
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with("  "))
            .collect();
        assert!(!lines.is_empty(), "{lock}: no access in 1.5 us:\n{stderr}");
        for line in &lines {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let issued: f64 = fields[0].parse().unwrap();
            if fields[4] == "Sleep" {
                // A sleep in progress at the window's start counts too.
                let end = issued + fields[1].parse::<f64>().unwrap();
                assert!(issued < 101_500.0 && end >= 100_000.0, "{line}");
            } else {
                assert!((100_000.0..101_500.0).contains(&issued), "{line}");
            }
            let outcomes: &[&str] = match fields[4] {
                "Load" | "Store" | "Rmw" => &["hit", "MISS"],
                "Sleep" => &["woken", "timeout"],
                "Wake" => &["woke", "none"],
                kind => panic!("unknown kind {kind}: {line}"),
            };
            assert!(outcomes.contains(&fields[6]), "{line}");
        }
        // Every critical section writes the protected data: labelled as such.
        assert!(
            lines.iter().any(|l| l.contains("data+0x0")),
            "{lock}:\n{stderr}"
        );
    }
}

#[test]
fn tunables_are_validated_by_the_setters() {
    // The setters' errors name the value and the allowed range.
    assert_rejected(&["--spin-us", "2000000"], &["--spin-us", "2s", "0 to 1s"]);
    assert_rejected(
        &["--steal-bound-us", "0"],
        &["--steal-bound-us", "1us to 10s"],
    );
    assert_rejected(
        &["--retake-window-us", "20000"],
        &["--retake-window-us", "20ms", "0 to 10ms"],
    );
    assert_rejected(
        &["--lone-retake-window-us", "20000"],
        &["--lone-retake-window-us", "20ms", "0 to 10ms"],
    );
    assert_rejected(
        &["--cna-flush-us", "0.5"],
        &["--cna-flush-us", "1us to 10s"],
    );
    assert_rejected(
        &["--hq-local-handoffs", "0"],
        &["--hq-local-handoffs", "0", "1 to 16777216"],
    );
    assert_rejected(
        &["--hq-domain-handoffs", "0"],
        &[
            "--hq-domain-handoffs",
            "0",
            "hq_domain_handoffs",
            "1 to 16777216",
        ],
    );
    assert_rejected(
        &["--hq-domain-handoffs", "16777217"],
        &["--hq-domain-handoffs", "16777217", "1 to 16777216"],
    );
    assert_rejected(&["--spin-us", "-1"], &["'-1'", "--spin-us"]);
}

#[test]
fn machine_list_describes_every_preset() {
    let stdout = run_ok(&["--machine", "list"]);
    for name in ["x5-4", "kunpeng920", "epyc-2s", "2s-generic"] {
        let line = stdout
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}"));
        assert!(line.contains("hw threads"), "{line}");
    }
}

#[test]
fn help_explains_locks_workloads_and_columns() {
    let help = run_ok(&["--help"]);
    for needle in [
        "--machine",
        "--threads",
        "--locks",
        "--workload",
        "--seed",
        "--duration-us",
        "--stealing",
        "--rwlock-write-mode",
        "--format",
        "--plot",
        "--spin-us",
        "--steal-bound-us",
        "--retake-window-us",
        "--lone-retake-window-us",
        "--cna-flush-us",
        "--hq-local-handoffs",
        "--hq-domain-handoffs",
        "--lockbench-locks",
        "--lockbench-ops",
        "--store-buffers",
        "MODEL",
        "qspinlock",
        "cna-kernel",
        "std",
        "pthread",
        "e5-2690v3-2s",
        "locktorture",
        "lockbench",
        "remote_handoff_pct",
        "wait_p99_us",
        "host_ms",
        "--read-pct",
        "--writers",
        "reads_per_sec",
        "rw ",
        "mcs-rw",
        "cna-rw",
        "hq-rw",
        "pl-rwlock",
        "std-rwlock",
        "sharded-rw",
        "write_wait_p99_us",
        "run as write locks",
        "mcs-delegate",
        "cna-delegate",
        "hq-delegate",
        "Delegate::delegate",
    ] {
        assert!(help.contains(needle), "--help does not mention {needle}");
    }
}

/// The defaults `--help` states for the pass-through tunables are the crate's own (a default
/// that changes in `tunables` must change in the help too).
#[test]
fn help_states_the_crate_defaults() {
    use numa_locks::tunables;
    let help = run_ok(&["--help"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (option, default) in [
        ("--spin-us", tunables::DEFAULT_SPIN_TIME.as_micros()),
        (
            "--steal-bound-us",
            tunables::DEFAULT_STEAL_BOUND.as_micros(),
        ),
        (
            "--retake-window-us",
            tunables::DEFAULT_RETAKE_WINDOW.as_micros(),
        ),
        (
            "--lone-retake-window-us",
            tunables::DEFAULT_LONE_RETAKE_WINDOW.as_micros(),
        ),
        (
            "--cna-flush-us",
            tunables::DEFAULT_CNA_FLUSH_THRESHOLD.as_micros(),
        ),
        (
            "--hq-local-handoffs",
            u128::from(tunables::DEFAULT_HQ_LOCAL_HANDOFFS),
        ),
        (
            "--hq-domain-handoffs",
            u128::from(tunables::DEFAULT_HQ_DOMAIN_HANDOFFS),
        ),
    ] {
        let start = help
            .find(&format!("{option} <"))
            .unwrap_or_else(|| panic!("--help does not describe {option}"));
        let text = &help[start..];
        let stated = text
            .find("[default: ")
            .map(|at| &text[at + "[default: ".len()..])
            .and_then(|rest| rest.split(']').next())
            .unwrap_or_else(|| panic!("--help states no default for {option}"));
        assert_eq!(stated, default.to_string(), "--help's default for {option}");
    }
}

const TINY: [&str; 4] = ["--duration-us", "200", "--format", "csv"];

fn tiny(extra: &[&str]) -> String {
    let args: Vec<&str> = TINY.iter().chain(extra).copied().collect();
    run_ok(&args)
}

#[test]
fn csv_has_the_exact_header_and_one_row_per_run() {
    let stdout = tiny(&[
        "--machine",
        "kunpeng920",
        "--threads",
        "1,8",
        "--locks",
        "mcs,cna,hq,ttas,spin-mcs",
    ]);
    assert_eq!(stdout.lines().next(), Some(CSV_HEADER));
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 5 * 2, "{stdout}");
    for row in &rows {
        assert_eq!(row.len(), 11, "{row:?}");
        assert_eq!(row[0], "kunpeng920");
        assert_eq!(row[2], "counter");
        assert!(number(row, 4) > 0.0, "sim_ops_per_sec: {row:?}");
        assert!(number(row, 5) > 0.0, "speedup_vs_mcs: {row:?}");
        let fairness = number(row, 6);
        assert!((0.5..=1.0).contains(&fairness), "fairness_factor: {row:?}");
        assert!(number(row, 7) >= 1.0, "max_min: {row:?}");
        let remote = number(row, 8);
        assert!(
            (0.0..=100.0).contains(&remote),
            "remote_handoff_pct: {row:?}"
        );
        assert!(number(row, 9) >= 0.0, "wait_p99_us: {row:?}");
        assert!(number(row, 10) >= 0.0, "host_ms: {row:?}");
        if row[3] == "1" {
            // One thread: no handoffs, perfectly "fair".
            assert_eq!((row[6], row[7], row[8]), ("1.0000", "1.000", "0.00"));
        }
        if row[1] == "mcs" {
            assert_eq!(row[5], "1.000");
        }
    }
}

/// A run of `args` with `--placement placement` in CSV, which must succeed and name the
/// placement in its header: each row's lock and `remote_handoff_pct`.
fn remote_by_lock(args: &[&str], placement: &str) -> Vec<(String, f64)> {
    let mut all = args.to_vec();
    all.extend(["--format", "csv", "--placement", placement]);
    let output = numasim(&all);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stderr.contains(&format!("placement {placement},")),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    csv_rows(&stdout)
        .iter()
        .map(|row| (row[1].to_string(), row[8].parse().unwrap()))
        .collect()
}

/// `--placement packed` puts up to one node's worth of threads on one node: no handoff crosses
/// nodes, for any lock, where the default spread placement crosses in most of McsMutex's; the
/// header on stderr names the placement.
#[test]
fn packed_placement_keeps_every_handoff_on_one_node() {
    let run = |placement: &str| {
        let remote = remote_by_lock(
            &[
                "--duration-us",
                "1000",
                "--machine",
                "kunpeng920",
                "--threads",
                "24",
                "--locks",
                "mcs,cna,hq,ttas,spin-mcs",
            ],
            placement,
        );
        assert_eq!(remote.len(), 5, "{remote:?}");
        remote
    };
    for (lock, remote) in run("packed") {
        assert_eq!(remote, 0.0, "{lock}: {remote}% remote, packed");
    }
    let spread = run("spread");
    let mcs = spread.iter().find(|(lock, _)| lock == "mcs").unwrap().1;
    assert!(mcs >= 25.0, "mcs: {mcs}% remote, spread");
}

/// `--placement linux-5.12` (the v15 letter's stock kernel's balancer) keeps 4 threads of
/// `x5-4` on one node, so no handoff crosses nodes, where `linux` (v5.10) runs them 2 and 2 on
/// two nodes; the header names it.
#[test]
fn linux_5_12_placement_keeps_four_threads_on_one_node() {
    let run = |placement: &str| {
        let args = [
            "--duration-us",
            "2000",
            "--machine",
            "x5-4",
            "--threads",
            "4",
            "--workload",
            "locktorture",
            "--locks",
            "qspinlock,cna-kernel",
        ];
        remote_by_lock(&args, placement)
    };
    for (lock, remote) in run("linux-5.12") {
        assert_eq!(remote, 0.0, "{lock}: {remote}% remote under linux-5.12");
    }
    let v5_10 = run("linux");
    assert!(
        v5_10.iter().all(|(_, remote)| *remote > 0.0),
        "linux (v5.10) runs 4 threads on two nodes: {v5_10:?}"
    );
}

/// `--placement linux` puts 2 threads on one node (the scheduler keeps a pair together), so no
/// handoff crosses nodes; `--help` lists it and the CNA variants (`cna-kernel-wo-sro`, and v13
/// with and without shuffle reduction), which run beside `cna-kernel`.
#[test]
fn linux_placement_and_the_cna_variant_without_shuffle_reduction() {
    let args = [
        "--duration-us",
        "500",
        "--format",
        "csv",
        "--machine",
        "x5-4",
        "--threads",
        "2",
        "--locks",
        "qspinlock,cna-kernel,cna-kernel-wo-sro,cna-kernel-v13,cna-kernel-v13-wo-sro",
        "--workload",
        "locktorture",
        "--placement",
        "linux",
    ];
    let output = numasim(&args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stderr.contains("placement linux"), "{stderr}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let rows = csv_rows(&stdout);
    let locks: Vec<&str> = rows.iter().map(|row| row[1]).collect();
    assert_eq!(
        locks,
        [
            "qspinlock",
            "cna-kernel",
            "cna-kernel-wo-sro",
            "cna-kernel-v13",
            "cna-kernel-v13-wo-sro"
        ]
    );
    for row in &rows {
        assert_eq!(row[8], "0.00", "{}: 2 threads share a node", row[1]);
    }
    let help = String::from_utf8(numasim(&["--help"]).stdout).unwrap();
    assert!(help.contains("cna-kernel-wo-sro") && help.contains("spread|packed|linux"));
    assert!(help.contains("cna-kernel-v13") && help.contains("cna-kernel-v13-wo-sro"));
    // The kernel's stutter is on by default, as in locktorture, and the header says so.
    assert!(help.contains("--locktorture-stutter") && help.contains("[default: 5]"));
    assert!(stderr.contains("locktorture stutter 5 jiffies"), "{stderr}");
    // CNA v15's flush threshold, its module parameter: 1 ms by default, and said so.
    assert!(help.contains("--cna-kernel-threshold-ns") && help.contains("[default: 1000000]"));
    assert!(
        stderr.contains("cna-kernel threshold 1000000 ns"),
        "{stderr}"
    );
}

/// A rule of the simulated machine, `option` with values `default` and `other`: the default
/// gives the same rows as no option, the header names the rule in use, and `other` changes the
/// contended runs' timing only (the same rows, deterministic, one thread untouched).
fn a_rule_of_the_simulated_machine(option: &str, default: &str, other: &str, header: &str) {
    let args = [
        "--threads",
        "1,8",
        "--locks",
        "qspinlock,cna-kernel,cna",
        "--workload",
        "locktorture",
    ];
    let plain = tiny(&args);
    let explicit = tiny(&[&args[..], &[option, default]].concat());
    assert_eq!(
        without_host_ms(&explicit, ','),
        without_host_ms(&plain, ',')
    );
    let other_args = [&TINY[..], &args[..], &[option, other]].concat();
    let output = numasim(&other_args);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("{header} {other}")), "{stderr}");
    let changed = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        without_host_ms(&changed, ','),
        without_host_ms(&run_ok(&other_args), ',')
    );
    let (before, after) = (csv_rows(&plain), csv_rows(&changed));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b[..4], a[..4]);
        // One thread has no contended line: nothing changes.
        if b[3] == "1" {
            assert_eq!(b[4], a[4], "{b:?} {a:?}");
        }
    }
    assert!(
        before.iter().zip(&after).any(|(b, a)| b[4] != a[4]),
        "{plain}"
    );
    let help = String::from_utf8(numasim(&["--help"]).stdout).unwrap();
    let usage = help
        .lines()
        .find(|l| l.trim_start().starts_with(option))
        .unwrap_or_else(|| panic!("{option} in --help: {help}"));
    assert!(usage.contains(default) && usage.contains(other), "{usage}");
}

/// `--store-forwarding`: `address` is the default, `line` the earlier rule.
#[test]
fn store_forwarding_is_a_rule_of_the_simulated_machine() {
    a_rule_of_the_simulated_machine("--store-forwarding", "address", "line", "store forwarding");
}

/// `--snoop-window`: off by default; on, a line's holders keep it until a request's snoop
/// reaches them.
#[test]
fn snoop_window_is_a_rule_of_the_simulated_machine() {
    a_rule_of_the_simulated_machine("--snoop-window", "off", "on", "snoop window");
}

/// `--wake-phase`: off by default; on, a woken spinner looks again at a drawn phase of its
/// loop's iteration.
#[test]
fn wake_phase_is_a_rule_of_the_simulated_machine() {
    a_rule_of_the_simulated_machine("--wake-phase", "off", "on", "wake phase");
}

#[test]
fn paths_adds_its_columns_and_changes_nothing_else() {
    let args = ["--threads", "1,8", "--locks", "mcs,cna,hq,ttas,cna-kernel"];
    let plain = tiny(&args);
    let with_paths = tiny(&[&args[..], &["--paths"]].concat());
    assert_eq!(
        with_paths.lines().next(),
        Some(
            CSV_HEADER
                .replace(
                    ",host_ms",
                    ",fast_pct,steal_pct,queued_pct,parks_per_kacq,acq_per_handoff,\
                     alt_time_pct,alt_ops_per_sec,cna_unordered_pct,cna_free_pct,\
                     cna_ordered_pct,cna_flush_pct,cna_unordered_remote_pct,\
                     cna_free_remote_pct,cna_ordered_remote_pct,cna_flush_remote_pct,host_ms"
                )
                .as_str()
        )
    );
    let rows = csv_rows(&with_paths);
    assert_eq!(rows.len(), 5 * 2, "{with_paths}");
    for (row, plain_row) in rows.iter().zip(csv_rows(&plain)) {
        // The counting is free: every other column but host_ms is as without --paths.
        assert_eq!(row[..10], plain_row[..10], "{row:?} vs {plain_row:?}");
        let paths: Vec<&str> = row[10..14].to_vec();
        // Every lock, models included: no handoff alone, else at least one acquisition each.
        let (per_handoff, alt_time, alt_rate) = (row[14], row[15], row[16]);
        if row[3] == "1" {
            assert_eq!(per_handoff, "", "no handoffs alone: {row:?}");
            assert_eq!(
                (alt_time, alt_rate),
                ("0.0", ""),
                "nobody to alternate with"
            );
        } else {
            let per_handoff: f64 = per_handoff.parse().unwrap();
            assert!(per_handoff >= 1.0, "{row:?}");
            let alt_time: f64 = alt_time.parse().unwrap();
            assert!((0.0..=100.0).contains(&alt_time), "{row:?}");
            assert_eq!(alt_rate.is_empty(), alt_time == 0.0, "{row:?}");
        }
        // The kernel's CNA counts how its queue heads passed the lock on, and only it.
        let cna = &row[17..25];
        if row[1] == "cna-kernel" && row[3] != "1" {
            let numbers: Vec<f64> = cna.iter().map(|c| c.parse().unwrap()).collect();
            let sum: f64 = numbers[..4].iter().sum();
            assert!((sum - 100.0).abs() < 0.05, "the paths add up: {row:?}");
            let remote: f64 = numbers[4..].iter().sum();
            let handoffs: f64 = row[8].parse().unwrap();
            assert!((remote - handoffs).abs() < 5.0, "{row:?}");
        } else {
            assert!(cna.iter().all(|c| c.is_empty()), "{row:?}");
        }
        if row[1] == "ttas" || row[1] == "cna-kernel" {
            assert_eq!(paths, ["", "", "", ""], "a model counts nothing: {row:?}");
            continue;
        }
        let numbers: Vec<f64> = paths.iter().map(|c| c.parse().unwrap()).collect();
        let sum = numbers[0] + numbers[1] + numbers[2];
        assert!(
            (sum - 100.0).abs() < 0.05,
            "the three paths add up to 100%: {row:?}"
        );
        if row[3] == "1" {
            // Alone, every acquisition takes the fast path and nobody sleeps.
            assert_eq!(paths, ["100.00", "0.00", "0.00", "0.0"], "{row:?}");
        }
    }
}

#[test]
fn speedup_is_empty_without_mcs() {
    let stdout = tiny(&["--threads", "2", "--locks", "cna,ttas"]);
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 2, "{stdout}");
    for row in rows {
        assert_eq!(row[5], "", "speedup without mcs: {row:?}");
    }
}

/// Drops the last column (host_ms) of every line.
fn without_host_ms(output: &str, separator: char) -> Vec<String> {
    output
        .lines()
        .map(|line| match line.trim_end().rsplit_once(separator) {
            Some((rest, _)) => rest.trim_end().to_string(),
            None => line.to_string(),
        })
        .collect()
}

#[test]
fn same_arguments_same_output_except_host_ms() {
    let args = [
        "--machine",
        "x5-4",
        "--threads",
        "4,16",
        "--locks",
        "mcs,cna,hq,qspinlock,cna-kernel,std,pthread,ttas,spin-mcs",
        "--workload",
        "counter,kv,freelist,locktorture,lockbench",
        "--seed",
        "7",
        "--duration-us",
        "300",
    ];
    let csv: Vec<&str> = args.iter().copied().chain(["--format", "csv"]).collect();
    let (first, second) = (run_ok(&csv), run_ok(&csv));
    assert_eq!(first.lines().count(), 1 + 9 * 2 * 5, "{first}");
    assert_eq!(without_host_ms(&first, ','), without_host_ms(&second, ','));
    let (first, second) = (run_ok(&args), run_ok(&args));
    assert_eq!(without_host_ms(&first, ' '), without_host_ms(&second, ' '));
    // Another seed changes the figures (jitter, the workloads' random choices).
    let other: Vec<&str> = csv
        .iter()
        .map(|&a| if a == "7" { "8" } else { a })
        .collect();
    assert_ne!(
        without_host_ms(&run_ok(&csv), ','),
        without_host_ms(&run_ok(&other), ',')
    );
}

/// The rwlocks repeat exactly too, on four nodes: their visible-readers table once put a lock
/// in the column its heap address hashed to, and ASLR moves the heap between runs.
#[test]
fn rwlocks_repeat_exactly_on_four_nodes() {
    for read_pct in ["0", "95"] {
        let args = [
            "--machine",
            "x5-4",
            "--threads",
            "8",
            "--locks",
            "mcs-rw,cna-rw",
            "--workload",
            "rw",
            "--read-pct",
            read_pct,
            "--duration-us",
            "100",
        ];
        let first = without_host_ms(&run_ok(&args), ' ');
        for _ in 0..2 {
            assert_eq!(
                first,
                without_host_ms(&run_ok(&args), ' '),
                "--read-pct {read_pct}"
            );
        }
    }
}

#[test]
fn every_lock_runs_every_workload_and_144_threads() {
    // Exit code 1 and "MUTUAL EXCLUSION VIOLATED" (or the simulator's report) on a failure.
    let stdout = tiny(&[
        "--threads",
        "3,144",
        "--locks",
        "mcs,cna,hq,qspinlock,cna-kernel,std,pthread,ttas,spin-mcs",
        "--workload",
        "counter,kv,freelist,locktorture,lockbench",
        "--duration-us",
        "100",
    ]);
    assert_eq!(stdout.lines().count(), 1 + 9 * 2 * 5, "{stdout}");
    // lockbench with several locks, and timed as lock-bench times it (a fixed number of
    // operations per thread): every operation counted, the same number on every thread.
    let stdout = tiny(&[
        "--threads",
        "8",
        "--locks",
        "mcs,std,ttas",
        "--workload",
        "lockbench",
        "--lockbench-locks",
        "3",
        "--lockbench-ops",
        "50",
        "--store-buffers",
        "off",
    ]);
    for row in csv_rows(&stdout) {
        assert_eq!(row[6], "0.5000", "equal work, fairness 0.5: {row:?}");
        assert_eq!(row[7], "1.000", "equal work, max/min 1: {row:?}");
    }
    // Stealing off and the pass-through tunables are accepted and run.
    let stdout = tiny(&[
        "--threads",
        "8",
        "--locks",
        "mcs,cna,hq",
        "--stealing",
        "off",
        "--spin-us",
        "0.5",
        "--steal-bound-us",
        "50",
        "--cna-flush-us",
        "20",
        "--hq-local-handoffs",
        "4",
        "--hq-domain-handoffs",
        "2",
        "--ttas-fairness",
        "off",
    ]);
    assert_eq!(stdout.lines().count(), 1 + 3, "{stdout}");
}

#[test]
fn plot_writes_an_svg_per_workload() {
    let dir = scratch_dir("numasim_cli_plot");
    let one = dir.join("one.svg");
    tiny(&[
        "--threads",
        "1,2",
        "--locks",
        "mcs,ttas",
        "--plot",
        one.to_str().unwrap(),
    ]);
    assert_svg_chart(
        &one,
        &["x5-4", "counter", "threads", "mcs", "ttas", "</svg>"],
    );
    // Two workloads: one file each, named after the workload.
    let two = dir.join("two.svg");
    tiny(&[
        "--threads",
        "2",
        "--workload",
        "kv,locktorture",
        "--plot",
        two.to_str().unwrap(),
    ]);
    for workload in ["kv", "locktorture"] {
        assert_svg_chart(
            &dir.join(format!("two-{workload}.svg")),
            &[workload, "</svg>"],
        );
    }
    assert!(!two.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `rw` workload runs every lock, the rwlocks and their models included, and the rwlocks
/// run the other workloads (as write locks); the header gains `write_wait_p99_us` after
/// `wait_p99_us`. At 100 % reads nobody takes the lock exclusively (the column is empty); at
/// 0 % every acquisition is a write (the two waits agree).
#[test]
fn rw_workload_runs_every_lock_and_the_rwlocks_run_every_workload() {
    const RW: &str = "mcs-rw,cna-rw,hq-rw,pl-rwlock,std-rwlock,sharded-rw";
    let header = CSV_HEADER.replace("wait_p99_us,", "wait_p99_us,write_wait_p99_us,");
    for pct in ["100", "95", "0"] {
        let stdout = tiny(&[
            "--threads",
            "1,8",
            "--locks",
            &format!("mcs,cna,hq,std,ttas,{RW}"),
            "--workload",
            "rw",
            "--read-pct",
            pct,
        ]);
        assert_eq!(stdout.lines().next(), Some(header.as_str()));
        let rows = csv_rows(&stdout);
        assert_eq!(rows.len(), 11 * 2, "{stdout}");
        for row in &rows {
            assert_eq!(row.len(), 12, "{row:?}");
            assert_eq!(row[2], "rw");
            assert!(number(row, 4) > 0.0, "sim_ops_per_sec: {row:?}");
            match pct {
                "100" => assert_eq!(row[10], "", "no writes at 100 % reads: {row:?}"),
                "0" => assert_eq!(row[9], row[10], "only writes at 0 % reads: {row:?}"),
                _ => assert!(number(row, 10) >= 0.0, "write_wait_p99_us: {row:?}"),
            }
        }
    }
    // The rwlocks on every other workload, and 144 threads on rw.
    let stdout = tiny(&[
        "--threads",
        "3,144",
        "--locks",
        RW,
        "--workload",
        "counter,kv,freelist,locktorture,lockbench,rw",
        "--duration-us",
        "100",
    ]);
    assert_eq!(stdout.lines().count(), 1 + 6 * 2 * 6, "{stdout}");
    // The default is 95 % reads.
    let args = ["--threads", "8", "--locks", "cna-rw", "--workload", "rw"];
    let with_95: Vec<&str> = args.iter().copied().chain(["--read-pct", "95"]).collect();
    assert_eq!(
        without_host_ms(&tiny(&args), ','),
        without_host_ms(&tiny(&with_95), ',')
    );
}

/// `--writers N`: threads 0..N only write and the others only read; the report gains the
/// readers' and writers' rates, which add up to the total; a mutex takes both as exclusive.
#[test]
fn writers_dedicate_threads_and_report_both_rates() {
    let header = CSV_HEADER.replace(
        "wait_p99_us,",
        "wait_p99_us,write_wait_p99_us,reads_per_sec,writes_per_sec,",
    );
    let stdout = tiny(&[
        "--threads",
        "2,9",
        "--locks",
        "mcs,cna-rw,hq-rw,pl-rwlock,sharded-rw",
        "--workload",
        "rw",
        "--writers",
        "1",
    ]);
    assert_eq!(stdout.lines().next(), Some(header.as_str()));
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 5 * 2, "{stdout}");
    for row in &rows {
        assert_eq!(row.len(), 14, "{row:?}");
        let (total, reads, writes) = (number(row, 4), number(row, 11), number(row, 12));
        assert!(reads > 0.0 && writes > 0.0, "both roles ran: {row:?}");
        assert!(
            (reads + writes - total).abs() <= 2.0,
            "reads and writes add up to sim_ops_per_sec: {row:?}"
        );
    }
    // One writer beside one reader: the writer's rate is its thread's share.
    let stdout = tiny(&[
        "--threads",
        "2",
        "--locks",
        "cna-rw",
        "--workload",
        "rw",
        "--writers",
        "1",
        "--read-pct",
        "0",
    ]);
    let row = &csv_rows(&stdout)[0];
    assert!(number(row, 11) > 0.0, "--read-pct is unused: {row:?}");
    // Beside rw, a workload without reads runs as always and leaves both rates empty.
    let stdout = tiny(&[
        "--threads",
        "4",
        "--locks",
        "cna-rw",
        "--workload",
        "counter,rw",
        "--writers",
        "1",
    ]);
    let rows = csv_rows(&stdout);
    assert_eq!(
        (rows[0][2], rows[0][11], rows[0][12]),
        ("counter", "", ""),
        "{stdout}"
    );
    assert!(number(&rows[1], 11) > 0.0, "{stdout}");
}

#[test]
fn writers_is_validated() {
    let base = ["--threads", "4", "--locks", "cna-rw", "--workload", "rw"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    assert_rejected(&with(&["--writers", "0"]), &["--writers", "from 1 to 1023"]);
    assert_rejected(&with(&["--writers", "x"]), &["--writers", "from 1 to 1023"]);
    assert_rejected(
        &with(&["--writers", "4"]),
        &["--writers 4", "--threads has 4"],
    );
    assert_rejected(
        &["--threads", "4", "--workload", "counter", "--writers", "1"],
        &["--writers 1", "--workload rw only"],
    );
}
