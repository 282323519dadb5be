//! Runs the `locktorture` example binary: bad command lines exit with code 2 and say what is wrong
//! and what is allowed; a tiny real run prints well-formed CSV. No timing assertions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use numa_bench::cli_checks::{
    assert_rejected_output, assert_svg_chart, csv_rows, number, scratch_dir,
};

const CSV_HEADER: &str = "lock,workload,threads,nodes,penalty_ns,runs,ops_per_sec,stddev,\
                          speedup_vs_parking_lot,fairness_factor,max_min,remote_handoff_pct,\
                          speedup_vs_pl_rwlock,reads_per_sec,writes_per_sec";

const ALL_LOCKS: &str = "mcs, cna, hq, parking_lot, std, mcs-rw, cna-rw, hq-rw, pl-rwlock, \
                         std-rwlock, sharded, mcs-delegate, cna-delegate, hq-delegate";
const ALL_WORKLOADS: &str = "empty, counter, kv, freelist, hammer, pc, rw";
/// The mutexes, then the rwlocks: the default `--locks` of `--workload rw`.
const MUTEXES: [&str; 5] = ["mcs", "cna", "hq", "parking_lot", "std"];
const RWLOCKS: [&str; 6] = [
    "mcs-rw",
    "cna-rw",
    "hq-rw",
    "pl-rwlock",
    "std-rwlock",
    "sharded",
];

/// The example binary that `cargo test` builds next to the test binaries
/// (target/<profile>/examples/locktorture), if it exists and is newer than every source it is
/// built from. `cargo test --test locktorture_cli` alone does not rebuild examples, so an older
/// binary may be stale; then the caller falls back to `cargo run`, which rebuilds it.
fn example_binary() -> Option<PathBuf> {
    let test_binary = std::env::current_exe().ok()?;
    // target/<profile>/deps/locktorture_cli-<hash> -> target/<profile>
    let profile_dir = test_binary.parent()?.parent()?;
    let binary = profile_dir
        .join("examples")
        .join(format!("locktorture{}", std::env::consts::EXE_SUFFIX));
    let built = std::fs::metadata(&binary).ok()?.modified().ok()?;
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = [
        "examples/locktorture.rs",
        "numa_bench/src",
        "numa_bench/Cargo.toml",
        "src",
        "Cargo.toml",
    ];
    let newest_source = sources
        .iter()
        .filter_map(|source| newest_modification(&manifest_dir.join(source)))
        .max()?;
    (built >= newest_source).then_some(binary)
}

/// The latest modification time of `path` or, for a directory, of anything below it.
fn newest_modification(path: &Path) -> Option<SystemTime> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_dir() {
        return metadata.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|entry| newest_modification(&entry.ok()?.path()))
        .max()
}

/// Runs the example with `args`, through `cargo run` when the built binary is not where expected.
fn locktorture(args: &[&str]) -> Output {
    let mut command = match example_binary() {
        Some(binary) => Command::new(binary),
        None => {
            let mut cargo = Command::new(env!("CARGO"));
            cargo
                .args(["run", "--quiet", "--example", "locktorture", "--"])
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            cargo
        }
    };
    command
        .args(args)
        .output()
        .expect("cannot start the locktorture example")
}

/// Asserts exit code 2, no panic, nothing on stdout, and a stderr that contains every one of
/// `needles`.
fn assert_rejected(args: &[&str], needles: &[&str]) {
    assert_rejected_output(args, &locktorture(args), needles);
}

/// A run that must succeed (exit code 1 and "MUTUAL EXCLUSION VIOLATED" on stderr if a check
/// after a run failed); returns its stdout.
fn run_ok(args: &[&str]) -> String {
    let output = locktorture(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "args {args:?}; stderr:\n{stderr}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn unknown_lock_is_rejected() {
    assert_rejected(&["--locks", "mcs,foo"], &["'foo'", "--locks", ALL_LOCKS]);
}

#[test]
fn unknown_workload_is_rejected() {
    assert_rejected(
        &["--workload", "counter,bar"],
        &["'bar'", "--workload", ALL_WORKLOADS],
    );
}

#[test]
fn zero_threads_is_rejected() {
    assert_rejected(&["--threads", "1,0"], &["'0'", "--threads", "1 to 1024"]);
}

#[test]
fn empty_list_item_is_rejected() {
    assert_rejected(
        &["--threads", "1,,2"],
        &["'1,,2'", "--threads", "1 to 1024"],
    );
    assert_rejected(&["--locks", "mcs,"], &["'mcs,'", "--locks", ALL_LOCKS]);
}

#[test]
fn non_numeric_thread_count_is_rejected() {
    assert_rejected(&["--threads", "a"], &["'a'", "--threads", "1 to 1024"]);
}

#[test]
fn writers_without_readers_are_rejected() {
    assert_rejected(
        &["--workload", "rw", "--writers", "4", "--threads", "8,4"],
        &["--writers 4", "--threads has 4", "at least one reader"],
    );
    assert_rejected(
        &["--workload", "counter", "--writers", "1", "--threads", "4"],
        &["--writers 1", "--workload rw only"],
    );
}

#[test]
fn negative_duration_is_rejected() {
    assert_rejected(&["--duration-ms", "-5"], &["'-5'", "--duration-ms", "1 to"]);
    assert_rejected(&["--duration-ms=-5"], &["'-5'", "--duration-ms", "1 to"]);
}

#[test]
fn zero_runs_and_zero_virtual_nodes_are_rejected() {
    assert_rejected(&["--runs", "0"], &["'0'", "--runs", "1 to"]);
    assert_rejected(
        &["--virtual-nodes", "0"],
        &["'0'", "--virtual-nodes", "1 to"],
    );
}

#[test]
fn negative_penalty_is_rejected() {
    assert_rejected(
        &["--remote-penalty-ns", "-1"],
        &["'-1'", "--remote-penalty-ns", "0 to"],
    );
}

#[test]
fn unknown_stealing_value_is_rejected() {
    assert_rejected(
        &["--stealing", "maybe"],
        &["'maybe'", "--stealing", "on, off"],
    );
}

#[test]
fn unknown_rwlock_handover_value_is_rejected() {
    assert_rejected(
        &["--rwlock-handover", "yes"],
        &["'yes'", "--rwlock-handover", "on, off"],
    );
}

#[test]
fn unknown_rwlock_write_mode_value_is_rejected() {
    assert_rejected(
        &["--rwlock-write-mode", "always"],
        &["'always'", "--rwlock-write-mode", "on, off"],
    );
}

#[test]
fn bad_hq_domain_handoffs_are_rejected() {
    // The setter's error names the value and the allowed range.
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
    assert_rejected(
        &["--hq-domain-handoffs", "-1"],
        &["'-1'", "--hq-domain-handoffs", "1 to 16777216"],
    );
}

#[test]
fn bad_spin_and_steal_bounds_are_rejected() {
    // Out of the setter's range: its error names the value and the allowed range.
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
    // Not a number of microseconds at all.
    assert_rejected(
        &["--spin-us", "-1"],
        &["'-1'", "--spin-us", "non-negative number of microseconds"],
    );
    assert_rejected(
        &["--steal-bound-us", "soon"],
        &[
            "'soon'",
            "--steal-bound-us",
            "non-negative number of microseconds",
        ],
    );
    // Values in range are taken.
    run_ok(&[
        "--spin-us",
        "0.5",
        "--steal-bound-us",
        "50",
        "--retake-window-us",
        "0.5",
        "--lone-retake-window-us",
        "20",
        "--duration-ms",
        "10",
        "--runs",
        "1",
        "--threads",
        "2",
    ]);
}

#[test]
fn bad_pc_options_are_rejected() {
    assert_rejected(&["--notify", "some"], &["'some'", "--notify", "one, all"]);
    assert_rejected(&["--slots", "0"], &["'0'", "--slots", "1 to 1000000"]);
    assert_rejected(
        &["--workload", "pc", "--threads", "1,2"],
        &["--workload pc", "at least 2 threads", "1"],
    );
}

/// The producer/consumer workload runs for every lock, with both notify styles and with one
/// and several slots, and its queue check (every message pushed was popped or is still queued)
/// holds.
#[test]
fn pc_workload_runs_for_every_lock_and_notify_style() {
    for (slots, notify) in [("1", "all"), ("4", "one")] {
        let stdout = run_ok(&[
            "--workload",
            "pc",
            "--slots",
            slots,
            "--notify",
            notify,
            "--duration-ms",
            "10",
            "--runs",
            "1",
            "--threads",
            "2,5",
            "--format",
            "csv",
        ]);
        let rows: Vec<&str> = stdout.lines().skip(1).collect();
        assert_eq!(rows.len(), 5 * 2, "{stdout}");
        for row in rows {
            let fields: Vec<&str> = row.split(',').collect();
            assert_eq!(fields[1], "pc", "{stdout}");
            let ops: f64 = fields[6].parse().unwrap_or(0.0);
            assert!(ops > 0.0, "no push or pop in a pc run: {stdout}");
        }
    }
}

#[test]
fn unknown_format_is_rejected() {
    assert_rejected(&["--format", "json"], &["'json'", "--format", "table, csv"]);
}

#[test]
fn unknown_flag_is_rejected() {
    assert_rejected(
        &["--frobnicate"],
        &["'--frobnicate'", "--locks", "--threads", "--help"],
    );
    assert_rejected(&["stray"], &["'stray'", "--locks"]);
}

#[test]
fn missing_value_is_rejected() {
    assert_rejected(&["--threads"], &["--threads", "needs a value", "1 to 1024"]);
    assert_rejected(&["--locks"], &["--locks", "needs a value", ALL_LOCKS]);
}

#[test]
fn think_spins_is_validated_and_hammer_thinks_with_it() {
    for bad in ["-1", "1000001", "x"] {
        assert_rejected(
            &["--think-spins", bad],
            &[&format!("'{bad}'"), "--think-spins", "0 to 1000000"],
        );
    }
    let stdout = run_ok(&[
        "--workload",
        "hammer",
        "--think-spins",
        "20",
        "--locks",
        "cna,parking_lot",
        "--threads",
        "1,3",
        "--duration-ms",
        "20",
        "--runs",
        "1",
        "--format",
        "csv",
    ]);
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[1], "hammer", "{row}");
        let ops: f64 = cells[6].parse().unwrap();
        assert!(ops > 0.0, "{row}");
    }
}

#[test]
fn help_describes_every_option() {
    let output = locktorture(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    for option in [
        "--locks",
        "--threads",
        "--duration-ms",
        "--runs",
        "--workload",
        "--virtual-nodes",
        "--remote-penalty-ns",
        "--stealing",
        "--spin-us",
        "--steal-bound-us",
        "--hq-domain-handoffs",
        "--format",
        "--slots",
        "--notify",
        "--read-pct",
        "--think-spins",
        "remote_handoff_pct",
        "speedup_vs_pl_rwlock",
        "pl-rwlock",
    ] {
        assert!(help.contains(option), "--help does not mention {option}");
    }
}

#[test]
fn tiny_run_prints_well_formed_csv() {
    let output = locktorture(&[
        "--duration-ms",
        "20",
        "--runs",
        "1",
        "--threads",
        "1,2",
        "--format",
        "csv",
        "--virtual-nodes",
        "2",
        "--remote-penalty-ns",
        "100",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");

    assert_eq!(stdout.lines().next(), Some(CSV_HEADER));
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 5 * 2, "one row per (lock, threads):\n{stdout}");

    for row in &rows {
        assert_eq!(row.len(), 15, "{row:?}");
        assert!(MUTEXES.contains(&row[0]), "{row:?}");
        assert_eq!(row[1], "counter", "{row:?}");
        assert!(["1", "2"].contains(&row[2]), "{row:?}");
        assert_eq!(row[3], "2", "nodes: {row:?}");
        assert_eq!(row[4], "100", "penalty_ns: {row:?}");
        assert_eq!(row[5], "1", "runs: {row:?}");
        // How much a thread gets done in a 20 ms run is the scheduler's business, but every
        // worker completes at least one operation (on a loaded machine it may first run after
        // the end), so the shares are always defined.
        let ops_per_sec = number(row, 6);
        assert!(
            ops_per_sec > 0.0 && ops_per_sec.is_finite(),
            "ops_per_sec: {row:?}"
        );
        assert!(number(row, 7) >= 0.0, "stddev: {row:?}");
        let speedup = number(row, 8);
        assert!(speedup >= 0.0 || speedup.is_nan(), "speedup: {row:?}");
        let fairness = number(row, 9);
        assert!((0.5..=1.0).contains(&fairness), "fairness_factor: {row:?}");
        assert!(number(row, 10) >= 1.0, "max_min: {row:?}");
        let remote = number(row, 11);
        assert!(
            (0.0..=100.0).contains(&remote),
            "remote_handoff_pct: {row:?}"
        );
        assert_eq!(
            row[12], "",
            "speedup_vs_pl_rwlock without pl-rwlock: {row:?}"
        );
    }
}

#[test]
fn speedup_is_empty_without_parking_lot() {
    let output = locktorture(&[
        "--locks",
        "mcs,std",
        "--duration-ms",
        "5",
        "--runs",
        "1",
        "--threads",
        "1",
        "--workload",
        "empty",
        "--format",
        "csv",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 2, "{stdout}");
    for row in rows {
        assert_eq!(row[8], "", "speedup without parking_lot: {row:?}");
    }
}

#[test]
fn every_workload_runs_and_keeps_its_data_consistent() {
    let output = locktorture(&[
        "--workload",
        "empty,counter,kv,freelist,hammer",
        "--duration-ms",
        "10",
        "--runs",
        "1",
        "--threads",
        "2",
        "--format",
        "csv",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Exit code 1 and "MUTUAL EXCLUSION VIOLATED" on stderr if a check after a run failed.
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let workloads: Vec<&str> = csv_rows(&stdout)
        .iter()
        .map(|row| row.get(1).copied().unwrap_or(""))
        .collect();
    assert_eq!(workloads.len(), 5 * 5, "{stdout}");
    for workload in ["empty", "counter", "kv", "freelist", "hammer"] {
        assert_eq!(
            workloads.iter().filter(|&&w| w == workload).count(),
            5,
            "{stdout}"
        );
    }
}

const STATS_COLUMNS: &str =
    "wait_p50_ns,wait_p99_ns,wait_max_ns,hold_p50_ns,hold_p99_ns,hold_max_ns";

/// Runs the example through `cargo run`, built with feature `stats` or without it, whatever
/// built the binary that `locktorture()` would find (`cargo test --features stats --test
/// locktorture_cli` does not rebuild examples).
fn locktorture_built(with_stats: bool, args: &[&str]) -> Output {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["run", "--quiet", "--example", "locktorture"]);
    if with_stats {
        cargo.args(["--features", "stats"]);
    }
    cargo
        .arg("--")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cannot run cargo run --example locktorture")
}

#[test]
fn stats_adds_six_columns_with_the_feature_and_is_an_error_without() {
    let args = [
        "--stats",
        "--duration-ms",
        "10",
        "--runs",
        "2",
        "--threads",
        "2",
        "--format",
        "csv",
    ];
    if !cfg!(feature = "stats") {
        let output = locktorture_built(false, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
        assert!(
            stderr.contains("--stats") && stderr.contains("--features stats"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty());
        return;
    }
    let output = locktorture_built(true, &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.lines().next(),
        Some(format!("{CSV_HEADER},{STATS_COLUMNS}").as_str())
    );
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 5, "{stdout}");
    for row in &rows {
        assert_eq!(row.len(), 21, "{row:?}");
        let stats = &row[15..];
        if ["parking_lot", "std"].contains(&row[0]) {
            assert!(stats.iter().all(|cell| cell.is_empty()), "{row:?}");
            continue;
        }
        let ns: Vec<u64> = stats
            .iter()
            .map(|cell| cell.parse().unwrap_or_else(|_| panic!("{row:?}")))
            .collect();
        // p50 <= p99 <= max for the wait and the hold; every critical section is held a while.
        assert!(ns[0] <= ns[1] && ns[1] <= ns[2], "wait: {row:?}");
        assert!(ns[3] <= ns[4] && ns[4] <= ns[5], "hold: {row:?}");
        assert!(ns[5] > 0, "hold max: {row:?}");
    }
}

#[test]
fn plot_writes_an_svg_chart_per_workload() {
    let dir = scratch_dir("locktorture_cli_plot");
    let file = dir.join("throughput.svg");
    let output = locktorture(&[
        "--locks",
        "mcs,parking_lot",
        "--duration-ms",
        "5",
        "--runs",
        "1",
        "--threads",
        "1,2",
        "--workload",
        "empty,kv",
        "--plot",
        file.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0));
    for workload in ["empty", "kv"] {
        assert_svg_chart(
            &dir.join(format!("throughput-{workload}.svg")),
            &[
                "this machine",
                workload,
                "threads",
                "mcs",
                "parking_lot",
                "</svg>",
            ],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `--workload rw` with `extra` arguments (CSV, one run of 10 ms each) and returns its
/// output, after checking the exit code: 1 if a read saw a half-done write or a write was lost.
fn rw_rows(extra: &[&str]) -> String {
    let mut args = vec![
        "--workload",
        "rw",
        "--duration-ms",
        "10",
        "--runs",
        "1",
        "--format",
        "csv",
    ];
    args.extend(extra);
    run_ok(&args)
}

/// Workload `rw` runs for every lock (by default the mutexes and the rwlocks), at 1 and several
/// threads and at the read shares' edges (no write at 100, no read at 0), and its checks hold.
#[test]
fn rw_workload_runs_for_every_lock_and_read_share() {
    for read_pct in ["0", "95", "100"] {
        let stdout = rw_rows(&["--read-pct", read_pct, "--threads", "1,4"]);
        assert_eq!(stdout.lines().next(), Some(CSV_HEADER));
        let rows = csv_rows(&stdout);
        let locks: Vec<&str> = MUTEXES.iter().chain(&RWLOCKS).copied().collect();
        assert_eq!(rows.len(), locks.len() * 2, "{stdout}");
        for (row, lock) in rows.iter().zip(locks.iter().cycle()) {
            assert_eq!((row[0], row[1]), (*lock, "rw"), "{stdout}");
            assert!(number(row, 6) >= 0.0, "ops_per_sec: {row:?}");
            // Both baselines ran: every row has both ratios (NaN if a baseline did nothing).
            assert_ne!(row[8], "", "speedup_vs_parking_lot: {row:?}");
            assert_ne!(row[12], "", "speedup_vs_pl_rwlock: {row:?}");
        }
        let baseline = rows.iter().find(|row| row[0] == "pl-rwlock").unwrap();
        assert!(
            ["1.000", "NaN"].contains(&baseline[12]),
            "pl-rwlock against itself: {baseline:?}"
        );
    }
}

/// The rwlocks run the mutex workloads through `write()`, with the workloads' own checks.
#[test]
fn rwlocks_run_the_mutex_workloads_through_write() {
    let stdout = run_ok(&[
        "--locks",
        "cna-rw,pl-rwlock,std-rwlock",
        "--workload",
        "counter,freelist",
        "--duration-ms",
        "10",
        "--runs",
        "1",
        "--threads",
        "3",
        "--format",
        "csv",
    ]);
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 3 * 2, "{stdout}");
    for row in rows {
        // No parking_lot::Mutex in this run: only the rwlock ratio.
        assert_eq!(row[8], "", "{row:?}");
        assert_ne!(row[12], "", "{row:?}");
    }
}

/// 64 threads on a machine with far fewer cores: every lock lets them all stop (the watchdog
/// fails the run with exit code 1 after 10 s otherwise); the test's own bound is generous.
#[test]
fn rw_with_64_oversubscribed_threads_finishes() {
    let started = std::time::Instant::now();
    for read_pct in ["50", "95"] {
        rw_rows(&["--read-pct", read_pct, "--threads", "64"]);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(300),
        "64 threads took {:?}",
        started.elapsed()
    );
}

#[test]
fn bad_read_pct_is_rejected() {
    for bad in ["101", "-1", "ninety", "5.5", ""] {
        assert_rejected(
            &["--workload", "rw", "--read-pct", bad],
            &[&format!("'{bad}'"), "--read-pct", "0 to 100"],
        );
    }
    assert_rejected(
        &["--read-pct"],
        &["--read-pct", "needs a value", "0 to 100"],
    );
}

#[test]
fn pc_with_an_rwlock_is_rejected() {
    assert_rejected(
        &["--workload", "pc", "--threads", "2", "--locks", "cna,hq-rw"],
        &[
            "--workload pc",
            "condition variable",
            "'hq-rw'",
            "mcs, cna, hq",
        ],
    );
    // With pc, the default locks are the mutexes only, even beside rw.
    let stdout = run_ok(&[
        "--workload",
        "pc,rw",
        "--threads",
        "2",
        "--duration-ms",
        "5",
        "--runs",
        "1",
        "--format",
        "csv",
    ]);
    assert_eq!(csv_rows(&stdout).len(), 5 * 2, "{stdout}");
}

#[test]
fn pc_with_a_delegating_lock_is_rejected() {
    assert_rejected(
        &[
            "--workload",
            "pc",
            "--threads",
            "2",
            "--locks",
            "hq,cna-delegate",
        ],
        &[
            "--workload pc",
            "condition variable",
            "'cna-delegate'",
            "mcs, cna, hq",
        ],
    );
}

#[test]
fn delegating_locks_run_and_count_every_section() {
    // A real run of each delegating lock: well-formed rows, and the workloads' own checks
    // (exact counts) pass, or the run would fail.
    let stdout = run_ok(&[
        "--workload",
        "counter,kv,freelist,hammer",
        "--locks",
        "mcs-delegate,cna-delegate,hq-delegate",
        "--threads",
        "3",
        "--virtual-nodes",
        "2",
        "--duration-ms",
        "5",
        "--runs",
        "1",
        "--format",
        "csv",
    ]);
    let rows = csv_rows(&stdout);
    assert_eq!(rows.len(), 3 * 4, "{stdout}");
    for row in rows {
        assert!(row[0].ends_with("-delegate"), "{row:?}");
        assert!(number(&row, 6) > 0.0, "{row:?}");
    }
}
