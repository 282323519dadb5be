//! What the tests of the two example tools' command lines share (tests/locktorture_cli.rs and
//! tests/numasim_cli.rs): the check of a rejected command line, reading CSV output, and the
//! check of an SVG chart. How each test runs its
//! tool, and what it expects of the output, stays in its own file.

use std::path::{Path, PathBuf};
use std::process::Output;

/// Asserts that `output`, of the tool run with `args`, is a rejection: exit code 2, no panic,
/// a stderr that contains every one of `needles`, and nothing on stdout.
pub fn assert_rejected_output(args: &[&str], output: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "args {args:?}; stderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "args {args:?} panicked:\n{stderr}"
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "args {args:?}: stderr does not mention {needle:?}:\n{stderr}"
        );
    }
    assert!(
        output.stdout.is_empty(),
        "args {args:?} printed results on stdout"
    );
}

/// The rows of CSV output after its header, split into cells.
pub fn csv_rows(csv: &str) -> Vec<Vec<&str>> {
    csv.lines()
        .skip(1)
        .map(|line| line.split(',').collect())
        .collect()
}

/// Cell `column` of `row` as a number; panics, naming the cell, if it is not one.
pub fn number(row: &[&str], column: usize) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("column {column} of {row:?} is not a number"))
}

/// A new directory for a test's files: `<tmp>/<name>_<process id>`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts that `file` is an SVG document that shows every one of `texts`.
pub fn assert_svg_chart(file: &Path, texts: &[&str]) {
    let svg = std::fs::read_to_string(file).unwrap();
    assert!(svg.starts_with("<svg"), "{svg:.100}");
    for text in texts {
        assert!(
            svg.contains(text),
            "the chart {} does not show {text:?}",
            file.display()
        );
    }
}
