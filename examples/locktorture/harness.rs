//! One timed run: spawn the threads, start them together, let them hammer one lock, stop them.
//!
//! The handoff bookkeeping and the remote penalty live here, inside every critical section, so
//! every lock (ours, `parking_lot` and `std`) is measured by exactly the same code.

use crate::cli::{LockKind, WorkloadKind};
use crate::workload::{Counter, Empty, FreeList, Hammer, Kv, Workload, rng_for_worker};
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::topology;
use numa_locks::{CnaMutex, HqMutex, McsMutex};
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

/// A mutex the harness can drive: every `lock_api` mutex and `std::sync::Mutex`.
pub trait LockUnderTest<T>: Sync {
    /// A new unlocked mutex protecting `data`.
    fn new(data: T) -> Self;

    /// Runs `critical_section` with the lock held.
    fn with_lock<R>(&self, critical_section: impl FnOnce(&mut T) -> R) -> R;

    /// The lock's wait and hold statistics (this crate's locks, feature `stats`), once the run
    /// is over; `None` for locks that keep none.
    fn stats(&self) -> Option<WaitHold> {
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

/// A `lock_api` raw mutex whose statistics the harness may read: this crate's, with feature
/// `stats`. The default is none (parking_lot; this crate's without the feature).
pub trait StatsSource: lock_api::RawMutex + Sized {
    fn wait_hold<T>(_mutex: &lock_api::Mutex<Self, T>) -> Option<WaitHold> {
        None
    }
}

impl StatsSource for parking_lot::RawMutex {}

macro_rules! stats_from_snapshot {
    ($($raw:ty),*) => {$(
        impl StatsSource for $raw {
            #[cfg(feature = "stats")]
            fn wait_hold<T>(mutex: &lock_api::Mutex<Self, T>) -> Option<WaitHold> {
                let stats = numa_locks::stats::snapshot(mutex);
                let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                let summary = |h: &numa_locks::stats::Histogram| {
                    [ns(h.percentile(50.0)), ns(h.percentile(99.0)), ns(h.max())]
                };
                Some(WaitHold {
                    wait: summary(&stats.wait),
                    hold: summary(&stats.hold),
                })
            }
        }
    )*};
}

stats_from_snapshot!(RawMcs, RawCna, RawHq);

impl<R, T> LockUnderTest<T> for lock_api::Mutex<R, T>
where
    R: StatsSource + Send + Sync,
    T: Send,
{
    fn new(data: T) -> Self {
        lock_api::Mutex::new(data)
    }

    #[inline]
    fn with_lock<U>(&self, critical_section: impl FnOnce(&mut T) -> U) -> U {
        critical_section(&mut self.lock())
    }

    fn stats(&self) -> Option<WaitHold> {
        R::wait_hold(self)
    }

    fn into_data(self) -> T {
        self.into_inner()
    }
}

impl<T: Send> LockUnderTest<T> for std::sync::Mutex<T> {
    fn new(data: T) -> Self {
        std::sync::Mutex::new(data)
    }

    #[inline]
    fn with_lock<U>(&self, critical_section: impl FnOnce(&mut T) -> U) -> U {
        // A worker that panicked has already failed the run; poisoning adds nothing.
        critical_section(&mut self.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn into_data(self) -> T {
        self.into_inner().unwrap_or_else(PoisonError::into_inner)
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
}

/// What one worker counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadCounts {
    /// Critical sections completed.
    pub ops: u64,
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
    }
}

fn run_workload<W: Workload>(lock: LockKind, config: &RunConfig) -> RunResult {
    match lock {
        LockKind::Mcs => run::<McsMutex<Protected<W>>, W>(config),
        LockKind::Cna => run::<CnaMutex<Protected<W>>, W>(config),
        LockKind::Hq => run::<HqMutex<Protected<W>>, W>(config),
        LockKind::ParkingLot => run::<parking_lot::Mutex<Protected<W>>, W>(config),
        LockKind::Std => run::<std::sync::Mutex<Protected<W>>, W>(config),
    }
}

fn run<L, W>(config: &RunConfig) -> RunResult
where
    L: LockUnderTest<Protected<W>>,
    W: Workload,
{
    // Built before the clock starts: the kv map alone is 64K inserts.
    let lock = L::new(Protected {
        last_thread: NO_THREAD,
        last_node: 0,
        workload: W::new(config.threads),
    });
    // The workers and this thread meet here, so all start together.
    let start = Barrier::new(config.threads + 1);
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
        start.wait();
        let started = Instant::now();
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
    let ops = per_thread.iter().map(|counts| counts.ops).sum();
    let stats = lock.stats();
    let violation = lock.into_data().workload.check(ops).err();
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
    start: &Barrier,
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
    let mut rng = rng_for_worker(id as u64);
    let mut local = W::Local::default();
    let mut counts = ThreadCounts::default();

    start.wait();
    // Relaxed: see the store in `run`.
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..LOCAL_WORK_ROUNDS {
            rng.next_u64();
        }
        let input = W::prepare(&mut rng);
        // Without virtual nodes: the node this thread runs on just before it asks for the lock.
        let node = virtual_node.unwrap_or_else(topology::current_node);
        lock.with_lock(|protected| {
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
        });
        counts.ops += 1;
    }
    // Keeps the local work alive: without a use of the final state it could be optimised away.
    black_box(rng);
    counts
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
