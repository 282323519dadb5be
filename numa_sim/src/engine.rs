//! The simulation state of one OS thread, and the operations the simulated code calls.
//!
//! A simulation runs a whole shuttle execution on the OS thread that called
//! [`Simulation::run`](crate::Simulation::run) (or `check_random`), so its state lives in a
//! `std` thread-local of that OS thread ([`CONTEXT`]): simulations running at the same time on
//! other OS threads (cargo runs tests in parallel) share nothing with it.
//!
//! # Virtual-time mode: how an access is ordered
//!
//! Every task (simulated thread) has a virtual clock in picoseconds; the scheduler
//! ([`crate::scheduler`]) always runs the task with the smallest `(clock, task id)`. An access
//! by task `T` whose clock reads `t`:
//!
//! 1. **sync**: if some other runnable task has a smaller `(clock, id)` (`T` may have advanced
//!    its clock locally since it last ran: `work`, `pause`, a clock read), switch to it first, so
//!    that `T` is the earliest task when it issues the access;
//! 2. **reserve**: cost the access from the line's state now and update that state at once
//!    (holders, `busy_until`: see `cache.rs`); `T`'s clock becomes the completion time; a write
//!    wakes the spinners sleeping on the line at that completion time;
//! 3. **sync** again: every task whose clock is below the completion time runs first;
//! 4. the caller **performs** the real `std` operation.
//!
//! Effects therefore happen in completion-time order, and a load returns the value as of its
//! completion. The order is consistent: a transfer of a line starts no earlier than the previous
//! transfer's completion (`busy_until`), a write no earlier than every load reserved before it
//! (`reads_until`), and every cost is positive, so a write's completion time differs from that
//! of every other access to its line and falls after all the accesses reserved before it. Only
//! two loads (which commute) can complete at the same time. A write is never a hit while
//! another copy exists.
//!
//! Step 1 could be skipped if every clock advance were itself a scheduling point; doing it at
//! the next access instead makes local work (`work`, `pause`, clock reads) free of scheduling
//! decisions. With lookahead on (the default), a sync that would pick the caller again is
//! skipped without asking shuttle.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use shuttle_engine::runtime::thread::switch;

use crate::cache::{BufferedStore, Line, Request, Reservation, Topo, Word, Write};
use crate::machine::{Machine, Ps};

/// A clock that never comes: the wake time of a sleeper nobody has a deadline for.
pub(crate) const NEVER: Ps = u64::MAX;

/// How the tasks are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Smallest virtual clock first; spin sleep; futex waits in virtual time.
    VirtualTime,
    /// Shuttle's random or PCT scheduler; every access a plain scheduling point.
    Randomized,
}

/// What kind of memory access, or (only in a trace) of futex event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A load (an atomic load, or `touch_read`).
    Load,
    /// A plain store (an atomic store, or `touch`).
    Store,
    /// A locked read-modify-write (swap, CAS, fetch-op), failed CASes included.
    Rmw,
    /// Only in a trace: a sleep in [`futex_wait`](crate::futex_wait), from the park to the
    /// moment the thread runs again; [`Access::hit`] says whether a wake ended it (rather than
    /// its deadline). Recorded when it ends, if it overlaps the window (so it may have been
    /// issued before the window's start).
    Sleep,
    /// Only in a trace: a [`futex_wake`](crate::futex_wake), costing the waker the machine's
    /// `futex_wake`; [`Access::hit`] says whether it woke a sleeper (who runs `wake_latency`
    /// after it).
    Wake,
}

/// One simulated access (or futex sleep or wake, see [`Kind`]) by a pinned thread, as
/// [`Simulation::run_traced`](crate::Simulation::run_traced) records it. Times are virtual
/// picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// When the thread issued it.
    pub issued_ps: u64,
    /// When it completed (the thread's clock after it).
    pub completed_ps: u64,
    /// The simulated thread (task id: 0 is the harness, workers from 1 in spawn order).
    pub task: usize,
    /// The hardware thread it is pinned to.
    pub hw: usize,
    /// Load, store or RMW; or, in a trace, a futex sleep or wake.
    pub kind: Kind,
    /// The address accessed (its line is `address >> 6`); the futex word for a sleep or wake.
    pub address: usize,
    /// Whether it hit the thread's own cache (no transfer); for a sleep, whether a wake ended
    /// it; for a wake, whether it woke anyone.
    pub hit: bool,
}

/// What a task waits for, besides its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Nothing (runnable at its clock).
    Running,
    /// Asleep in `pause` until one of the lines it watches is written, or its spin deadline.
    Spinning { seq: u32 },
    /// Parked in `futex_wait` on `addr`.
    Futex { addr: usize },
}

/// One simulated thread.
pub(crate) struct Task {
    /// Virtual time, ps. A sleeper's clock is its wake time (`NEVER` without a deadline).
    pub(crate) clock: Ps,
    /// The hardware thread it is pinned to; `None` for the harness (unpinned, free).
    pub(crate) hw: Option<usize>,
    /// Whether shuttle listed it as runnable at the last scheduling decision (a task blocked in
    /// `join` is not), or it was spawned since.
    runnable: bool,
    /// The user closure has returned.
    finished: bool,
    wait: Wait,
    /// When the current sleep or park began.
    sleep_start: Ps,
    /// Numbers the task's spin sleeps, to recognise stale sleeper entries on lines.
    sleep_seq: u32,
    /// Lines watched by the current spin sleep (for the deadlock report).
    watching: Vec<u64>,
    /// Set by `futex_wake`: the park ended by a wake, not a timeout.
    woken: bool,
    /// The registered spin deadline, ps; `None` if never registered.
    spin_deadline: Option<Ps>,
    /// No write (store or RMW) since the deadline was registered: the loop that registered it
    /// may still be the one running.
    deadline_current: bool,
    /// Lines loaded (all hits) since the last `pause`.
    iter_lines: Vec<u64>,
    /// Every operation since the last `pause` was a load hit (or a clock read).
    iter_pure: bool,
    /// Accesses so far (seeds the jitter).
    ops: u64,
    /// Consecutive spin iterations, run as written, that found nothing changed.
    unchanged_iterations: u64,
    /// For unpark in randomized mode.
    thread: Option<shuttle::thread::Thread>,
    /// The store buffer: the commit times of the plain stores this thread issued that have not
    /// reached the memory system yet, oldest first (see [`Engine::reserve`]).
    store_buffer: VecDeque<Ps>,
    /// When the youngest of those commits (stores commit in program order): a drain waits
    /// until then.
    last_commit: Ps,
    /// The lines this thread's buffered stores are still fetching (each store that missed):
    /// (line, the store's address, when the line arrives). Until then a load of another
    /// address on the line waits for the line (see [`Engine::reserve`]).
    fills: Vec<(u64, usize, Ps)>,
    /// The engine's sequence number of this thread's latest reservation (see
    /// [`Engine::stale_after_buffered_store`]).
    last_seq: u64,
    /// Its latest access hit in a snoop window (`Line::window`): it comes before the other
    /// threads' buffered stores that took the line, in value as in time ([`Engine::rewind`]).
    in_window: bool,
}

impl Task {
    fn new(clock: Ps, hw: Option<usize>) -> Self {
        Task {
            clock,
            hw,
            runnable: true,
            finished: false,
            wait: Wait::Running,
            sleep_start: 0,
            sleep_seq: 0,
            watching: Vec::new(),
            woken: false,
            spin_deadline: None,
            deadline_current: false,
            iter_lines: Vec::new(),
            iter_pure: true,
            ops: 0,
            unchanged_iterations: 0,
            thread: None,
            store_buffer: VecDeque::new(),
            last_commit: 0,
            fills: Vec::new(),
            last_seq: 0,
            in_window: false,
        }
    }

    /// When a load of `addr` (on `line`; `None` for a `touch`) at `now` can complete at the
    /// earliest: a buffered store of this thread to the same address forwards its data at once,
    /// but a load of another address on a line one of its stores is still fetching waits for
    /// the line.
    #[inline]
    fn fill_wait(&mut self, line: u64, addr: Option<usize>, now: Ps) -> Option<Ps> {
        if self.fills.is_empty() {
            return None;
        }
        self.fills.retain(|&(_, _, arrival)| arrival > now);
        let mut wait = None;
        for &(l, a, arrival) in &self.fills {
            if l == line {
                if Some(a) == addr {
                    return None;
                }
                wait = wait.max(Some(arrival));
            }
        }
        wait
    }

    #[inline]
    fn reset_iteration(&mut self) {
        self.iter_lines.clear();
        self.iter_pure = true;
    }

    /// Waits until every buffered store has committed.
    #[inline]
    fn drain_store_buffer(&mut self) {
        if !self.store_buffer.is_empty() {
            self.clock = self.clock.max(self.last_commit);
            self.store_buffer.clear();
            self.iter_pure = false;
        }
    }

    /// Forgets the stores that have committed by now; while the buffer is still full
    /// (`entries`), waits for its oldest store to commit.
    #[inline]
    fn make_room_in_store_buffer(&mut self, entries: usize) {
        while self
            .store_buffer
            .front()
            .is_some_and(|&commit| commit <= self.clock)
        {
            self.store_buffer.pop_front();
        }
        while self.store_buffer.len() >= entries.max(1)
            && let Some(oldest) = self.store_buffer.pop_front()
        {
            self.clock = self.clock.max(oldest);
        }
    }
}

/// What `pause` decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pause {
    /// Go on running.
    Go,
    /// The task sleeps: switch.
    Sleep,
    /// The task spins for ever on lines nobody writes: stop with this message.
    Runaway(String),
}

/// Unchanged iterations of an undeclared wait loop after which it is reported as a runaway
/// (2^24: about 64 ms of virtual spinning at 4 ns a `pause`, a second or two of host time).
pub(crate) const RUNAWAY_ITERATIONS: u64 = 1 << 24;

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub(crate) decisions: u64,
    pub(crate) accesses: u64,
    pub(crate) lookahead_skips: u64,
    /// The events counted with [`crate::tally`].
    pub(crate) tallies: [u64; crate::TALLY_SLOTS],
}

/// A fast, deterministic hasher for line numbers and addresses (Fx-style multiply-rotate). The
/// maps keyed by it index [`FirstUse`] and are only looked up, never iterated, and their
/// values own no memory, so addresses never order anything (not even what is freed when).
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

type AddrMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

/// Values kept in the order their keys (line numbers, futex addresses) were first used, found
/// by key. Not a map of values: dropping or clearing a map frees the values' buffers in the
/// order of their keys' hashes, addresses that ASLR moves between processes; the simulated
/// code's later allocations then reuse other blocks, on lines with other histories, and a run
/// after another in the same process stops repeating.
struct FirstUse<V> {
    index: AddrMap<u64, usize>,
    values: Vec<V>,
}

impl<V> Default for FirstUse<V> {
    fn default() -> Self {
        FirstUse {
            index: AddrMap::default(),
            values: Vec::new(),
        }
    }
}

impl<V> FirstUse<V> {
    fn get(&self, key: &u64) -> Option<&V> {
        self.index.get(key).map(|&i| &self.values[i])
    }

    fn get_mut(&mut self, key: &u64) -> Option<&mut V> {
        self.index.get(key).map(|&i| &mut self.values[i])
    }

    /// The key's value, made by `new` at the key's first use.
    fn get_or_insert_with(&mut self, key: u64, new: impl FnOnce() -> V) -> &mut V {
        let values = &mut self.values;
        let i = *self.index.entry(key).or_insert_with(|| {
            values.push(new());
            values.len() - 1
        });
        &mut self.values[i]
    }

    fn clear(&mut self) {
        self.index.clear();
        self.values.clear();
    }
}

/// The state of one simulation (one shuttle execution at a time).
pub(crate) struct Engine {
    pub(crate) topo: Topo,
    pub(crate) mode: Mode,
    pub(crate) seed: u64,
    jitter: f64,
    lookahead: bool,
    pub(crate) tasks: Vec<Task>,
    /// The running task (the scheduler's last choice).
    pub(crate) current: usize,
    /// The running task's clock when it was last known to be the earliest task (chosen by the
    /// scheduler, or checked): while its clock has not moved, it still is (see `is_earliest`).
    earliest_at: Ps,
    lines: FirstUse<Line>,
    futexes: FirstUse<VecDeque<usize>>,
    /// Which live task each hardware thread is pinned by.
    hw_owner: Vec<Option<usize>>,
    /// Set once the simulation is over (finished, or stopped by a deadlock): every operation is
    /// then the plain `std` one, so that teardown code runs freely.
    pub(crate) stopped: bool,
    /// Why the simulation stopped early, to be reported by the harness.
    pub(crate) failure: Option<String>,
    pub(crate) counters: Counters,
    /// Accesses issued in this window of virtual time are recorded in `traced`.
    pub(crate) trace: Option<(Ps, Ps)>,
    pub(crate) traced: Vec<Access>,
    /// Whether plain stores go through per-thread store buffers (see [`Engine::reserve`]).
    pub(crate) store_buffers: bool,
    /// Whether a buffered store forwards only to loads of its own address (see
    /// [`crate::Simulation::store_forwarding`]).
    pub(crate) forward_by_address: bool,
    /// Whether a line's holders keep it until a request's snoop reaches them (see
    /// [`crate::Simulation::snoop_window`]; virtual time only).
    pub(crate) snoop_window: bool,
    /// Whether a woken spinner looks again at a random phase of its loop's iteration (see
    /// [`crate::Simulation::wake_phase`]).
    pub(crate) wake_phase: bool,
    /// Numbers the reservations, in the order they are made.
    seq: u64,
}

/// splitmix64: the simulator's hash for seeds and jitter.
#[inline]
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `cost` scaled by a factor uniform in `[1 - amount, 1 + amount]`, drawn from (seed, task,
/// operation count): noise that breaks artificial lockstep, the same in every run.
#[inline]
fn jittered(cost: Ps, amount: f64, seed: u64, task: usize, ops: u64) -> Ps {
    if amount == 0.0 || cost == 0 {
        return cost;
    }
    let r = mix(seed ^ mix(task as u64 ^ ops.rotate_left(20)));
    let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
    let factor = 1.0 + amount * (2.0 * unit - 1.0);
    ((cost as f64 * factor) as Ps).max(1)
}

impl Engine {
    pub(crate) fn new(
        machine: &'static Machine,
        mode: Mode,
        seed: u64,
        jitter: f64,
        lookahead: bool,
    ) -> Self {
        let mut engine = Engine {
            topo: Topo::new(machine),
            mode,
            seed,
            jitter,
            lookahead,
            tasks: Vec::new(),
            current: 0,
            earliest_at: NEVER,
            lines: FirstUse::default(),
            futexes: FirstUse::default(),
            hw_owner: vec![None; machine.hw_threads()],
            stopped: false,
            failure: None,
            counters: Counters::default(),
            trace: None,
            traced: Vec::new(),
            store_buffers: true,
            forward_by_address: false,
            snoop_window: false,
            wake_phase: false,
            seq: 0,
        };
        engine.reset();
        engine
    }

    /// A fresh execution: only the harness task (shuttle's main task, id 0) exists, unpinned,
    /// at time 0; every line is in memory.
    pub(crate) fn reset(&mut self) {
        self.tasks.clear();
        self.tasks.push(Task::new(0, None));
        self.current = 0;
        self.earliest_at = NEVER;
        self.lines.clear();
        self.futexes.clear();
        self.hw_owner.iter_mut().for_each(|o| *o = None);
        self.stopped = false;
        self.failure = None;
    }

    pub(crate) fn machine(&self) -> &'static Machine {
        self.topo.machine
    }

    /// Registers a task the harness did not spawn with `spawn_on` (raw shuttle threads): it is
    /// unpinned, at the clock of the task that was running.
    pub(crate) fn register_unknown(&mut self, id: usize) {
        let clock = self.tasks.get(self.current).map_or(0, |t| t.clock);
        while self.tasks.len() <= id {
            self.tasks.push(Task::new(clock, None));
        }
    }

    /// Claims hardware thread `hw` for a thread about to be spawned.
    pub(crate) fn claim_hw(&mut self, hw: usize) {
        let machine = self.machine();
        assert!(
            hw < machine.hw_threads(),
            "numa_sim: cannot pin a thread to hardware thread {hw}: {} has {} hardware threads \
             (0..{})",
            machine.name,
            machine.hw_threads(),
            machine.hw_threads()
        );
        if let Some(owner) = self.hw_owner[hw] {
            panic!(
                "numa_sim: hardware thread {hw} of {} already runs simulated thread {owner}: one \
                 live simulated thread per hardware thread",
                machine.name
            );
        }
        self.hw_owner[hw] = Some(usize::MAX);
    }

    /// Registers a task just spawned on `hw` by the current task.
    pub(crate) fn register_spawned(&mut self, id: usize, hw: usize) {
        let clock = self.tasks[self.current].clock;
        while self.tasks.len() <= id {
            self.tasks.push(Task::new(clock, None));
        }
        self.tasks[id] = Task::new(clock, Some(hw));
        self.hw_owner[hw] = Some(id);
    }

    /// The current task's user code has returned: its hardware thread is free again.
    pub(crate) fn finish_current(&mut self) {
        // A thread's end is a system call: its stores commit first.
        self.drain_store_buffer();
        let task = &mut self.tasks[self.current];
        task.finished = true;
        if let Some(hw) = task.hw
            && self.hw_owner[hw] == Some(self.current)
        {
            self.hw_owner[hw] = None;
        }
    }

    /// Tasks other than the harness whose user code has not returned.
    pub(crate) fn unfinished(&self) -> Vec<usize> {
        (1..self.tasks.len())
            .filter(|&i| !self.tasks[i].finished && self.tasks[i].hw.is_some())
            .collect()
    }

    pub(crate) fn current_task(&mut self) -> &mut Task {
        &mut self.tasks[self.current]
    }

    /// Whether the current task may act now without a scheduling decision: no other runnable
    /// task has a smaller `(clock, id)`. Always `false` with lookahead off.
    ///
    /// While the running task's clock has not moved since it was last known to be the earliest,
    /// it still is: other tasks' clocks change only when they run (not while this one does) or
    /// when this one wakes them (which resets `earliest_at`), and a spawned task starts at its
    /// spawner's clock with a higher id.
    #[inline]
    fn is_earliest(&mut self) -> bool {
        if !self.lookahead {
            return false;
        }
        let me = self.current;
        let mine = self.tasks[me].clock;
        if mine == self.earliest_at && mine != NEVER {
            self.counters.lookahead_skips += 1;
            return true;
        }
        for (id, task) in self.tasks.iter().enumerate() {
            if id != me && task.runnable && (task.clock < mine || (task.clock == mine && id < me)) {
                return false;
            }
        }
        self.counters.lookahead_skips += 1;
        self.earliest_at = mine;
        true
    }

    /// The scheduler's choice among `runnable` (shuttle's list): the smallest `(clock, id)`.
    /// Refreshes the runnable flags. `None` when every runnable task waits for ever: then the
    /// simulation is stopped with a deadlock report.
    pub(crate) fn choose(
        &mut self,
        runnable: impl Iterator<Item = usize> + Clone,
    ) -> Option<usize> {
        self.counters.decisions += 1;
        for task in &mut self.tasks {
            task.runnable = false;
        }
        let mut best: Option<(Ps, usize)> = None;
        for id in runnable {
            if id >= self.tasks.len() {
                self.register_unknown(id);
            }
            let task = &mut self.tasks[id];
            task.runnable = true;
            let key = (task.clock, id);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        let (clock, id) = best?;
        if clock == NEVER {
            self.failure = Some(self.deadlock_report());
            self.stopped = true;
            return None;
        }
        self.current = id;
        self.earliest_at = clock;
        Some(id)
    }

    fn deadlock_report(&self) -> String {
        use std::fmt::Write;
        let m = self.machine();
        let mut s = format!(
            "numa_sim: deadlock/lost wake-up: every simulated thread is parked or spinning on \
             lines nobody writes (machine {}, seed {}, at {} ns of virtual time):",
            m.name,
            self.seed,
            self.virtual_end() / 1000,
        );
        for (id, task) in self.tasks.iter().enumerate() {
            if task.finished {
                continue;
            }
            let who = match task.hw {
                Some(hw) => format!("task {id} (hw thread {hw}, node {})", m.node_of(hw)),
                None if id == 0 => format!("task {id} (harness)"),
                None => format!("task {id} (unpinned)"),
            };
            let what = match task.wait {
                _ if !task.runnable => "blocked (joining a thread)".to_string(),
                Wait::Running => format!("runnable at {} ns", task.clock / 1000),
                Wait::Spinning { .. } => {
                    let lines: Vec<String> = task
                        .watching
                        .iter()
                        .map(|l| format!("{:#x}", l << 6))
                        .collect();
                    format!(
                        "spinning since {} ns on line(s) [{}], no spin deadline ahead",
                        task.sleep_start / 1000,
                        lines.join(", ")
                    )
                }
                Wait::Futex { addr } => format!(
                    "parked since {} ns in futex_wait on {addr:#x}, no deadline",
                    task.sleep_start / 1000
                ),
            };
            let _ = write!(s, "\n  {who}: {what}");
        }
        s
    }

    /// The latest clock any task reached (ignoring sleepers that never woke).
    pub(crate) fn virtual_end(&self) -> Ps {
        self.tasks
            .iter()
            .map(|t| {
                if t.clock == NEVER {
                    t.sleep_start
                } else {
                    t.clock
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// Before step 1 of `n` accesses of `kind` (see the module docs): the waits that come
    /// before the thread can issue them. A locked instruction waits for its store buffer to
    /// drain, a plain store for a free entry. They advance the thread's clock, so they come
    /// before the sync: an access is reserved only while its thread is the earliest, at the
    /// time it issues.
    pub(crate) fn make_ready(&mut self, kind: Kind, n: usize) {
        let entries = self.topo.machine.store_buffer;
        let buffered = kind == Kind::Store && self.store_buffers;
        let task = &mut self.tasks[self.current];
        if task.hw.is_none() {
            return;
        }
        if kind == Kind::Rmw {
            task.drain_store_buffer();
        } else if buffered {
            task.make_room_in_store_buffer((entries + 1).saturating_sub(n));
        }
    }

    /// A software prefetch of the line of `addr` by the current thread, for reading or (with
    /// `write`) for writing: reserved as a load, or as a write that stores nothing (every
    /// other copy invalidated, spinners on the line woken to read it again), at the thread's
    /// clock; the thread goes on after the instruction's issue time, and its own hits on the
    /// line wait for the fill ([`Line::fill`]). A miss only: a line the thread holds as the
    /// prefetch needs is left alone.
    pub(crate) fn prefetch(&mut self, addr: usize, write: bool) {
        let me = self.current;
        let Some(hw) = self.tasks[me].hw else {
            return;
        };
        let line_id = (addr >> 6) as u64;
        let home = self.topo.places[hw].node;
        let line = self.lines.get_or_insert_with(line_id, || Line::new(home));
        let held = if write {
            line.holders.is_only(hw)
        } else {
            line.holders.contains(hw)
        };
        let task = &mut self.tasks[me];
        let (now, issue) = (task.clock, self.topo.machine.costs.issue);
        task.clock = now + issue;
        task.iter_pure = false;
        if held {
            return;
        }
        self.counters.accesses += 1;
        self.seq += 1;
        let task = &mut self.tasks[me];
        task.ops += 1;
        task.last_seq = self.seq;
        let (seed, amount, ops) = (self.seed, self.jitter, task.ops);
        let jitter = |cost| jittered(cost, amount, seed, me, ops);
        let line = self.lines.get_mut(&line_id).expect("inserted above");
        let r = if write {
            line.store(&self.topo, hw, now, false, jitter)
        } else {
            line.load(&self.topo, hw, now, jitter)
        };
        line.fill = (hw as u16, r.completion);
        self.record(Access {
            issued_ps: now,
            completed_ps: r.completion,
            task: me,
            hw,
            kind: if write { Kind::Store } else { Kind::Load },
            address: addr,
            hit: false,
        });
        if write {
            self.wake_spinners(line_id, r.completion);
        }
    }

    /// Step 2 of an access (see the module docs): cost it, update the line, advance the
    /// current task's clock, wake the spinners a write concerns.
    ///
    /// `store`: for a plain store that the caller then performs on an atomic, the word and what
    /// it writes (`None` for loads, RMWs and `touch`, which writes nothing real).
    pub(crate) fn reserve(&mut self, addr: usize, kind: Kind, store: Option<(Word, Write)>) {
        self.reserve_access(addr, kind, store, true);
    }

    /// [`Engine::reserve`]; `word`: whether `addr` is the word accessed (an atomic's), which a
    /// load can have forwarded from a buffered store of the same address, or only stands for
    /// its line (a `touch`, whose loads read other data on it).
    fn reserve_access(
        &mut self,
        addr: usize,
        kind: Kind,
        store: Option<(Word, Write)>,
        word: bool,
    ) {
        self.counters.accesses += 1;
        let me = self.current;
        let line_id = (addr >> 6) as u64;
        let Some(hw) = self.tasks[me].hw else {
            // The harness: free, takes no time; a write leaves the line in memory.
            if kind != Kind::Load {
                let now = self.tasks[me].clock;
                let line = self.lines.get_or_insert_with(line_id, || Line::new(0));
                line.harness_store();
                self.wake_spinners(line_id, now);
            }
            return;
        };
        self.seq += 1;
        let seq = self.seq;
        let buffered = kind == Kind::Store && self.store_buffers;
        // A locked instruction drains the store buffer first (x86: it cannot execute before every
        // earlier store has committed), a store waits for an entry. In virtual time the caller
        // has done so before the sync (then this waits for nothing); the randomized mode has not.
        self.make_ready(kind, 1);
        let task = &mut self.tasks[me];
        task.ops += 1;
        task.last_seq = seq;
        let (now, ops) = (task.clock, task.ops);
        let last_commit = task.last_commit;
        let (seed, amount) = (self.seed, self.jitter);
        let jitter = |cost| jittered(cost, amount, seed, me, ops);
        let home = self.topo.places[hw].node;
        let (l1_hit, issue) = (
            self.topo.machine.costs.l1_hit,
            self.topo.machine.costs.issue,
        );
        let line = self.lines.get_or_insert_with(line_id, || Line::new(home));
        // A buffered store that must fetch its line (not a holder now, after every earlier
        // reservation): the thread's loads of other addresses on the line wait for it.
        let fetches = buffered && self.forward_by_address && !line.holders.contains(hw);
        // With the snoop window: still this thread's until another's snoop arrives
        // (`Line::open_windows`), a buffered store only if it commits by then; and what a miss
        // reserved now finds, for the windows it opens.
        let snooping = self.snoop_window && self.mode == Mode::VirtualTime;
        let windowed = snooping
            && line
                .window(hw, now, kind != Kind::Load)
                .is_some_and(|until| !buffered || last_commit.max(now + l1_hit) < until);
        let before = snooping.then(|| {
            let start = if kind == Kind::Load {
                line.busy_until
            } else {
                line.busy_until.max(line.reads_until)
            };
            (line.holders, line.modified, start)
        });
        let mut r = match kind {
            _ if windowed => {
                let cost = if kind == Kind::Rmw {
                    self.topo.machine.costs.rmw_hit
                } else {
                    l1_hit
                };
                Reservation {
                    completion: line.after_fill(hw, now + cost),
                    hit: true,
                }
            }
            Kind::Load => line.load(&self.topo, hw, now, jitter),
            Kind::Store => line.store(&self.topo, hw, now, false, jitter),
            Kind::Rmw => line.store(&self.topo, hw, now, true, jitter),
            Kind::Sleep | Kind::Wake => unreachable!("{kind:?} is not a memory access"),
        };
        // Intel: a load that misses L1 on a line with a miss outstanding waits for that fill
        // (MEM_LOAD_UOPS_RETIRED.HIT_LFB); only a load of the bytes of an older buffered store
        // is forwarded from it (README, "Store buffers").
        if kind == Kind::Load
            && r.hit
            && let Some(arrival) = self.tasks[me].fill_wait(line_id, word.then_some(addr), now)
            && arrival > r.completion
        {
            // (The line stays this thread's until the store commits, after `arrival`: no other
            // access can be reserved before then.)
            r.completion = arrival;
        }
        if let Some((holders, modified, start)) = before
            && !r.hit
        {
            let request = Request {
                hw,
                write: kind != Kind::Load,
                buffered,
                issue: now,
                start: start.max(now),
                completion: r.completion,
            };
            line.open_windows(request, holders, modified);
        }
        self.tasks[me].in_window = windowed;
        // When the access takes effect for every other thread, and when this thread goes on.
        let (visible, resume) = if buffered {
            // The store's line transfer starts now (the request for ownership goes out when
            // the store enters the buffer), but stores commit in program order: the line is
            // held, and the value hidden, until every earlier store has committed.
            let commit = r.completion.max(last_commit);
            line.busy_until = line.busy_until.max(commit);
            if let Some((word, write)) = store {
                // Reservations come in the order of their issue times, and an access is
                // performed no earlier than it was issued: a store committed by now can never be
                // in the future of an access again.
                line.buffered.retain(|b| b.commit > now);
                line.buffered.push(BufferedStore {
                    word,
                    write,
                    before: None,
                    task: me,
                    seq,
                    commit,
                });
            }
            let task = &mut self.tasks[me];
            task.store_buffer.push_back(commit);
            task.last_commit = commit;
            if fetches {
                task.fills.retain(|&(_, _, arrival)| arrival > now);
                task.fills.push((line_id, addr, r.completion));
            }
            (commit, now + l1_hit)
        } else {
            (r.completion, r.completion)
        };
        self.record(Access {
            issued_ps: now,
            completed_ps: visible,
            task: me,
            hw,
            kind,
            address: addr,
            hit: r.hit,
        });
        let task = &mut self.tasks[me];
        // The instructions around the access issue after it (charging them before would issue
        // the access after the clock it was synced at).
        task.clock = resume + issue;
        if kind == Kind::Load && r.hit {
            if !task.iter_lines.contains(&line_id) {
                task.iter_lines.push(line_id);
            }
        } else {
            task.iter_pure = false;
        }
        if kind != Kind::Load {
            task.deadline_current = false;
        }
        if kind != Kind::Load {
            self.wake_spinners(line_id, visible);
        }
    }

    /// Makes the word hold what the current thread's access to it, reserved and about to be
    /// performed, must see. Other threads' buffered stores to the word that were reserved after
    /// this access are performed on the real memory when issued (simulated code runs on real
    /// atomics), but in the model they commit after this access completes: they are in its
    /// future. If there are any, the word is set back to its value before the first of them;
    /// the caller performs its access and then calls [`replay`](Self::replay), which applies
    /// those stores again on top of the access's result. The access thus reads the old value
    /// and is ordered before the stores, as on the machine, at the time the model gives it.
    /// (Stores to other words of the line, and `touch`, which writes nothing real, change no
    /// value this access reads.) Returns the sequence numbers of the stores to replay.
    pub(crate) fn rewind(&mut self, word: Word) -> Option<Vec<u64>> {
        let me = self.current;
        let task = &self.tasks[me];
        // The harness's accesses take no time: nothing is in flight.
        task.hw?;
        let (mine, clock, windowed) = (task.last_seq, task.clock, task.in_window);
        let line = self.lines.get(&((word.addr >> 6) as u64))?;
        // Only stores already performed on the memory: one reserved but not yet performed
        // (its thread runs after us) will be performed on top of what we leave, in order.
        let mut later = line
            .buffered
            .iter()
            .filter(|b| {
                b.word == word
                    && b.task != me
                    // In its snoop window an access comes before the store that took the line
                    // too (reserved earlier, committing after it).
                    && (b.seq > mine || windowed)
                    && b.commit > clock
                    && b.before.is_some()
            })
            .peekable();
        let before = later.peek()?.before?;
        let seqs: Vec<u64> = later.map(|b| b.seq).collect();
        // SAFETY: the simulated code is about to access this atomic through a reference it
        // holds; simulated threads run one at a time on this OS thread.
        unsafe { write_word(word, before) };
        Some(seqs)
    }

    /// After an access made on a rewound word (see [`rewind`](Self::rewind)): applies the
    /// later stores `seqs` again, in order, on top of what the access left, each recording the
    /// value it now follows.
    pub(crate) fn replay(&mut self, word: Word, seqs: &[u64]) {
        // SAFETY: as in `rewind`: the caller has just accessed this atomic through a reference.
        let mut value = unsafe { read_word(word) };
        if let Some(line) = self.lines.get_mut(&((word.addr >> 6) as u64)) {
            for b in line.buffered.iter_mut().filter(|b| seqs.contains(&b.seq)) {
                b.before = Some(value);
                value = b.write.apply(value);
            }
        }
        // SAFETY: as above.
        unsafe { write_word(word, value) };
    }

    /// Records the word's value just before the current thread's buffered store to it is
    /// performed (what an access in flight before that store must see).
    pub(crate) fn capture_before(&mut self, word: Word) {
        let seq = self.tasks[self.current].last_seq;
        if let Some(line) = self.lines.get_mut(&((word.addr >> 6) as u64))
            && let Some(b) = line.buffered.iter_mut().find(|b| b.seq == seq)
        {
            // SAFETY: as in `rewind`.
            b.before = Some(unsafe { read_word(word) });
        }
    }

    /// Drains the current thread's store buffer (an `SeqCst` fence, a system call, the
    /// thread's end): it goes on once its last store has committed.
    pub(crate) fn drain_store_buffer(&mut self) {
        let me = self.current;
        if self.tasks[me].hw.is_some() {
            self.tasks[me].drain_store_buffer();
        }
    }

    /// Writes of `touch`: one per line, all issued at the caller's clock (independent misses
    /// overlap); the caller's clock becomes the latest completion.
    pub(crate) fn reserve_batch(&mut self, addrs: &[*const u8], kind: Kind) {
        let me = self.current;
        let start = self.tasks[me].clock;
        let mut end = start;
        for &addr in addrs {
            self.tasks[me].clock = start;
            self.reserve_access(addr as usize, kind, None, false);
            end = end.max(self.tasks[me].clock);
        }
        let task = &mut self.tasks[me];
        task.clock = end;
        task.iter_pure = false;
    }

    /// Wakes every spinner sleeping on `line_id` at `when` (or its sleep start, if later).
    fn wake_spinners(&mut self, line_id: u64, when: Ps) {
        let Some(line) = self.lines.get_mut(&line_id) else {
            return;
        };
        if line.sleepers.is_empty() {
            return;
        }
        let sleepers = std::mem::take(&mut line.sleepers);
        // With the wake phase, a spinner notices the write at its next look: a seeded phase of
        // one iteration (a `pause` and a hit) later, drawn anew for each write.
        let iteration = self.wake_phase.then(|| {
            let costs = &self.topo.machine.costs;
            (costs.pause + costs.l1_hit).max(1)
        });
        for &(id, seq) in &sleepers {
            let phase = iteration.map_or(0, |i| mix(self.seed ^ (u64::from(id) << 40) ^ when) % i);
            let task = &mut self.tasks[id as usize];
            if task.wait == (Wait::Spinning { seq }) {
                task.wait = Wait::Running;
                task.clock = task.clock.min(when.max(task.sleep_start) + phase);
                // Someone may now be due before the running task: check at the next sync.
                self.earliest_at = NEVER;
            }
        }
        // Give the allocation back to the line.
        let line = self.lines.get_mut(&line_id).expect("still there");
        if line.sleepers.is_empty() {
            let mut sleepers = sleepers;
            sleepers.clear();
            line.sleepers = sleepers;
        }
    }

    /// `pause()` in virtual-time mode. Returns `true` if the task went to sleep (the caller
    /// must then switch).
    pub(crate) fn pause(&mut self) -> Pause {
        let pause_cost = self.topo.machine.costs.pause;
        let me = self.current;
        let task = &mut self.tasks[me];
        let Some(hw) = task.hw else {
            task.reset_iteration();
            return Pause::Go;
        };
        task.clock += pause_cost;
        if !task.iter_pure {
            task.unchanged_iterations = 0;
            task.reset_iteration();
            return Pause::Go;
        }
        if task.iter_lines.is_empty() {
            // The second and later `pause`s of one backoff batch.
            return Pause::Go;
        }
        // A pure iteration: the next one would read the same values and do the same thing,
        // until a line it reads is written, or until the loop's own exit condition holds. The
        // simulator knows that condition only if the loop declared its time bound: then the
        // task sleeps until the first of the two.
        let wake_at = match task.spin_deadline {
            Some(deadline) if task.deadline_current && deadline > task.clock => deadline,
            // No declaration, a deadline that has passed, or one that belongs to a loop the
            // task has left (it wrote to memory since): run the iterations as written.
            _ => {
                task.reset_iteration();
                task.unchanged_iterations += 1;
                if task.unchanged_iterations >= RUNAWAY_ITERATIONS {
                    self.stopped = true;
                    let hw = task.hw.unwrap_or(usize::MAX);
                    return Pause::Runaway(format!(
                        "numa_sim: simulated thread {me} (hw thread {hw}) has re-read lines \
                         nobody writes {RUNAWAY_ITERATIONS} times in a row in a wait loop that \
                         declares no spin_deadline: a livelock, or a wait for something nobody \
                         will do. Declare the loop with numa_sim::spin_deadline(u64::MAX) (or its \
                         real deadline): it then sleeps until a line it reads is written, and a \
                         wait nobody ends is reported as a deadlock (machine {}, seed {})",
                        self.topo.machine.name, self.seed
                    ));
                }
                return Pause::Go;
            }
        };
        // A write reserved on a line this iteration read, after that read (the read hit before
        // the write's reservation invalidated the copy, and completed before the write will):
        // the write has already woken the line's sleepers, so a sleep now would miss it. The
        // next iteration's read misses and returns the new value instead.
        if task.iter_lines.iter().any(|line_id| {
            self.lines
                .get(line_id)
                .is_some_and(|line| !line.holders.contains(hw))
        }) {
            let task = &mut self.tasks[me];
            task.reset_iteration();
            return Pause::Go;
        }
        let task = &mut self.tasks[me];
        task.sleep_seq = task.sleep_seq.wrapping_add(1);
        let seq = task.sleep_seq;
        task.wait = Wait::Spinning { seq };
        task.sleep_start = task.clock;
        task.clock = wake_at;
        let lines = std::mem::take(&mut task.iter_lines);
        for &line_id in &lines {
            let line = self
                .lines
                .get_mut(&line_id)
                .expect("a line that was hit exists");
            if line.sleepers.len() >= 8 {
                // Drop stale entries (sleeps that already ended) before they pile up.
                let tasks = &self.tasks;
                line.sleepers
                    .retain(|&(id, seq)| tasks[id as usize].wait == Wait::Spinning { seq });
            }
            line.sleepers.push((me as u32, seq));
        }
        let task = &mut self.tasks[me];
        task.watching.clone_from(&lines);
        task.iter_lines = lines;
        task.reset_iteration();
        task.unchanged_iterations = 0;
        Pause::Sleep
    }

    /// After a spin sleep: running again (woken by a write, or at the deadline).
    pub(crate) fn end_spin_sleep(&mut self) {
        let task = self.current_task();
        task.wait = Wait::Running;
        task.reset_iteration();
    }

    pub(crate) fn spin_deadline(&mut self, deadline_ns: u64) {
        let task = self.current_task();
        task.spin_deadline = Some(deadline_ns.saturating_mul(1000));
        task.deadline_current = true;
    }

    /// Charges the current task `cost` of local (non-memory) time; ends its spin iteration.
    pub(crate) fn charge(&mut self, cost: Ps) {
        let task = self.current_task();
        if task.hw.is_some() {
            task.clock = task.clock.saturating_add(cost);
        }
        task.iter_pure = false;
    }

    /// Reads the current task's clock, charging `clock_read`; keeps the spin iteration pure.
    pub(crate) fn now_ns(&mut self) -> u64 {
        let cost = self.topo.machine.costs.clock_read;
        let task = self.current_task();
        if task.hw.is_some() {
            task.clock += cost;
        }
        task.clock / 1000
    }

    /// Adds `entry` to the trace if tracing is on and it was issued in the window.
    fn record(&mut self, entry: Access) {
        if let Some((from, to)) = self.trace
            && (from..to).contains(&entry.issued_ps)
        {
            self.traced.push(entry);
        }
    }

    /// Parks the current task on `addr` until a wake or `deadline_ns`.
    pub(crate) fn park(&mut self, addr: usize, deadline_ns: Option<u64>) {
        let me = self.current;
        let task = &mut self.tasks[me];
        task.wait = Wait::Futex { addr };
        task.woken = false;
        task.sleep_start = task.clock;
        task.clock = match deadline_ns {
            Some(d) => d.saturating_mul(1000).max(task.clock),
            None => NEVER,
        };
        task.reset_iteration();
        self.futexes
            .get_or_insert_with(addr as u64, VecDeque::new)
            .push_back(me);
    }

    /// After a park: returns whether the task was woken; a timed-out task leaves the queue.
    pub(crate) fn unpark_self(&mut self, addr: usize) -> bool {
        let me = self.current;
        let task = &mut self.tasks[me];
        task.wait = Wait::Running;
        let woken = task.woken;
        if let (Some(hw), Some((from, to))) = (task.hw, self.trace)
            && task.sleep_start < to
            && task.clock >= from
        {
            let (issued_ps, completed_ps) = (task.sleep_start, task.clock);
            self.traced.push(Access {
                issued_ps,
                completed_ps,
                task: me,
                hw,
                kind: Kind::Sleep,
                address: addr,
                hit: woken,
            });
        }
        if !woken && let Some(queue) = self.futexes.get_mut(&(addr as u64)) {
            queue.retain(|&t| t != me);
        }
        woken
    }

    /// Whether the current task has been woken (randomized mode's park loop).
    pub(crate) fn woken(&self) -> bool {
        self.tasks[self.current].woken
    }

    /// Wakes up to `count` tasks parked on `addr`; returns their thread handles (for
    /// randomized mode, which must unpark them in shuttle too).
    pub(crate) fn futex_wake(&mut self, addr: usize, count: u32) -> Vec<shuttle::thread::Thread> {
        let costs = self.topo.machine.costs;
        let me = self.current;
        let waker = &mut self.tasks[me];
        let now = waker.clock;
        let wake_at = now.saturating_add(costs.wake_latency);
        let pinned = waker.hw.is_some();
        let mut handles = Vec::new();
        let mut woke = 0;
        if let Some(queue) = self.futexes.get_mut(&(addr as u64)) {
            while woke < count {
                let Some(id) = queue.pop_front() else { break };
                let task = &mut self.tasks[id];
                task.woken = true;
                let at = if pinned { wake_at } else { now };
                task.clock = task.clock.min(at.max(task.sleep_start));
                self.earliest_at = NEVER;
                handles.extend(task.thread.clone());
                woke += 1;
            }
        }
        let waker = &mut self.tasks[me];
        waker.iter_pure = false;
        if let Some(hw) = waker.hw {
            // With nobody asleep on the word Linux returns after the bucket lookup.
            waker.clock += if woke > 0 {
                costs.futex_wake
            } else {
                costs.syscall
            };
            let completed_ps = waker.clock;
            self.record(Access {
                issued_ps: now,
                completed_ps,
                task: me,
                hw,
                kind: Kind::Wake,
                address: addr,
                hit: woke > 0,
            });
        }
        handles
    }

    pub(crate) fn set_thread(&mut self, thread: shuttle::thread::Thread) {
        self.current_task().thread = Some(thread);
    }

    /// A value from (simulation seed, current task): never 0.
    pub(crate) fn thread_seed(&self) -> u64 {
        mix(self.seed ^ mix(self.current as u64 + 1)).max(1)
    }

    /// Joining task `target`: the joiner's clock catches up with the target's end.
    pub(crate) fn joined(&mut self, target: usize) {
        let end = self.tasks[target].clock;
        let task = self.current_task();
        if end != NEVER {
            task.clock = task.clock.max(end);
        }
    }
}

// The simulation running on this OS thread, if any.
thread_local! {
    static CONTEXT: Cell<*const RefCell<Engine>> = const { Cell::new(std::ptr::null()) };
}

/// Installs a simulation on this OS thread for as long as it lives.
pub(crate) struct ContextGuard {
    engine: Rc<RefCell<Engine>>,
}

impl ContextGuard {
    pub(crate) fn install(engine: Rc<RefCell<Engine>>) -> Self {
        CONTEXT.with(|c| {
            assert!(
                c.get().is_null(),
                "numa_sim: a simulation is already running on this OS thread (simulations do not \
                 nest)"
            );
            c.set(Rc::as_ptr(&engine));
        });
        ContextGuard { engine }
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.set(std::ptr::null()));
        let _ = &self.engine;
    }
}

/// The simulation on this OS thread, if one is running.
#[inline(always)]
pub(crate) fn context() -> Option<&'static RefCell<Engine>> {
    let ptr = CONTEXT.with(Cell::get);
    // SAFETY: a non-null pointer was set by `ContextGuard::install` from an `Rc` that the guard
    // keeps alive, and is reset to null when the guard drops; everything that reads it runs on
    // this OS thread, within the guard's lifetime (the simulation's tasks run inside
    // `Runner::run`, which returns before the guard drops). The `'static` lifetime is never
    // allowed to escape a single operation.
    unsafe { ptr.as_ref() }
}

/// The running simulation, unless there is none or it has stopped.
#[inline(always)]
pub(crate) fn active() -> Option<&'static RefCell<Engine>> {
    context().filter(|cell| !cell.borrow().stopped)
}

/// Step 1 and 3 of an access: switch unless the current task is the earliest.
#[inline]
pub(crate) fn sync(cell: &RefCell<Engine>) {
    let must_switch = {
        let mut e = cell.borrow_mut();
        !e.stopped && !e.is_earliest()
    };
    if must_switch {
        switch();
    }
}

/// A simulated access to `word` (steps 1 to 3); the caller then performs the operation and,
/// if this returns the stores to replay, calls [`Engine::replay`].
#[inline(never)]
pub(crate) fn simulated_access(
    cell: &RefCell<Engine>,
    word: Word,
    kind: Kind,
    store: Option<Write>,
) -> Option<Vec<u64>> {
    let mode = {
        let e = cell.borrow();
        if e.stopped {
            return None;
        }
        e.mode
    };
    let store = store.map(|write| (word, write));
    match mode {
        Mode::VirtualTime => {
            cell.borrow_mut().make_ready(kind, 1);
            sync(cell);
            cell.borrow_mut().reserve(word.addr, kind, store);
            sync(cell);
            let mut e = cell.borrow_mut();
            let rewound = e.rewind(word);
            if store.is_some() && e.store_buffers {
                e.capture_before(word);
            }
            rewound
        }
        Mode::Randomized => {
            cell.borrow_mut().reserve(word.addr, kind, store);
            switch();
            None
        }
    }
}

/// Runs `op` as a simulated access of kind `kind` to `word` (with `store`, what a plain store
/// writes) if a simulation runs on this OS thread, or as is.
#[inline(always)]
pub(crate) fn access<R>(word: Word, kind: Kind, store: Option<Write>, op: impl FnOnce() -> R) -> R {
    let Some(cell) = context() else {
        return op();
    };
    let rewound = simulated_access(cell, word, kind, store);
    let result = op();
    if let Some(seqs) = rewound {
        cell.borrow_mut().replay(word, &seqs);
    }
    result
}

/// Reads an atomic word of the simulated code.
///
/// # Safety
/// `word` must be a live atomic of its width that the caller may access (the simulated code
/// holds a reference to it), with no other thread accessing it concurrently.
unsafe fn read_word(word: Word) -> u64 {
    use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
    // SAFETY: the caller's contract; the atomics of a width share its size and alignment.
    unsafe {
        if word.ptr {
            let p = (*(word.addr as *const AtomicPtr<u8>)).load(Relaxed);
            return p.expose_provenance() as u64;
        }
        match word.width {
            1 => u64::from((*(word.addr as *const AtomicU8)).load(Relaxed)),
            4 => u64::from((*(word.addr as *const AtomicU32)).load(Relaxed)),
            8 => (*(word.addr as *const AtomicU64)).load(Relaxed),
            w => unreachable!("no atomic of {w} bytes"),
        }
    }
}

/// Writes an atomic word of the simulated code.
///
/// # Safety
/// As for [`read_word`]; `value` must be a valid value of the atomic's type (one it held, or
/// one a store wrote to it).
unsafe fn write_word(word: Word, value: u64) {
    use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
    // SAFETY: the caller's contract; a pointer value was exposed when it was read or stored.
    unsafe {
        if word.ptr {
            let p = std::ptr::with_exposed_provenance_mut::<u8>(value as usize);
            (*(word.addr as *const AtomicPtr<u8>)).store(p, Relaxed);
            return;
        }
        match word.width {
            1 => (*(word.addr as *const AtomicU8)).store(value as u8, Relaxed),
            4 => (*(word.addr as *const AtomicU32)).store(value as u32, Relaxed),
            8 => (*(word.addr as *const AtomicU64)).store(value, Relaxed),
            w => unreachable!("no atomic of {w} bytes"),
        }
    }
}
