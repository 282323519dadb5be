//! The `locktorture` tool: this crate's locks beside parking_lot's, std's and crossbeam's on
//! real threads of this machine, with optional virtual nodes and a remote-handoff penalty. The
//! `locktorture` example is its `main` (with the glue for `--stats`, see [`StatsReader`]);
//! tests/locktorture_cli.rs runs it.

pub mod cli;
pub mod harness;
pub mod report;
pub mod workload;

pub use harness::{StatsReader, WaitHold};

use cli::Options;
use harness::{RunConfig, RunResult};
use report::{Row, RowKey};
use std::time::{Duration, Instant};

/// Runs every (workload, threads, run, lock) and summarises each (lock, workload, threads).
/// Also returns how many runs left the protected data inconsistent (each is reported on stderr).
///
/// `stats` reads the wait and hold statistics of numa_locks' mutexes after every run; without it
/// the rows have none.
pub fn torture(options: &Options, stats: Option<StatsReader>) -> (Vec<Row>, usize) {
    // Always valid: these setters only return Result like every tunable's setter.
    let _ = numa_locks::tunables::set_stealing(options.stealing);
    let _ = numa_locks::tunables::set_rwlock_writer_handover(options.rwlock_handover);
    let _ = numa_locks::tunables::set_rwlock_write_mode(options.rwlock_write_mode);
    let nodes = options
        .virtual_nodes
        .unwrap_or_else(numa_locks::topology::node_count);
    let total =
        options.workloads.len() * options.threads.len() * options.runs * options.locks.len();
    let estimate = Duration::from_millis(options.duration_ms).as_secs_f64() * total as f64;
    let reads = if options.workloads.contains(&cli::WorkloadKind::Rw) {
        match options.writers {
            Some(writers) => format!(", rw: {writers} dedicated writer(s), work {}", options.work),
            None => format!(", rw reads {}%, work {}", options.read_pct, options.work),
        }
    } else {
        String::new()
    };
    eprintln!(
        "locktorture: {total} runs of {} ms, about {estimate:.1} s; {nodes} node(s){}, remote penalty {} ns, stealing {}{reads}",
        options.duration_ms,
        if options.virtual_nodes.is_some() {
            " (virtual)"
        } else {
            ""
        },
        options.remote_penalty_ns,
        if options.stealing { "on" } else { "off" },
    );

    let began = Instant::now();
    let mut rows = Vec::new();
    let mut done = 0;
    if let Some(spins) = options.think_spins {
        workload::THINK_SPINS.store(spins, std::sync::atomic::Ordering::Relaxed);
    }
    let mut violations = 0;
    for &workload in &options.workloads {
        for &threads in &options.threads {
            let config = RunConfig {
                threads,
                duration: Duration::from_millis(options.duration_ms),
                virtual_nodes: options.virtual_nodes,
                remote_penalty: Duration::from_nanos(options.remote_penalty_ns),
                slots: options.slots,
                notify_all: options.notify_all,
                read_pct: options.read_pct,
                writers: options.writers,
                work: options.work,
                stats,
            };
            // results[i] holds the runs of options.locks[i].
            let mut results: Vec<Vec<RunResult>> = vec![Vec::new(); options.locks.len()];
            for run in 1..=options.runs {
                for (&lock, lock_results) in options.locks.iter().zip(&mut results) {
                    done += 1;
                    eprintln!(
                        "[{done}/{total}] {} {} {threads} threads run {run}/{}",
                        lock.name(),
                        workload.name(),
                        options.runs
                    );
                    let result = harness::run_once(lock, workload, &config);
                    if let Some(violation) = &result.violation {
                        violations += 1;
                        eprintln!(
                            "error: MUTUAL EXCLUSION VIOLATED: {} {} {threads} threads run {run}: \
                             {violation}",
                            lock.name(),
                            workload.name()
                        );
                    }
                    lock_results.push(result);
                }
            }
            for (&lock, lock_results) in options.locks.iter().zip(&results) {
                let key = RowKey {
                    lock: lock.name(),
                    workload: workload.name(),
                    threads,
                    nodes,
                    penalty_ns: options.remote_penalty_ns,
                };
                rows.push(report::summarize(key, lock_results));
            }
        }
    }
    report::fill_speedups(&mut rows);
    eprintln!(
        "locktorture: done in {:.1} s",
        began.elapsed().as_secs_f64()
    );
    (rows, violations)
}
