//! Waiting on a 32-bit status word: bounded spinning, then parking (futex on Linux).
//!
//! Every wait in the crate has the same shape: spin on a word for a short, tunable time
//! ([`SpinBudget`]), then announce the sleep in the word itself and sleep with
//! [`park`]`(word, announced_value)`. The waker changes the word with release ordering and calls
//! [`unpark`] only if it saw the announcement. Because `park` sleeps only while the word still
//! holds the announced value (checked atomically with the sleep), a wake-up cannot be lost: either
//! the waker's change lands first and `park` returns at once, or the waiter is asleep when the
//! waker calls `unpark`.
//!
//! Spurious returns from `park` are allowed, so every caller re-checks its condition in a loop.
//!
//! The sleeping itself is `sync::futex_wait` / `sync::futex_wake` (the Linux futex, or an
//! emulation with the same contract).

use crate::sync::{self, AtomicU32, EXHAUSTIVE, Ordering, now_ns, spin_hint, yield_now};
use crate::tunables;

/// Bounded spinning before a wait parks: a deadline in nanoseconds from the spin-time tunable,
/// optionally with exponential backoff between two looks at the awaited word.
///
/// Backoff is for the queue head, which spins on the lock word ([`SpinBudget::head`]):
/// a head that reads the word in a tight loop pulls its cache line away from the holder at every
/// write, and with two threads on two cores that ping-pong halves the lock's throughput. Each
/// call then spins `2^step` times (`step` capped at [`MAX_STEP`]), so the look rate drops while
/// the first looks stay prompt. A head that is owed the lock (`NO_STEAL`) gains nothing from
/// backing off, since nobody else can take the lock, and loses handoff latency: it calls
/// [`SpinBudget::spin_eager`] instead.
/// A waiter that spins on its own node's status ([`SpinBudget::waiting`]) bothers nobody and spins
/// without backoff, to see its turn at once. The clock is read once when the budget is made and
/// then every [`CHECK_EVERY`] spins.
pub(crate) struct SpinBudget {
    deadline: u64,
    step: u32,
    /// The largest step this budget reaches: 0 without backoff.
    max_step: u32,
    spins: u32,
}

/// How long a queued waiter may wait behind each running thread: one round of the queue, a
/// handoff plus the releasing threads' re-takes before the next head looks, with room to spare.
///
/// A waiter whose core is not crowded spins for the spin time plus this per CPU before it parks
/// ([`uncrowded_wait_ns`]): with no more running threads than CPUs, that many rounds is the
/// longest a first-come queue can make it wait. A queue lock whose waiters park hands every
/// contended acquisition to a thread that needs a futex wake, and a queue of them parks all the
/// more, since every waiter then waits longer and the free lock goes to arrivals meanwhile: a
/// budget shorter than the queue's real wait tips a lock into that regime for good
/// (docs/DESIGN.md, "Decision record: uncrowded waiters spin longer", and "a waiter's budget
/// covers a round"). Where threads outnumber cores the budget stays the spin time: a spinning
/// waiter would only take a core from the thread it waits for.
pub(crate) const WAIT_PER_CPU_NS: u64 = 4_000;

/// How long a waiter whose core is not crowded spins before it parks: the spin time plus
/// [`WAIT_PER_CPU_NS`] per CPU of the machine.
pub(crate) fn uncrowded_wait_ns() -> u64 {
    tunables::spin_ns().saturating_add((cpus() as u64).saturating_mul(WAIT_PER_CPU_NS))
}

/// The machine's CPUs (the simulated machine's under numa_sim), at least 1.
fn cpus() -> usize {
    crate::sync::modelled_cpus()
        .unwrap_or_else(|| crate::topology::detected().cpu_count())
        .max(1)
}

/// How long a thread's reading of the machine's runnable tasks stands
/// ([`machine_oversubscribed`]).
const LOAD_SAMPLE_NS: u64 = 16_000_000;

crate::sync::thread_local! {
    /// This thread's last reading of [`machine_oversubscribed`]: the answer and when (0: never).
    static LOAD: core::cell::Cell<(bool, u64)> = const { core::cell::Cell::new((false, 0)) };
}

/// Whether the machine has more runnable tasks than CPUs, by the kernel's own count
/// (`/proc/loadavg`'s fourth field, `runnable/total`, in which the reading thread counts too),
/// read again at most every [`LOAD_SAMPLE_NS`] by each thread. Unlike the timed yield's verdict
/// ([`crowded`]), it tells a core shared by two threads of a producer/consumer pair, with the
/// other core idle, from cores that other processes keep busy. `false` where it cannot be read
/// (no `/proc`), under loom and Miri, and in numa_sim.
pub(crate) fn machine_oversubscribed() -> bool {
    if EXHAUSTIVE || cfg!(any(numa_sim, miri)) {
        return false;
    }
    LOAD.try_with(|cell| {
        let (answer, at) = cell.get();
        let now = now_ns();
        if at != 0 && now.saturating_sub(at) < LOAD_SAMPLE_NS {
            return answer;
        }
        let answer = runnable_tasks().is_some_and(|n| n > cpus());
        cell.set((answer, now.max(1)));
        answer
    })
    .unwrap_or(false)
}

/// The kernel's count of runnable tasks, if `/proc/loadavg` can be read. No heap allocation:
/// a waiter about to sleep may be inside an allocator's own lock.
fn runnable_tasks() -> Option<usize> {
    use std::io::Read as _;
    let mut line = [0u8; 128];
    let len = std::fs::File::open("/proc/loadavg")
        .ok()?
        .read(&mut line)
        .ok()?;
    runnable_in_loadavg(core::str::from_utf8(&line[..len]).ok()?)
}

/// The runnable tasks of a `/proc/loadavg` line (`0.52 0.58 0.59 3/467 12345`: 3).
fn runnable_in_loadavg(line: &str) -> Option<usize> {
    line.split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Whether a queue head may mark its successor `NEXT` (see `LockWord::acquire_as_head`): the
/// holder, the head and the marked successor then all run at once, which needs 3 CPUs, and a
/// core that is not crowded ([`crowded`]). On 2 CPUs a marked successor spins on the core the
/// holder needs whenever anything else runs (docs/DESIGN.md, "Decision record: marking needs 3
/// CPUs").
/// Never crowded under loom, which explores the marking paths.
pub(crate) fn may_mark() -> bool {
    (EXHAUSTIVE || cpus() >= 3) && !crowded()
}

/// [`may_mark`] without a clock read: the last crowding verdict, however old (`false` if this
/// thread has none yet). For a new queue head's mark before its first look at the lock
/// (`raw::premark`), which the head checks against [`may_mark`] if it has to wait.
#[inline]
pub(crate) fn may_mark_hint() -> bool {
    if !(EXHAUSTIVE || cpus() >= 3) {
        return false;
    }
    EXHAUSTIVE
        || CROWDED
            .try_with(|c| {
                let v = c.get();
                v.at != 0 && !v.crowded
            })
            .unwrap_or(false)
}

/// The largest backoff step: batches of `2^MAX_STEP` spins (64 `pause`s, whose time depends on
/// the CPU); parking_lot's larger cap slowed the head's handoffs (docs/DESIGN.md, "Decision
/// record: head backoff").
const MAX_STEP: u32 = 6;
/// Spins between two clock reads.
const CHECK_EVERY: u32 = 64;
/// Spins between two clock reads in [`SpinBudget::spin_for`].
const GAP_BATCH: u32 = 16;

/// How long a queue head with nobody behind it waits between two looks at the busy lock it
/// leaves open (`LockWord::acquire_as_head`, the lone head's window): each look takes the lock
/// word's line from the thread re-taking it, a transfer across nodes its next write waits for.
/// Spaced this far, the looks cost that thread one transfer per gap of its sections
/// (docs/DESIGN.md, "Decision record: a lone head's looks").
pub(crate) const LONE_LOOK_GAP_NS: u64 = 4_000;

impl SpinBudget {
    /// A queued waiter's budget (it spins on its own node, bothering nobody): the configured
    /// spin time while this thread's core is crowded ([`crowded`]), [`uncrowded_wait_ns`]
    /// otherwise, ending no later than `until`, if given.
    #[inline]
    pub(crate) fn waiting(until: Option<u64>) -> Self {
        Self::with_max_step(0, Self::wait_ns(), until)
    }

    /// How long a waiter spins: the spin time where the core is crowded, else
    /// [`uncrowded_wait_ns`]. A spin time of 0 stays 0 (parking at once).
    #[inline]
    fn wait_ns() -> u64 {
        let spin = tunables::spin_ns();
        if spin == 0 || crowded() {
            spin
        } else {
            uncrowded_wait_ns()
        }
    }

    /// The queue head's budget: the configured spin time, with exponential backoff, ending no
    /// later than `until`, if given; [`uncrowded_wait_ns`] while this thread's core is not
    /// crowded, as for the waiters behind it.
    #[inline]
    pub(crate) fn head(until: Option<u64>) -> Self {
        Self::with_max_step(MAX_STEP, Self::wait_ns(), until)
    }

    /// A budget of the configured spin time, without backoff, ending no later than `until`
    /// (a timed waiter's deadline), if given: the rwlock's waits (`src/raw/rwlock.rs`), which
    /// keep the plain spin time whatever the core's crowding.
    #[inline]
    pub(crate) fn new(until: Option<u64>) -> Self {
        Self::with_max_step(0, tunables::spin_ns(), until)
    }

    /// [`SpinBudget::new`] with exponential backoff between looks (the rwlock's writer that
    /// waits on a shared word).
    #[inline]
    pub(crate) fn with_backoff(until: Option<u64>) -> Self {
        Self::with_max_step(MAX_STEP, tunables::spin_ns(), until)
    }

    /// Whether this budget backs off between looks.
    #[cfg(test)]
    pub(crate) fn backs_off(&self) -> bool {
        self.max_step > 0
    }

    /// Declares the budget's end again to the simulator, for a spin loop that wrote to memory
    /// since the budget was made (numa_sim compresses a declared loop only until its thread's
    /// next write). Nothing outside numa_sim.
    #[inline]
    pub(crate) fn redeclare(&self) {
        sync::spin_deadline(self.deadline);
    }

    /// A budget that is used up: the first `spin` says "park now".
    #[inline]
    pub(crate) fn exhausted() -> Self {
        SpinBudget {
            deadline: 0,
            step: 0,
            max_step: 0,
            spins: 0,
        }
    }

    #[inline]
    fn with_max_step(max_step: u32, spin: u64, until: Option<u64>) -> Self {
        let deadline = if spin == 0 {
            0
        } else {
            let now = now_ns();
            let end = now.saturating_add(spin);
            match until {
                // An expired cap leaves no budget at all (0 means "park now").
                Some(until) if until <= now => 0,
                Some(until) => end.min(until),
                None => end,
            }
        };
        sync::spin_deadline(deadline);
        SpinBudget {
            deadline,
            step: 0,
            max_step,
            spins: 0,
        }
    }

    /// Spins one backoff batch and returns `true` while the budget lasts; `false` means
    /// "park now".
    ///
    /// Under loom spinning is skipped entirely: the model explores the parking path, and a spin
    /// would only multiply the interleavings.
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        self.spin_batch(true)
    }

    /// Spins for `ns` without looking at memory, or until the budget ends; like
    /// [`spin`](Self::spin) otherwise (`false`: park now).
    #[inline]
    pub(crate) fn spin_for(&mut self, ns: u64) -> bool {
        if EXHAUSTIVE || self.deadline == 0 {
            return false;
        }
        let end = now_ns().saturating_add(ns);
        loop {
            for _ in 0..GAP_BATCH {
                spin_hint();
            }
            let now = now_ns();
            if now >= self.deadline {
                self.deadline = 0;
                return false;
            }
            if now >= end {
                return true;
            }
        }
    }

    /// Like [`spin`](Self::spin), but one spin per call whatever the backoff step.
    #[inline]
    pub(crate) fn spin_eager(&mut self) -> bool {
        self.spin_batch(false)
    }

    #[inline]
    fn spin_batch(&mut self, backoff: bool) -> bool {
        if EXHAUSTIVE || self.deadline == 0 {
            return false;
        }
        if !backoff {
            self.step = 0;
        }
        let batch = 1u32 << self.step;
        self.spins = self.spins.wrapping_add(batch);
        if self.spins >= CHECK_EVERY {
            self.spins = 0;
            if now_ns() >= self.deadline {
                self.deadline = 0;
                return false;
            }
        }
        for _ in 0..batch {
            spin_hint();
        }
        if self.step < self.max_step {
            self.step += 1;
        }
        true
    }
}

/// How many `lock()`s a thread on a crowded core makes since it last waited (in a lock's queue
/// or on a condition variable) before its next one joins the queue behind the waiters instead
/// ([`turn_over`]). Where threads outnumber cores the queue's waiters sleep, and the running
/// thread keeps the lock between them until the scheduler preempts it, so each thread's share
/// is whatever CPU time it got per turn; the budget gives each turn the same length in
/// acquisitions (docs/DESIGN.md, "Decision record: a crowded thread's turn").
pub(crate) const TURN_BUDGET: u32 = 40_000;

crate::sync::thread_local! {
    /// This thread's `lock()`s since it last waited, or since its last look at the queue found
    /// nobody (see [`turn_over`]).
    static TURN: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// Counts a `lock()` of this thread; `true` once it has made [`TURN_BUDGET`] of them since it
/// last waited and its core is crowded (the last verdict, [`crowded_hint`]): the
/// caller then joins the queue if anyone waits in it, and calls [`turn_ended`] either way. A
/// thread whose core is not crowded starts counting afresh. One thread-local add and compare
/// per `lock()`; `false` under loom (whose models never run that long) and where the
/// thread-local is gone.
#[inline(always)]
pub(crate) fn turn_over() -> bool {
    if EXHAUSTIVE {
        return false;
    }
    TURN.try_with(|turn| {
        let n = turn.get().wrapping_add(1);
        turn.set(n);
        n >= TURN_BUDGET
    })
    .unwrap_or(false)
        && turn_crowded()
}

/// The rare half of [`turn_over`]: a budget used up on a core that is not crowded starts
/// counting afresh.
#[cold]
fn turn_crowded() -> bool {
    let crowded = crowded_hint();
    if !crowded {
        turn_ended();
    }
    crowded
}

/// Starts this thread's count of `lock()`s afresh: it waited in a lock's queue or on a
/// condition variable, or its budget was used up ([`turn_over`]).
#[inline]
pub(crate) fn turn_ended() {
    let _ = TURN.try_with(|turn| turn.set(0));
}

/// A `sched_yield` that returns within this found nobody else to run: a yield alone is a
/// fraction of this, a yield to another thread well above it (docs/DESIGN.md, "Decision
/// record: a crowded verdict that stands").
pub(crate) const ALONE_YIELD_NS: u64 = 1000;

/// How long a "not crowded" verdict stands before a thread times a yield again; a "crowded"
/// verdict stands this long times 2^(n-1) after n crowded verdicts in a row, at most
/// [`CROWDED_MAX_HOLD_NS`].
const CROWDED_RECHECK_NS: u64 = 1_000_000;

/// The longest a "crowded" verdict stands. On a crowded core the timed yield is no longer
/// cheap: the scheduler runs the other threads first, often for a whole time slice, so a
/// verdict renewed every millisecond costs a crowded thread a time slice per millisecond. At
/// this cap a thread on a core that stays crowded spends at most one time slice in 128 ms on
/// the test, and one whose core frees up spins again within 128 ms (until then it parks at
/// once, as a crowded waiter does). Why 128 ms: docs/DESIGN.md, "Decision record: a crowded
/// verdict that stands".
const CROWDED_MAX_HOLD_NS: u64 = 128_000_000;

/// A verdict: crowded or not, when it was made (0: never), and how many crowded verdicts in a
/// row (0 if the last one was "not crowded").
#[derive(Clone, Copy)]
struct Verdict {
    crowded: bool,
    at: u64,
    streak: u32,
}

impl Verdict {
    /// Whether the verdict still stands at `now` (a verdict never made does not).
    fn stands(self, now: u64) -> bool {
        self.at != 0 && now.saturating_sub(self.at) < self.hold_ns()
    }

    /// Whether crowding is established at `now`: two or more crowded verdicts in a row, the
    /// last still standing.
    fn established(self, now: u64) -> bool {
        self.crowded && self.streak >= 2 && self.stands(now)
    }

    /// How long the verdict stands.
    fn hold_ns(self) -> u64 {
        if self.crowded {
            (CROWDED_RECHECK_NS << self.streak.saturating_sub(1).min(7)).min(CROWDED_MAX_HOLD_NS)
        } else {
            CROWDED_RECHECK_NS
        }
    }
}

crate::sync::thread_local! {
    /// This thread's last crowding verdict.
    static CROWDED: core::cell::Cell<Verdict> = const {
        core::cell::Cell::new(Verdict { crowded: false, at: 0, streak: 0 })
    };
}

/// Records a timed `sched_yield` of this thread: its core is *crowded* if the yield took
/// [`ALONE_YIELD_NS`] or more (another thread wanted the core).
#[inline]
pub(crate) fn note_yield(took_ns: u64, now: u64) {
    let crowded = took_ns >= ALONE_YIELD_NS;
    let _ = CROWDED.try_with(|c| {
        let streak = if crowded {
            c.get().streak.saturating_add(1)
        } else {
            0
        };
        c.set(Verdict {
            crowded,
            at: now.max(1),
            streak,
        });
    });
}

/// Whether this thread's core is crowded: more runnable threads than cores, where a spinning
/// waiter may be preempted, so that marking a successor (which then spins without parking) and
/// reserving the lock for it (so that nobody else can take it) could hold the lock up for a
/// time slice. The verdict of the last timed yield while it stands (1 ms for "not crowded",
/// 1 to 128 ms for "crowded", see [`CROWDED_MAX_HOLD_NS`]), else a new timed yield. Never under
/// loom, which explores the marking paths; always in a thread-local destructor (no marking there).
pub(crate) fn crowded() -> bool {
    if EXHAUSTIVE {
        return false;
    }
    let Ok(verdict) = CROWDED.try_with(core::cell::Cell::get) else {
        return true;
    };
    let now = now_ns();
    if verdict.stands(now) {
        return verdict.crowded;
    }
    timed_yield(now)
}

/// This thread's last crowding verdict, however old, without a clock read or a yield: `false`
/// if it has none, and under loom. For a caller that times a yield of its own soon after, which
/// renews the verdict (`raw::LockWord::spin_steal`); and free in numa_sim, whose clock reads
/// cost virtual time.
#[inline]
pub(crate) fn crowded_hint() -> bool {
    !EXHAUSTIVE && CROWDED.try_with(|c| c.get().crowded).unwrap_or(false)
}

/// Whether crowding is *established* for this thread: its last two or more verdicts in a row
/// said crowded, and the last one still stands. No yield, and a clock read only then: `false`
/// at once on a core that was not found crowded, and under loom. One crowded verdict can be a
/// fluke (a yield that met a passing thread, or the threads of a run starting together), and
/// a verdict whose time is over says nothing. For a waiting thread that judges its core again
/// itself while it waits (the rwlock's readers).
#[inline]
pub(crate) fn crowded_established() -> bool {
    if EXHAUSTIVE {
        return false;
    }
    let Ok(verdict) = CROWDED.try_with(core::cell::Cell::get) else {
        return false;
    };
    verdict.established(now_ns())
}

/// Yields the CPU, records the verdict ([`note_yield`]) and returns it: `true` if crowded.
/// `now` is the clock as the caller just read it.
fn timed_yield(now: u64) -> bool {
    yield_now();
    let after = now_ns();
    note_yield(after.saturating_sub(now), after);
    after.saturating_sub(now) >= ALONE_YIELD_NS
}

/// Whether this thread's core is free to spin on, for a waiter about to sleep (the condition
/// variable's): a timed yield now, as [`crowded`] makes, unless crowding is *established* (the
/// last two or more verdicts in a row said crowded, and the last one still stands): then no
/// yield at all. A fresh test at every wait is what a free core wants (a standing verdict lets
/// one false "crowded" make a waiter park at every wait for a millisecond), and no test at all
/// is what a crowded core wants (there each timed yield costs a time slice: see
/// [`CROWDED_MAX_HOLD_NS`]; docs/DESIGN.md, "Decision record: a crowded verdict that stands").
pub(crate) fn core_is_free() -> bool {
    if EXHAUSTIVE {
        return false;
    }
    let Ok(verdict) = CROWDED.try_with(core::cell::Cell::get) else {
        return false;
    };
    let now = now_ns();
    if verdict.established(now) {
        return false;
    }
    !timed_yield(now)
}

/// Waits, without parking, for another thread that is a few instructions away from a store (a
/// successor linking itself into a queue). Spins first, then yields the CPU: the other thread may
/// have been preempted in that window, and on an oversubscribed machine it needs our core.
#[inline]
pub(crate) fn wait_until<T>(mut ready: impl FnMut() -> Option<T>) -> T {
    let mut spins = 0u32;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        if !EXHAUSTIVE && spins < 128 {
            spins += 1;
            spin_hint();
        } else {
            yield_now();
        }
    }
}

/// Sleeps while `*word == expected`, at most until `deadline` if given. May return spuriously.
#[inline]
pub(crate) fn park(word: &AtomicU32, expected: u32, deadline: Option<u64>) {
    sync::futex_wait(word, expected, deadline)
}

/// Wakes every thread sleeping in [`park`] on `word`.
///
/// Takes the address only: the word may already belong to memory that was reused (the sleeping
/// thread returns as soon as it sees the new value), and the address is never dereferenced.
#[inline]
pub(crate) fn unpark(word: *const AtomicU32) {
    sync::futex_wake(word)
}

/// Announces a sleep in `word` by setting `flag`, then sleeps while the word is unchanged, at
/// most until `deadline` if given.
///
/// `seen` is the value the caller last read. Returns when the word changed, at the deadline, or
/// spuriously; the caller re-reads the word (and the clock). The CAS is `Relaxed`: it only
/// publishes "I may sleep", and every waker's change that matters is ordered by the caller's own
/// acquire load after waking.
#[inline]
pub(crate) fn announce_and_park(word: &AtomicU32, seen: u32, flag: u32, deadline: Option<u64>) {
    let parked = seen | flag;
    if seen & flag == 0
        && word
            .compare_exchange(seen, parked, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    #[cfg(feature = "stats")]
    crate::stats::note_park();
    park(word, parked, deadline);
}

/// Whether `deadline` (if any) has passed.
#[inline]
pub(crate) fn expired(deadline: Option<u64>) -> bool {
    deadline.is_some_and(|deadline| now_ns() >= deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records a timed yield of this thread that took `took_ns`, dated `ahead_ns` from now.
    fn verdict(took_ns: u64, ahead_ns: u64) {
        note_yield(took_ns, now_ns() + ahead_ns);
    }

    /// A verdict dated this far ahead stands whatever the scheduler does to the test.
    const AHEAD_NS: u64 = 60_000_000_000;

    #[test]
    fn crowding_is_established_by_two_crowded_verdicts_in_a_row_while_they_stand() {
        // A fresh thread has no verdict.
        std::thread::spawn(|| {
            assert!(!crowded_established());
            verdict(ALONE_YIELD_NS, AHEAD_NS);
            assert!(crowded_hint(), "one crowded verdict is a hint");
            assert!(!crowded_established(), "but one verdict is not established");
            verdict(ALONE_YIELD_NS, AHEAD_NS);
            assert!(crowded_established());
            verdict(0, AHEAD_NS);
            assert!(!crowded_established(), "a free core ends it");
            // Two crowded verdicts made now stand twice the recheck time, then say nothing.
            verdict(ALONE_YIELD_NS, 0);
            verdict(ALONE_YIELD_NS, 0);
            std::thread::sleep(std::time::Duration::from_nanos(
                2 * CROWDED_RECHECK_NS + 1_000_000,
            ));
            assert!(
                !crowded_established(),
                "a verdict whose time is over says nothing"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_crowded_threads_turn_ends_after_its_budget() {
        std::thread::spawn(|| {
            // On a core that is not crowded the budget runs out and counting starts afresh.
            verdict(0, AHEAD_NS);
            assert!((0..3 * TURN_BUDGET).all(|_| !turn_over()));
            // On a crowded one the budget-th `lock()` of a turn ends it, until the caller
            // starts a new one.
            verdict(ALONE_YIELD_NS, AHEAD_NS);
            turn_ended();
            assert_eq!(
                (1..=2 * TURN_BUDGET).find(|_| turn_over()),
                Some(TURN_BUDGET)
            );
            assert!(turn_over(), "over until the caller ends it");
            turn_ended();
            assert!(!turn_over());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn loadavg_gives_the_runnable_tasks() {
        assert_eq!(runnable_in_loadavg("0.52 0.58 0.59 3/467 12345\n"), Some(3));
        assert_eq!(runnable_in_loadavg("0.00 0.01 0.05 1/86 22008"), Some(1));
        assert_eq!(runnable_in_loadavg("0.52 0.58"), None);
        assert_eq!(runnable_in_loadavg("a b c x/467 1"), None);
    }

    #[test]
    fn backoff_budgets_back_off() {
        assert!(SpinBudget::with_backoff(None).backs_off());
        assert!(!SpinBudget::new(None).backs_off());
    }

    /// `spin_for` waits at least the gap it is given (a lower bound, whatever the scheduler
    /// does), and says "park now" once the budget is over, at once for a spent one.
    #[test]
    fn spin_for_waits_the_gap_within_the_budget() {
        let mut budget = SpinBudget::with_max_step(0, 10_000_000_000, None);
        let start = now_ns();
        assert!(budget.spin_for(20_000));
        assert!(now_ns() - start >= 20_000);
        assert!(!SpinBudget::exhausted().spin_for(20_000));
        // A budget shorter than the gap ends it.
        let mut short = SpinBudget::with_max_step(0, 1, None);
        assert!(!short.spin_for(1_000_000_000));
        assert!(!short.spin_for(1));
    }
}
