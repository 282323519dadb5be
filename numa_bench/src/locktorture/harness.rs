//! One timed run: spawn the threads, start them together, let them hammer one lock, stop them.
//!
//! The handoff bookkeeping and the remote penalty live here, inside every exclusive critical
//! section, so every lock (ours, `parking_lot` and `std`) is measured by exactly the same code.
//! So does the read/write mix of workload `rw`: a mutex takes its only lock for a read, an
//! rwlock its shared lock.

use crate::locktorture::cli::{LockKind, WorkloadKind};
use crate::locktorture::workload::{
    Counter, Empty, FreeList, Hammer, Kv, Rw, Workload, rng_for_worker,
};
use numa_locks::raw::{RawCna, RawCondvar, RawHq, RawMcs};
use numa_locks::topology;
use numa_locks::{CnaMutex, CnaRwLock, HqMutex, HqRwLock, McsMutex, McsRwLock};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// How long the workers may take to notice the stop flag and leave: one more acquisition each.
/// A lock that needs longer has lost a wake-up or deadlocked.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// PRNG rounds in the non-critical section: a few ns of purely local work between acquisitions,
/// short enough that the lock stays hot.
const LOCAL_WORK_ROUNDS: usize = 4;

/// `last_thread` before the first acquisition.
const NO_THREAD: usize = usize::MAX;

/// A lock the harness can drive: every `lock_api` mutex and rwlock, `std::sync::Mutex` and
/// `std::sync::RwLock`.
pub trait LockUnderTest<T>: Sync {
    /// A new unlocked lock protecting `data`.
    fn new(data: T) -> Self;

    /// Whether a critical section may run on another thread than the one that asked for it
    /// (`Delegated`): the worker then counts handoffs by the thread that runs it.
    const DELEGATES: bool = false;

    /// Runs `critical_section` with the lock held exclusively (an rwlock's `write()`); a
    /// delegating lock may run it on another thread.
    fn with_lock<R: Send>(&self, critical_section: impl FnOnce(&mut T) -> R + Send) -> R;

    /// Runs `read_section` with the lock held shared (an rwlock's `read()`); a mutex takes its
    /// only lock.
    #[inline]
    fn with_read_lock<R: Send>(&self, read_section: impl FnOnce(&T) -> R + Send) -> R {
        self.with_lock(|data| read_section(data))
    }

    /// The lock's wait and hold statistics, read by `reader`, once the run is over; `None` for
    /// locks that keep none (all but numa_locks' mutexes).
    fn stats(&self, _reader: &StatsReader) -> Option<WaitHold> {
        None
    }

    /// The protected data, once the run is over.
    fn into_data(self) -> T;
}

/// p50, p99 and max of the wait and the hold times of one run, ns (`--stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WaitHold {
    pub wait: [u64; 3],
    pub hold: [u64; 3],
}

/// Reads the wait and hold statistics of numa_locks' three raw mutexes (`--stats`).
///
/// They exist only with numa_locks' feature `stats`, which numa_bench must not turn on: cargo
/// unifies features, so every `cargo test` of numa_locks would then build its locks with the
/// counters. The `locktorture` example's main, built with `--features stats`, supplies the
/// reader instead (from `numa_locks::stats::HasStats`); without one, `--stats` is refused.
#[derive(Clone, Copy, Debug)]
pub struct StatsReader {
    /// Reads a [`numa_locks::McsMutex`]'s raw lock.
    pub mcs: fn(&RawMcs) -> WaitHold,
    /// Reads a [`numa_locks::CnaMutex`]'s raw lock.
    pub cna: fn(&RawCna) -> WaitHold,
    /// Reads a [`numa_locks::HqMutex`]'s raw lock.
    pub hq: fn(&RawHq) -> WaitHold,
}

/// A `lock_api` raw mutex whose statistics the harness may read: numa_locks', through a
/// [`StatsReader`]. The default is none (parking_lot).
pub trait StatsSource: lock_api::RawMutex + Sized {
    /// The function of `reader` that reads this raw lock, if any.
    fn reader(_reader: &StatsReader) -> Option<fn(&Self) -> WaitHold> {
        None
    }
}

impl StatsSource for parking_lot::RawMutex {}

impl StatsSource for RawMcs {
    fn reader(reader: &StatsReader) -> Option<fn(&Self) -> WaitHold> {
        Some(reader.mcs)
    }
}

impl StatsSource for RawCna {
    fn reader(reader: &StatsReader) -> Option<fn(&Self) -> WaitHold> {
        Some(reader.cna)
    }
}

impl StatsSource for RawHq {
    fn reader(reader: &StatsReader) -> Option<fn(&Self) -> WaitHold> {
        Some(reader.hq)
    }
}

impl<R, T> LockUnderTest<T> for lock_api::Mutex<R, T>
where
    R: StatsSource + Send + Sync,
    T: Send,
{
    fn new(data: T) -> Self {
        lock_api::Mutex::new(data)
    }

    #[inline]
    fn with_lock<U: Send>(&self, critical_section: impl FnOnce(&mut T) -> U + Send) -> U {
        critical_section(&mut self.lock())
    }

    fn stats(&self, reader: &StatsReader) -> Option<WaitHold> {
        let read = R::reader(reader)?;
        // SAFETY: reading the statistics' counters does not touch the lock state, so it cannot
        // invalidate guards or references to the data (as `numa_locks::stats::snapshot`).
        Some(read(unsafe { self.raw() }))
    }

    fn into_data(self) -> T {
        self.into_inner()
    }
}

/// A numa_locks mutex taken through [`numa_locks::Delegate::delegate`]: `mcs-delegate`,
/// `cna-delegate`, `hq-delegate`.
pub struct Delegated<M>(M);

impl<R, T> LockUnderTest<T> for Delegated<lock_api::Mutex<R, T>>
where
    R: StatsSource + Send + Sync,
    T: Send,
    lock_api::Mutex<R, T>: numa_locks::Delegate<T>,
{
    const DELEGATES: bool = true;

    fn new(data: T) -> Self {
        Delegated(lock_api::Mutex::new(data))
    }

    #[inline]
    fn with_lock<U: Send>(&self, critical_section: impl FnOnce(&mut T) -> U + Send) -> U {
        numa_locks::Delegate::delegate(&self.0, critical_section)
    }

    fn stats(&self, reader: &StatsReader) -> Option<WaitHold> {
        self.0.stats(reader)
    }

    fn into_data(self) -> T {
        self.0.into_inner()
    }
}

impl<T: Send> LockUnderTest<T> for std::sync::Mutex<T> {
    fn new(data: T) -> Self {
        std::sync::Mutex::new(data)
    }

    #[inline]
    fn with_lock<U: Send>(&self, critical_section: impl FnOnce(&mut T) -> U + Send) -> U {
        // A worker that panicked has already failed the run; poisoning adds nothing.
        critical_section(&mut self.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn into_data(self) -> T {
        self.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<R, T> LockUnderTest<T> for lock_api::RwLock<R, T>
where
    R: lock_api::RawRwLock + Send + Sync,
    T: Send + Sync,
{
    fn new(data: T) -> Self {
        lock_api::RwLock::new(data)
    }

    #[inline]
    fn with_lock<U: Send>(&self, critical_section: impl FnOnce(&mut T) -> U + Send) -> U {
        critical_section(&mut self.write())
    }

    #[inline]
    fn with_read_lock<U: Send>(&self, read_section: impl FnOnce(&T) -> U + Send) -> U {
        read_section(&self.read())
    }

    fn into_data(self) -> T {
        self.into_inner()
    }
}

/// The rwlocks whose guards come through a `LockResult` (std's, and crossbeam's `ShardedLock`,
/// which has std's API): poisoning adds nothing to a failed run, as for `std::sync::Mutex`.
macro_rules! poisoning_rwlock {
    ($($lock:ident)::+) => {
        impl<T: Send + Sync> LockUnderTest<T> for $($lock)::+<T> {
            fn new(data: T) -> Self {
                $($lock)::+::new(data)
            }

            #[inline]
            fn with_lock<U: Send>(&self, critical_section: impl FnOnce(&mut T) -> U + Send) -> U {
                critical_section(&mut self.write().unwrap_or_else(PoisonError::into_inner))
            }

            #[inline]
            fn with_read_lock<U: Send>(&self, read_section: impl FnOnce(&T) -> U + Send) -> U {
                read_section(&self.read().unwrap_or_else(PoisonError::into_inner))
            }

            fn into_data(self) -> T {
                self.into_inner().unwrap_or_else(PoisonError::into_inner)
            }
        }
    };
}

poisoning_rwlock!(std::sync::RwLock);
poisoning_rwlock!(crossbeam_utils::sync::ShardedLock);

/// Starts a run's workers together, after the clock: each worker waits at a barrier (so that all
/// are spawned and ready), then until the controller has read the clock and opened the run.
///
/// Without the second wait the workers ran as soon as the barrier let them go, while the
/// controller, released with them, might wait for a core before reading the clock: with 64
/// readers that never block on 2 cores, seconds of operations fell before the start, and
/// `ops_per_sec` came out above what 2 cores can do (200 million a second for `hq-rw` at 100 %
/// reads, against 100 at most).
struct StartLine {
    ready: Barrier,
    open: AtomicBool,
}

impl StartLine {
    fn new(workers: usize) -> Self {
        StartLine {
            ready: Barrier::new(workers + 1),
            open: AtomicBool::new(false),
        }
    }

    /// A worker: returns once the run is open. Yields while it waits, so that the controller
    /// gets a core.
    fn wait(&self) {
        self.ready.wait();
        // Relaxed: the flag only starts the clock's run; the data was published by the barrier.
        while !self.open.load(Ordering::Relaxed) {
            thread::yield_now();
        }
    }

    /// The controller: waits for every worker, reads the clock, opens the run and returns the
    /// time it opened.
    fn open(&self) -> Instant {
        self.ready.wait();
        let started = Instant::now();
        self.open.store(true, Ordering::Relaxed);
        started
    }
}

/// The data every lock protects: the workload's state plus the harness's handoff bookkeeping.
struct Protected<W> {
    /// The thread that held the lock last ([`NO_THREAD`] before the first acquisition).
    last_thread: usize,
    /// The node the last holder was on when it took the lock.
    last_node: usize,
    workload: W,
}

impl<W: Workload> Protected<W> {
    /// The workload's fresh state for `threads` workers, before any acquisition.
    fn new(threads: usize) -> Self {
        Protected {
            last_thread: NO_THREAD,
            last_node: 0,
            workload: W::new(threads),
        }
    }
}

/// The parameters of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    /// Worker threads.
    pub threads: usize,
    /// How long the workers run.
    pub duration: Duration,
    /// `Some(n)`: worker i runs on virtual node `i % n`.
    pub virtual_nodes: Option<usize>,
    /// Busy-wait inserted at the start of every remote handoff's critical section.
    pub remote_penalty: Duration,
    /// Workload `pc`: the queue's capacity.
    pub slots: usize,
    /// Workload `pc`: `notify_all` on the empty/full transitions, or `notify_one` always.
    pub notify_all: bool,
    /// Workloads with reads (`rw`): the percentage of operations that read, 0..=100.
    pub read_pct: u64,
    /// Workloads with reads: `Some(n)`: workers `0..n` only write, the others only read.
    pub writers: Option<usize>,
    /// Workloads with reads: PRNG rounds inside every critical section and, besides
    /// `LOCAL_WORK_ROUNDS`, outside.
    pub work: u64,
    /// Reads the lock's wait and hold statistics after the run (`--stats`), if this build can.
    pub stats: Option<StatsReader>,
}

/// What one worker counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadCounts {
    /// Critical sections completed, reads included.
    pub ops: u64,
    /// Of `ops`, the reads (under the shared lock; workload `rw`).
    pub reads: u64,
    /// Acquisitions whose previous holder was another thread.
    pub handoffs: u64,
    /// Handoffs whose previous holder was on another node.
    pub remote_handoffs: u64,
}

/// The outcome of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// From the moment the workers were released to the moment they were told to stop.
    pub elapsed: Duration,
    /// One entry per worker.
    pub per_thread: Vec<ThreadCounts>,
    /// What [`Workload::check`] found wrong with the protected data afterwards, if anything.
    pub violation: Option<String>,
    /// The lock's wait and hold statistics over the whole run (start and stop included), if it
    /// keeps them.
    pub stats: Option<WaitHold>,
}

/// Runs `lock` with `workload` once.
pub fn run_once(lock: LockKind, workload: WorkloadKind, config: &RunConfig) -> RunResult {
    match workload {
        WorkloadKind::Empty => run_workload::<Empty>(lock, config),
        WorkloadKind::Counter => run_workload::<Counter>(lock, config),
        WorkloadKind::Kv => run_workload::<Kv>(lock, config),
        WorkloadKind::FreeList => run_workload::<FreeList>(lock, config),
        WorkloadKind::Hammer => run_workload::<Hammer>(lock, config),
        WorkloadKind::Rw => run_workload::<Rw>(lock, config),
        WorkloadKind::Pc => match lock {
            LockKind::Mcs => run_pc::<McsMutex<PcQueue>>(config),
            LockKind::Cna => run_pc::<CnaMutex<PcQueue>>(config),
            LockKind::Hq => run_pc::<HqMutex<PcQueue>>(config),
            LockKind::ParkingLot => run_pc::<parking_lot::Mutex<PcQueue>>(config),
            LockKind::Std => run_pc::<std::sync::Mutex<PcQueue>>(config),
            // A delegated closure cannot wait on a condition variable: the command line
            // refuses pc with them.
            LockKind::McsDelegate | LockKind::CnaDelegate | LockKind::HqDelegate => {
                unreachable!("pc with {}", lock.name())
            }
            // The command line refuses pc with an rwlock (no condition variable).
            LockKind::McsRw
            | LockKind::CnaRw
            | LockKind::HqRw
            | LockKind::PlRwLock
            | LockKind::StdRwLock
            | LockKind::Sharded => unreachable!("pc with the rwlock {}", lock.name()),
        },
    }
}

fn run_workload<W: Workload>(lock: LockKind, config: &RunConfig) -> RunResult {
    match lock {
        LockKind::Mcs => run::<McsMutex<Protected<W>>, W>(config),
        LockKind::Cna => run::<CnaMutex<Protected<W>>, W>(config),
        LockKind::Hq => run::<HqMutex<Protected<W>>, W>(config),
        LockKind::ParkingLot => run::<parking_lot::Mutex<Protected<W>>, W>(config),
        LockKind::Std => run::<std::sync::Mutex<Protected<W>>, W>(config),
        LockKind::McsRw => run::<McsRwLock<Protected<W>>, W>(config),
        LockKind::CnaRw => run::<CnaRwLock<Protected<W>>, W>(config),
        LockKind::HqRw => run::<HqRwLock<Protected<W>>, W>(config),
        LockKind::PlRwLock => run::<parking_lot::RwLock<Protected<W>>, W>(config),
        LockKind::StdRwLock => run::<std::sync::RwLock<Protected<W>>, W>(config),
        LockKind::Sharded => run::<crossbeam_utils::sync::ShardedLock<Protected<W>>, W>(config),
        LockKind::McsDelegate => run::<Delegated<McsMutex<Protected<W>>>, W>(config),
        LockKind::CnaDelegate => run::<Delegated<CnaMutex<Protected<W>>>, W>(config),
        LockKind::HqDelegate => run::<Delegated<HqMutex<Protected<W>>>, W>(config),
    }
}

fn run<L, W>(config: &RunConfig) -> RunResult
where
    L: LockUnderTest<Protected<W>>,
    W: Workload,
{
    // Built before the clock starts: the kv map alone is 64K inserts.
    let lock = L::new(Protected::new(config.threads));
    // The workers and this thread meet here, so all start together.
    let start = StartLine::new(config.threads);
    // Read by every worker on every iteration and written once: alone on its cache line.
    let stop = crossbeam_utils::CachePadded::new(AtomicBool::new(false));

    let (elapsed, per_thread) = thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|id| {
                let (lock, start, stop) = (&lock, &start, &*stop);
                let spawned = thread::Builder::new()
                    .name(format!("locktorture-{id}"))
                    .spawn_scoped(scope, move || worker::<L, W>(id, lock, config, start, stop));
                spawned.unwrap_or_else(|err| {
                    // The workers already spawned wait on the barrier forever: leave now.
                    eprintln!(
                        "error: cannot spawn worker thread {id} of {}: {err}; try fewer --threads",
                        config.threads
                    );
                    std::process::exit(1)
                })
            })
            .collect();
        let started = start.open();
        thread::sleep(config.duration);
        // Relaxed: the flag carries no data; the counts come back through `join`.
        stop.store(true, Ordering::Relaxed);
        let elapsed = started.elapsed();
        let joined = watchdog(scope);
        let per_thread: Vec<ThreadCounts> = workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        // The watchdog has nothing to report once every worker is back.
        let _ = joined.send(());
        (elapsed, per_thread)
    });
    let exclusive_ops = per_thread
        .iter()
        .map(|counts| counts.ops - counts.reads)
        .sum();
    let stats = config.stats.and_then(|reader| lock.stats(&reader));
    let violation = lock.into_data().workload.check(exclusive_ops).err();
    RunResult {
        elapsed,
        per_thread,
        violation,
        stats,
    }
}

/// Starts a thread that ends the process if no message arrives within [`STOP_GRACE`]: a stuck
/// lock then fails the run loudly instead of hanging it.
fn watchdog<'scope>(scope: &'scope thread::Scope<'scope, '_>) -> mpsc::Sender<()> {
    let (joined, done) = mpsc::channel::<()>();
    let spawned = thread::Builder::new()
        .name("locktorture-watchdog".to_string())
        .spawn_scoped(scope, move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(STOP_GRACE) {
                eprintln!(
                    "error: the workers did not stop within {} s of the end of the run: the lock \
                     above is stuck (deadlock or lost wake-up)",
                    STOP_GRACE.as_secs()
                );
                std::process::exit(1);
            }
        });
    // Without a watchdog the run still works; it just cannot report a hang.
    drop(spawned);
    joined
}

/// One worker: local work, then one critical section, until told to stop.
fn worker<L, W>(
    id: usize,
    lock: &L,
    config: &RunConfig,
    start: &StartLine,
    stop: &AtomicBool,
) -> ThreadCounts
where
    L: LockUnderTest<Protected<W>>,
    W: Workload,
{
    let virtual_node = config.virtual_nodes.map(|nodes| id % nodes);
    if virtual_node.is_some() {
        // The NUMA-aware locks read the same override through `topology::current_node`.
        topology::set_thread_node(virtual_node);
    }
    let penalty = config.remote_penalty;
    let read_pct = config.read_pct;
    // `Some(true)`: a dedicated writer, `Some(false)`: a dedicated reader (`--writers`).
    let writer = config.writers.map(|writers| id < writers);
    let work = if W::HAS_READS { config.work } else { 0 };
    let mut rng = rng_for_worker(id as u64);
    let mut local = W::Local::default();
    let mut counts = ThreadCounts::default();

    start.wait();
    // The stop flag is read after each operation, so every worker completes at least one even
    // when it first runs after the end of a short run (a loaded machine): a row never reads 0.
    loop {
        for _ in 0..LOCAL_WORK_ROUNDS as u64 + work {
            rng.next_u64();
        }
        let input = W::prepare(&mut rng);
        // `HAS_READS` is a constant: the other workloads draw nothing here.
        let read = W::HAS_READS
            && match writer {
                Some(writer) => !writer,
                None => rng.next_u64() % 100 < read_pct,
            };
        if read {
            // A read leaves no trace in the handoff bookkeeping: it cannot write the data.
            lock.with_read_lock(|protected| {
                protected.workload.read_section(input);
                work_rounds(&mut rng, work);
            });
            counts.ops += 1;
            counts.reads += 1;
        } else {
            // Without virtual nodes: the node this thread runs on just before it asks for the lock.
            let node = virtual_node.unwrap_or_else(topology::current_node);
            RUNNER.set((id, node));
            lock.with_lock(|protected| {
                // Who runs the section: this thread, or (delegation) the holder that runs it for
                // us, whose caches the protected data then moves to.
                let (id, node) = if L::DELEGATES {
                    RUNNER.get()
                } else {
                    (id, node)
                };
                if protected.last_thread != id {
                    if protected.last_thread != NO_THREAD {
                        counts.handoffs += 1;
                        if protected.last_node != node {
                            counts.remote_handoffs += 1;
                            spin_for(penalty);
                        }
                    }
                    protected.last_thread = id;
                }
                protected.last_node = node;
                protected.workload.critical_section(input, &mut local);
                work_rounds(&mut rng, work);
            });
            counts.ops += 1;
        }
        // Relaxed: see the store in `run`.
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    // Keeps the local work alive: without a use of the final state it could be optimised away.
    black_box(rng);
    counts
}

std::thread_local! {
    /// The worker running on this thread and its node, as of its last acquisition: who runs a
    /// delegated critical section.
    static RUNNER: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// `--work`: `rounds` PRNG rounds (inside a critical section).
#[inline]
fn work_rounds(rng: &mut crate::common::workload::XorShift, rounds: u64) {
    for _ in 0..rounds {
        rng.next_u64();
    }
}

/// Busy-waits for `penalty`, standing in for the cache misses a remote handoff causes.
///
/// Reads the monotonic clock (a vDSO call, some 20 ns), so penalties below about 50 ns are coarse.
#[inline]
fn spin_for(penalty: Duration) {
    if penalty.is_zero() {
        return;
    }
    let started = Instant::now();
    while started.elapsed() < penalty {
        std::hint::spin_loop();
    }
}

// ---- Workload `pc`: producers and consumers on a bounded queue ---------------------------------

/// A mutex with a condition variable of its own kind, for workload `pc`.
pub trait CondvarLock<T>: LockUnderTest<T> {
    type Condvar: Sync;

    fn new_condvar() -> Self::Condvar;

    /// Locks, waits on `condvar` while `blocked(data)`, then runs `then` with the lock held.
    fn wait_while_then<R>(
        &self,
        condvar: &Self::Condvar,
        blocked: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> R,
    ) -> R;

    /// `notify_all` if `all`, else `notify_one`.
    fn notify(condvar: &Self::Condvar, all: bool);
}

/// The raw condition variable that goes with a raw mutex.
pub trait PairedCondvar: lock_api::RawMutex {
    type RawCondvar: lock_api::RawCondvar<RawMutex = Self> + Send + Sync;
}

impl PairedCondvar for RawMcs {
    type RawCondvar = RawCondvar<RawMcs>;
}
impl PairedCondvar for RawCna {
    type RawCondvar = RawCondvar<RawCna>;
}
impl PairedCondvar for RawHq {
    type RawCondvar = RawCondvar<RawHq>;
}
impl PairedCondvar for parking_lot::RawMutex {
    type RawCondvar = parking_lot::RawCondvar;
}

impl<R, T> CondvarLock<T> for lock_api::Mutex<R, T>
where
    R: StatsSource + PairedCondvar + Send + Sync,
    T: Send,
{
    type Condvar = lock_api::Condvar<R::RawCondvar>;

    fn new_condvar() -> Self::Condvar {
        lock_api::Condvar::new()
    }

    #[inline]
    fn wait_while_then<U>(
        &self,
        condvar: &Self::Condvar,
        blocked: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> U,
    ) -> U {
        let mut guard = self.lock();
        condvar.wait_while(&mut guard, blocked);
        then(&mut guard)
    }

    #[inline]
    fn notify(condvar: &Self::Condvar, all: bool) {
        if all {
            condvar.notify_all();
        } else {
            condvar.notify_one();
        }
    }
}

impl<T: Send> CondvarLock<T> for std::sync::Mutex<T> {
    type Condvar = std::sync::Condvar;

    fn new_condvar() -> Self::Condvar {
        std::sync::Condvar::new()
    }

    #[inline]
    fn wait_while_then<U>(
        &self,
        condvar: &Self::Condvar,
        blocked: impl FnMut(&mut T) -> bool,
        then: impl FnOnce(&mut T) -> U,
    ) -> U {
        let guard = self.lock().unwrap_or_else(PoisonError::into_inner);
        let mut guard = condvar
            .wait_while(guard, blocked)
            .unwrap_or_else(PoisonError::into_inner);
        then(&mut guard)
    }

    #[inline]
    fn notify(condvar: &Self::Condvar, all: bool) {
        if all {
            condvar.notify_all();
        } else {
            condvar.notify_one();
        }
    }
}

/// Workload `pc`'s shared state: the bounded queue and what went through it.
pub struct PcQueue {
    items: VecDeque<u64>,
    /// Set (under the lock) at the end of the run: every waiter leaves.
    stop: bool,
    pushed: u64,
    popped: u64,
}

/// The producers of a `pc` run with `threads` threads: workers `0..producers`; the others consume.
fn pc_producers(threads: usize) -> usize {
    threads.div_ceil(2)
}

fn run_pc<L: CondvarLock<PcQueue>>(config: &RunConfig) -> RunResult {
    assert!(config.threads >= 2, "pc needs a producer and a consumer");
    let lock = L::new(PcQueue {
        items: VecDeque::with_capacity(config.slots),
        stop: false,
        pushed: 0,
        popped: 0,
    });
    let not_empty = L::new_condvar();
    let not_full = L::new_condvar();
    let start = StartLine::new(config.threads);
    let (elapsed, per_thread) = thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|id| {
                let (lock, not_empty, not_full, start) = (&lock, &not_empty, &not_full, &start);
                let spawned = thread::Builder::new()
                    .name(format!("locktorture-{id}"))
                    .spawn_scoped(scope, move || {
                        pc_worker::<L>(id, lock, not_empty, not_full, config, start)
                    });
                spawned.unwrap_or_else(|err| {
                    eprintln!(
                        "error: cannot spawn worker thread {id} of {}: {err}; try fewer --threads",
                        config.threads
                    );
                    std::process::exit(1)
                })
            })
            .collect();
        let started = start.open();
        thread::sleep(config.duration);
        // Under the lock, so no waiter can miss it between its check and its wait.
        lock.wait_while_then(&not_full, |_| false, |queue| queue.stop = true);
        L::notify(&not_empty, true);
        L::notify(&not_full, true);
        let elapsed = started.elapsed();
        let joined = watchdog(scope);
        let per_thread: Vec<ThreadCounts> = workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        let _ = joined.send(());
        (elapsed, per_thread)
    });
    let stats = config.stats.and_then(|reader| lock.stats(&reader));
    let queue = lock.into_data();
    let ops: u64 = per_thread.iter().map(|counts| counts.ops).sum();
    let violation = if queue.pushed != queue.popped + queue.items.len() as u64 {
        Some(format!(
            "{} messages pushed, but {} popped and {} left in the queue",
            queue.pushed,
            queue.popped,
            queue.items.len()
        ))
    } else if ops != queue.pushed + queue.popped {
        Some(format!(
            "the workers counted {ops} pushes and pops, the queue {}",
            queue.pushed + queue.popped
        ))
    } else if queue.items.len() > config.slots {
        Some(format!(
            "{} messages in a queue of {} slots",
            queue.items.len(),
            config.slots
        ))
    } else {
        None
    };
    RunResult {
        elapsed,
        per_thread,
        violation,
        stats,
    }
}

/// One `pc` worker: a producer pushes message after message, waiting while the queue is full; a
/// consumer pops, waiting while it is empty; each notifies the other side as `--notify` says.
fn pc_worker<L: CondvarLock<PcQueue>>(
    id: usize,
    lock: &L,
    not_empty: &L::Condvar,
    not_full: &L::Condvar,
    config: &RunConfig,
    start: &StartLine,
) -> ThreadCounts {
    if let Some(nodes) = config.virtual_nodes {
        topology::set_thread_node(Some(id % nodes));
    }
    let producer = id < pc_producers(config.threads);
    let (slots, notify_all) = (config.slots, config.notify_all);
    let mut counts = ThreadCounts::default();
    start.wait();
    loop {
        // `Some(notify)`: one push or pop done, and whether the other side must be notified
        // (with notify_all: the queue just stopped being empty, or full); `None`: stop.
        let done = if producer {
            lock.wait_while_then(
                not_full,
                |queue| queue.items.len() >= slots && !queue.stop,
                |queue| {
                    // A producer's first push still goes in after the stop if there is room, so a
                    // run always moves a message (a row never reads 0; see `worker`).
                    if queue.stop && (counts.ops > 0 || queue.items.len() >= slots) {
                        return None;
                    }
                    queue.items.push_back(counts.ops);
                    queue.pushed += 1;
                    Some(queue.items.len() == 1)
                },
            )
        } else {
            lock.wait_while_then(
                not_empty,
                |queue| queue.items.is_empty() && !queue.stop,
                |queue| {
                    if queue.stop && (counts.ops > 0 || queue.items.is_empty()) {
                        return None;
                    }
                    let was_full = queue.items.len() == slots;
                    black_box(queue.items.pop_front());
                    queue.popped += 1;
                    Some(was_full)
                },
            )
        };
        let Some(transition) = done else { break };
        counts.ops += 1;
        let other_side = if producer { not_empty } else { not_full };
        if !notify_all {
            L::notify(other_side, false);
        } else if transition {
            L::notify(other_side, true);
        }
    }
    counts
}

#[cfg(test)]
mod tests;
