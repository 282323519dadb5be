//! One simulated run: spawn the pinned threads, let them hammer one lock for the run's virtual
//! duration, count.
//!
//! The handoff bookkeeping lives here, inside every critical section, on the first protected
//! line (which every workload writes), so every lock, this crate's and the models, is measured
//! by exactly the same code. Everything a run allocates is created inside the simulation and
//! padded to whole cache lines, so its line layout, and thus the result, does not depend on
//! where the allocator puts it.

use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use numa_locks::raw::{RawCna, RawCnaRwLock, RawHq, RawHqRwLock, RawMcs, RawMcsRwLock};
use numa_sim::{Access, Machine, Simulation, thread};

use crate::numasim::baselines::{Pthread, SpinMcs, StdMutex, Ttas};
use crate::numasim::cli::{LockKind, WorkloadKind};
use crate::numasim::kernel::{
    CnaKernel, CnaKernelV13, CnaKernelV13WoSro, CnaKernelWoSro, QSpinLock,
};
use crate::numasim::rwlocks::{PlRwLock, ShardedRw, StdRwLock};
use crate::numasim::stutter;
use crate::numasim::workload::{
    Counter, FreeList, Kv, LockBench, LockTorture, Rw, Workload, XorShift,
};

/// `Head::last_thread` before the first acquisition.
const NO_THREAD: usize = usize::MAX;

/// The length of the windows of virtual time in which `RunResult::windows` counts acquisitions
/// and handoffs: 20 µs, about 100 critical sections at the simulated locks' rates.
pub const WINDOW_NS: u64 = 20_000;

/// A lock the harness can drive: this crate's mutexes and the baseline models.
pub trait SimLock: Send + Sync + 'static {
    /// What all the locks of one run share: per-thread state that the real lock keeps per
    /// thread or per CPU, not per lock (the kernel's queue nodes, parking_lot's thread data and
    /// hash table of buckets). `()` for none.
    type Shared: Send + Sync + 'static;

    /// The shared state for a run with `threads` simulated threads.
    fn shared(threads: usize, config: &RunConfig) -> Self::Shared;

    /// Lock number `index` of the run (0 unless the workload has several), unlocked.
    fn new(shared: &Arc<Self::Shared>, index: usize, config: &RunConfig) -> Self;

    /// Runs `critical_section` with the lock held by simulated thread `me` (0..threads): a
    /// mutex's only lock, an rwlock's exclusive lock.
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R;

    /// Whether a critical section may run on another simulated thread than the one that asked
    /// for it (delegation): the harness then counts handoffs by the thread that runs it.
    const DELEGATES: bool = false;

    /// Runs a read-only `critical_section` (the `rw` workload's reads) with the lock held shared
    /// by `me`: an rwlock's shared lock; a mutex takes its only lock (the default).
    #[inline]
    fn with_read_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.with_lock(me, critical_section)
    }
}

/// This crate's locks, through `lock_api`, exactly as users take them.
pub struct CrateLock<R: lock_api::RawMutex>(lock_api::Mutex<R, ()>);

impl<R> SimLock for CrateLock<R>
where
    R: lock_api::RawMutex + Send + Sync + 'static,
{
    type Shared = ();

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(_shared: &Arc<()>, _index: usize, _config: &RunConfig) -> Self {
        CrateLock(lock_api::Mutex::new(()))
    }

    #[inline]
    fn with_lock<U>(&self, _me: usize, critical_section: impl FnOnce() -> U) -> U {
        let _guard = self.0.lock();
        critical_section()
    }
}

/// This crate's mutexes through [`numa_locks::Delegate::delegate`]: the critical section is a
/// closure a holder may run for its caller.
pub struct CrateDelegate<R: lock_api::RawMutex>(lock_api::Mutex<R, ()>);

/// A closure or value the simulation moves between its threads. The simulator runs one thread
/// at a time on the host and switches threads with synchronization of its own, and a delegated
/// section's caller waits until it has run, so what the harness's sections borrow stays valid.
struct SimSend<T>(T);

// SAFETY: see the type's docs.
unsafe impl<T> Send for SimSend<T> {}

impl<R> SimLock for CrateDelegate<R>
where
    R: lock_api::RawMutex + Send + Sync + 'static,
    lock_api::Mutex<R, ()>: numa_locks::Delegate<()>,
{
    type Shared = ();
    const DELEGATES: bool = true;

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(_shared: &Arc<()>, _index: usize, _config: &RunConfig) -> Self {
        CrateDelegate(lock_api::Mutex::new(()))
    }

    #[inline]
    fn with_lock<U>(&self, _me: usize, critical_section: impl FnOnce() -> U) -> U {
        let section = SimSend(critical_section);
        numa_locks::Delegate::delegate(&self.0, move |_| {
            // The whole wrapper, not its field: the closure must capture the `Send` wrapper.
            let section = section;
            SimSend((section.0)())
        })
        .0
    }
}

/// This crate's rwlocks, through `lock_api`, exactly as users take them: `write()` for
/// [`SimLock::with_lock`], `read()` for [`SimLock::with_read_lock`].
pub struct CrateRwLock<R: lock_api::RawRwLock>(lock_api::RwLock<R, ()>);

impl<R> SimLock for CrateRwLock<R>
where
    R: lock_api::RawRwLock + Send + Sync + 'static,
{
    type Shared = ();

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(_shared: &Arc<()>, _index: usize, _config: &RunConfig) -> Self {
        CrateRwLock(lock_api::RwLock::new(()))
    }

    #[inline]
    fn with_lock<U>(&self, _me: usize, critical_section: impl FnOnce() -> U) -> U {
        let _guard = self.0.write();
        critical_section()
    }

    #[inline]
    fn with_read_lock<U>(&self, _me: usize, critical_section: impl FnOnce() -> U) -> U {
        let _guard = self.0.read();
        critical_section()
    }
}

/// The parameters of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    /// The simulated machine.
    pub machine: &'static Machine,
    /// Simulated threads.
    pub threads: usize,
    /// Where they are pinned.
    pub placement: crate::numasim::cli::Placement,
    /// Critical sections entered before this virtual time (ns) count.
    pub duration_ns: u64,
    /// The simulation's seed.
    pub seed: u64,
    /// The ttas model's eventual fairness.
    pub ttas_fairness: bool,
    /// The `rw` workload's percentage of reads.
    pub read_pct: u32,
    /// `rw` with dedicated roles: threads `0..N` only write, the others only read (`read_pct`
    /// unused).
    pub writers: Option<usize>,
    /// Locks of the `lockbench` workload (the other workloads have one).
    pub lockbench_locks: usize,
    /// `lockbench` as lock-bench times it: each thread runs this many operations and the run
    /// lasts until the last one is done (`None`: for `duration_ns`, like every workload).
    pub lockbench_ops: Option<u64>,
    /// Whether the simulated threads have store buffers.
    pub store_buffers: bool,
    /// Which loads their buffered stores serve.
    pub store_forwarding: numa_sim::StoreForwarding,
    /// Whether a line's holders keep it until a request's snoop reaches them
    /// (`numa_sim::Simulation::snoop_window`).
    pub snoop_window: bool,
    /// Whether a woken spinner looks again at a random phase of its loop's iteration
    /// (`numa_sim::Simulation::wake_phase`).
    pub wake_phase: bool,
    /// locktorture's `stutter`, jiffies: its writers halt and restart every period (0 or 1:
    /// never, as in the kernel; the other workloads ignore it). See [`crate::numasim::stutter`].
    pub stutter_jiffies: u64,
    /// The CNA v15 models' `numa_spinlock_threshold_ns` (the other locks ignore it; see
    /// [`crate::numasim::kernel::DEFAULT_CNA_THRESHOLD_NS`]).
    pub cna_kernel_threshold_ns: u64,
    /// Record the accesses issued in this window of virtual time (ns, end excluded).
    pub trace: Option<(u64, u64)>,
}

impl RunConfig {
    /// `numasim`'s defaults for one run of `threads` threads on `machine`: pinned round-robin
    /// (`spread`), 10 ms, seed 1, the ttas model's eventual fairness, 95% reads, `lockbench`'s
    /// 2 locks for the duration, store buffers on, forwarding by address, no snoop window or
    /// wake phase, the kernel's stutter and CNA threshold, no trace. A test or tool sets what it
    /// varies on top
    /// (`RunConfig { seed: 2, ..RunConfig::new(machine, 8) }`), so that a new parameter or
    /// default changes here only.
    pub fn new(machine: &'static Machine, threads: usize) -> Self {
        RunConfig {
            machine,
            threads,
            placement: crate::numasim::cli::Placement::Spread,
            duration_ns: 10_000_000,
            seed: 1,
            ttas_fairness: true,
            read_pct: 95,
            writers: None,
            lockbench_locks: 2,
            lockbench_ops: None,
            store_buffers: true,
            store_forwarding: numa_sim::StoreForwarding::default(),
            snoop_window: false,
            wake_phase: false,
            stutter_jiffies: crate::numasim::stutter::DEFAULT_STUTTER_JIFFIES,
            cna_kernel_threshold_ns: crate::numasim::kernel::DEFAULT_CNA_THRESHOLD_NS,
            trace: None,
        }
    }
}

/// The accesses a run recorded (`RunConfig::trace`), with where the lock and its protected data
/// lay, so that a reader can tell their lines apart.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The accesses, sorted by issue time.
    pub accesses: Vec<Access>,
    /// The lock's address and size in bytes (whole lines).
    pub lock: (usize, usize),
    /// The protected data's address and size in bytes (whole lines).
    pub data: (usize, usize),
}

impl Trace {
    /// What `address` belongs to: `lock+OFFSET`, `data+OFFSET`, or nothing (a queue node, a
    /// model's own state).
    pub fn label(&self, address: usize) -> String {
        for (name, (start, len)) in [("lock", self.lock), ("data", self.data)] {
            if (start..start + len).contains(&address) {
                return format!("{name}+{:#x}", address - start);
            }
        }
        String::new()
    }
}

/// What one simulated thread counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadCounts {
    /// Critical sections entered within the run's duration.
    pub ops: u64,
    /// Of those, acquisitions whose previous holder was another thread.
    pub handoffs: u64,
    /// Of those, handoffs whose previous holder was on another NUMA node.
    pub remote_handoffs: u64,
    /// Critical sections entered after the end (while leaving): not counted above.
    pub late: u64,
    /// When the thread finished (ns of virtual time).
    pub finished_ns: u64,
}

/// The outcome of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// One entry per simulated thread.
    pub per_thread: Vec<ThreadCounts>,
    /// Host wall time of the simulation.
    pub host_time: Duration,
    /// The simulator's counts of `numa_locks::PathEvent`s, by slot (the models count only
    /// the CNA model's ordering, in `kernel::TALLY_CNA_*`).
    pub tallies: [u64; numa_sim::TALLY_SLOTS],
    /// (acquisitions, handoffs) in each whole [`WINDOW_NS`] window of the run, in order: how
    /// the lock's regime changes over time.
    pub windows: Vec<[u32; 2]>,
    /// The accesses recorded, if the run asked for a trace.
    pub trace: Option<Trace>,
    /// How long each counted acquisition waited, ns of virtual time from the call to `lock()`
    /// to the start of the critical section, all threads, sorted.
    pub waits_ns: Vec<u32>,
    /// The same for the exclusive acquisitions alone (all of them but the `rw` workload's
    /// reads), sorted.
    pub write_waits_ns: Vec<u32>,
    /// How long the run lasted, ns: its duration, or for a fixed number of operations per
    /// thread (`RunConfig::lockbench_ops`) until the last thread was done.
    pub elapsed_ns: u64,
    /// `RunConfig::writers`: threads `0..N` of `per_thread` wrote, the others read.
    pub writers: Option<usize>,
}

impl RunResult {
    /// Critical sections entered within the duration, all threads.
    pub fn total_ops(&self) -> u64 {
        self.per_thread.iter().map(|c| c.ops).sum()
    }

    /// The `q`-quantile (0 to 1) of the counted acquisitions' waits, ns (`None` without any).
    pub fn wait_quantile_ns(&self, q: f64) -> Option<u32> {
        quantile(&self.waits_ns, q)
    }

    /// The `q`-quantile of the exclusive acquisitions' waits, ns (`None` without any).
    pub fn write_wait_quantile_ns(&self, q: f64) -> Option<u32> {
        quantile(&self.write_waits_ns, q)
    }
}

/// The `q`-quantile (0 to 1) of `sorted`; `None` if it is empty.
fn quantile(sorted: &[u32], q: f64) -> Option<u32> {
    let last = sorted.len().checked_sub(1)?;
    let rank = ((last as f64) * q).ceil() as usize;
    sorted.get(rank.min(last)).copied()
}

/// The harness's bookkeeping, on the first protected line: every workload's critical section
/// writes this line (`Workload::critical_section` gets its address), so the accesses below are
/// costed by the simulator as part of it.
struct Head {
    /// The thread that held the lock last ([`NO_THREAD`] before the first acquisition).
    last_thread: usize,
    /// The NUMA node of the last holder.
    last_node: usize,
    /// Set while a thread is inside the critical section: a second one finding it set means
    /// mutual exclusion was violated.
    inside: bool,
    /// Critical sections entered (counted or not).
    entries: u64,
    /// Critical sections that found `inside` set.
    violations: u64,
    /// (acquisitions, handoffs) per whole [`WINDOW_NS`] window of the run. Host memory, which
    /// the simulator does not cost: counting here changes nothing measured.
    windows: Vec<[u32; 2]>,
}

/// Everything a lock protects. Only accessed by the holder of `Guarded::lock`.
struct Protected<W> {
    head: CachePadded<Head>,
    workload: W,
}

/// The harness's own bookkeeping of shared (read) critical sections, which several threads run
/// at once: host atomics, which the simulator does not cost (unlike `Head`, nothing here is a
/// simulated line).
#[derive(Default)]
struct Readers {
    /// Threads inside a read critical section now.
    inside: AtomicU64,
    /// Whether a thread is inside an exclusive critical section now.
    writer_inside: AtomicBool,
    /// Read critical sections entered (counted or not).
    entries: AtomicU64,
    /// Critical sections that found a writer beside a reader.
    violations: AtomicU64,
}

/// A lock and its protected data, each on its own lines.
struct Guarded<L, W> {
    lock: CachePadded<L>,
    data: CachePadded<UnsafeCell<Protected<W>>>,
    readers: Readers,
}

// SAFETY: `data` is only written by the thread that holds `lock` exclusively, and only read
// (through `&`) by the threads that hold it shared (and by the harness after every worker has
// been joined); the `inside` flags check the first part.
unsafe impl<L: Sync, W: Send> Sync for Guarded<L, W> {}

/// The run's locks, each with its data (one, unless the workload has several).
type Locks<L, W> = Vec<Guarded<L, W>>;

/// What one simulated thread hands back: its counts, its acquisitions' waits and its exclusive
/// acquisitions' waits (ns).
type WorkerOutcome = (ThreadCounts, Vec<u32>, Vec<u32>);

/// Runs `lock` with `workload` once. `Err` carries the simulator's failure report (a deadlock,
/// a runaway spin) or the mutual-exclusion violation found.
pub fn run_once(
    lock: LockKind,
    workload: WorkloadKind,
    config: &RunConfig,
) -> Result<RunResult, String> {
    match workload {
        WorkloadKind::Counter => run_workload::<Counter>(lock, config),
        WorkloadKind::Kv => run_workload::<Kv>(lock, config),
        WorkloadKind::FreeList => run_workload::<FreeList>(lock, config),
        WorkloadKind::LockTorture => run_workload::<LockTorture>(lock, config),
        WorkloadKind::LockBench => run_workload::<LockBench>(lock, config),
        WorkloadKind::Rw => run_workload::<Rw>(lock, config),
    }
}

fn run_workload<W: Workload>(lock: LockKind, config: &RunConfig) -> Result<RunResult, String> {
    match lock {
        LockKind::Mcs => run::<CrateLock<RawMcs>, W>(config),
        LockKind::Cna => run::<CrateLock<RawCna>, W>(config),
        LockKind::Hq => run::<CrateLock<RawHq>, W>(config),
        LockKind::QSpinLock => run::<QSpinLock, W>(config),
        LockKind::CnaKernel => run::<CnaKernel, W>(config),
        LockKind::CnaKernelWoSro => run::<CnaKernelWoSro, W>(config),
        LockKind::CnaKernelV13 => run::<CnaKernelV13, W>(config),
        LockKind::CnaKernelV13WoSro => run::<CnaKernelV13WoSro, W>(config),
        LockKind::Std => run::<StdMutex, W>(config),
        LockKind::Pthread => run::<Pthread, W>(config),
        LockKind::Ttas => run::<Ttas, W>(config),
        LockKind::SpinMcs => run::<SpinMcs, W>(config),
        LockKind::McsRw => run::<CrateRwLock<RawMcsRwLock>, W>(config),
        LockKind::CnaRw => run::<CrateRwLock<RawCnaRwLock>, W>(config),
        LockKind::HqRw => run::<CrateRwLock<RawHqRwLock>, W>(config),
        LockKind::PlRwLock => run::<PlRwLock, W>(config),
        LockKind::StdRwLock => run::<StdRwLock, W>(config),
        LockKind::ShardedRw => run::<ShardedRw, W>(config),
        LockKind::McsDelegate => run::<CrateDelegate<RawMcs>, W>(config),
        LockKind::CnaDelegate => run::<CrateDelegate<RawCna>, W>(config),
        LockKind::HqDelegate => run::<CrateDelegate<RawHq>, W>(config),
    }
}

/// What the simulation hands back to the host: per-thread counts and waits, the per-window
/// counts and the data check.
type Outcome = (Vec<WorkerOutcome>, Vec<[u32; 2]>, Result<(), String>);

fn run<L: SimLock, W: Workload>(config: &RunConfig) -> Result<RunResult, String> {
    let config = *config;
    // The per-window counts cover a run of known duration only.
    let windows = |config: &RunConfig| {
        if W::fixed_ops(config).is_some() {
            0
        } else {
            (config.duration_ns / WINDOW_NS) as usize
        }
    };
    let outcome: Arc<Mutex<Option<Outcome>>> = Arc::new(Mutex::new(None));
    let out = outcome.clone();
    // Where the lock and its data lie (for a trace's labels).
    let layout: Arc<Mutex<[(usize, usize); 2]>> = Arc::default();
    let seen = layout.clone();
    let simulation = Simulation::new(config.machine)
        .seed(config.seed)
        .store_buffers(config.store_buffers)
        .store_forwarding(config.store_forwarding)
        .snoop_window(config.snoop_window)
        .wake_phase(config.wake_phase);
    let report = catch_unwind(AssertUnwindSafe(|| {
        let body = move || {
            let shared = Arc::new(L::shared(config.threads, &config));
            let count = W::locks(&config);
            let locks: Arc<Locks<L, W>> = Arc::new(
                (0..count)
                    .map(|index| Guarded {
                        lock: CachePadded::new(L::new(&shared, index, &config)),
                        data: CachePadded::new(UnsafeCell::new(Protected {
                            head: CachePadded::new(Head {
                                last_thread: NO_THREAD,
                                last_node: 0,
                                inside: false,
                                entries: 0,
                                violations: 0,
                                windows: vec![[0; 2]; windows(&config)],
                            }),
                            workload: W::new(config.threads),
                        })),
                        readers: Readers::default(),
                    })
                    .collect(),
            );
            let first = &locks[0];
            *seen.lock().unwrap_or_else(PoisonError::into_inner) = [
                (
                    &*first.lock as *const L as usize,
                    std::mem::size_of::<CachePadded<L>>(),
                ),
                (
                    first.data.get() as usize,
                    std::mem::size_of::<CachePadded<UnsafeCell<Protected<W>>>>(),
                ),
            ];
            let placement = config
                .placement
                .place(config.machine, config.threads, config.seed)
                .expect("the command line checked the thread count");
            // locktorture's stutter kthread and the flag it toggles, on a line of its own.
            let stutter = stutter::kthread_hw(&placement, config.machine.hw_threads())
                .filter(|_| {
                    W::STUTTERS && config.stutter_jiffies > 1 && W::fixed_ops(&config).is_none()
                })
                .map(|hw| {
                    let flag = Arc::new(CachePadded::new(numa_sim::atomic::AtomicU32::new(0)));
                    let toggled = flag.clone();
                    let kthread = thread::spawn_on(hw, move || {
                        stutter::torture_stutter(
                            &toggled,
                            config.stutter_jiffies,
                            config.duration_ns,
                        )
                    });
                    (flag, kthread)
                });
            let workers: Vec<_> = placement
                .into_iter()
                .enumerate()
                .map(|(id, hw)| {
                    let locks = locks.clone();
                    let flag = stutter.as_ref().map(|(flag, _)| flag.clone());
                    thread::spawn_on(hw, move || {
                        worker(id, &locks, flag.as_deref().map(|flag| &**flag), &config)
                    })
                })
                .collect();
            let per_thread: Vec<WorkerOutcome> = workers.into_iter().map(|w| w.join()).collect();
            if let Some((_, kthread)) = stutter {
                kthread.join();
            }
            let entries: u64 = per_thread.iter().map(|(c, _, _)| c.ops + c.late).sum();
            let mut windows = vec![[0u32; 2]; windows(&config)];
            let mut protected_entries = 0;
            let mut check = Ok(());
            for guarded in locks.iter() {
                // SAFETY: every worker has been joined; nobody else holds the lock.
                let data = unsafe { &*guarded.data.get() };
                let reads = guarded.readers.entries.load(Relaxed);
                protected_entries += data.head.entries + reads;
                for (sum, window) in windows.iter_mut().zip(&data.head.windows) {
                    sum[0] += window[0];
                    sum[1] += window[1];
                }
                if check.is_ok() {
                    let violations =
                        data.head.violations + guarded.readers.violations.load(Relaxed);
                    check = if violations != 0 {
                        Err(format!(
                            "MUTUAL EXCLUSION VIOLATED: {violations} critical sections found \
                             another thread inside (a writer beside anyone)"
                        ))
                    } else if data.workload.reads() != reads {
                        Err(format!(
                            "{} reads done, but {reads} read critical sections ran",
                            data.workload.reads()
                        ))
                    } else {
                        data.workload.check(data.head.entries)
                    };
                }
            }
            if check.is_ok() && protected_entries != entries {
                check = Err(format!(
                    "MUTUAL EXCLUSION VIOLATED: the protected counts add up to \
                     {protected_entries}, but the threads entered {entries} critical sections \
                     (lost updates)"
                ));
            }
            *out.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((per_thread, windows, check));
        };
        match config.trace {
            Some((from, to)) => simulation.run_traced(from, to, body),
            None => (simulation.run(body), Vec::new()),
        }
    }))
    .map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the simulation panicked".to_string());
        format!("the simulation failed: {message}")
    })?;
    let (per_thread, windows, check) = outcome
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .ok_or("the simulation ended without a result")?;
    check?;
    let (report, mut accesses) = report;
    let trace = config.trace.map(|_| {
        accesses.sort_by_key(|a| (a.issued_ps, a.task));
        let [lock, data] = *layout.lock().unwrap_or_else(PoisonError::into_inner);
        Trace {
            accesses,
            lock,
            data,
        }
    });
    let mut waits_ns: Vec<u32> = per_thread.iter().flat_map(|(_, w, _)| w).copied().collect();
    waits_ns.sort_unstable();
    let mut write_waits_ns: Vec<u32> = per_thread.iter().flat_map(|(_, _, w)| w).copied().collect();
    write_waits_ns.sort_unstable();
    let elapsed_ns = match W::fixed_ops(&config) {
        Some(_) => per_thread
            .iter()
            .map(|(c, _, _)| c.finished_ns)
            .max()
            .unwrap_or(0),
        None => config.duration_ns,
    };
    Ok(RunResult {
        per_thread: per_thread
            .into_iter()
            .map(|(counts, _, _)| counts)
            .collect(),
        host_time: report.host_time,
        tallies: report.tallies,
        windows,
        trace,
        waits_ns,
        write_waits_ns,
        elapsed_ns,
        writers: config.writers,
    })
}

/// One simulated thread: one critical section, then the workload's local work, until the run's
/// virtual time is over. The end is checked with the free clock peek, so the check costs nothing
/// simulated and does not change what is measured; so is each acquisition's wait (from the call
/// to `lock()` to the critical section), kept in host memory.
fn worker<L: SimLock, W: Workload>(
    id: usize,
    locks: &Locks<L, W>,
    stutter: Option<&numa_sim::atomic::AtomicU32>,
    config: &RunConfig,
) -> WorkerOutcome {
    // Pinned: the node never changes.
    let node = numa_sim::current_node();
    let mut rng = XorShift::new(numa_sim::thread_seed());
    let mut local = W::Local::default();
    let mut counts = ThreadCounts::default();
    let mut waits = Vec::new();
    let mut write_waits = Vec::new();
    // A fixed number of operations (all of them counted), or the run's duration.
    let fixed = W::fixed_ops(config);
    let end = if fixed.is_some() {
        u64::MAX
    } else {
        config.duration_ns
    };
    while numa_sim::clock_ns() < end && fixed.is_none_or(|n| counts.ops < n) {
        let mut input = W::prepare(&mut rng, config, locks.len());
        if let Some(writers) = config.writers {
            input = W::dedicated(input, id >= writers);
        }
        let guarded = &locks[W::lock_of(&input)];
        let called = numa_sim::clock_ns();
        if W::is_read(&input) {
            guarded.lock.with_read_lock(id, || {
                let readers = &guarded.readers;
                // Host atomics, Relaxed: the simulator runs one thread at a time and switches
                // threads with synchronization of its own.
                readers.inside.fetch_add(1, Relaxed);
                readers.entries.fetch_add(1, Relaxed);
                let now = numa_sim::clock_ns();
                if now < end {
                    counts.ops += 1;
                    waits.push(u32::try_from(now - called).unwrap_or(u32::MAX));
                } else {
                    counts.late += 1;
                }
                // SAFETY: we hold the lock shared: nobody writes `data` (a writer inside would be
                // a violation, counted below and reported as such).
                let data = unsafe { &*guarded.data.get() };
                data.workload.read_section(input, id);
                if readers.writer_inside.load(Relaxed) {
                    readers.violations.fetch_add(1, Relaxed);
                }
                readers.inside.fetch_sub(1, Relaxed);
            });
            W::between_acquisitions();
            continue;
        }
        guarded.lock.with_lock(id, || {
            let readers = &guarded.readers;
            if readers.inside.load(Relaxed) != 0 || readers.writer_inside.swap(true, Relaxed) {
                readers.violations.fetch_add(1, Relaxed);
            }
            // SAFETY: we hold the lock; `inside` catches anyone else who thinks so too.
            let data = unsafe { &mut *guarded.data.get() };
            let head = &mut *data.head;
            // Who runs the section: the caller, or (delegation) the holder that runs it for
            // the caller, whose caches the protected lines then move to.
            let (runner, runner_node) = if L::DELEGATES {
                (
                    numa_sim::current_hw_thread().unwrap_or(id),
                    numa_sim::current_node(),
                )
            } else {
                (id, node)
            };
            if head.inside {
                head.violations += 1;
            }
            head.inside = true;
            head.entries += 1;
            let now = numa_sim::clock_ns();
            let counted = now < end;
            let window = head.windows.get_mut((now / WINDOW_NS) as usize);
            let handoff = head.last_thread != runner && head.last_thread != NO_THREAD;
            if let Some(window) = window {
                window[0] += 1;
                window[1] += u32::from(handoff);
            }
            if handoff && counted {
                counts.handoffs += 1;
                if head.last_node != runner_node {
                    counts.remote_handoffs += 1;
                }
            }
            head.last_thread = runner;
            head.last_node = runner_node;
            if counted {
                counts.ops += 1;
                let wait = u32::try_from(now - called).unwrap_or(u32::MAX);
                waits.push(wait);
                write_waits.push(wait);
            } else {
                counts.late += 1;
            }
            // The line the critical section writes first: the harness's head line, or the lock's
            // own line for a workload that keeps its data beside the lock.
            let first_line = if W::ON_LOCK_LINE {
                (&*guarded.lock as *const L).cast::<u8>()
            } else {
                (head as *const Head).cast::<u8>()
            };
            // Read by the section and by `between_acquisitions` after it (the same lock).
            crate::numasim::workload::LOCK_LINE
                .with(|c| c.set((&*guarded.lock as *const L).cast::<u8>()));
            data.workload
                .critical_section(first_line, input, &mut local, id);
            let head = &mut *data.head;
            if !head.inside {
                head.violations += 1;
            }
            head.inside = false;
            if readers.inside.load(Relaxed) != 0 {
                readers.violations.fetch_add(1, Relaxed);
            }
            readers.writer_inside.store(false, Relaxed);
        });
        W::between_acquisitions();
        if let Some(flag) = stutter {
            stutter::stutter_wait(flag, end);
        }
    }
    counts.finished_ns = numa_sim::clock_ns();
    (counts, waits, write_waits)
}
