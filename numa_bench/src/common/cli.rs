//! What the two tools' command lines share: the comma lists (`--locks mcs,cna`, `--threads
//! 1,2,4`) and the output format. Each tool words its own error messages (they name its options
//! and limits), so the helpers here report *what* is wrong and leave the words to the caller.

/// A comma list that clap keeps as one value (a `Vec` field would mean "repeatable option").
#[derive(Clone, Debug)]
pub struct List<T>(pub Vec<T>);

/// How the results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // (No doc comments on the variants: clap would list them as the values' help.)
    // An aligned human-readable table.
    Table,
    // Comma-separated values with a fixed header.
    Csv,
}

/// The items of a comma list, trimmed; `None` if one is empty (`1,,2`, a trailing comma, an
/// empty value).
pub fn split_list(value: &str) -> Option<Vec<&str>> {
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    (!items.iter().any(|item| item.is_empty())).then_some(items)
}

/// `items` parsed one by one with `parse` (the first error is returned), in order, a repeated
/// value kept once (where it first stands).
pub fn parse_unique<T: PartialEq, E>(
    items: &[&str],
    mut parse: impl FnMut(&str) -> Result<T, E>,
) -> Result<List<T>, E> {
    let mut chosen = Vec::new();
    for item in items {
        let value = parse(item)?;
        if !chosen.contains(&value) {
            chosen.push(value);
        }
    }
    Ok(List(chosen))
}

/// A number of microseconds for a tunable: any non-negative number up to 10^12 (the setter
/// checks the tunable's own range, so that its error names it); `None` if it is not one.
pub fn parse_micros(value: &str) -> Option<f64> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|us| (0.0..=1e12).contains(us))
}

/// The value of `all` named `item` (`name` gives each one's name).
pub fn find_named<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str, item: &str) -> Option<T> {
    all.iter().copied().find(|&value| name(value) == item)
}

/// The names of `all`, comma-separated: what an error message says is allowed.
pub fn allowed_names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    let names: Vec<&str> = all.iter().map(|&value| name(value)).collect();
    names.join(", ")
}

/// The most dedicated writer threads `--writers` takes, in both tools.
pub const MAX_WRITERS: u64 = 1023;

/// What is wrong with `--writers writers` beside these workloads (`has_rw`: `--workload` has
/// `rw`) and thread counts, if anything: the `rw` workload missing, or a thread count with no
/// reader left. Both tools' `--writers` mean the same, so the message is worded here once.
pub fn writers_conflict(writers: usize, has_rw: bool, threads: &[usize]) -> Option<String> {
    if !has_rw {
        return Some(format!(
            "--writers {writers} applies to --workload rw only, which --workload does not have"
        ));
    }
    threads.iter().find(|&&n| n <= writers).map(|few| {
        format!(
            "--writers {writers} needs more threads than writers (at least one reader), but \
             --threads has {few}"
        )
    })
}
