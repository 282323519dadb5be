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

// The tool's code lives in numa_bench (harness, workloads, report, command line); here are only
// the main and the glue that reads numa_locks' statistics for `--stats`.
use numa_bench::common;
use numa_bench::locktorture::{self, StatsReader, cli, report};

use cli::Format;
use std::process::ExitCode;

fn main() -> ExitCode {
    let stats = stats_reader();
    let options = match cli::parse(std::env::args_os(), stats.is_some()) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    let (rows, violations) = locktorture::torture(&options, stats);
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

/// The reader of the wait and hold statistics of McsMutex, CnaMutex and HqMutex, which exist only
/// with numa_locks' feature `stats`. numa_bench cannot turn the feature on itself (cargo unifies
/// features, so every `cargo test` of numa_locks would then build its locks with the counters):
/// this example, built with `--features stats`, hands it the reader.
#[cfg(feature = "stats")]
fn stats_reader() -> Option<StatsReader> {
    use locktorture::WaitHold;
    use numa_locks::stats::{HasStats, Histogram};
    use std::time::Duration;

    /// p50, p99 and max of the raw lock's wait and hold times, ns.
    fn wait_hold<R: HasStats>(raw: &R) -> WaitHold {
        let stats = raw.stats();
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let summary = |h: &Histogram| [ns(h.percentile(50.0)), ns(h.percentile(99.0)), ns(h.max())];
        WaitHold {
            wait: summary(&stats.wait),
            hold: summary(&stats.hold),
        }
    }
    Some(StatsReader {
        mcs: wait_hold,
        cna: wait_hold,
        hq: wait_hold,
    })
}

/// Without feature `stats` the locks keep no statistics: `--stats` is refused.
#[cfg(not(feature = "stats"))]
fn stats_reader() -> Option<StatsReader> {
    None
}
