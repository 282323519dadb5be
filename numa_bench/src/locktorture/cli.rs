//! Command-line parsing for `locktorture`, with clap (derive).
//!
//! Every bad input is reported with a message that names the offending value and the values that
//! are allowed, and exits with code 2. The messages are those of the hand-written parser this
//! replaced: the value parsers return them whole, and the clap errors that have an equivalent
//! (unknown option, missing value) are reworded to it; any other clap error is printed as clap
//! words it. Nothing here panics on user input.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

pub use crate::common::cli::Format;
use crate::common::cli::{List, MAX_WRITERS, allowed_names, find_named, parse_unique, split_list};

/// The lock implementations the harness knows: the mutexes, then the rwlocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// `numa_locks::McsMutex`.
    Mcs,
    /// `numa_locks::CnaMutex`.
    Cna,
    /// `numa_locks::HqMutex`.
    Hq,
    /// `parking_lot::Mutex`, the baseline for `speedup_vs_parking_lot`.
    ParkingLot,
    /// `std::sync::Mutex`.
    Std,
    /// `numa_locks::McsRwLock`.
    McsRw,
    /// `numa_locks::CnaRwLock`.
    CnaRw,
    /// `numa_locks::HqRwLock`.
    HqRw,
    /// `parking_lot::RwLock`, the baseline for `speedup_vs_pl_rwlock`.
    PlRwLock,
    /// `std::sync::RwLock`.
    StdRwLock,
    /// `crossbeam_utils::sync::ShardedLock`: a reader locks one of 8 shards picked by thread,
    /// a writer all of them.
    Sharded,
    /// `numa_locks::McsMutex` through `Delegate::delegate`.
    McsDelegate,
    /// `numa_locks::CnaMutex` through `Delegate::delegate`.
    CnaDelegate,
    /// `numa_locks::HqMutex` through `Delegate::delegate`.
    HqDelegate,
}

impl LockKind {
    /// The mutexes: the default `--locks`.
    pub const MUTEXES: [LockKind; 5] =
        [Self::Mcs, Self::Cna, Self::Hq, Self::ParkingLot, Self::Std];

    /// The reader-writer locks: added to the default `--locks` when `--workload` has `rw`.
    pub const RWLOCKS: [LockKind; 6] = [
        Self::McsRw,
        Self::CnaRw,
        Self::HqRw,
        Self::PlRwLock,
        Self::StdRwLock,
        Self::Sharded,
    ];

    /// Every lock, in the order the help lists them.
    pub const ALL: [LockKind; 14] = [
        Self::Mcs,
        Self::Cna,
        Self::Hq,
        Self::ParkingLot,
        Self::Std,
        Self::McsRw,
        Self::CnaRw,
        Self::HqRw,
        Self::PlRwLock,
        Self::StdRwLock,
        Self::Sharded,
        Self::McsDelegate,
        Self::CnaDelegate,
        Self::HqDelegate,
    ];

    /// The mutexes taken through `Delegate::delegate`.
    pub const DELEGATES: [LockKind; 3] = [Self::McsDelegate, Self::CnaDelegate, Self::HqDelegate];

    /// The name used on the command line and in the output (numasim's names for the same locks).
    pub fn name(self) -> &'static str {
        match self {
            Self::Mcs => "mcs",
            Self::Cna => "cna",
            Self::Hq => "hq",
            Self::ParkingLot => "parking_lot",
            Self::Std => "std",
            Self::McsRw => "mcs-rw",
            Self::CnaRw => "cna-rw",
            Self::HqRw => "hq-rw",
            Self::PlRwLock => "pl-rwlock",
            Self::StdRwLock => "std-rwlock",
            Self::Sharded => "sharded",
            Self::McsDelegate => "mcs-delegate",
            Self::CnaDelegate => "cna-delegate",
            Self::HqDelegate => "hq-delegate",
        }
    }

    /// Whether this is a reader-writer lock (shared reads in `rw`, `write()` everywhere else).
    pub fn is_rwlock(self) -> bool {
        Self::RWLOCKS.contains(&self)
    }
}

/// What a critical section does (see the help's WORKLOADS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Nothing.
    Empty,
    /// Four shared counters on separate cache lines.
    Counter,
    /// A skewed get/put on a shared hash map.
    Kv,
    /// Pop and push at the head of a shared free list.
    FreeList,
    /// One shared counter, with about 1 µs of spinning between acquisitions.
    Hammer,
    /// Producers and consumers on a bounded queue, with condition variables.
    Pc,
    /// A read-mostly hash table: `--read-pct` of the operations are reads under the shared lock.
    Rw,
}

impl WorkloadKind {
    /// Every workload, in the order the help lists them.
    pub const ALL: [WorkloadKind; 7] = [
        Self::Empty,
        Self::Counter,
        Self::Kv,
        Self::FreeList,
        Self::Hammer,
        Self::Pc,
        Self::Rw,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Counter => "counter",
            Self::Kv => "kv",
            Self::FreeList => "freelist",
            Self::Hammer => "hammer",
            Self::Pc => "pc",
            Self::Rw => "rw",
        }
    }
}

/// A fully validated command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// Locks to run, in order, without duplicates.
    pub locks: Vec<LockKind>,
    /// Thread counts, in order, without duplicates.
    pub threads: Vec<usize>,
    /// Length of one run in milliseconds.
    pub duration_ms: u64,
    /// Runs per (lock, workload, threads).
    pub runs: usize,
    /// Workloads, in order, without duplicates.
    pub workloads: Vec<WorkloadKind>,
    /// `Some(n)`: thread i is put on virtual node `i % n`.
    pub virtual_nodes: Option<usize>,
    /// Busy-spin this long on a remote handoff.
    pub remote_penalty_ns: u64,
    /// Whether this crate's locks may steal (`numa_locks::tunables::set_stealing`).
    pub stealing: bool,
    /// Whether this crate's rwlocks hand the revocation from writer to writer
    /// (`numa_locks::tunables::set_rwlock_writer_handover`).
    pub rwlock_handover: bool,
    /// Whether this crate's rwlocks may enter write mode
    /// (`numa_locks::tunables::set_rwlock_write_mode`).
    pub rwlock_write_mode: bool,
    /// Output format.
    pub format: Format,
    /// Where to draw throughput against threads (`--plot`).
    pub plot: Option<PathBuf>,
    /// Whether to report wait and hold percentiles (`--stats`, feature `stats`).
    pub stats: bool,
    /// `pc`: the queue's capacity.
    pub slots: usize,
    /// `pc`: `notify_all` on the empty/full transitions (true), or `notify_one` after every
    /// push and pop (false).
    pub notify_all: bool,
    /// `rw`: the percentage of operations that are reads, 0..=100.
    pub read_pct: u64,
    /// `rw`: `Some(n)`: threads `0..n` only write and the others only read (`--read-pct` is
    /// then unused).
    pub writers: Option<usize>,
    /// `rw`: PRNG rounds inside every critical section and, besides the usual few, outside.
    pub work: u64,
    /// `hammer`: `Some(n)`: think for `n` `spin_loop` hints between acquisitions instead of the
    /// clock-timed 1 µs.
    pub think_spins: Option<u64>,
}

/// A bad value: the complete message (naming the value, the option and what is allowed), without
/// a newline.
#[derive(Debug, Clone)]
struct CliError(String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}

const MAX_THREADS: u64 = 1024;
const MAX_DURATION_MS: u64 = 3_600_000;
const MAX_RUNS: u64 = 1000;
const MAX_VIRTUAL_NODES: u64 = 1024;
const MAX_PENALTY_NS: u64 = 10_000_000;
const MAX_SLOTS: u64 = 1_000_000;
const MAX_READ_PCT: u64 = 100;
const MAX_WORK: u64 = 1_000_000;
const MAX_THINK_SPINS: u64 = 1_000_000;

const OPTION_NAMES: &str = "--locks, --threads, --duration-ms, --runs, --workload, --virtual-nodes, \
                            --remote-penalty-ns, --stealing, --rwlock-handover, --rwlock-write-mode, \
                            --spin-us, --steal-bound-us, --retake-window-us, --lone-retake-window-us, --hq-domain-handoffs, --delegate-batch, --format, \
                            --plot, --stats, --slots, --notify, --read-pct, --writers, --work, \
                            --think-spins, --help";

const ABOUT: &str = "\
locktorture: run McsMutex, CnaMutex, HqMutex, parking_lot::Mutex and std::sync::Mutex (and the
reader-writer locks McsRwLock, CnaRwLock, HqRwLock, parking_lot::RwLock and std::sync::RwLock)
side by side and report throughput, fairness and cross-node handoffs.

A value may also be given as --option=value.";

const AFTER_HELP: &str = "\
WORKLOADS (what one critical section does):
    empty       nothing (the classic locktorture loop)
    counter     increments 4 shared u64 counters, each on its own cache line
    kv          one operation on a HashMap<u64, u64> pre-filled with 65536 keys; skewed keys
                (key = r1 % (r2 % 65536 + 1)); 90% get, 10% put
    freelist    pops a 64-byte block from the head of a shared index-linked free list and pushes
                back the block the thread popped last time (a page allocator's zone lock)
    hammer      increments one shared counter, then spins about 1 us (a clock-timed loop)
                before the next acquisition: the loop a new user writes to try a lock;
                --think-spins N spins N spin_loop hints instead (no clock reads)
    pc          producers and consumers (half the threads each, rounded up for producers; needs
                2 threads at least) on a bounded queue of --slots messages, with two condition
                variables (not full, not empty) of the lock's own kind (parking_lot::Condvar,
                std::sync::Condvar, numa_locks' McsCondvar, CnaCondvar, HqCondvar); --notify all
                calls notify_all when the queue stops being empty or full, --notify one calls
                notify_one after every push and pop (parking_lot's WebKit queue tests). One
                operation is one push or one pop; no handoff bookkeeping (remote_handoff_pct 0).
                Needs a condition variable: not for the rwlocks
    rw          a read-mostly hash table: 1024 buckets of 4 entries (u64 key, value, and a seal
                computed from both), keys 0..4096 drawn uniformly; --read-pct of the operations
                look a key up under the shared lock (read()) and check its seal, the others
                store a new value and seal under the exclusive lock (write()) and keep a count
                and a sum of all values. A mutex takes its only lock for both. Handoffs are
                counted between exclusive acquisitions only (a read leaves no trace).
                --writers N makes threads 0..N dedicated writers and the rest dedicated
                readers; --work N adds N PRNG rounds inside every critical section and outside
    The rwlocks (mcs-rw, cna-rw, hq-rw, pl-rwlock, std-rwlock, sharded: crossbeam-utils'
    ShardedLock) run every workload but pc, and
    all but rw through write() alone: what swapping a Mutex for an RwLock costs.
    mcs-delegate, cna-delegate and hq-delegate are McsMutex, CnaMutex and HqMutex taken through
    Delegate::delegate: a holder may run a waiter's critical section for it, and handoffs count
    changes of the thread that runs the sections. They run every workload but pc.
    Between acquisitions every thread also does a few ns of local work (xorshift PRNG rounds), so the
    lock stays hot.

COLUMNS:
    ops_per_sec             critical sections per second, all threads; mean over runs
    stddev                  sample standard deviation of ops_per_sec over runs (0 for one run)
    speedup_vs_parking_lot  ops_per_sec / parking_lot's ops_per_sec for the same workload and
                            thread count, measured in this invocation ('-' in the table and empty
                            in CSV when parking_lot is not among --locks)
    fairness_factor         share of all operations done by the busiest ceil(n/2) threads, mean
                            over runs; 0.5 is perfectly fair for an even thread count, 1.0 means
                            the busiest half did everything (always 1.0 for one thread)
    max_min                 busiest thread's ops / idlest thread's ops, mean over runs
                            ('inf' when a thread never got the lock)
    remote_handoff_pct      percentage of handoffs that crossed nodes. A handoff is an acquisition
                            whose previous holder was a different thread (re-acquisitions by the
                            same thread are not handoffs); it is remote when the previous holder's
                            node differs from the acquiring thread's node. The harness measures it
                            inside the critical section from a last_thread/last_node pair stored
                            with the protected data, identically for every lock; the remote
                            penalty is applied at the same place. Summed over runs; 0 when there
                            were no handoffs (one thread).
    speedup_vs_pl_rwlock    ops_per_sec / pl-rwlock's (parking_lot::RwLock) ops_per_sec for the
                            same workload and thread count, measured in this invocation: the
                            rwlock comparison, as speedup_vs_parking_lot is the mutex one ('-' in
                            the table and empty in CSV when pl-rwlock is not among --locks)
    reads_per_sec           of ops_per_sec, the reads (rw's shared acquisitions); mean over runs
    writes_per_sec          of ops_per_sec, the exclusive acquisitions; mean over runs
  With --stats (build with --features stats), after remote_handoff_pct:
    wait_p50_ns, wait_p99_ns, wait_max_ns
                            time from the lock() call to holding the lock, per acquisition, from
                            numa_locks::stats::snapshot (log buckets: a percentile overstates the
                            exact one by at most half); p50 and p99 are means over runs, max the
                            largest of any run; the whole run, start and stop included
    hold_p50_ns, hold_p99_ns, hold_max_ns
                            time from acquiring to unlocking, likewise
                            ('-' in the table and empty in CSV for parking_lot, std and the
                            rwlocks, which keep no statistics)

Progress goes to stderr, results to stdout. Bad input exits with code 2.";

#[derive(Parser, Debug)]
#[command(
    name = "locktorture",
    about = ABOUT,
    override_usage = "cargo run --release --example locktorture -- [OPTIONS]",
    after_help = AFTER_HELP,
    args_override_self = true,
    max_term_width = 100
)]
struct Args {
    /// Comma list of locks to run; allowed: mcs, cna, hq, parking_lot, std (mutexes), mcs-rw,
    /// cna-rw, hq-rw, pl-rwlock, std-rwlock, sharded (rwlocks: see WORKLOADS), mcs-delegate,
    /// cna-delegate, hq-delegate (the mutexes through Delegate::delegate). Default: the mutexes,
    /// and the rwlocks too when --workload has rw (and not pc)
    #[arg(long, value_name = "LIST", value_parser = parse_locks, allow_hyphen_values = true)]
    locks: Option<List<LockKind>>,

    /// Comma list of thread counts, each 1..=1024
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8",
          value_parser = parse_threads, allow_hyphen_values = true)]
    threads: List<usize>,

    /// Length of one run in milliseconds, 1..=3600000
    #[arg(long, value_name = "MS", default_value = "500",
          value_parser = parse_duration_ms, allow_hyphen_values = true)]
    duration_ms: u64,

    /// Runs per (lock, workload, threads), 1..=1000
    #[arg(long, value_name = "N", default_value = "3",
          value_parser = parse_runs, allow_hyphen_values = true)]
    runs: usize,

    /// Comma list of critical sections; allowed: empty, counter, kv, freelist, hammer, pc, rw
    /// (see WORKLOADS)
    #[arg(long, value_name = "LIST", default_value = "counter",
          value_parser = parse_workloads, allow_hyphen_values = true)]
    workload: List<WorkloadKind>,

    /// Thread i pretends to run on node i % N, 1..=1024 (topology::set_thread_node); without it
    /// each thread's node is topology::current_node(), read just before every lock()
    #[arg(long, value_name = "N", value_parser = parse_virtual_nodes, allow_hyphen_values = true)]
    virtual_nodes: Option<usize>,

    /// NUMA emulation: a critical section entered on a different node than the previous holder's
    /// first busy-spins P ns, standing in for the remote cache misses on the protected data,
    /// 0..=10000000
    #[arg(long, value_name = "P", default_value = "0",
          value_parser = parse_penalty_ns, allow_hyphen_values = true)]
    remote_penalty_ns: u64,

    /// Whether this crate's locks let an arriving thread take a free lock ahead of queued
    /// waiters (numa_locks::tunables::set_stealing); off makes every contended acquisition a
    /// queue handoff, which is how the NUMA-aware policies show on a machine with few cores.
    /// parking_lot and std are not affected
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set,
          value_parser = parse_stealing, allow_hyphen_values = true)]
    stealing: bool,

    /// Whether this crate's rwlocks hand the readers' revocation from writer to writer
    /// (numa_locks::tunables::set_rwlock_writer_handover; for write-heavy rwlocks)
    #[arg(long, value_name = "on|off", default_value = "off", action = clap::ArgAction::Set,
          value_parser = parse_rwlock_handover, allow_hyphen_values = true)]
    rwlock_handover: bool,

    /// Whether this crate's rwlocks leave a lock whose last writers found no reader in write
    /// mode (numa_locks::tunables::set_rwlock_write_mode)
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set,
          value_parser = parse_rwlock_write_mode, allow_hyphen_values = true)]
    rwlock_write_mode: bool,

    /// Tunable: how long this crate's waiters spin before they park, in microseconds
    /// (numa_locks::tunables::set_spin_time) [default: 5]
    #[arg(long, value_name = "US", value_parser = parse_spin_us, allow_hyphen_values = true)]
    spin_us: Option<f64>,

    /// Tunable: how long the queue head lets arriving threads take the lock ahead of it, in
    /// microseconds (numa_locks::tunables::set_steal_bound) [default: 1000]
    #[arg(long, value_name = "US", value_parser = parse_steal_bound_us,
          allow_hyphen_values = true)]
    steal_bound_us: Option<f64>,

    /// Tunable: how long a new queue head leaves the free lock open to the thread that
    /// released it before it reserves it, in microseconds, 0..=10000
    /// (numa_locks::tunables::set_retake_window) [default: 0]. No effect where heads do not
    /// reserve: on fewer than 3 CPUs, or while threads outnumber cores
    #[arg(long, value_name = "US", value_parser = parse_retake_window_us,
          allow_hyphen_values = true)]
    retake_window_us: Option<f64>,

    /// Tunable: how long a queue head with nobody queued behind it leaves the free lock open
    /// before it reserves it, in microseconds, 0..=10000
    /// (numa_locks::tunables::set_lone_retake_window) [default: 50]. No effect where heads do
    /// not reserve: on fewer than 3 CPUs, or while threads outnumber cores
    #[arg(long, value_name = "US", value_parser = parse_lone_retake_window_us,
          allow_hyphen_values = true)]
    lone_retake_window_us: Option<f64>,

    /// Tunable: consecutive handoffs HqMutex keeps within a cache domain (an L3) while it queues
    /// per domain, 1..=16777216 (numa_locks::tunables::set_hq_domain_handoffs) [default: 16].
    /// Read only where NUMA nodes hold several L3 domains
    #[arg(long, value_name = "N", value_parser = parse_hq_domain_handoffs,
          allow_hyphen_values = true)]
    hq_domain_handoffs: Option<u64>,

    /// Tunable: most closures a delegating holder (mcs-delegate, cna-delegate, hq-delegate)
    /// runs for its waiters before it hands the lock on, 0..=65536, 0 = no combining
    /// (numa_locks::tunables::set_delegate_batch) [default: 16]
    #[arg(long, value_name = "N", value_parser = parse_delegate_batch,
          allow_hyphen_values = true)]
    delegate_batch: Option<u64>,

    /// Output format: table or csv
    #[arg(long, value_name = "FORMAT", default_value = "table",
          value_parser = parse_format, allow_hyphen_values = true)]
    format: Format,

    /// Also draw ops_per_sec against threads, one line per lock, as an SVG line chart; with
    /// several workloads, one file per workload: FILE's stem + "-<workload>.svg"
    #[arg(long, value_name = "FILE.svg", allow_hyphen_values = true)]
    plot: Option<PathBuf>,

    /// Report the p50/p99/max wait and hold times of this crate's locks beside the throughput
    /// (numa_locks::stats; needs `--features stats`; see COLUMNS)
    #[arg(long)]
    stats: bool,

    /// Workload pc: the queue's capacity in messages, 1..=1000000
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = parse_slots, allow_hyphen_values = true)]
    slots: usize,

    /// Workload pc: notify_all on the empty/full transitions (all) or notify_one after every
    /// push and pop (one)
    #[arg(long, value_name = "one|all", default_value = "all", action = clap::ArgAction::Set,
          value_parser = parse_notify, allow_hyphen_values = true)]
    notify: bool,

    /// Workload rw: the percentage of operations that are reads (under the shared lock),
    /// 0..=100
    #[arg(long, value_name = "P", default_value = "95",
          value_parser = parse_read_pct, allow_hyphen_values = true)]
    read_pct: u64,

    /// Workload rw: threads 0..N only write and the others only read (dedicated writers beside
    /// dedicated readers; --read-pct is unused), 1..=1023, fewer than every --threads value
    #[arg(long, value_name = "N", value_parser = parse_writers, allow_hyphen_values = true)]
    writers: Option<usize>,

    /// Workload rw: N units of work (xorshift PRNG rounds) inside every critical section, and N
    /// more outside, 0..=1000000
    #[arg(long, value_name = "N", default_value = "0",
          value_parser = parse_work, allow_hyphen_values = true)]
    work: u64,

    /// Workload hammer: think for N spin_loop hints between acquisitions instead of the
    /// clock-timed 1 us, 0..=1000000
    #[arg(long, value_name = "N", value_parser = parse_think_spins, allow_hyphen_values = true)]
    think_spins: Option<u64>,
}

/// Parses the command line (program name first). On `--help` (printed, exit code 0) or an error
/// (printed, exit code 2) returns the exit code for `main` to return. `--stats` is an error
/// unless `stats_readable` (the example's main has a [`StatsReader`](super::StatsReader), which
/// needs numa_locks' feature `stats`).
pub fn parse<I: IntoIterator<Item = OsString>>(
    args: I,
    stats_readable: bool,
) -> Result<Options, ExitCode> {
    let args = match Args::try_parse_from(args) {
        Ok(args) => args,
        Err(error) if error.kind() == ErrorKind::DisplayHelp => {
            let _ = error.print();
            return Err(ExitCode::SUCCESS);
        }
        Err(error) => return Err(report(&describe(&error))),
    };
    if args.stats && !stats_readable {
        return Err(report(
            "--stats needs the wait and hold statistics of numa_locks' `stats` feature, which \
             this build does not have; run: cargo run --release --example locktorture \
             --features stats -- --stats",
        ));
    }
    let micros = |us: f64| std::time::Duration::from_secs_f64(us / 1e6);
    if let Some(us) = args.spin_us
        && let Err(e) = numa_locks::tunables::set_spin_time(micros(us))
    {
        return Err(report(&format!("--spin-us {us}: {e}")));
    }
    if let Some(us) = args.steal_bound_us
        && let Err(e) = numa_locks::tunables::set_steal_bound(micros(us))
    {
        return Err(report(&format!("--steal-bound-us {us}: {e}")));
    }
    if let Some(us) = args.retake_window_us
        && let Err(e) = numa_locks::tunables::set_retake_window(micros(us))
    {
        return Err(report(&format!("--retake-window-us {us}: {e}")));
    }
    if let Some(us) = args.lone_retake_window_us
        && let Err(e) = numa_locks::tunables::set_lone_retake_window(micros(us))
    {
        return Err(report(&format!("--lone-retake-window-us {us}: {e}")));
    }
    if let Some(n) = args.hq_domain_handoffs
        && let Err(e) = numa_locks::tunables::set_hq_domain_handoffs(n)
    {
        return Err(report(&format!("--hq-domain-handoffs {n}: {e}")));
    }
    if let Some(n) = args.delegate_batch
        && let Err(e) = numa_locks::tunables::set_delegate_batch(n)
    {
        return Err(report(&format!("--delegate-batch {n}: {e}")));
    }
    let has_pc = args.workload.0.contains(&WorkloadKind::Pc);
    if has_pc && let Some(&one) = args.threads.0.iter().find(|&&n| n < 2) {
        return Err(report(&format!(
            "--workload pc needs at least 2 threads (a producer and a consumer), but --threads \
             has {one}"
        )));
    }
    if let Some(conflict) = args.writers.and_then(|writers| {
        let has_rw = args.workload.0.contains(&WorkloadKind::Rw);
        crate::common::cli::writers_conflict(writers, has_rw, &args.threads.0)
    }) {
        return Err(report(&conflict));
    }
    let locks = match args.locks {
        Some(List(locks)) => locks,
        None if args.workload.0.contains(&WorkloadKind::Rw) && !has_pc => {
            [&LockKind::MUTEXES[..], &LockKind::RWLOCKS[..]].concat()
        }
        None => LockKind::MUTEXES.to_vec(),
    };
    if has_pc && let Some(rwlock) = locks.iter().find(|lock| lock.is_rwlock()) {
        return Err(report(&format!(
            "--workload pc needs a condition variable, which the rwlock '{}' in --locks does not \
             have; run pc with the mutexes ({}) only",
            rwlock.name(),
            allowed_names(&LockKind::MUTEXES, LockKind::name)
        )));
    }
    if has_pc && let Some(delegate) = locks.iter().find(|lock| LockKind::DELEGATES.contains(lock)) {
        return Err(report(&format!(
            "--workload pc waits on a condition variable inside its critical section, which a \
             delegated closure ('{}' in --locks) may not do (it may run on another thread); run \
             pc with the mutexes ({}) only",
            delegate.name(),
            allowed_names(&LockKind::MUTEXES, LockKind::name)
        )));
    }
    Ok(Options {
        locks,
        threads: args.threads.0,
        duration_ms: args.duration_ms,
        runs: args.runs,
        workloads: args.workload.0,
        virtual_nodes: args.virtual_nodes,
        remote_penalty_ns: args.remote_penalty_ns,
        stealing: args.stealing,
        rwlock_handover: args.rwlock_handover,
        rwlock_write_mode: args.rwlock_write_mode,
        format: args.format,
        plot: args.plot,
        stats: args.stats,
        slots: args.slots,
        notify_all: args.notify,
        read_pct: args.read_pct,
        writers: args.writers,
        work: args.work,
        think_spins: args.think_spins,
    })
}

/// Prints `message` (without its `error: ` prefix) and the pointer to `--help`; exit code 2.
fn report(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    eprintln!("run with --help for usage");
    ExitCode::from(2)
}

/// A clap error in the hand-written parser's words, where it had them.
fn describe(error: &clap::Error) -> String {
    let context = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        _ => None,
    };
    match error.kind() {
        // Our value parsers' messages, whole.
        ErrorKind::ValueValidation => {
            if let Some(ours) = std::error::Error::source(error)
                .and_then(|source| source.downcast_ref::<CliError>())
            {
                return ours.0.clone();
            }
        }
        ErrorKind::UnknownArgument => {
            if let Some(arg) = context(ContextKind::InvalidArg) {
                return format!("unknown option '{arg}'; allowed: {OPTION_NAMES}");
            }
        }
        // An option at the end of the line, without its value.
        ErrorKind::InvalidValue if context(ContextKind::InvalidValue).as_deref() == Some("") => {
            if let Some(arg) = context(ContextKind::InvalidArg) {
                // "--threads <LIST>" -> "--threads"
                let flag = arg.split_whitespace().next().unwrap_or(&arg).to_string();
                return format!("{flag} needs a value ({})", expected_value(&flag));
            }
        }
        _ => {}
    }
    // Anything else as clap words it, without its own "error: " prefix and trailing help hint.
    let rendered = error.render().to_string();
    let message = rendered.trim_start_matches("error: ");
    message
        .split("\n\nFor more information")
        .next()
        .unwrap_or(message)
        .trim_end()
        .to_string()
}

/// What a valid value of `flag` looks like, for error messages.
fn expected_value(flag: &str) -> String {
    match flag {
        "--locks" => format!(
            "a comma list; allowed: {}",
            allowed_names(&LockKind::ALL, LockKind::name)
        ),
        "--workload" => format!(
            "a comma list; allowed: {}",
            allowed_names(&WorkloadKind::ALL, WorkloadKind::name)
        ),
        "--threads" => {
            format!("a comma list of integers from 1 to {MAX_THREADS}, e.g. 1,2,4,8")
        }
        "--duration-ms" => format!("an integer from 1 to {MAX_DURATION_MS}"),
        "--runs" => format!("an integer from 1 to {MAX_RUNS}"),
        "--virtual-nodes" => format!("an integer from 1 to {MAX_VIRTUAL_NODES}"),
        "--remote-penalty-ns" => format!("an integer from 0 to {MAX_PENALTY_NS}"),
        "--stealing" | "--rwlock-handover" | "--rwlock-write-mode" => {
            "allowed: on, off".to_string()
        }
        "--spin-us" | "--steal-bound-us" | "--retake-window-us" => {
            "a non-negative number of microseconds, e.g. 5 or 0.5".to_string()
        }
        "--hq-domain-handoffs" => "an integer from 1 to 16777216".to_string(),
        "--delegate-batch" => "an integer from 0 to 65536".to_string(),
        "--format" => "allowed: table, csv".to_string(),
        "--plot" => "a file name, e.g. throughput.svg".to_string(),
        "--slots" => format!("an integer from 1 to {MAX_SLOTS}"),
        "--notify" => "allowed: one, all".to_string(),
        "--read-pct" => format!("an integer from 0 to {MAX_READ_PCT} (percent of reads)"),
        "--writers" => format!("an integer from 1 to {MAX_WRITERS} (dedicated writer threads)"),
        "--work" => format!("an integer from 0 to {MAX_WORK} (PRNG rounds)"),
        "--think-spins" => format!("an integer from 0 to {MAX_THINK_SPINS} (spin_loop hints)"),
        _ => String::new(),
    }
}

/// Every limit above fits in `usize` on the 32- and 64-bit targets the crate supports.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The items of `flag`'s comma list `value`; an empty item is an error.
fn split<'a>(flag: &str, value: &'a str) -> Result<Vec<&'a str>, CliError> {
    split_list(value).ok_or_else(|| {
        CliError(format!(
            "empty item in {flag} '{value}'; expected {}",
            expected_value(flag)
        ))
    })
}

fn parse_names<T: Copy + PartialEq>(
    flag: &str,
    value: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str + Copy,
    what: &str,
) -> Result<List<T>, CliError> {
    parse_unique(&split(flag, value)?, |item| {
        find_named(all, name, item).ok_or_else(|| {
            CliError(format!(
                "unknown {what} '{item}' in {flag}; allowed: {}",
                allowed_names(all, name)
            ))
        })
    })
}

fn parse_number(flag: &str, value: &str, min: u64, max: u64) -> Result<u64, CliError> {
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(CliError(format!(
            "invalid value '{value}' for {flag}; expected {}",
            expected_value(flag)
        ))),
    }
}

fn parse_number_list(flag: &str, value: &str, min: u64, max: u64) -> Result<List<usize>, CliError> {
    parse_unique(&split(flag, value)?, |item| match item.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(to_usize(n)),
        _ => Err(CliError(format!(
            "invalid value '{item}' in {flag} '{value}'; expected {}",
            expected_value(flag)
        ))),
    })
}

// One value parser per option: clap calls them with the value only, and every message names the
// option.

/// A number of microseconds (`common::cli::parse_micros`), the message worded for `flag`.
fn parse_micros(flag: &str, value: &str) -> Result<f64, CliError> {
    crate::common::cli::parse_micros(value).ok_or_else(|| {
        CliError(format!(
            "invalid value '{value}' for {flag}; expected {}",
            expected_value(flag)
        ))
    })
}

fn parse_spin_us(value: &str) -> Result<f64, CliError> {
    parse_micros("--spin-us", value)
}

fn parse_steal_bound_us(value: &str) -> Result<f64, CliError> {
    parse_micros("--steal-bound-us", value)
}

fn parse_retake_window_us(value: &str) -> Result<f64, CliError> {
    parse_micros("--retake-window-us", value)
}

fn parse_lone_retake_window_us(value: &str) -> Result<f64, CliError> {
    parse_micros("--lone-retake-window-us", value)
}

/// Any integer: the range is the setter's to check, so that its error names it.
fn parse_hq_domain_handoffs(value: &str) -> Result<u64, CliError> {
    parse_number("--hq-domain-handoffs", value, 0, u64::MAX)
}

/// Any integer: the range is the setter's to check, so that its error names it.
fn parse_delegate_batch(value: &str) -> Result<u64, CliError> {
    parse_number("--delegate-batch", value, 0, u64::MAX)
}

fn parse_locks(value: &str) -> Result<List<LockKind>, CliError> {
    parse_names("--locks", value, &LockKind::ALL, LockKind::name, "lock")
}

fn parse_workloads(value: &str) -> Result<List<WorkloadKind>, CliError> {
    parse_names(
        "--workload",
        value,
        &WorkloadKind::ALL,
        WorkloadKind::name,
        "workload",
    )
}

fn parse_threads(value: &str) -> Result<List<usize>, CliError> {
    parse_number_list("--threads", value, 1, MAX_THREADS)
}

fn parse_duration_ms(value: &str) -> Result<u64, CliError> {
    parse_number("--duration-ms", value, 1, MAX_DURATION_MS)
}

fn parse_runs(value: &str) -> Result<usize, CliError> {
    parse_number("--runs", value, 1, MAX_RUNS).map(to_usize)
}

fn parse_virtual_nodes(value: &str) -> Result<usize, CliError> {
    parse_number("--virtual-nodes", value, 1, MAX_VIRTUAL_NODES).map(to_usize)
}

fn parse_penalty_ns(value: &str) -> Result<u64, CliError> {
    parse_number("--remote-penalty-ns", value, 0, MAX_PENALTY_NS)
}

fn parse_stealing(value: &str) -> Result<bool, CliError> {
    parse_switch("--stealing", value)
}

fn parse_rwlock_handover(value: &str) -> Result<bool, CliError> {
    parse_switch("--rwlock-handover", value)
}

fn parse_rwlock_write_mode(value: &str) -> Result<bool, CliError> {
    parse_switch("--rwlock-write-mode", value)
}

fn parse_switch(name: &str, value: &str) -> Result<bool, CliError> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(CliError(format!(
            "unknown value '{value}' in {name}; allowed: on, off"
        ))),
    }
}

fn parse_slots(value: &str) -> Result<usize, CliError> {
    parse_number("--slots", value, 1, MAX_SLOTS).map(to_usize)
}

fn parse_read_pct(value: &str) -> Result<u64, CliError> {
    parse_number("--read-pct", value, 0, MAX_READ_PCT)
}

fn parse_writers(value: &str) -> Result<usize, CliError> {
    parse_number("--writers", value, 1, MAX_WRITERS).map(|n| n as usize)
}

fn parse_work(value: &str) -> Result<u64, CliError> {
    parse_number("--work", value, 0, MAX_WORK)
}

fn parse_think_spins(value: &str) -> Result<u64, CliError> {
    parse_number("--think-spins", value, 0, MAX_THINK_SPINS)
}

fn parse_notify(value: &str) -> Result<bool, CliError> {
    match value {
        "all" => Ok(true),
        "one" => Ok(false),
        _ => Err(CliError(format!(
            "unknown value '{value}' in --notify; allowed: one, all"
        ))),
    }
}

fn parse_format(value: &str) -> Result<Format, CliError> {
    match value {
        "table" => Ok(Format::Table),
        "csv" => Ok(Format::Csv),
        _ => Err(CliError(format!(
            "unknown format '{value}' in --format; allowed: table, csv"
        ))),
    }
}
