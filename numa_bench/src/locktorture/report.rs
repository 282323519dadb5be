//! Turns runs into rows (mean, deviation, fairness, handoffs, and with `--stats` wait and hold
//! percentiles) and prints them as a table or CSV, or draws them.

use std::path::{Path, PathBuf};

use crate::common::plot::{self, Point};
use crate::common::report::{fairness, remote_handoff_pct, speedups};
use crate::locktorture::harness::{RunResult, WaitHold};

/// The CSV header, also the table's column names.
///
/// `speedup_vs_pl_rwlock` came last, after the columns scripts already read by position.
pub const COLUMNS: [&str; 15] = [
    "lock",
    "workload",
    "threads",
    "nodes",
    "penalty_ns",
    "runs",
    "ops_per_sec",
    "stddev",
    "speedup_vs_parking_lot",
    "fairness_factor",
    "max_min",
    "remote_handoff_pct",
    "speedup_vs_pl_rwlock",
    "reads_per_sec",
    "writes_per_sec",
];

/// The columns `--stats` appends.
pub const STATS_COLUMNS: [&str; 6] = [
    "wait_p50_ns",
    "wait_p99_ns",
    "wait_max_ns",
    "hold_p50_ns",
    "hold_p99_ns",
    "hold_max_ns",
];

/// One output line: a (lock, workload, threads) combination summarised over its runs.
#[derive(Clone, Debug)]
pub struct Row {
    pub lock: &'static str,
    pub workload: &'static str,
    pub threads: usize,
    pub nodes: usize,
    pub penalty_ns: u64,
    pub runs: usize,
    /// Mean over runs of (all threads' ops) / elapsed.
    pub ops_per_sec: f64,
    /// Sample standard deviation of the per-run ops/s (0 with one run).
    pub stddev: f64,
    /// `ops_per_sec` over parking_lot's, when parking_lot ran.
    pub speedup: Option<f64>,
    /// `ops_per_sec` over parking_lot::RwLock's (`pl-rwlock`), when it ran.
    pub speedup_vs_pl_rwlock: Option<f64>,
    /// Of `ops_per_sec`, the reads (mean over runs).
    pub reads_per_sec: f64,
    /// Of `ops_per_sec`, the exclusive acquisitions (mean over runs).
    pub writes_per_sec: f64,
    /// Mean over runs of the busiest half's share of the ops.
    pub fairness_factor: f64,
    /// Mean over runs of max/min per-thread ops (infinite when a thread did nothing).
    pub max_min: f64,
    /// Remote handoffs / handoffs over all runs, in percent (0 without handoffs).
    pub remote_handoff_pct: f64,
    /// Wait and hold p50/p99 (means over runs) and max (over all runs), for locks that keep
    /// statistics.
    pub stats: Option<WaitHold>,
}

/// The identity of a row; the statistics are filled in by [`summarize`].
#[derive(Clone, Copy, Debug)]
pub struct RowKey {
    pub lock: &'static str,
    pub workload: &'static str,
    pub threads: usize,
    pub nodes: usize,
    pub penalty_ns: u64,
}

/// Summarises the runs of one (lock, workload, threads); `speedup` is left for [`fill_speedups`].
pub fn summarize(key: RowKey, runs: &[RunResult]) -> Row {
    let rates: Vec<f64> = runs.iter().map(ops_per_sec).collect();
    let (ops_per_sec, stddev) = mean_and_stddev(&rates);
    let read_rates: Vec<f64> = runs.iter().map(reads_per_sec).collect();
    let (reads_per_sec, _) = mean_and_stddev(&read_rates);

    let shapes: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|run| fairness(&run.per_thread.iter().map(|c| c.ops).collect::<Vec<_>>()))
        .collect();
    let (fairness_factor, max_min) = if shapes.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        let n = shapes.len() as f64;
        (
            shapes.iter().map(|s| s.0).sum::<f64>() / n,
            shapes.iter().map(|s| s.1).sum::<f64>() / n,
        )
    };

    let counts = runs.iter().flat_map(|run| &run.per_thread);
    let (handoffs, remote) = counts.fold((0u64, 0u64), |(h, r), c| {
        (h + c.handoffs, r + c.remote_handoffs)
    });
    let remote_handoff_pct = remote_handoff_pct(handoffs, remote);

    let stats = combine_stats(runs);
    Row {
        lock: key.lock,
        workload: key.workload,
        threads: key.threads,
        nodes: key.nodes,
        penalty_ns: key.penalty_ns,
        runs: runs.len(),
        ops_per_sec,
        stddev,
        speedup: None,
        speedup_vs_pl_rwlock: None,
        reads_per_sec,
        writes_per_sec: ops_per_sec - reads_per_sec,
        fairness_factor,
        max_min,
        remote_handoff_pct,
        stats,
    }
}

/// The runs' statistics in one: the mean of each percentile, the largest maximum. `None` unless
/// every run has them.
fn combine_stats(runs: &[RunResult]) -> Option<WaitHold> {
    let all: Vec<WaitHold> = runs.iter().map(|run| run.stats).collect::<Option<_>>()?;
    let n = all.len() as u64;
    if n == 0 {
        return None;
    }
    let combine = |part: fn(&WaitHold) -> [u64; 3]| {
        let sum = |i: usize| all.iter().map(|s| u128::from(part(s)[i])).sum::<u128>();
        let mean = |i: usize| u64::try_from(sum(i) / u128::from(n)).unwrap_or(u64::MAX);
        let max = all.iter().map(|s| part(s)[2]).max().unwrap_or(0);
        [mean(0), mean(1), max]
    };
    Some(WaitHold {
        wait: combine(|s| s.wait),
        hold: combine(|s| s.hold),
    })
}

/// Sets every row's speedups against the parking_lot row and the pl-rwlock row of the same
/// workload and thread count.
pub fn fill_speedups(rows: &mut [Row]) {
    let against = |baseline: &str| {
        speedups(rows.iter().map(|row| {
            (
                row.lock == baseline,
                (row.workload, row.threads),
                row.ops_per_sec,
            )
        }))
    };
    let (vs_mutex, vs_rwlock) = (against("parking_lot"), against("pl-rwlock"));
    for ((row, speedup), rw_speedup) in rows.iter_mut().zip(vs_mutex).zip(vs_rwlock) {
        row.speedup = speedup;
        row.speedup_vs_pl_rwlock = rw_speedup;
    }
}

fn ops_per_sec(run: &RunResult) -> f64 {
    let ops: u64 = run.per_thread.iter().map(|c| c.ops).sum();
    ops as f64 / run.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

fn reads_per_sec(run: &RunResult) -> f64 {
    let reads: u64 = run.per_thread.iter().map(|c| c.reads).sum();
    reads as f64 / run.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

fn mean_and_stddev(samples: &[f64]) -> (f64, f64) {
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    if samples.len() < 2 {
        return (mean, 0.0);
    }
    let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, variance.sqrt())
}

/// The header: [`COLUMNS`], and [`STATS_COLUMNS`] with `--stats`.
fn header(stats: bool) -> Vec<&'static str> {
    let mut header = COLUMNS.to_vec();
    if stats {
        header.extend(STATS_COLUMNS);
    }
    header
}

/// The row's cells, formatted; `missing` stands for an absent speedup or statistic. With `stats`,
/// the six statistics columns follow.
fn cells(row: &Row, missing: &str, stats: bool) -> Vec<String> {
    let speedup =
        |speedup: Option<f64>| speedup.map_or_else(|| missing.to_string(), |s| format!("{s:.3}"));
    let mut cells = vec![
        row.lock.to_string(),
        row.workload.to_string(),
        row.threads.to_string(),
        row.nodes.to_string(),
        row.penalty_ns.to_string(),
        row.runs.to_string(),
        format!("{:.0}", row.ops_per_sec),
        format!("{:.0}", row.stddev),
        speedup(row.speedup),
        format!("{:.4}", row.fairness_factor),
        format!("{:.3}", row.max_min),
        format!("{:.2}", row.remote_handoff_pct),
        speedup(row.speedup_vs_pl_rwlock),
        format!("{:.0}", row.reads_per_sec),
        format!("{:.0}", row.writes_per_sec),
    ];
    if stats {
        match row.stats {
            Some(s) => cells.extend(s.wait.iter().chain(&s.hold).map(u64::to_string)),
            None => cells.extend(STATS_COLUMNS.map(|_| missing.to_string())),
        }
    }
    cells
}

/// The header and one line per row, comma-separated; an absent speedup or statistic is an empty
/// field. The statistics columns only with `stats`.
pub fn print_csv(rows: &[Row], stats: bool) {
    let lines: Vec<Vec<String>> = rows.iter().map(|row| cells(row, "", stats)).collect();
    crate::common::report::print_csv(&header(stats), &lines);
}

/// An aligned table with the CSV's columns (text left-aligned, numbers right-aligned); an absent
/// speedup or statistic is `-`. A blank line separates workloads.
pub fn print_table(rows: &[Row], stats: bool) {
    let lines: Vec<Vec<String>> = rows.iter().map(|row| cells(row, "-", stats)).collect();
    let workloads: Vec<&str> = rows.iter().map(|row| row.workload).collect();
    crate::common::report::print_table(&header(stats), &lines, 2, &workloads);
}

/// Draws ops_per_sec against threads, one line per lock and one chart per workload; returns the
/// files written (see [`plot::files_for`]).
pub fn plot(path: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, String> {
    let points: Vec<Point> = rows
        .iter()
        .map(|row| Point {
            workload: row.workload,
            lock: row.lock,
            threads: row.threads,
            rate: row.ops_per_sec,
        })
        .collect();
    plot::draw_per_workload(
        path,
        &points,
        |workload| format!("locktorture: this machine, workload {workload}"),
        "critical sections per second (mean over runs)",
    )
}
