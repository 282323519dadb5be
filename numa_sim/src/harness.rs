//! Running a closure on a simulated machine: virtual time ([`Simulation`]) or randomized
//! schedules ([`check_random`], [`check_pct`], [`replay`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use shuttle::scheduler::{PctScheduler, RandomScheduler, ReplayScheduler, Scheduler};
use shuttle::{Config, FailurePersistence, MaxSteps, Runner};

use crate::engine::{self, Access, ContextGuard, Engine, Mode};
use crate::machine::Machine;
use crate::scheduler::{Randomized, VirtualTimeScheduler};

/// The default stack of a simulated thread: enough for lock code in debug builds.
const STACK_SIZE: usize = 256 * 1024;

/// A virtual-time simulation of a machine: the configuration, and [`run`](Simulation::run).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::Ordering::SeqCst;
/// use numa_sim::{Machine, Simulation, atomic::AtomicU64, thread};
///
/// let machine = Machine::by_name("x5-4").unwrap();
/// let counter = Arc::new(AtomicU64::new(0));
/// let c = counter.clone();
/// let report = Simulation::new(machine).seed(7).run(move || {
///     let workers: Vec<_> = numa_sim::placement(machine, 4)
///         .unwrap()
///         .into_iter()
///         .map(|hw| {
///             let c = c.clone();
///             thread::spawn_on(hw, move || {
///                 for _ in 0..10 {
///                     c.fetch_add(1, SeqCst);
///                 }
///             })
///         })
///         .collect();
///     workers.into_iter().for_each(|w| w.join());
/// });
/// assert_eq!(counter.load(SeqCst), 40);
/// assert!(report.virtual_end_ns > 0);
/// ```
#[derive(Debug, Clone)]
pub struct Simulation {
    machine: &'static Machine,
    seed: u64,
    jitter: f64,
    lookahead: bool,
    store_buffers: bool,
    store_forwarding: StoreForwarding,
    snoop_window: bool,
    wake_phase: bool,
    stack_size: usize,
}

/// Which loads a thread's buffered stores serve ([`Simulation::store_forwarding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreForwarding {
    /// Every load of a line the thread has a buffered store to hits at once, even while the
    /// store is still fetching the line: numa_sim's rule before 2026-12-06, looser than the
    /// hardware's, kept to compare with.
    Line,
    /// The default, as Intel's cores do: a load of the address of a buffered store gets its
    /// data from the store (store forwarding); a load of another address on a line that one of
    /// the thread's stores is still fetching waits for the line to arrive (Intel's
    /// Optimization Reference Manual, "Store Forwarding": the load's bytes must come from one
    /// store; the Haswell event `MEM_LOAD_UOPS_RETIRED.HIT_LFB` counts loads that missed L1 and
    /// waited on the fill buffer of an earlier miss to the same line).
    #[default]
    Address,
}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunReport {
    /// The latest virtual time any simulated thread reached, ns.
    pub virtual_end_ns: u64,
    /// Scheduling decisions shuttle asked for (each costs about 16 bytes of schedule).
    pub scheduling_decisions: u64,
    /// Simulated memory accesses (atomic operations, touched lines).
    pub simulated_accesses: u64,
    /// Scheduling points skipped because the task was the earliest anyway.
    pub lookahead_skips: u64,
    /// Host time the run took.
    pub host_time: Duration,
    /// How many times the simulated threads counted each event with [`crate::tally`].
    pub tallies: [u64; crate::TALLY_SLOTS],
}

impl Simulation {
    /// A simulation of `machine`: seed 0, jitter 0.05, lookahead on.
    pub fn new(machine: &'static Machine) -> Self {
        Simulation {
            machine,
            seed: 0,
            jitter: 0.05,
            lookahead: true,
            store_buffers: true,
            store_forwarding: StoreForwarding::Address,
            snoop_window: false,
            wake_phase: false,
            stack_size: STACK_SIZE,
        }
    }

    /// The seed of the jitter and of [`thread_seed`](crate::thread_seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Memory transfer costs are scaled by a factor drawn uniformly from
    /// `[1 - jitter, 1 + jitter]` (deterministically from the seed, the thread and its
    /// operation count): noise that breaks artificial lockstep between simulated threads. 0
    /// disables it.
    ///
    /// # Panics
    ///
    /// Unless `0 <= jitter < 1`.
    pub fn jitter(mut self, jitter: f64) -> Self {
        assert!(
            (0.0..1.0).contains(&jitter),
            "numa_sim: jitter {jitter} out of range: allowed 0 <= jitter < 1"
        );
        self.jitter = jitter;
        self
    }

    /// Skip scheduling points where the running thread is the earliest anyway (default on;
    /// results are identical either way, only host time differs).
    pub fn lookahead(mut self, on: bool) -> Self {
        self.lookahead = on;
        self
    }

    /// Whether plain stores go through per-thread store buffers (default on), with x86-TSO
    /// timing: a store enters its thread's buffer and the thread goes on; the buffer commits in
    /// order, each store once its line has been fetched (the fetches overlap); a locked
    /// read-modify-write, an `SeqCst` [`fence`](crate::atomic::fence) and every system call
    /// (yield, futex, thread exit) wait until the buffer has drained; a load of a line the
    /// thread has a buffered store to hits (store forwarding; which loads, see
    /// [`Simulation::store_forwarding`]), and loads of other lines do not wait. Off, every
    /// store stalls its thread until its transfer completes, like an RMW.
    /// Timing only: the memory model stays sequentially consistent.
    pub fn store_buffers(mut self, on: bool) -> Self {
        self.store_buffers = on;
        self
    }

    /// Which loads a thread's buffered stores serve (default [`StoreForwarding::Address`]); only
    /// matters with store buffers on.
    pub fn store_forwarding(mut self, rule: StoreForwarding) -> Self {
        self.store_forwarding = rule;
        self
    }

    /// Whether a line's holders keep it until a request's snoop reaches them (default off;
    /// virtual time only). Off, a miss takes the line from its holders when it is reserved, at
    /// its issue. On, the request goes to the line's home, which snoops the holders and has
    /// the data or the acknowledgements sent back (Intel's home-snoop flow), its three legs
    /// taken as equal (**EST**): the snoop arrives two thirds of the transfer after the issue,
    /// or, for a request the home held behind another transfer of the line, a third of its
    /// transfer after that transfer completes. Until then the holders' own accesses hit: a
    /// modified or exclusive owner may still write (not after a buffered store, whose value
    /// the engine performs at issue), and what it writes is what the request sees. Requests are
    /// still reserved in the order they issue (the home serves them in turn), each completing
    /// one transfer after its issue or after the transfer it waited for, as the presets' CAS
    /// ping-pong measurements say.
    pub fn snoop_window(mut self, on: bool) -> Self {
        self.snoop_window = on;
        self
    }

    /// Whether a spinner that sleeps through its wait loop (see [`crate::spin_deadline`]) wakes
    /// at a phase of its loop's iteration after the write it waits for (default off; virtual
    /// time only). Off, it wakes at the write's completion; a real one notices the write at its
    /// next look, up to one iteration (a `pause` and a hit) later. On, that delay is drawn for
    /// each spinner and each write from the simulation's seed, so that spinners woken by one
    /// write do not always look again in the same order.
    pub fn wake_phase(mut self, on: bool) -> Self {
        self.wake_phase = on;
        self
    }

    /// The stack size of each simulated thread, bytes (default 256 KiB).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Runs `f` once as the harness (an unpinned simulated thread whose accesses are free and
    /// take no time), in virtual time. `f` spawns pinned threads with
    /// [`thread::spawn_on`](crate::thread::spawn_on) and must join them all; results come back
    /// through state it captures.
    ///
    /// # Panics
    ///
    /// If a simulated thread panics (with its message), or with a deadlock report if every
    /// simulated thread ends up waiting for something nobody will do.
    pub fn run<F>(&self, f: F) -> RunReport
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.run_with_trace(None, f).0
    }

    /// [`run`](Self::run), also recording every access that a pinned thread issues from
    /// `from_ns` to `to_ns` of virtual time (not including `to_ns`), its futex wakes in that
    /// window and its futex sleeps that overlap it (kinds [`Sleep`](crate::AccessKind::Sleep) and
    /// [`Wake`](crate::AccessKind::Wake)), in issue order per thread (sort by
    /// [`Access::issued_ps`](crate::Access::issued_ps) for a timeline). Recording is free: the
    /// run is the same as without it. For finding where a handoff spends its time.
    pub fn run_traced<F>(&self, from_ns: u64, to_ns: u64, f: F) -> (RunReport, Vec<Access>)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let ps = |ns: u64| ns.saturating_mul(1000);
        self.run_with_trace(Some((ps(from_ns), ps(to_ns))), f)
    }

    fn run_with_trace<F>(&self, trace: Option<(u64, u64)>, f: F) -> (RunReport, Vec<Access>)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let mut engine = Engine::new(
            self.machine,
            Mode::VirtualTime,
            self.seed,
            self.jitter,
            self.lookahead,
        );
        engine.trace = trace;
        engine.store_buffers = self.store_buffers;
        engine.forward_by_address = self.store_forwarding == StoreForwarding::Address;
        engine.snoop_window = self.snoop_window;
        engine.wake_phase = self.wake_phase;
        let engine = Rc::new(RefCell::new(engine));
        let _context = ContextGuard::install(engine.clone());
        let (name, seed) = (self.machine.name, self.seed);
        let _note = FailureNote(Box::new(move || {
            format!("numa_sim: the simulation failed (machine {name}, seed {seed})")
        }));
        let mut config = Config::new();
        config.stack_size = self.stack_size;
        config.max_steps = MaxSteps::None;
        config.failure_persistence = FailurePersistence::None;
        let start = Instant::now();
        Runner::new(VirtualTimeScheduler::new(engine.clone(), self.seed), config)
            .run(move || harness_main(&f));
        let host_time = start.elapsed();
        let mut e = engine.borrow_mut();
        if let Some(failure) = e.failure.clone() {
            drop(e);
            panic!("{failure}");
        }
        let report = RunReport {
            virtual_end_ns: e.virtual_end() / 1000,
            scheduling_decisions: e.counters.decisions,
            simulated_accesses: e.counters.accesses,
            lookahead_skips: e.counters.lookahead_skips,
            host_time,
            tallies: e.counters.tallies,
        };
        (report, std::mem::take(&mut e.traced))
    }
}

/// The harness task: runs `f`, then ends the simulation (every later operation is plain).
fn harness_main(f: &impl Fn()) {
    if let Some(cell) = engine::active() {
        cell.borrow_mut().set_thread(shuttle::thread::current());
    }
    f();
    if let Some(cell) = engine::context() {
        let mut e = cell.borrow_mut();
        let unfinished = e.unfinished();
        if !unfinished.is_empty() && e.failure.is_none() {
            e.failure = Some(format!(
                "numa_sim: the simulation's closure returned while simulated threads (task ids \
                 {unfinished:?}) were still running: join every thread spawned with spawn_on"
            ));
        }
        e.stopped = true;
    }
}

/// Prints a line when dropped during a panic.
struct FailureNote(Box<dyn Fn() -> String>);

impl Drop for FailureNote {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", (self.0)());
        }
    }
}

/// What a randomized check ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomReport {
    /// Executions (schedules) run.
    pub executions: usize,
    /// Scheduling decisions over all executions.
    pub scheduling_decisions: u64,
    /// Simulated accesses over all executions.
    pub simulated_accesses: u64,
    /// Host time.
    pub host_time: Duration,
}

/// Runs `f` under `iterations` random schedules (shuttle's `RandomScheduler`, seeded with
/// `seed`): every simulated access is a scheduling point, chosen at random. Costs and clocks
/// are still tracked, so time passes and deadlines expire, but they order nothing; spinners do
/// not sleep, `pause` is a yield hint, and `futex_wait` really blocks, so shuttle detects
/// deadlocks. A failing execution prints the seed and the schedule (pass it to [`replay`]).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::Ordering::SeqCst;
/// use numa_sim::{Machine, atomic::AtomicU32, thread};
///
/// numa_sim::check_random(Machine::by_name("2s-generic").unwrap(), 1, 50, || {
///     let n = Arc::new(AtomicU32::new(0));
///     let ts: Vec<_> = (0..3)
///         .map(|hw| {
///             let n = n.clone();
///             thread::spawn_on(hw, move || {
///                 n.fetch_add(1, SeqCst);
///             })
///         })
///         .collect();
///     ts.into_iter().for_each(|t| t.join());
///     assert_eq!(n.load(SeqCst), 3);
/// });
/// ```
pub fn check_random<F>(
    machine: &'static Machine,
    seed: u64,
    iterations: usize,
    f: F,
) -> RandomReport
where
    F: Fn() + Send + Sync + 'static,
{
    run_randomized(
        machine,
        seed,
        RandomScheduler::new_from_seed(seed, iterations),
        format!("check_random (seed {seed})"),
        f,
    )
}

/// Like [`check_random`], under shuttle's PCT scheduler (priority-based, with `depth`
/// priority change points per execution), which finds bugs that need a few specific
/// preemptions far more often than uniform random choices.
pub fn check_pct<F>(
    machine: &'static Machine,
    seed: u64,
    iterations: usize,
    depth: usize,
    f: F,
) -> RandomReport
where
    F: Fn() + Send + Sync + 'static,
{
    run_randomized(
        machine,
        seed,
        PctScheduler::new_from_seed(seed, depth, iterations),
        format!("check_pct (seed {seed}, depth {depth})"),
        f,
    )
}

/// Replays one failing schedule printed by [`check_random`] or [`check_pct`] (the quoted text
/// after "failing schedule:").
pub fn replay<F>(machine: &'static Machine, schedule: &str, f: F) -> RandomReport
where
    F: Fn() + Send + Sync + 'static,
{
    run_randomized(
        machine,
        0,
        ReplayScheduler::new_from_encoded(schedule),
        "replay".to_string(),
        f,
    )
}

fn run_randomized<S, F>(
    machine: &'static Machine,
    seed: u64,
    scheduler: S,
    what: String,
    f: F,
) -> RandomReport
where
    S: Scheduler + 'static,
    F: Fn() + Send + Sync + 'static,
{
    let mut engine = Engine::new(machine, Mode::Randomized, seed, 0.0, false);
    // Timing does not matter here, and every access is a scheduling point anyway.
    engine.store_buffers = false;
    let engine = Rc::new(RefCell::new(engine));
    let _context = ContextGuard::install(engine.clone());
    let executions = Rc::new(Cell::new(0));
    let counted = executions.clone();
    let ran = executions.clone();
    let name = machine.name;
    let _note = FailureNote(Box::new(move || {
        format!(
            "numa_sim: {what} failed on machine {name} in execution {} (its schedule is printed \
             above as \"failing schedule\": pass it to numa_sim::replay)",
            counted.get()
        )
    }));
    let mut config = Config::new();
    config.stack_size = STACK_SIZE;
    config.failure_persistence = FailurePersistence::Print;
    let scheduler = Randomized {
        inner: scheduler,
        engine: engine.clone(),
        executions,
    };
    let start = Instant::now();
    Runner::new(scheduler, config).run(move || harness_main(&f));
    let host_time = start.elapsed();
    let e = engine.borrow();
    if let Some(failure) = e.failure.clone() {
        drop(e);
        panic!("{failure}");
    }
    RandomReport {
        executions: ran.get(),
        scheduling_decisions: e.counters.decisions,
        simulated_accesses: e.counters.accesses,
        host_time,
    }
}
