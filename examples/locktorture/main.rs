//! `locktorture`: McsMutex, CnaMutex, HqMutex, parking_lot::Mutex and std::sync::Mutex side by side,
//! and the reader-writer locks McsRwLock, CnaRwLock, HqRwLock, parking_lot::RwLock and
//! std::sync::RwLock.
//!
//! For every workload, thread count and run, every chosen lock is hammered for `--duration-ms` by
//! threads that loop "a few ns of local work, then one critical section". The harness itself
//! counts, inside the critical section, how many handoffs crossed nodes, so every lock is measured
//! the same way. The locks take turns within each run number (run 1 of every lock, then run 2, ...)
//! so slow drifts of the machine affect all of them alike.
//!
//! ```text
//! cargo run --release --example locktorture
//! cargo run --release --example locktorture -- --workload kv --threads 4,8,16 --format csv
//! cargo run --release --example locktorture -- --virtual-nodes 4 --remote-penalty-ns 200 --threads 16
//! cargo run --release --example locktorture -- --threads 1,2,4,8,16 --plot throughput.svg
//! cargo run --release --example locktorture --features stats -- --stats
//! cargo run --release --example locktorture -- --workload pc --slots 1 --notify all --threads 2,4,8,20
//! cargo run --release --example locktorture -- --workload rw --read-pct 95 --threads 1,2,8,32
//! cargo run --release --example locktorture -- --help
//! ```
//!
//! Workload `pc` is the condition-variable shape: half the threads produce and half consume on a
//! bounded queue of `--slots` messages, with two condition variables of the lock's own kind
//! (`--notify all`: `notify_all` when the queue stops being empty or full; `--notify one`:
//! `notify_one` after every push and pop), as in parking_lot's WebKit queue tests.
//!
//! Workload `rw` is a read-mostly hash table: `--read-pct` of the operations take the shared lock
//! (`read()`) and check that the entry they read is whole, the others the exclusive one
//! (`write()`); a mutex takes its only lock for both. The rwlocks (`mcs-rw`, `cna-rw`, `hq-rw`,
//! `pl-rwlock`, `std-rwlock`) run the other workloads (but `pc`, which needs a condition
//! variable) through `write()`, and `speedup_vs_pl_rwlock` compares every lock with
//! `parking_lot::RwLock` as `speedup_vs_parking_lot` does with `parking_lot::Mutex`.
//!
//! `--plot FILE.svg` also draws throughput against threads (one line per lock, one chart per
//! workload); `--stats` (with `--features stats`) adds the p50/p99/max wait and hold times of this
//! crate's locks from `numa_locks::stats`.
//!
//! After every run the harness checks the protected data (the counters equal the number of critical
//! sections, the free list is intact, the map still holds its keys, every message pushed was
//! popped or is still queued, no read of `rw` saw a half-done write and no write was lost) and
//! reports a violation of
//! mutual exclusion on stderr; a watchdog reports a lock that does not let the workers stop.
//!
//! Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a lock failed
//! (mutual exclusion violated, stuck, or a thread could not be spawned) or the plot could not be
//! written, 2 bad command line.

// examples/locktorture/main.rs: cargo's example `locktorture`, its modules beside it.
mod cli;
mod harness;
mod report;
mod workload;

// What locktorture shares with numasim (command-line pieces, workload helpers, reports, plots).
use numa_bench::common;

use cli::{Format, Options};
use harness::{RunConfig, RunResult};
use report::{Row, RowKey};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let options = match cli::parse(std::env::args_os()) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    let (rows, violations) = torture(&options);
    match options.format {
        Format::Table => report::print_table(&rows, options.stats),
        Format::Csv => report::print_csv(&rows, options.stats),
    }
    let mut failed = false;
    if let Some(path) = &options.plot {
        failed |= !common::plot::report_written("locktorture", report::plot(path, &rows));
    }
    if violations != 0 {
        eprintln!("error: {violations} run(s) broke mutual exclusion (see above)");
        failed = true;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs every (workload, threads, run, lock) and summarises each (lock, workload, threads).
/// Also returns how many runs left the protected data inconsistent (each is reported on stderr).
fn torture(options: &Options) -> (Vec<Row>, usize) {
    // Always valid: set_stealing only returns Result like every tunable's setter.
    let _ = numa_locks::tunables::set_stealing(options.stealing);
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
