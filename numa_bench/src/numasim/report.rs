//! Turns runs into rows (throughput, fairness, handoffs) and prints them as a table or CSV, or
//! draws them.

use std::path::{Path, PathBuf};

use numa_locks::PathEvent;

use crate::common::plot::{self, Point};
use crate::common::report::{fairness, remote_handoff_pct, speedups};
use crate::numasim::harness::RunResult;
use crate::numasim::kernel::CnaPath;

/// The CSV header, also the table's column names.
pub const COLUMNS: [&str; 11] = [
    "machine",
    "lock",
    "workload",
    "threads",
    "sim_ops_per_sec",
    "speedup_vs_mcs",
    "fairness_factor",
    "max_min",
    "remote_handoff_pct",
    "wait_p99_us",
    "host_ms",
];

/// The columns `--paths` adds, before `host_ms`: the crate locks' acquisition paths (empty for
/// the models), then [`HOLDER_COLUMNS`].
pub const PATH_COLUMNS: [&str; 4] = ["fast_pct", "steal_pct", "queued_pct", "parks_per_kacq"];

/// The columns `--paths` adds after [`PATH_COLUMNS`]: how often the holder changes (every lock).
pub const HOLDER_COLUMNS: [&str; 3] = ["acq_per_handoff", "alt_time_pct", "alt_ops_per_sec"];

/// The columns `--paths` adds after [`HOLDER_COLUMNS`]: how the kernel's CNA models' queue
/// heads passed the MCS lock on ([`CnaHandoffs`]; empty for the other locks).
pub const CNA_COLUMNS: [&str; 8] = [
    "cna_unordered_pct",
    "cna_free_pct",
    "cna_ordered_pct",
    "cna_flush_pct",
    "cna_unordered_remote_pct",
    "cna_free_remote_pct",
    "cna_ordered_remote_pct",
    "cna_flush_remote_pct",
];

/// The column a sweep with the `rw` workload adds after `wait_p99_us`: the exclusive
/// acquisitions' (the writers') p99 wait.
pub const WRITE_WAIT_COLUMN: &str = "write_wait_p99_us";

/// The columns `--writers` adds after [`WRITE_WAIT_COLUMN`]: the dedicated readers' and
/// writers' operations per simulated second (as locktorture's columns of the same names).
pub const ROLE_COLUMNS: [&str; 2] = ["reads_per_sec", "writes_per_sec"];

/// Which optional columns a report has.
#[derive(Clone, Copy, Debug)]
pub struct Columns {
    /// `--paths`: [`PATH_COLUMNS`] and [`HOLDER_COLUMNS`] before `host_ms`.
    pub paths: bool,
    /// The sweep has the `rw` workload: [`WRITE_WAIT_COLUMN`] after `wait_p99_us`.
    pub write_wait: bool,
    /// `--writers`: [`ROLE_COLUMNS`] after [`WRITE_WAIT_COLUMN`].
    pub roles: bool,
}

/// A window of the run in which the lock averaged fewer acquisitions per handoff than this
/// counts as *alternating* (threads taking turns, one's critical section overlapping the
/// others' local work), as opposed to one thread re-taking the lock for a while.
pub const ALTERNATING_BELOW: f64 = 2.0;

/// The windows (`harness::WINDOW_NS`) in which the lock's threads alternated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alternation {
    /// Percent of the run's windows.
    pub time_pct: f64,
    /// Critical sections per simulated second within them (`None` if there were none): the
    /// lock's rate in its alternating regime.
    pub ops_per_sec: Option<f64>,
}

impl Alternation {
    /// From the (acquisitions, handoffs) of each window; `None` without windows.
    pub fn from_windows(windows: &[[u32; 2]]) -> Option<Alternation> {
        if windows.is_empty() {
            return None;
        }
        let alternating: Vec<u32> = windows
            .iter()
            .filter(|[acq, handoffs]| {
                *handoffs > 0 && f64::from(*acq) < ALTERNATING_BELOW * f64::from(*handoffs)
            })
            .map(|[acq, _]| *acq)
            .collect();
        let seconds = alternating.len() as f64 * crate::numasim::harness::WINDOW_NS as f64 * 1e-9;
        Some(Alternation {
            time_pct: 100.0 * alternating.len() as f64 / windows.len() as f64,
            ops_per_sec: (!alternating.is_empty())
                .then(|| alternating.iter().map(|&a| f64::from(a)).sum::<f64>() / seconds),
        })
    }
}

/// The header: [`COLUMNS`], with [`WRITE_WAIT_COLUMN`] after `wait_p99_us` if `write_wait`,
/// then [`ROLE_COLUMNS`] if `roles`, and [`PATH_COLUMNS`] and [`HOLDER_COLUMNS`] before
/// `host_ms` if `paths`.
pub fn columns(
    Columns {
        paths,
        write_wait,
        roles,
    }: Columns,
) -> Vec<&'static str> {
    let (host_ms, rest) = COLUMNS.split_last().expect("not empty");
    let mut columns = rest.to_vec();
    if write_wait {
        columns.push(WRITE_WAIT_COLUMN);
    }
    if roles {
        columns.extend(ROLE_COLUMNS);
    }
    if paths {
        columns.extend(PATH_COLUMNS);
        columns.extend(HOLDER_COLUMNS);
        columns.extend(CNA_COLUMNS);
    }
    columns.push(host_ms);
    columns
}

/// How a run's acquisitions were made, from the simulator's counts of `PathEvent`s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paths {
    /// Percent of the acquisitions made by the fast path.
    pub fast_pct: f64,
    /// Percent made by an arriving thread's stealing spin.
    pub steal_pct: f64,
    /// Percent made after waiting in the queue.
    pub queued_pct: f64,
    /// Sleeps (queue head and waiters) per 1000 acquisitions.
    pub parks_per_kacq: f64,
}

impl Paths {
    /// `None` when no acquisition was counted (the models count nothing).
    pub fn from_tallies(tallies: &[u64; numa_sim::TALLY_SLOTS]) -> Option<Paths> {
        let count = |event: PathEvent| tallies[event as usize] as f64;
        let acquisitions =
            count(PathEvent::Fast) + count(PathEvent::Steal) + count(PathEvent::Queued);
        (acquisitions > 0.0).then(|| Paths {
            fast_pct: 100.0 * count(PathEvent::Fast) / acquisitions,
            steal_pct: 100.0 * count(PathEvent::Steal) / acquisitions,
            queued_pct: 100.0 * count(PathEvent::Queued) / acquisitions,
            parks_per_kacq: 1000.0 * (count(PathEvent::HeadPark) + count(PathEvent::WaiterPark))
                / acquisitions,
        })
    }
}

/// How a kernel CNA model's queue heads passed the MCS lock on, by [`CnaPath`]: each path's
/// share of those handoffs, and the share of them that went to another node on that path (the
/// four remote shares add up to the share of all of them that crossed nodes), in percent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CnaHandoffs {
    /// Percent of the handoffs made on each path, in [`CnaPath::ALL`]'s order.
    pub path_pct: [f64; 4],
    /// Percent of the handoffs made on each path to a waiter of another node.
    pub remote_pct: [f64; 4],
}

impl CnaHandoffs {
    /// `None` when no CNA handoff was counted (every other lock).
    pub fn from_tallies(tallies: &[u64; numa_sim::TALLY_SLOTS]) -> Option<CnaHandoffs> {
        let count = |path: CnaPath, remote: bool| tallies[path.slot(remote)] as f64;
        let total: f64 = CnaPath::ALL
            .iter()
            .map(|&path| count(path, false) + count(path, true))
            .sum();
        (total > 0.0).then(|| CnaHandoffs {
            path_pct: CnaPath::ALL
                .map(|path| 100.0 * (count(path, false) + count(path, true)) / total),
            remote_pct: CnaPath::ALL.map(|path| 100.0 * count(path, true) / total),
        })
    }

    /// Percent of the handoffs that went to another node, all paths.
    pub fn remote_total_pct(&self) -> f64 {
        self.remote_pct.iter().sum()
    }
}

/// The identity of a row.
#[derive(Clone, Copy, Debug)]
pub struct RowKey {
    pub machine: &'static str,
    pub lock: &'static str,
    pub workload: &'static str,
    pub threads: usize,
}

/// One output line: one run of a (lock, workload, threads).
#[derive(Clone, Debug)]
pub struct Row {
    pub key: RowKey,
    /// Critical sections entered per simulated second, all threads.
    pub ops_per_sec: f64,
    /// `ops_per_sec` over mcs's, when mcs ran.
    pub speedup: Option<f64>,
    /// The busiest ceil(n/2) threads' share of the ops (`NaN` when nobody did any).
    pub fairness_factor: f64,
    /// Busiest over idlest thread's ops (infinite when a thread did none).
    pub max_min: f64,
    /// Remote handoffs / handoffs, in percent (0 without handoffs).
    pub remote_handoff_pct: f64,
    /// The 99th percentile of the counted acquisitions' waits, µs (`None` without any).
    pub wait_p99_us: Option<f64>,
    /// The same for the exclusive acquisitions alone (`None` without any).
    pub write_wait_p99_us: Option<f64>,
    /// With dedicated writers (`--writers`): the readers' and the writers' operations per
    /// simulated second (`None` otherwise).
    pub reads_writes_per_sec: Option<(f64, f64)>,
    /// Acquisitions per handoff: how many critical sections a thread runs in a row on average
    /// (`None` without handoffs).
    pub acq_per_handoff: Option<f64>,
    /// When the threads alternated, and how fast the lock ran then (`None` for runs shorter
    /// than a window).
    pub alternation: Option<Alternation>,
    /// Host wall time of the run, ms.
    pub host_ms: f64,
    /// How the acquisitions were made (this crate's locks only).
    pub paths: Option<Paths>,
    /// How the queue heads passed the lock on (the kernel's CNA models only).
    pub cna: Option<CnaHandoffs>,
}

/// Summarises one run; `speedup` is left for [`fill_speedups`].
pub fn summarize(key: RowKey, run: &RunResult) -> Row {
    let ops: Vec<u64> = run.per_thread.iter().map(|c| c.ops).collect();
    let (fairness_factor, max_min) = fairness(&ops).unwrap_or((f64::NAN, f64::NAN));
    let (handoffs, remote) = run.per_thread.iter().fold((0u64, 0u64), |(h, r), c| {
        (h + c.handoffs, r + c.remote_handoffs)
    });
    let seconds = run.elapsed_ns.max(1) as f64 * 1e-9;
    let reads_writes_per_sec = run.writers.map(|writers| {
        let writes: u64 = run.per_thread.iter().take(writers).map(|c| c.ops).sum();
        let reads = run.total_ops() - writes;
        (reads as f64 / seconds, writes as f64 / seconds)
    });
    Row {
        key,
        ops_per_sec: run.total_ops() as f64 / seconds,
        speedup: None,
        fairness_factor,
        max_min,
        remote_handoff_pct: remote_handoff_pct(handoffs, remote),
        wait_p99_us: run.wait_quantile_ns(0.99).map(|ns| f64::from(ns) / 1e3),
        write_wait_p99_us: run
            .write_wait_quantile_ns(0.99)
            .map(|ns| f64::from(ns) / 1e3),
        reads_writes_per_sec,
        acq_per_handoff: (handoffs > 0).then(|| run.total_ops() as f64 / handoffs as f64),
        alternation: Alternation::from_windows(&run.windows),
        host_ms: run.host_time.as_secs_f64() * 1e3,
        paths: Paths::from_tallies(&run.tallies),
        cna: CnaHandoffs::from_tallies(&run.tallies),
    }
}

/// Sets every row's speedup against the mcs row of the same machine, workload and threads.
pub fn fill_speedups(rows: &mut [Row]) {
    let speedups = speedups(rows.iter().map(|row| {
        let key = row.key;
        (
            key.lock == "mcs",
            (key.machine, key.workload, key.threads),
            row.ops_per_sec,
        )
    }));
    for (row, speedup) in rows.iter_mut().zip(speedups) {
        row.speedup = speedup;
    }
}

/// The row's cells, formatted (with the optional `columns`); `missing` stands for an absent
/// speedup, wait or path count.
fn cells(row: &Row, missing: &str, columns: Columns) -> Vec<String> {
    let mut cells = vec![
        row.key.machine.to_string(),
        row.key.lock.to_string(),
        row.key.workload.to_string(),
        row.key.threads.to_string(),
        format!("{:.0}", row.ops_per_sec),
        row.speedup
            .map_or_else(|| missing.to_string(), |s| format!("{s:.3}")),
        format!("{:.4}", row.fairness_factor),
        format!("{:.3}", row.max_min),
        format!("{:.2}", row.remote_handoff_pct),
        row.wait_p99_us
            .map_or_else(|| missing.to_string(), |us| format!("{us:.2}")),
    ];
    if columns.write_wait {
        cells.push(
            row.write_wait_p99_us
                .map_or_else(|| missing.to_string(), |us| format!("{us:.2}")),
        );
    }
    if columns.roles {
        match row.reads_writes_per_sec {
            Some((reads, writes)) => cells.extend([format!("{reads:.0}"), format!("{writes:.0}")]),
            None => cells.extend(ROLE_COLUMNS.map(|_| missing.to_string())),
        }
    }
    if columns.paths {
        match row.paths {
            Some(p) => cells.extend([
                format!("{:.2}", p.fast_pct),
                format!("{:.2}", p.steal_pct),
                format!("{:.2}", p.queued_pct),
                format!("{:.1}", p.parks_per_kacq),
            ]),
            None => cells.extend(PATH_COLUMNS.map(|_| missing.to_string())),
        }
        let number = |value: Option<f64>, digits: usize| {
            value.map_or_else(|| missing.to_string(), |v| format!("{v:.digits$}"))
        };
        cells.push(number(row.acq_per_handoff, 2));
        cells.push(number(row.alternation.map(|a| a.time_pct), 1));
        cells.push(number(row.alternation.and_then(|a| a.ops_per_sec), 0));
        match row.cna {
            Some(cna) => cells.extend(
                cna.path_pct
                    .iter()
                    .chain(&cna.remote_pct)
                    .map(|pct| format!("{pct:.2}")),
            ),
            None => cells.extend(CNA_COLUMNS.map(|_| missing.to_string())),
        }
    }
    cells.push(format!("{:.1}", row.host_ms));
    cells
}

/// The header and one line per row, comma-separated; an absent speedup is an empty field.
pub fn print_csv(rows: &[Row], optional: Columns) {
    let lines: Vec<Vec<String>> = rows.iter().map(|row| cells(row, "", optional)).collect();
    crate::common::report::print_csv(&columns(optional), &lines);
}

/// An aligned table with the CSV's columns (text left-aligned, numbers right-aligned); an absent
/// speedup is `-`. A blank line separates workloads. `host_ms` is the last column, so its
/// width cannot shift the others.
pub fn print_table(rows: &[Row], optional: Columns) {
    let lines: Vec<Vec<String>> = rows.iter().map(|row| cells(row, "-", optional)).collect();
    let workloads: Vec<&str> = rows.iter().map(|row| row.key.workload).collect();
    crate::common::report::print_table(&columns(optional), &lines, 3, &workloads);
}

/// Draws simulated throughput against threads, one line per lock and one chart per workload
/// (the `rw` workload's title says its `read_pct`); returns the files written (see
/// [`plot::files_for`]).
pub fn plot(
    path: &Path,
    machine: &str,
    read_pct: u32,
    rows: &[Row],
) -> Result<Vec<PathBuf>, String> {
    let points: Vec<Point> = rows
        .iter()
        .map(|row| Point {
            workload: row.key.workload,
            lock: row.key.lock,
            threads: row.key.threads,
            rate: row.ops_per_sec,
        })
        .collect();
    plot::draw_per_workload(
        path,
        &points,
        |workload| match workload {
            "rw" => format!("numasim: {machine} (simulated), workload rw, {read_pct} % reads"),
            _ => format!("numasim: {machine} (simulated), workload {workload}"),
        },
        "critical sections per simulated second",
    )
}
