//! Condition variables for this crate's locks: [`RawCondvar`], behind the `McsCondvar`,
//! `CnaCondvar` and `HqCondvar` aliases (`lock_api::Condvar`s).
//!
//! `parking_lot::Condvar` works only with parking_lot's own mutex, so a program that swaps
//! `parking_lot::Mutex` for a lock of this crate needs these. parking_lot's own condition
//! variable tests (its WebKit producer/consumer queue tests included) and Rust std's
//! non-poisoning ones run against them in CI (`cargo test -p upstream_tests`).
//!
//! # Design: notified waiters take the mutex as arriving threads do
//!
//! A waiter waits on its own queue node (the one every lock of the crate gives each thread), in
//! the condition variable's list (linked by the node's `next`, under a small internal word
//! lock); its node's `cv_queued` word says whether it is still listed:
//!
//! ```text
//! condvar list: W1 -> W2 -> W3        notify_one: W1 leaves the list, is woken if it sleeps,
//!                                     and calls the mutex's lock() like any thread
//! ```
//!
//! - `wait`: the waiter appends its node to the list, **then** releases the mutex, so a notify
//!   that comes after the release finds it. It then yields the CPU once: if the yield comes back
//!   at once (within `ALONE_YIELD_NS`, nobody else wanted the core) it spins for the spin time
//!   before it sleeps on its `cv_queued` word, since on a free core the notify is likely near;
//!   otherwise it looks at the word a few times only (`CROWDED_SPINS`), then sleeps (spinning
//!   longer would only take the CPU from the thread that must notify it). Where the machine has
//!   more runnable tasks than CPUs (other processes' busy threads, most often) and its looks
//!   have lately found the notify in less than a quarter of its waits, it sleeps without them,
//!   looking again every eighth wait (`looks_pay`). Once its yields have found the core crowded
//!   twice in a row it skips the yield for a while (`wait::core_is_free`): on a crowded core
//!   each one cost a time slice.
//! - `notify_one` / `notify_all` take the oldest waiter / all of them off the list, tell each
//!   with one swap of its `cv_queued` word, and wake those that sleep (after releasing the list
//!   lock, a few at a time). A notify with nobody waiting is a lock, a load and an unlock: no
//!   system call.
//! - A notified waiter takes the mutex with the mutex's own `lock()`: it may take a free mutex
//!   at once, spin, or queue and sleep like any arriving thread. Why not requeue it into the
//!   mutex's queue, as parking_lot does and as this crate first did: a waiter in the queue is
//!   handed the mutex in turn, asleep or not, and every handoff to a sleeper makes the mutex
//!   wait for its wake-up. On a one-slot producer/consumer queue with more threads than cores
//!   that cost a second sleep per message (docs/DESIGN.md, "Oversubscription").
//! - A timed wait whose deadline passes takes the internal lock: if its node is still in the
//!   list, it unlinks it and returns "timed out" after re-locking the mutex; if a notify took it
//!   off first, it was notified (and `notify_one` returned `true` for it).
//!
//! There are no spurious wake-ups, so `notify_one` returns whether it notified a waiter and
//! `notify_all` how many, as `lock_api` documents for such implementations. The one exception: a
//! thread that cannot get any queue node at all (over a million threads alive at once) waits by
//! releasing and re-taking the mutex, a spurious wake-up.
//!
//! As with parking_lot, the waiters of one condition variable must all use the same mutex at any
//! time; using a second mutex while waiters of the first are in the list panics in `wait` with
//! parking_lot's message (before the mutex is released, so the guard unlocks it as the panic
//! unwinds).

use core::ptr;

use crate::qnode::{self, Queued, node};
use crate::raw::{QueueLock, Token, deadline_after};
use crate::sync;
use crate::sync::{AtomicPtr, AtomicU32, EXHAUSTIVE, Ordering, const_fn, spin_hint};
use crate::wait::{self, SpinBudget};

/// The raw condition variable behind [`McsCondvar`](crate::McsCondvar),
/// [`CnaCondvar`](crate::CnaCondvar) and [`HqCondvar`](crate::HqCondvar), for the mutex `R`
/// (`RawMcs`, `RawCna` or `RawHq`).
///
/// A waiter waits on its queue node in the condition variable's list; a notify takes waiters
/// off the list in the order they waited and wakes them, and they take the mutex as any
/// arriving thread does (see the module docs). No spurious wake-ups, so `notify_one` /
/// `notify_all` return whether / how many waiters they notified. The waiters of one condition
/// variable must use the same mutex at any one time (as with parking_lot); `wait` panics
/// otherwise, before it releases the mutex.
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use numa_locks::{CnaCondvar, CnaMutex};
///
/// let pair = Arc::new((CnaMutex::new(false), CnaCondvar::new()));
/// let pair2 = pair.clone();
/// thread::spawn(move || {
///     *pair2.0.lock() = true;
///     pair2.1.notify_one();
/// });
/// let mut ready = pair.0.lock();
/// pair.1.wait_while(&mut ready, |ready| !*ready);
/// assert!(*ready);
/// ```
pub struct RawCondvar<R> {
    /// Guards the three fields below and the listed nodes' `next` and `cv_queued`.
    list_lock: WordLock,
    /// The first waiting node (0: nobody waits); waiters are linked by `QNode::next`.
    first: AtomicU32,
    /// The last waiting node (0: nobody waits).
    last: AtomicU32,
    /// The mutex the waiters wait with; null while nobody waits.
    mutex: AtomicPtr<R>,
}

// SAFETY: `mutex` is only a pointer to a `R: Sync` that waiters keep alive while it is set (see
// `notify_one`); everything else is atomics.
unsafe impl<R: Sync> Sync for RawCondvar<R> {}
// SAFETY: as for `Sync`; the condition variable owns nothing of `R`.
unsafe impl<R: Sync> Send for RawCondvar<R> {}

impl<R> RawCondvar<R> {
    const_fn! {
        /// A condition variable nobody waits on.
        pub const fn new() -> Self {
            RawCondvar {
                list_lock: WordLock::new(),
                first: AtomicU32::new(0),
                last: AtomicU32::new(0),
                mutex: AtomicPtr::new(ptr::null_mut()),
            }
        }
    }
}

impl<R> Default for RawCondvar<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> core::fmt::Debug for RawCondvar<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawCondvar").finish_non_exhaustive()
    }
}

impl<R: QueueLock> RawCondvar<R> {
    /// Releases `mutex` and waits for a notification, then takes `mutex` again; with a
    /// `deadline` (on the crate's `now_ns` clock), gives up waiting for a notification once it
    /// has passed. Returns `true` if it timed out (and was not notified). Never returns before
    /// holding `mutex` again.
    ///
    /// # Safety
    /// The calling thread must hold `mutex` (lock_api's contract for `RawCondvar::wait`).
    pub(crate) unsafe fn wait_until_ns(&self, mutex: &R, deadline: Option<u64>) -> bool {
        // A thread that waits here leaves the mutex to the others: its turn (see
        // `wait::turn_over`) starts afresh.
        crate::wait::turn_ended();
        let mut timed_out = false;
        let queued = qnode::with_node(
            |me| {
                // SAFETY: passed on from our caller.
                timed_out = unsafe { self.wait_queued(mutex, me, deadline) };
                Queued::Acquired
            },
            || false,
        );
        if !queued.acquired() {
            // No queue node at all: a spurious wake-up (see the module docs).
            // SAFETY: the caller holds `mutex`.
            unsafe { mutex.unlock_queue_lock(Token::new()) };
            sync::yield_now();
            mutex.lock_queue_lock(Token::new());
        }
        timed_out
    }

    /// `wait_until_ns` with the thread's node `me`.
    ///
    /// # Safety
    /// As for `wait_until_ns`.
    unsafe fn wait_queued(&self, mutex: &R, me: u32, deadline: Option<u64>) -> bool {
        let my = node(me);
        self.list_lock.lock();
        let current = self.mutex.load(Ordering::Relaxed);
        let ours = mutex as *const R as *mut R;
        if current.is_null() {
            self.mutex.store(ours, Ordering::Relaxed);
        } else if current != ours {
            self.list_lock.unlock();
            // parking_lot's message, word for word: its own test `two_mutexes` and any user's
            // `#[should_panic(expected = ...)]` written against parking_lot look for it.
            panic!("attempted to use a condition variable with more than one mutex");
        }
        // Relaxed, here and for every list field (`first`, `last`, `mutex`, the nodes' `next`
        // while listed): the list lock orders them.
        my.cv_queued.store(CV_WAITING, Ordering::Relaxed);
        my.next.store(0, Ordering::Relaxed);
        match self.last.load(Ordering::Relaxed) {
            0 => self.first.store(me, Ordering::Relaxed),
            last => node(last).next.store(me, Ordering::Relaxed),
        }
        self.last.store(me, Ordering::Relaxed);
        self.list_lock.unlock();
        // Only now release the mutex: a notify from here on finds us in the list.
        // SAFETY: the caller holds `mutex`.
        unsafe { mutex.unlock_queue_lock(Token::new()) };
        // Spin first only on a free core (see the module docs): the notifier then runs
        // elsewhere, and its notify may well come within the spin time.
        let mut budget = if wait::core_is_free() {
            SpinBudget::waiting(deadline)
        } else {
            // A few looks even on a crowded core, while they pay: the notify often comes
            // while we would be falling asleep, unless other processes keep the cores busy
            // (docs/DESIGN.md, "Decision record: a few looks before a crowded waiter sleeps").
            if !EXHAUSTIVE && looks_pay() {
                let mut found = false;
                for _ in 0..CROWDED_SPINS {
                    // Acquire, as the loop's load below (which re-reads the word before we reuse
                    // the node): it pairs with the notifier's Release swap.
                    if my.cv_queued.load(Ordering::Acquire) == 0 {
                        found = true;
                        break;
                    }
                    spin_hint();
                }
                record_looks(found);
            }
            SpinBudget::exhausted()
        };
        let timed_out = loop {
            // Acquire: pairs with the notifier's Release swap, so its last read of our `next`
            // happens before we reuse the node in the mutex's queue.
            let s = my.cv_queued.load(Ordering::Acquire);
            if s == 0 {
                break false;
            }
            if budget.spin() {
                continue;
            }
            if wait::expired(deadline) {
                // Leave the list, unless a notify has taken us out of it.
                break self.remove(me);
            }
            wait::announce_and_park(&my.cv_queued, s, CV_PARKED, deadline);
            budget = SpinBudget::waiting(deadline);
        };
        mutex.lock_queue_lock(Token::new());
        timed_out
    }

    /// Unlinks the timed-out waiter `me` from the list; `true` if it was still there (timed
    /// out), `false` if a notify took it out first (notified).
    fn remove(&self, me: u32) -> bool {
        self.list_lock.lock();
        let my = node(me);
        if my.cv_queued.load(Ordering::Relaxed) == 0 {
            self.list_lock.unlock();
            #[cfg(loom)]
            crate::sync::loom_probe::cv_notified_at_deadline();
            return false;
        }
        my.cv_queued.store(0, Ordering::Relaxed);
        let next = my.next.load(Ordering::Relaxed);
        let mut prev = 0;
        let mut at = self.first.load(Ordering::Relaxed);
        while at != me {
            prev = at;
            at = node(at).next.load(Ordering::Relaxed);
        }
        match prev {
            0 => self.first.store(next, Ordering::Relaxed),
            prev => node(prev).next.store(next, Ordering::Relaxed),
        }
        if self.last.load(Ordering::Relaxed) == me {
            self.last.store(prev, Ordering::Relaxed);
        }
        if self.first.load(Ordering::Relaxed) == 0 {
            self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        }
        self.list_lock.unlock();
        true
    }

    /// Notifies the oldest waiter; `true` if there was one. It leaves the list and is woken (if
    /// it sleeps), and takes the mutex as any arriving thread does.
    pub fn notify_one(&self) -> bool {
        self.list_lock.lock();
        let first = self.first.load(Ordering::Relaxed);
        if first == 0 {
            self.list_lock.unlock();
            return false;
        }
        let next = node(first).next.load(Ordering::Relaxed);
        self.first.store(next, Ordering::Relaxed);
        if next == 0 {
            self.last.store(0, Ordering::Relaxed);
            self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        }
        let parked = take_off(first);
        self.list_lock.unlock();
        if parked {
            wake(first);
        }
        true
    }

    /// Notifies every waiter; returns how many. Each leaves the list and is woken (if it
    /// sleeps), and takes the mutex as any arriving thread does.
    pub fn notify_all(&self) -> usize {
        self.list_lock.lock();
        let mut at = self.first.load(Ordering::Relaxed);
        if at == 0 {
            self.list_lock.unlock();
            return 0;
        }
        self.first.store(0, Ordering::Relaxed);
        self.last.store(0, Ordering::Relaxed);
        self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        let mut count = 0;
        // The sleepers to wake once the list lock is free; a wake beyond these is made under it.
        let mut sleepers = [0u32; WAKE_BATCH];
        let mut asleep = 0;
        while at != 0 {
            // Read before the swap: once it lands, the waiter may reuse its node.
            let next = node(at).next.load(Ordering::Relaxed);
            if take_off(at) {
                if asleep == WAKE_BATCH {
                    #[cfg(loom)]
                    crate::sync::loom_probe::cv_wake_under_lock();
                    wake(at);
                } else {
                    sleepers[asleep] = at;
                    asleep += 1;
                }
            }
            count += 1;
            at = next;
        }
        self.list_lock.unlock();
        for &sleeper in &sleepers[..asleep] {
            wake(sleeper);
        }
        count
    }

    /// Releases `mutex`, waits for a notification, and takes `mutex` again. No spurious
    /// wake-ups (see the module docs).
    ///
    /// # Safety
    /// The calling thread must hold `mutex`.
    pub unsafe fn wait(&self, mutex: &R) {
        // SAFETY: passed on from our caller.
        unsafe { self.wait_until_ns(mutex, None) };
    }

    /// As [`wait`](Self::wait), but gives up waiting for a notification after `timeout`
    /// (then still takes `mutex` again); returns `true` if it timed out.
    ///
    /// # Safety
    /// The calling thread must hold `mutex`.
    pub unsafe fn wait_for(&self, mutex: &R, timeout: std::time::Duration) -> bool {
        // SAFETY: passed on from our caller.
        unsafe { self.wait_until_ns(mutex, Some(deadline_after(timeout))) }
    }
}

#[cfg(not(loom))]
// SAFETY: `wait` returns only once the thread holds the mutex again, and it never accesses the
// protected data; the guard is stateless (`GuardSend`), so "restoring" it is a no-op.
unsafe impl<R> lock_api::RawCondvar for RawCondvar<R>
where
    R: QueueLock + lock_api::RawMutex,
{
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type RawMutex = R;

    #[inline]
    unsafe fn wait(&self, mutex: &R, _guard: &mut R::Guard) {
        // SAFETY: lock_api's contract: the caller holds `mutex`.
        unsafe { self.wait_until_ns(mutex, None) };
    }

    #[inline]
    fn notify_one(&self) -> bool {
        RawCondvar::notify_one(self)
    }

    #[inline]
    fn notify_all(&self) -> usize {
        RawCondvar::notify_all(self)
    }
}

#[cfg(not(loom))]
// SAFETY: as for `RawCondvar`; a timed-out wait takes the mutex again before returning.
unsafe impl<R> lock_api::RawCondvarTimed for RawCondvar<R>
where
    R: QueueLock
        + lock_api::RawMutexTimed<Duration = std::time::Duration, Instant = std::time::Instant>,
{
    fn checked_duration_to_instant(timeout: &std::time::Duration) -> Option<std::time::Instant> {
        std::time::Instant::now().checked_add(*timeout)
    }

    unsafe fn wait_until(
        &self,
        mutex: &R,
        _guard: &mut R::Guard,
        timeout: &std::time::Instant,
    ) -> bool {
        // The crate's clock is `now_ns`: convert the instant into a time left on it.
        let left = timeout.saturating_duration_since(std::time::Instant::now());
        // SAFETY: lock_api's contract: the caller holds `mutex`.
        unsafe { self.wait_until_ns(mutex, Some(deadline_after(left))) }
    }

    unsafe fn wait_for(
        &self,
        mutex: &R,
        _guard: &mut R::Guard,
        timeout: &std::time::Duration,
    ) -> bool {
        // SAFETY: lock_api's contract: the caller holds `mutex`.
        unsafe { self.wait_until_ns(mutex, Some(deadline_after(*timeout))) }
    }
}

/// `QNode::cv_queued` of a node in the list (0: not in the list).
const CV_WAITING: u32 = 1;
/// Set in `QNode::cv_queued` by a listed waiter that sleeps on it: its notifier must wake it.
const CV_PARKED: u32 = 2;
/// How many times a waiter on a crowded core looks at `cv_queued` (with a spin hint between
/// looks) before it sleeps, where a free core spins for the spin time.
const CROWDED_SPINS: u32 = 64;
/// [`LookRecord::score`] of looks that always find the notify.
const LOOK_SCORE_ONE: u16 = 256;
/// The score below which a crowded waiter on an oversubscribed machine sleeps without looking:
/// its looks found the notify in less than a quarter of its recent waits. A look phase costs
/// about half a sleep and its wake-up beside busy threads, and the shapes measured lie well on
/// either side (docs/DESIGN.md, "Decision record: the crowded looks stop where they do not
/// pay").
const LOOKS_PAY_OFF: u16 = LOOK_SCORE_ONE / 4;
/// The weight of a look phase in [`LookRecord::score`]: 1/8.
const LOOK_WEIGHT: u16 = 8;
/// While its looks do not pay, a crowded waiter still looks at every this many-th wait, so that
/// the score follows a core that frees up.
const LOOK_PROBE_EVERY: u8 = 8;

/// A thread's record of its crowded looks: how often they found the notify lately (an
/// exponential average, weight [`LOOK_WEIGHT`], in 1/[`LOOK_SCORE_ONE`] units, starting
/// at "always"), and how many waits have slept without looking since the last look.
#[derive(Clone, Copy)]
struct LookRecord {
    score: u16,
    skipped: u8,
}

crate::sync::thread_local! {
    static LOOKS: core::cell::Cell<LookRecord> = const {
        core::cell::Cell::new(LookRecord { score: LOOK_SCORE_ONE, skipped: 0 })
    };
}

/// Whether a waiter on a crowded core should look for its notify before it sleeps: yes unless
/// its looks have not paid lately and the machine has more runnable tasks than CPUs
/// (`wait::machine_oversubscribed`); even then every [`LOOK_PROBE_EVERY`]th wait looks.
fn looks_pay() -> bool {
    looks_pay_when(wait::machine_oversubscribed)
}

/// [`looks_pay`], with `oversubscribed` asked only when the looks have not paid. Beside other
/// processes' busy threads the notifier rarely runs while we look, and the looks take CPU from
/// it. Where nothing else runs, a waiter whose looks miss shares its core with the notifier
/// (the scheduler put the two ends of a queue on one core, the other one idle), and there the
/// looks, which keep it running, are what lets the scheduler spread the pair again
/// (docs/DESIGN.md, "Decision record: the crowded looks stop where they do not pay").
fn looks_pay_when(oversubscribed: impl FnOnce() -> bool) -> bool {
    LOOKS
        .try_with(|cell| {
            let mut record = cell.get();
            if record.score >= LOOKS_PAY_OFF || !oversubscribed() {
                return true;
            }
            record.skipped += 1;
            let probe = record.skipped >= LOOK_PROBE_EVERY;
            if probe {
                record.skipped = 0;
            }
            cell.set(record);
            probe
        })
        .unwrap_or(false)
}

/// Records whether a phase of crowded looks found the notify.
fn record_looks(found: bool) {
    let _ = LOOKS.try_with(|cell| {
        let mut record = cell.get();
        record.score = record.score - record.score / LOOK_WEIGHT
            + if found {
                LOOK_SCORE_ONE / LOOK_WEIGHT
            } else {
                0
            };
        cell.set(record);
    });
}

/// Sleepers `notify_all` wakes after releasing the list lock; it wakes any more under it (1
/// under loom, so that two sleepers take both paths).
const WAKE_BATCH: usize = if cfg!(loom) { 1 } else { 8 };

/// With the list lock held, after unlinking `waiter` (and reading its `next`): tells it it was
/// notified; `true` if it sleeps and must be woken. The waiter may reuse its node as soon as
/// this lands: the caller must not read the node's `next` after it.
fn take_off(waiter: u32) -> bool {
    // Release: pairs with the waiter's Acquire load; our reads of its node come before.
    node(waiter).cv_queued.swap(0, Ordering::Release) & CV_PARKED != 0
}

/// Wakes the taken-off `waiter` that slept in the list. Its node may be in use for something
/// else by now: a wake is only an address, and every sleeper re-checks its word.
fn wake(waiter: u32) {
    #[cfg(loom)]
    crate::sync::loom_probe::cv_wake();
    wait::unpark(&node(waiter).cv_queued);
}

/// The condition variable's own small lock: a futex word lock (0 free, 1 held, 2 held and
/// someone may sleep on it). It guards a few list operations, never a wait, and needs no
/// queue node (its users may have theirs in the list).
struct WordLock {
    state: AtomicU32,
}

impl WordLock {
    const_fn! {
        const fn new() -> Self {
            WordLock {
                state: AtomicU32::new(0),
            }
        }
    }

    #[inline]
    fn lock(&self) {
        // Acquire: pairs with the Release in `unlock`; the list is as the last holder left it.
        if self
            .state
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
    }

    #[cold]
    fn lock_slow(&self) {
        // A holder keeps the lock for a few list operations: spin a little first.
        if !EXHAUSTIVE {
            for _ in 0..64 {
                spin_hint();
                if self.state.load(Ordering::Relaxed) == 0
                    && self
                        .state
                        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return;
                }
            }
        }
        // 2 = "held, maybe with sleepers": whoever takes it this way wakes the others on unlock.
        // Acquire: as in `lock`.
        while self.state.swap(2, Ordering::Acquire) != 0 {
            wait::park(&self.state, 2, None);
        }
    }

    #[inline]
    fn unlock(&self) {
        // Release: publishes the list operations to the next holder.
        if self.state.swap(0, Ordering::Release) == 2 {
            wait::unpark(&self.state);
        }
    }
}

// A raw condition variable is a few words; nothing about it is generic in size.
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<RawCondvar<()>>() <= 24);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crowded_looks_stop_on_an_oversubscribed_machine_where_they_do_not_pay() {
        std::thread::spawn(|| {
            assert!(looks_pay_when(|| true), "a thread starts out looking");
            // Look phases that never find the notify bring the score below a quarter within 11
            // of them (256 · (7/8)^11 < 64)...
            for _ in 0..11 {
                record_looks(false);
            }
            assert!(LOOKS.with(|c| c.get().score) < LOOKS_PAY_OFF);
            // ... but where nothing else wants the CPUs, the looks go on.
            assert!((0..3 * LOOK_PROBE_EVERY).all(|_| looks_pay_when(|| false)));
            // On an oversubscribed machine the waits sleep at once, but every eighth.
            let looked: Vec<bool> = (1..=2 * LOOK_PROBE_EVERY)
                .map(|_| looks_pay_when(|| true))
                .collect();
            let expected: Vec<bool> = (1..=2 * LOOK_PROBE_EVERY)
                .map(|wait| wait % LOOK_PROBE_EVERY == 0)
                .collect();
            assert_eq!(looked, expected, "one look in {LOOK_PROBE_EVERY} waits");
            // Looks that find the notify bring them back: one is enough from just below.
            record_looks(true);
            assert!(LOOKS.with(|c| c.get().score) >= LOOKS_PAY_OFF);
            assert!(looks_pay_when(|| true));
            // Looks that always find it keep the score at "always".
            for _ in 0..100 {
                record_looks(true);
            }
            assert_eq!(LOOKS.with(|c| c.get().score), LOOK_SCORE_ONE);
        })
        .join()
        .unwrap();
    }
}
