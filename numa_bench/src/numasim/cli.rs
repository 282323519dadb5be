//! The command line of `numasim` (clap derive), validated into [`Options`].
//!
//! Every bad input is reported on stderr with the offending value and what is allowed, and exits
//! with code 2: clap's own errors (unknown option, missing value, a value its parsers reject) and
//! the checks that need the machine (thread counts) or the crate's tunable setters.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use numa_sim::Machine;

pub use crate::common::cli::Format;
use crate::common::cli::List;
use crate::common::cli::{allowed_names, find_named, parse_unique, split_list};

/// The locks `numasim` can run, in their default order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// `numa_locks::McsMutex`, the baseline of the speedup column.
    Mcs,
    /// `numa_locks::CnaMutex`.
    Cna,
    /// `numa_locks::HqMutex`.
    Hq,
    /// The model of the kernel's stock qspinlock (kernel.rs).
    QSpinLock,
    /// The model of the kernel's qspinlock with the CNA series' slow path (kernel.rs).
    CnaKernel,
    /// The same model without the series' shuffle reduction (kernel.rs).
    CnaKernelWoSro,
    /// The model of the kernel's qspinlock with CNA v13's slow path (kernel.rs).
    CnaKernelV13,
    /// The same v13 model without shuffle reduction (kernel.rs).
    CnaKernelV13WoSro,
    /// The model of Rust std's futex mutex (baselines.rs).
    Std,
    /// The model of Rust std's mutex before 1.62: a boxed glibc pthread mutex (baselines.rs).
    Pthread,
    /// The model of parking_lot's `RawMutex` (baselines.rs).
    Ttas,
    /// The model of a plain spinning MCS lock, the kernel qspinlock's queue (baselines.rs).
    SpinMcs,
    /// `numa_locks::McsRwLock`.
    McsRw,
    /// `numa_locks::CnaRwLock`.
    CnaRw,
    /// `numa_locks::HqRwLock`.
    HqRw,
    /// The model of parking_lot 0.13's `RawRwLock` (rwlocks.rs).
    PlRwLock,
    /// The model of Rust std's futex `RwLock` (rwlocks.rs).
    StdRwLock,
    /// The model of crossbeam-utils' `ShardedLock` (rwlocks.rs).
    ShardedRw,
    /// `numa_locks::McsMutex` through `Delegate::delegate`.
    McsDelegate,
    /// `numa_locks::CnaMutex` through `Delegate::delegate`.
    CnaDelegate,
    /// `numa_locks::HqMutex` through `Delegate::delegate`.
    HqDelegate,
}

impl LockKind {
    /// Every lock, in the order the help lists them.
    pub const ALL: [LockKind; 21] = [
        Self::Mcs,
        Self::Cna,
        Self::Hq,
        Self::QSpinLock,
        Self::CnaKernel,
        Self::CnaKernelWoSro,
        Self::CnaKernelV13,
        Self::CnaKernelV13WoSro,
        Self::Std,
        Self::Pthread,
        Self::Ttas,
        Self::SpinMcs,
        Self::McsRw,
        Self::CnaRw,
        Self::HqRw,
        Self::PlRwLock,
        Self::StdRwLock,
        Self::ShardedRw,
        Self::McsDelegate,
        Self::CnaDelegate,
        Self::HqDelegate,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mcs => "mcs",
            Self::Cna => "cna",
            Self::Hq => "hq",
            Self::QSpinLock => "qspinlock",
            Self::CnaKernel => "cna-kernel",
            Self::CnaKernelWoSro => "cna-kernel-wo-sro",
            Self::CnaKernelV13 => "cna-kernel-v13",
            Self::CnaKernelV13WoSro => "cna-kernel-v13-wo-sro",
            Self::Std => "std",
            Self::Pthread => "pthread",
            Self::Ttas => "ttas",
            Self::SpinMcs => "spin-mcs",
            Self::McsRw => "mcs-rw",
            Self::CnaRw => "cna-rw",
            Self::HqRw => "hq-rw",
            Self::PlRwLock => "pl-rwlock",
            Self::StdRwLock => "std-rwlock",
            Self::ShardedRw => "sharded-rw",
            Self::McsDelegate => "mcs-delegate",
            Self::CnaDelegate => "cna-delegate",
            Self::HqDelegate => "hq-delegate",
        }
    }
}

/// What a critical section does (see the help's WORKLOADS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// The reference: 2 protected lines written, 50 ns inside, 200 ns outside.
    Counter,
    /// A skewed get/put on a simulated hash table.
    Kv,
    /// Pop and push at the head of a free list of 64-byte blocks.
    FreeList,
    /// The kernel's locktorture spin_lock writer.
    LockTorture,
    /// matklad/lock-bench: N locks, each beside its counter, taken at random back to back.
    LockBench,
    /// A read-mostly hash table: reads under the shared lock, writes under the exclusive one.
    Rw,
}

impl WorkloadKind {
    /// Every workload, in the order the help lists them.
    pub const ALL: [WorkloadKind; 6] = [
        Self::Counter,
        Self::Kv,
        Self::FreeList,
        Self::LockTorture,
        Self::LockBench,
        Self::Rw,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Kv => "kv",
            Self::FreeList => "freelist",
            Self::LockTorture => "locktorture",
            Self::LockBench => "lockbench",
            Self::Rw => "rw",
        }
    }
}

/// Where the simulated threads are pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Placement {
    // (No doc comments on the variants: clap would list them as the values' help.)
    // numa_sim::placement: over the sockets first, as Linux's scheduler spreads them.
    Spread,
    // numa_sim::packed_placement: one node at a time.
    Packed,
    // numa_sim::linux_placement: unpinned threads as the v5.10 scheduler balances them.
    Linux,
    // numa_sim::linux_v5_12_placement: as the v5.11-v5.12 scheduler balances them.
    #[value(name = "linux-5.12")]
    Linux512,
}

impl Placement {
    /// The hardware threads of `threads` threads on `machine` (`seed` draws which threads
    /// share a node under `linux`).
    pub fn place(
        self,
        machine: &Machine,
        threads: usize,
        seed: u64,
    ) -> Result<Vec<usize>, numa_sim::TooManyThreads> {
        match self {
            Placement::Spread => numa_sim::placement(machine, threads),
            Placement::Packed => numa_sim::packed_placement(machine, threads),
            Placement::Linux => numa_sim::linux_placement(machine, threads, seed),
            Placement::Linux512 => numa_sim::linux_v5_12_placement(machine, threads, seed),
        }
    }

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Packed => "packed",
            Placement::Linux => "linux",
            Placement::Linux512 => "linux-5.12",
        }
    }
}

/// `on` / `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// `--store-forwarding`: which loads a simulated thread's buffered stores serve
/// ([`numa_sim::StoreForwarding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Forwarding {
    Line,
    Address,
}

impl Forwarding {
    /// numa_sim's rule.
    pub fn rule(self) -> numa_sim::StoreForwarding {
        match self {
            Forwarding::Line => numa_sim::StoreForwarding::Line,
            Forwarding::Address => numa_sim::StoreForwarding::Address,
        }
    }
}

/// The thread counts of the default sweep (those above the machine's hardware threads dropped).
const DEFAULT_THREADS: [usize; 7] = [1, 2, 4, 8, 16, 32, 72];
/// The most locks `lockbench` may have.
const MAX_LOCKBENCH_LOCKS: u64 = 4096;
/// The most operations per thread `lockbench` may run (shuttle keeps ~16 bytes per scheduling
/// decision: 256 threads x 10^6 operations stays within a few GB).
const MAX_LOCKBENCH_OPS: u64 = 1_000_000;
/// The longest simulated run: 1 s. Shuttle keeps about 16 bytes per scheduling decision, and a
/// simulated second of a hot lock is some 10^7 to 10^8 decisions.
const MAX_DURATION_US: u64 = 1_000_000;
/// The longest `--locktorture-stutter`, jiffies: a second.
const MAX_STUTTER_JIFFIES: u64 = 1_000;
/// The range of `--cna-kernel-threshold-ns`: 1 µs (a few handoffs) to 1 s (the longest run).
const MIN_CNA_THRESHOLD_NS: u64 = 1_000;
const MAX_CNA_THRESHOLD_NS: u64 = 1_000_000_000;

const ABOUT: &str = "\
numasim: McsMutex, CnaMutex and HqMutex (and the RwLocks) on a simulated multi-socket machine
(numa_sim), beside models of the kernel's qspinlock and CNA, Rust std's mutex and RwLock,
parking_lot's mutex and RwLock and a spinning MCS lock; throughput, fairness, cross-node handoffs and wait times per lock, workload and thread
count. Deterministic: the same arguments give the same output (except host_ms).";

const AFTER_HELP: &str = "\
LOCKS:
    mcs, cna, hq  this crate's McsMutex, CnaMutex, HqMutex: the real code, unchanged
    ttas          MODEL of parking_lot 0.12/0.13's RawMutex: a test-and-test-and-set word with
                  LOCKED/PARKED bits, one-CAS fast path; the slow path spins with SpinWait's
                  schedule (1, 2, 4 pauses, then yields; 10 tries) while nobody is parked, then
                  parks in parking_lot_core's hash table (the lock's bucket: a FIFO of parked
                  threads under the bucket's WordLock, which spins and parks too); unlock wakes
                  one parked thread and, with
                  --ttas-fairness on, about every 0.5 ms hands it the lock directly (parking_lot
                  0.12's eventual fairness; 0.13 dropped it: --ttas-fairness off)
    qspinlock     MODEL of the kernel's stock queued spinlock (x86-64, NR_CPUS < 16K): one
                  32-bit word (locked byte, pending bit, 16-bit tail), the pending waiter, an MCS
                  queue whose head spins on the word; byte and halfword plain stores; never parks
    cna-kernel    MODEL of the kernel's qspinlock with the CNA series' slow path (v15): the MCS
                  head moves waiters of other nodes to a secondary queue while the lock word is
                  busy, passes the lock within its node, flushes the secondary queue after 1 ms;
                  shuffle reduction (with no secondary queue, only one head in 128 looks);
                  never parks
    cna-kernel-wo-sro
                  MODEL of the same without shuffle reduction: every head orders the queue
                  while the lock is busy
    cna-kernel-v13
                  MODEL of the CNA slow path as v13 of the series has it (the code of its cover
                  letter's locktorture table): the MCS head looks at its successor once,
                  whether or not the lock is busy (again at the handoff if it had none), moves
                  it to the secondary queue if it is of another node; flush after 10 ms (in
                  jiffies); shuffle reduction; never parks
    cna-kernel-v13-wo-sro
                  MODEL of v13 without shuffle reduction (that table's w/o SRO column)
    std           MODEL of Rust std's futex mutex (Rust 1.62+): states 0/1/2, up to 100 loads
                  while locked, then swap in 2 and futex_wait; unlock swaps in 0 and wakes one
                  sleeper if the word was 2
    pthread       MODEL of Rust std's mutex before Rust 1.62 (parking_lot #201's std): a boxed
                  glibc pthread mutex (PTHREAD_MUTEX_NORMAL: CAS 0->1, else swap in 2 and
                  futex_wait, no spinning), on a heap line shared with the neighbouring locks'
    spin-mcs      MODEL of a plain spinning MCS queue lock without parking (the kernel
                  qspinlock's queue without its lock word), one padded queue node per simulated
                  thread
    mcs-rw, cna-rw, hq-rw
                  this crate's McsRwLock, CnaRwLock, HqRwLock: the real code, unchanged (readers
                  count themselves in a line of their node; writers queue through McsMutex's,
                  CnaMutex's or HqMutex's queue lock)
    pl-rwlock     MODEL of parking_lot 0.13's RawRwLock (src/raw_rwlock.rs): one word with
                  reader count (ONE_READER = 16), WRITER, UPGRADABLE, WRITER_PARKED and PARKED
                  bits; readers CAS-add ONE_READER (SpinWait::spin_no_yield between failed CASes),
                  writers CAS WRITER in, then wait for the readers (spin, then park on the
                  lock's second key); waiters spin with SpinWait while nobody is parked, then
                  park in parking_lot_core's hash table (as ttas); unlocking a writer wakes every
                  parked reader and one writer (unpark_filter)
    std-rwlock    MODEL of Rust std's futex RwLock (Rust 1.62+, library/std/src/sys/sync/rwlock/
                  futex.rs): one state word (30-bit reader count, WRITE_LOCKED = all ones,
                  READERS_WAITING, WRITERS_WAITING) and a writer_notify futex; up to 100 loads
                  before a futex_wait; readers wait behind waiting writers; unlock wakes one
                  writer, else every reader
    sharded-rw    MODEL of crossbeam-utils 0.8's ShardedLock (src/sync/sharded_lock.rs): 8
                  cache-padded std RwLocks (the std-rwlock model); a reader read-locks the shard
                  of its thread index, a writer write-locks all 8 in order
    mcs-delegate, cna-delegate, hq-delegate
                  this crate's McsMutex, CnaMutex, HqMutex through Delegate::delegate: the
                  critical section is a closure that a holder may run for its waiter (of its
                  own NUMA node for cna-delegate, cache domain for hq-delegate); handoffs and
                  remote_handoff_pct then count changes of the thread that runs the sections
    The rwlocks (mcs-rw ... sharded-rw) take their shared lock for the rw workload's reads and
    their exclusive lock for everything else: with another workload they run as write locks.
    The mutexes take their only lock for the rw workload's reads and writes alike.
    The models are written for the simulator on numa_sim's atomics (numa_bench/src/numasim/
    kernel.rs, baselines.rs, rwlocks.rs); they are not the real kernel, std or parking_lot code.

WORKLOADS (what one critical section does; every thread stays on its hardware thread, see --placement):
    counter      the reference: read, then write 2 protected 64-byte lines (count += 1), 50 ns
                 of work inside; 200 ns of work between acquisitions
    kv           one get (90%) or put (10%) on a simulated hash table of 65536 keys (131072
                 buckets: a header line, 2048 control lines, 32768 entry lines): hash 20 ns,
                 then the control line, then the entry line, each a dependent miss; skewed keys
                 (key = r1 % (r2 % 65536 + 1)); 10 ns of work between acquisitions
    freelist     pop a 64-byte block from a shared free list and push back the block popped
                 last time (list head, then the two blocks: a page allocator's zone lock);
                 10 ns of work between acquisitions
    locktorture  the kernel's locktorture spin_lock writer (v5.10, as in the CNA series): the
                 write-held flag read and set, the writer's statistics incremented, three
                 torture_random() draws each tested with a 64-bit %, with probability
                 1/(4*threads) a 2 us hold and with 1/(200*threads) a 100 us one (the kernel's
                 100 ms hold at 1/(200000*threads), scaled to fit a run); the writer's loop
                 outside the lock (about 60 instructions and a draw); every 5 ms all writers
                 halt for about 4 ms and restart together (the kernel's stutter, see
                 --locktorture-stutter)
    lockbench    matklad/lock-bench (parking_lot issues #201, #418): --lockbench-locks locks,
                 each on a padded line with its counter beside it; every operation takes a
                 random lock (a xorshift step and a %) and increments its counter
    rw           a read-mostly hash table (kv's table and skewed keys): --read-pct percent of
                 the operations are reads (under the shared lock: the table's header line, hash
                 20 ns, the key's control line, its entry line, all read), the others writes
                 (under the exclusive lock: the harness's line written, then the same lines, the
                 entry written); 10 ns of work between operations. A read writes nothing but
                 the lock's own lines; handoffs and remote_handoff_pct count the writes only

COLUMNS:
    sim_ops_per_sec     critical sections entered per simulated second, all threads
    speedup_vs_mcs      sim_ops_per_sec / mcs's for the same machine, workload and threads in this
                        invocation ('-' in the table, empty in CSV without mcs in --locks)
    fairness_factor     share of the ops done by the busiest ceil(n/2) threads (0.5 fair for even
                        n, 1.0 when the busiest half did everything)
    max_min             busiest thread's ops / idlest thread's ops ('inf' when one did none)
    remote_handoff_pct  handoffs (acquisitions whose previous holder was another thread) whose
                        previous holder was on another NUMA node, in percent; measured inside the
                        critical section from data stored with the protected lines, identically
                        for every lock
    wait_p99_us         99th percentile of the counted acquisitions' waits, in microseconds of
                        virtual time from the call to lock() to the start of the critical section
    write_wait_p99_us   (only when the rw workload runs) the same for the exclusive acquisitions
                        alone: the writers' wait (every acquisition of the other workloads)
    reads_per_sec       (only with --writers) the dedicated readers' operations per simulated
    writes_per_sec      second, and the writers'; together they make sim_ops_per_sec
    host_ms             host wall time of the run (the only column that differs between runs)
  with --paths, before host_ms (this crate's locks; '-' in the table, empty in CSV, for models):
    fast_pct            acquisitions by the one-CAS fast path (an uncontended lock, or a free
                        one taken before the queue head: by the last holder again, or by another
                        awake thread; acq_per_handoff tells which), percent
    steal_pct           acquisitions by an arriving thread's stealing spin, without queueing
    queued_pct          acquisitions after waiting in the queue
    parks_per_kacq      sleeps (queue head on the lock word, or waiters on their queue nodes) per
                        1000 acquisitions
    acq_per_handoff     acquisitions per handoff: critical sections one thread runs in a row, on
                        average (1 when threads alternate); every lock, models included ('-' /
                        empty without handoffs)
    alt_time_pct        percent of the run's 20 us windows in which the lock's threads
                        alternated (under 2 acquisitions per handoff) rather than one re-taking
                        it; every lock
    alt_ops_per_sec     the throughput within those windows: the lock's rate while its threads
                        alternate ('-' / empty if they never did)
  with --paths, after those (the kernel's CNA models, cna-kernel* ; '-' /
  empty for the other locks): how the MCS queue heads passed the lock on, as percent of those
  handoffs (the first four add up to 100):
    cna_unordered_pct   no secondary queue, and shuffle reduction's draw skipped the ordering:
                        the next waiter in arrival order gets it
    cna_free_pct        the head found the lock word free at its first look, so it did not order
                        (v15 orders only while the lock is busy): the next waiter in the queue
    cna_ordered_pct     the head ordered the queue (v15: it found the lock busy; v13: always)
    cna_flush_pct       the secondary queue went to the front: its threshold passed, or the
                        main queue behind the head was empty
    cna_*_remote_pct    of the same handoffs, the percent (of all of them) that went to a
                        waiter on another node; the four add up to the share that crossed nodes

Progress goes to stderr, results to stdout. Bad input exits with code 2, a failed run with 1.
Build: RUSTFLAGS=\"--cfg numa_sim\" cargo run --release --example numasim --target-dir target/sim";

#[derive(Parser, Debug)]
#[command(
    name = "numasim",
    about = ABOUT,
    after_help = AFTER_HELP,
    args_override_self = true,
    max_term_width = 100
)]
struct Args {
    /// The simulated machine: a numa_sim preset (x5-4, e5-2690v3-2s, kunpeng920, epyc-2s,
    /// epyc9654-2s, 2s-generic), or `list` to print every preset with its description and exit
    #[arg(long, value_name = "NAME", default_value = "x5-4")]
    machine: String,

    /// Comma list of thread counts, each from 1 to the machine's hardware threads
    /// [default: 1,2,4,8,16,32,72, without those above the machine's hardware threads]
    #[arg(long, value_name = "LIST", value_parser = parse_threads, allow_hyphen_values = true)]
    threads: Option<List<usize>>,

    /// Comma list of locks; allowed: mcs, cna, hq, qspinlock, cna-kernel, cna-kernel-wo-sro,
    /// cna-kernel-v13, cna-kernel-v13-wo-sro, std, pthread, ttas, spin-mcs, mcs-rw, cna-rw, hq-rw,
    /// pl-rwlock, std-rwlock, sharded-rw, mcs-delegate, cna-delegate, hq-delegate (models:
    /// qspinlock, the four cna-kernel*, std, pthread, ttas, spin-mcs, pl-rwlock, std-rwlock,
    /// sharded-rw; see LOCKS)
    #[arg(long, value_name = "LIST", value_parser = parse_locks, default_value = "mcs,cna,hq,ttas")]
    locks: List<LockKind>,

    /// Comma list of workloads; allowed: counter, kv, freelist, locktorture, lockbench, rw
    #[arg(long, value_name = "LIST", value_parser = parse_workloads, default_value = "counter")]
    workload: List<WorkloadKind>,

    /// The percentage of the rw workload's operations that are reads, an integer from 0 to 100
    #[arg(long, value_name = "P", default_value_t = 95, value_parser = parse_read_pct,
          allow_hyphen_values = true)]
    read_pct: u32,

    /// The rw workload with dedicated roles: threads 0..N only write and the others only read
    /// (--read-pct unused), N from 1 to 1023 and below every --threads value; adds the columns
    /// reads_per_sec and writes_per_sec
    #[arg(long, value_name = "N", value_parser = parse_writers, allow_hyphen_values = true)]
    writers: Option<usize>,

    /// The number of locks of the lockbench workload, 1 to 4096
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=MAX_LOCKBENCH_LOCKS))]
    lockbench_locks: u64,

    /// lockbench as lock-bench times it: every thread runs N operations and the run lasts
    /// until the last thread is done (its published runs: 10000); 0 runs for --duration-us
    /// like every workload
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=MAX_LOCKBENCH_OPS))]
    lockbench_ops: u64,

    /// Seed of the simulation (transfer-cost jitter, the locks' and workloads' random choices)
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,

    /// locktorture's stutter, in jiffies of 1 ms, 0 to 1000: its writers run for J jiffies,
    /// halt for about as long, and restart together, as the kernel's torture framework makes
    /// them (its default: 5); 0 or 1 never halts, nor does a run whose threads fill every
    /// hardware thread (the kthread that halts them needs one); the other workloads ignore it
    #[arg(long, value_name = "J", default_value_t = crate::numasim::stutter::DEFAULT_STUTTER_JIFFIES,
          value_parser = clap::value_parser!(u64).range(0..=MAX_STUTTER_JIFFIES))]
    locktorture_stutter: u64,

    /// numa_spinlock_threshold_ns, the module parameter of the CNA v15 models (cna-kernel,
    /// cna-kernel-wo-sro): how long a secondary queue waits before a head flushes it, in
    /// nanoseconds, 1000 to 1000000000 (the series' default is 1 ms; the v15 cover letter also
    /// publishes runs with 10000000); the other locks ignore it
    #[arg(long, value_name = "NS", default_value_t = crate::numasim::kernel::DEFAULT_CNA_THRESHOLD_NS,
          value_parser = clap::value_parser!(u64).range(MIN_CNA_THRESHOLD_NS..=MAX_CNA_THRESHOLD_NS))]
    cna_kernel_threshold_ns: u64,

    /// Simulated length of one run in microseconds, 1 to 1000000
    #[arg(long, value_name = "US", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_DURATION_US))]
    duration_us: u64,

    /// Where the threads run: pinned round-robin over the sockets (spread); packed onto as few
    /// NUMA nodes as possible, so that up to one node's worth of threads every handoff stays
    /// within a node whatever the lock does (the most any NUMA policy can give); or unpinned as
    /// the Linux scheduler of the CNA series' runs balanced them, the placement that reproduces
    /// the published kernel figures (which threads share a node is drawn from the seed): v5.10's
    /// (linux, the v13 letter's kernel: 2 threads share a node, 4 run 2 and 2 on two nodes, from
    /// 8 on every node has its share) or v5.11-v5.12's (linux-5.12, the v15 letter's: a node
    /// running under a quarter of its CPUs keeps an imbalance of 2, so on x5-4 4 threads share a
    /// node and 8 run 4 and 4; machines with one NUMA level only)
    #[arg(
        long,
        value_name = "spread|packed|linux|linux-5.12",
        default_value = "spread"
    )]
    placement: Placement,

    /// Whether this crate's locks let an arriving thread take a free lock ahead of queued waiters
    /// (numa_locks::tunables::set_stealing); the models are not affected
    #[arg(long, value_name = "on|off", default_value = "on")]
    stealing: Switch,

    /// Whether this crate's rwlocks hand the readers' revocation from writer to writer
    /// (numa_locks::tunables::set_rwlock_writer_handover); the models are not affected
    #[arg(long, value_name = "on|off", default_value = "off")]
    rwlock_handover: Switch,

    /// Whether this crate's rwlocks leave a lock whose last writers found no reader in write
    /// mode (numa_locks::tunables::set_rwlock_write_mode); the models are not affected
    #[arg(long, value_name = "on|off", default_value = "on")]
    rwlock_write_mode: Switch,

    /// Whether the ttas model hands the lock directly to the thread it wakes about every 0.5 ms
    /// (parking_lot 0.12's eventual fairness; 0.13 has none)
    #[arg(long, value_name = "on|off", default_value = "on")]
    ttas_fairness: Switch,

    /// Whether the simulated threads have store buffers (x86-TSO timing: a plain store does not
    /// stall its thread; see numa_sim's README); off, every store waits for its transfer
    #[arg(long, value_name = "on|off", default_value = "on")]
    store_buffers: Switch,

    /// Which loads a simulated thread's buffered stores serve: `address` as Intel's cores do
    /// (a load of a store's own address gets its data; a load of another address on a line
    /// the store is still fetching waits for the line), or `line` (every load of that line
    /// hits at once: numa_sim's rule before 2026-12-06, looser than the hardware's, kept to
    /// compare with; see numa_sim's README)
    #[arg(long, value_name = "line|address", default_value = "address")]
    store_forwarding: Forwarding,

    /// Whether a line's holders keep it until a request's snoop reaches them (two thirds of its
    /// transfer after its issue, or a third after the transfer it waited for at the line's
    /// home), their accesses until then hitting; off, a request takes the line when it issues
    /// (numa_sim's `Simulation::snoop_window`)
    #[arg(long, value_name = "on|off", default_value = "off")]
    snoop_window: Switch,

    /// Whether a spinner woken by a write looks again at a random phase of its loop's
    /// iteration (a pause and a hit), drawn from the seed for each write; off, at the write's
    /// completion (numa_sim's `Simulation::wake_phase`)
    #[arg(long, value_name = "on|off", default_value = "off")]
    wake_phase: Switch,

    /// Output format: an aligned table, or CSV with a fixed header
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    format: Format,

    /// Also report how this crate's locks were acquired and how often waiters slept: columns
    /// fast_pct, steal_pct, queued_pct and parks_per_kacq (see COLUMNS); counted by the simulator
    /// for free, so the other columns do not change; and, for every lock, how often the holder
    /// changed: acq_per_handoff, alt_time_pct and alt_ops_per_sec
    #[arg(long)]
    paths: bool,

    /// Also write every memory access the simulated threads issue between FROM and TO
    /// microseconds of virtual time to stderr (time, cost, thread, kind, address, hit or miss),
    /// and every futex wake and sleep (kind Sleep, cost = until the thread runs again; one in
    /// progress at FROM too), for each run: where a handoff spends its time. Recording is free
    /// (the results do not change); keep the window short (1 us is about 20 accesses per busy
    /// thread)
    #[arg(long, value_name = "FROM-TO", value_parser = parse_window, allow_hyphen_values = true)]
    trace: Option<(u64, u64)>,

    /// Also draw throughput against threads, one line per lock, as an SVG line chart; with
    /// several workloads, one file per workload: FILE's stem + "-<workload>.svg"
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,

    /// Tunable for experiments: how long this crate's waiters spin before they park, in
    /// microseconds (numa_locks::tunables::set_spin_time) [default: 5]
    #[arg(long, value_name = "US", value_parser = parse_micros, allow_hyphen_values = true)]
    spin_us: Option<f64>,

    /// Tunable: how long the queue head tolerates stealers, in microseconds
    /// (tunables::set_steal_bound) [default: 1000]
    #[arg(long, value_name = "US", value_parser = parse_micros, allow_hyphen_values = true)]
    steal_bound_us: Option<f64>,

    /// Tunable: how long a new queue head leaves the free lock open to the thread that
    /// released it before it reserves it, in microseconds (tunables::set_retake_window)
    /// [default: 0]
    #[arg(long, value_name = "US", value_parser = parse_micros, allow_hyphen_values = true)]
    retake_window_us: Option<f64>,

    /// Tunable: how long a queue head with nobody queued behind it leaves the free lock open
    /// before it reserves it, in microseconds (tunables::set_lone_retake_window) [default: 50]
    #[arg(long, value_name = "US", value_parser = parse_micros, allow_hyphen_values = true)]
    lone_retake_window_us: Option<f64>,

    /// Tunable: the age at which CNA flushes its secondary queue, in microseconds
    /// (tunables::set_cna_flush_threshold) [default: 25]
    #[arg(long, value_name = "US", value_parser = parse_micros, allow_hyphen_values = true)]
    cna_flush_us: Option<f64>,

    /// Tunable: consecutive handoffs HQ keeps within a node (tunables::set_hq_local_handoffs)
    /// [default: 64]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    hq_local_handoffs: Option<u64>,

    /// Tunable: consecutive handoffs HQ keeps within a cache domain while its queues serve
    /// domains (tunables::set_hq_domain_handoffs) [default: 16]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    hq_domain_handoffs: Option<u64>,

    /// Tunable: most closures a delegating holder runs for its waiters before it hands the lock
    /// on (tunables::set_delegate_batch; 0 = no combining) [default: 16]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    delegate_batch: Option<u64>,
}

/// A fully validated command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// The simulated machine.
    pub machine: &'static Machine,
    /// Thread counts, in order, without duplicates, each within the machine.
    pub threads: Vec<usize>,
    /// Locks, in order, without duplicates.
    pub locks: Vec<LockKind>,
    /// Workloads, in order, without duplicates.
    pub workloads: Vec<WorkloadKind>,
    /// The simulation's seed.
    pub seed: u64,
    /// Simulated length of one run.
    pub duration_us: u64,
    /// Where the threads are pinned.
    pub placement: Placement,
    /// Whether this crate's locks may steal.
    pub stealing: bool,
    /// Whether the ttas model has parking_lot 0.12's eventual fairness.
    pub ttas_fairness: bool,
    /// The rw workload's percentage of reads.
    pub read_pct: u32,
    /// The rw workload's dedicated writers (`--writers`).
    pub writers: Option<usize>,
    /// The lockbench workload's lock count.
    pub lockbench_locks: usize,
    /// lockbench's operations per thread (`None`: run for the duration).
    pub lockbench_ops: Option<u64>,
    /// Whether the simulated threads have store buffers.
    pub store_buffers: bool,
    /// Which loads their buffered stores serve.
    pub store_forwarding: numa_sim::StoreForwarding,
    /// Whether a line's holders keep it until a request's snoop reaches them.
    pub snoop_window: bool,
    /// Whether a woken spinner looks again at a random phase of its loop's iteration.
    pub wake_phase: bool,
    /// locktorture's stutter, jiffies.
    pub stutter_jiffies: u64,
    /// The CNA v15 models' `numa_spinlock_threshold_ns`.
    pub cna_kernel_threshold_ns: u64,
    /// Output format.
    pub format: Format,
    /// Whether to add the acquisition-path columns.
    pub paths: bool,
    /// The window of virtual time (ns) whose accesses are written to stderr.
    pub trace: Option<(u64, u64)>,
    /// Where to draw the chart(s).
    pub plot: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// `--machine list`.
    ListMachines,
    /// Run the sweep (boxed: the options are most of the enum's size).
    Run(Box<Options>),
}

/// Parses and validates the command line (program name first), and applies the tunables. On
/// error or `--help`, the message has been printed and the caller exits with the code returned.
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, ExitCode> {
    let args = match Args::try_parse_from(args) {
        Ok(args) => args,
        Err(error) => {
            // clap prints help and version to stdout (exit 0), errors to stderr (exit 2).
            let _ = error.print();
            return Err(ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2)));
        }
    };
    validate(args).map_err(|message| {
        eprintln!("error: {message}");
        eprintln!("run with --help for usage");
        ExitCode::from(2)
    })
}

fn validate(args: Args) -> Result<Command, String> {
    if args.machine == "list" {
        return Ok(Command::ListMachines);
    }
    let machine = Machine::by_name(&args.machine).map_err(|unknown| {
        format!(
            "invalid value '{}' for --machine: {unknown}, or list",
            args.machine
        )
    })?;
    let threads = match args.threads.clone() {
        Some(List(threads)) => {
            for &n in &threads {
                numa_sim::placement(machine, n)
                    .map_err(|too_many| format!("invalid value '{n}' in --threads: {too_many}"))?;
            }
            threads
        }
        None => DEFAULT_THREADS
            .into_iter()
            .filter(|&n| n <= machine.hw_threads())
            .collect(),
    };
    if args.placement == Placement::Linux512 && machine.nodes_per_socket > 1 {
        // numa_sim::linux_v5_12_placement models one NUMA level.
        return Err(format!(
            "invalid value 'linux-5.12' for --placement on {}: it models machines with one NUMA \
             level, and {} has {} nodes per socket; use linux, spread or packed",
            machine.name, machine.name, machine.nodes_per_socket
        ));
    }
    if let Some(conflict) = args.writers.and_then(|writers| {
        let has_rw = args.workload.0.contains(&WorkloadKind::Rw);
        crate::common::cli::writers_conflict(writers, has_rw, &threads)
    }) {
        return Err(conflict);
    }
    apply_tunables(&args)?;
    Ok(Command::Run(Box::new(Options {
        machine,
        threads,
        locks: args.locks.0,
        workloads: args.workload.0,
        seed: args.seed,
        duration_us: args.duration_us,
        placement: args.placement,
        stealing: args.stealing == Switch::On,
        ttas_fairness: args.ttas_fairness == Switch::On,
        read_pct: args.read_pct,
        writers: args.writers,
        lockbench_locks: args.lockbench_locks as usize,
        lockbench_ops: (args.lockbench_ops > 0).then_some(args.lockbench_ops),
        store_buffers: args.store_buffers == Switch::On,
        store_forwarding: args.store_forwarding.rule(),
        snoop_window: args.snoop_window == Switch::On,
        wake_phase: args.wake_phase == Switch::On,
        stutter_jiffies: args.locktorture_stutter,
        cna_kernel_threshold_ns: args.cna_kernel_threshold_ns,
        format: args.format,
        paths: args.paths,
        trace: args.trace,
        plot: args.plot,
    })))
}

/// Sets the crate's tunables through their validated setters; their errors name the value and
/// the allowed range.
fn apply_tunables(args: &Args) -> Result<(), String> {
    use numa_locks::tunables;

    let micros = |us: f64| Duration::from_secs_f64(us / 1e6);
    // Always valid: these two setters return Result like every setter.
    let _ = tunables::set_stealing(args.stealing == Switch::On);
    let _ = tunables::set_rwlock_writer_handover(args.rwlock_handover == Switch::On);
    let _ = tunables::set_rwlock_write_mode(args.rwlock_write_mode == Switch::On);
    if let Some(us) = args.spin_us {
        tunables::set_spin_time(micros(us)).map_err(|e| format!("--spin-us {us}: {e}"))?;
    }
    if let Some(us) = args.steal_bound_us {
        tunables::set_steal_bound(micros(us)).map_err(|e| format!("--steal-bound-us {us}: {e}"))?;
    }
    if let Some(us) = args.retake_window_us {
        tunables::set_retake_window(micros(us))
            .map_err(|e| format!("--retake-window-us {us}: {e}"))?;
    }
    if let Some(us) = args.lone_retake_window_us {
        tunables::set_lone_retake_window(micros(us))
            .map_err(|e| format!("--lone-retake-window-us {us}: {e}"))?;
    }
    if let Some(us) = args.cna_flush_us {
        tunables::set_cna_flush_threshold(micros(us))
            .map_err(|e| format!("--cna-flush-us {us}: {e}"))?;
    }
    if let Some(n) = args.hq_local_handoffs {
        tunables::set_hq_local_handoffs(n).map_err(|e| format!("--hq-local-handoffs {n}: {e}"))?;
    }
    if let Some(n) = args.hq_domain_handoffs {
        tunables::set_hq_domain_handoffs(n)
            .map_err(|e| format!("--hq-domain-handoffs {n}: {e}"))?;
    }
    if let Some(n) = args.delegate_batch {
        tunables::set_delegate_batch(n).map_err(|e| format!("--delegate-batch {n}: {e}"))?;
    }
    Ok(())
}

/// The items of the comma list `value`; an empty item is an error that says what is expected.
fn split<'a>(value: &'a str, expected: &str) -> Result<Vec<&'a str>, String> {
    split_list(value).ok_or_else(|| format!("empty item in the list; expected {expected}"))
}

fn parse_names<T: Copy + PartialEq>(
    value: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str + Copy,
    what: &str,
) -> Result<List<T>, String> {
    let allowed = allowed_names(all, name);
    let items = split(value, &format!("a comma list; allowed: {allowed}"))?;
    parse_unique(&items, |item| {
        find_named(all, name, item)
            .ok_or_else(|| format!("unknown {what} '{item}'; allowed: {allowed}"))
    })
}

fn parse_locks(value: &str) -> Result<List<LockKind>, String> {
    parse_names(value, &LockKind::ALL, LockKind::name, "lock")
}

fn parse_workloads(value: &str) -> Result<List<WorkloadKind>, String> {
    parse_names(value, &WorkloadKind::ALL, WorkloadKind::name, "workload")
}

fn parse_threads(value: &str) -> Result<List<usize>, String> {
    let expected = format!(
        "a comma list of integers from 1 to the machine's hardware threads (at most {}), e.g. 1,2,4,8",
        numa_sim::MAX_HW_THREADS
    );
    parse_unique(&split(value, &expected)?, |item| {
        match item.parse::<usize>() {
            Ok(n) if (1..=numa_sim::MAX_HW_THREADS).contains(&n) => Ok(n),
            _ => Err(format!(
                "'{item}' is not a thread count; expected {expected}"
            )),
        }
    })
}

/// The rw workload's read percentage: an integer from 0 to 100.
fn parse_read_pct(value: &str) -> Result<u32, String> {
    match value.trim().parse::<u32>() {
        Ok(pct) if pct <= 100 => Ok(pct),
        _ => Err(format!(
            "'{value}' is not a read percentage; expected an integer from 0 to 100, e.g. 95"
        )),
    }
}

/// `--writers`: an integer from 1 to [`MAX_WRITERS`](crate::common::cli::MAX_WRITERS).
fn parse_writers(value: &str) -> Result<usize, String> {
    use crate::common::cli::MAX_WRITERS;
    match value.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_WRITERS).contains(&n) => Ok(n as usize),
        _ => Err(format!(
            "'{value}' is not a number of dedicated writers; expected an integer from 1 to \
             {MAX_WRITERS}, e.g. 1"
        )),
    }
}

/// `FROM-TO` in microseconds (fractions allowed), FROM < TO, as nanoseconds.
fn parse_window(value: &str) -> Result<(u64, u64), String> {
    let bad = || {
        format!(
            "expected FROM-TO in microseconds with FROM < TO, e.g. 5000-5002 or 5000.5-5001; \
             got '{value}'"
        )
    };
    let (from, to) = value.split_once('-').ok_or_else(bad)?;
    let ns = |us: &str| match us.trim().parse::<f64>() {
        Ok(us) if (0.0..=1e9).contains(&us) => Ok((us * 1000.0).round() as u64),
        _ => Err(bad()),
    };
    let (from, to) = (ns(from)?, ns(to)?);
    if from < to {
        Ok((from, to))
    } else {
        Err(bad())
    }
}

/// A non-negative number of microseconds; the setters check the range.
fn parse_micros(value: &str) -> Result<f64, String> {
    crate::common::cli::parse_micros(value)
        .ok_or_else(|| "expected a non-negative number of microseconds, e.g. 5 or 0.5".to_string())
}
