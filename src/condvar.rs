//! Condition variables for this crate's locks: [`RawCondvar`], behind the `McsCondvar`,
//! `CnaCondvar` and `HqCondvar` aliases (`lock_api::Condvar`s).
//!
//! `parking_lot::Condvar` works only with parking_lot's own mutex, so a program that swaps
//! `parking_lot::Mutex` for a lock of this crate needs these. parking_lot's own condition
//! variable tests (its WebKit producer/consumer queue tests included) and Rust std's
//! non-poisoning ones run against them in CI (`cargo test -p upstream_tests`).
//!
//! # Design: one notified waiter at a time in the lock's queue
//!
//! A waiter waits on its own queue node (the one every lock of the crate gives each thread),
//! first in the condition variable's list, then in the mutex's queue:
//!
//! ```text
//! condvar list (next), notified prefix [..]     mutex queue
//! W1 -> W2 -> W3                                holder | head -> a -> tail
//!   notify_all:   [W2 -> W3]                    holder | head -> a -> W1 = tail  (W1 in flight)
//!   W1 gets the mutex, passes on:  [W3]         W1 | ... -> W2 = tail            (W2 in flight)
//! ```
//!
//! - `wait`: the waiter resets its node as an arriving lock waiter would, appends it to the list
//!   (under a small internal word lock), **then** releases the mutex, so a notify that comes
//!   after the release finds it. It then yields the CPU once: if the yield comes back at once
//!   (within `ALONE_YIELD_NS`, nobody else wanted the core) it spins for the spin time before it
//!   parks on its node's status word, since on a free core the notify is likely near; otherwise
//!   it parks at once (spinning would only take the CPU from the thread that must notify it).
//!   Once its yields have found the core crowded twice in a row it skips the yield for a while
//!   (`wait::core_is_free`): on a crowded core each one cost a time slice.
//! - `notify_one` / `notify_all` mark the first un-notified waiter / all of them as
//!   **notified**; the notified waiters are always a prefix of the list. Then, unless a notified
//!   waiter is already **in flight**, the oldest notified waiter leaves the list and is
//!   **requeued** into the mutex's queue (`QueueLock::requeue`: one tail swap, exactly as if it
//!   had called `lock()`), and is now the one in flight. Nobody is woken by the notify itself:
//!   the waiter sleeps on until the lock's normal handoff makes it head.
//! - The waiter in flight, as soon as it holds the mutex, **passes on**: it puts the next
//!   notified waiter in flight the same way. So at most one waiter per condition variable is in
//!   the mutex's queue because of a notify. Why: moving every notified waiter into the queue at
//!   once (this crate's first design) handed the mutex to each of them in turn, and with a
//!   one-slot producer/consumer queue all but one found their predicate false and waited again:
//!   parking_lot's WebKit queue tests, 20 threads on 2 cores, ran 10 to 100 times slower than
//!   parking_lot (20.7 futex calls and 14.2 context switches per message against 10.5 and 5.7).
//!   Passed on one at a time, a notified waiter reaches the mutex after the previous one has
//!   changed the state and released it, as with parking_lot's requeue-behind-the-mutex.
//! - A timed wait whose deadline passes takes the internal lock: if its node is still in the
//!   list, it unlinks it and re-locks the mutex like any thread. It returns "timed out" only if
//!   it was not notified; a notified waiter that leaves before it was put in flight was notified
//!   (the notification is not lost either: `notify_one` returned `true` for it). If it is in
//!   flight already, it waits for its turn in the mutex's queue.
//!
//! There are no spurious wake-ups, so `notify_one` returns whether it notified a waiter and
//! `notify_all` how many (waiters notified before and not yet in flight are not counted again),
//! as `lock_api` documents for such implementations. The one exception: a thread that cannot
//! get any queue node at all (over a million threads alive at once) waits by releasing and
//! re-taking the mutex, a spurious wake-up.
//!
//! As with parking_lot, the waiters of one condition variable must all use the same mutex at any
//! time; using a second mutex while waiters of the first are in the list panics in `wait` with
//! parking_lot's message (before the mutex is released, so the guard unlocks it as the panic
//! unwinds).
//!
//! Known limit: the waiter in flight passes on when it *acquires* the mutex, not when it releases
//! it, so the next notified waiter can queue for the mutex ahead of a thread that arrives while
//! the first one holds it. With one producer and many consumers on a one-slot queue, a consumer
//! can then take the mutex before the producer has refilled the slot, and wait again. Passing on
//! at release would need a hook in the locks' unlock path (`src/raw`).

use core::ptr;

use crate::qnode::{self, Queued, node};
use crate::raw::{QueueLock, Token, deadline_after};
use crate::sync::{AtomicPtr, AtomicU32, EXHAUSTIVE, Ordering, const_fn, spin_hint};
use crate::{sync, wait};

/// The raw condition variable behind [`McsCondvar`](crate::McsCondvar),
/// [`CnaCondvar`](crate::CnaCondvar) and [`HqCondvar`](crate::HqCondvar), for the mutex `R`
/// (`RawMcs`, `RawCna` or `RawHq`).
///
/// A waiter waits on its queue node; a notify marks waiters as notified, and they move into
/// the mutex's queue one at a time, in the order they waited, each when the previous one got
/// the mutex; the lock's normal handoff wakes them: no stampede on the lock word, however many
/// wait (see the module docs). No spurious wake-ups,
/// so `notify_one` / `notify_all` return whether / how many waiters they notified. The waiters
/// of one condition variable must use the same mutex at any one time (as with parking_lot);
/// `wait` panics otherwise, before it releases the mutex.
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
    /// Guards the four fields below.
    list_lock: WordLock,
    /// The first waiting node (0: nobody waits); waiters are linked by `QNode::next`.
    first: AtomicU32,
    /// The last waiting node (0: nobody waits).
    last: AtomicU32,
    /// `IN_FLIGHT | last notified waiter in the list`. The notified waiters are the prefix
    /// `first ..= notified & !IN_FLIGHT` of the list (their nodes' `cv_queued` is
    /// `CV_NOTIFIED`, the others' `CV_WAITING`):
    ///
    /// | `IN_FLIGHT` | index | meaning                                                          |
    /// |-------------|-------|------------------------------------------------------------------|
    /// | 0           | 0     | no notified waiter in the list, none in the mutex's queue        |
    /// | 1           | 0     | one notified waiter in flight (in the mutex's queue, or holding it and about to pass on); none left in the list |
    /// | 1           | `n`   | one in flight, and `first ..= n` notified, to be passed on       |
    /// | 0           | `n`   | transient, only under the list lock inside a notify: it puts `first` in flight before releasing the lock |
    ///
    /// So whenever the list holds a notified waiter, one is in flight, and its pass-on (which
    /// every waiter moved out of the list does once it holds the mutex) moves the next.
    notified: AtomicU32,
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
                notified: AtomicU32::new(0),
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
        let mut timed_out = false;
        let queued = qnode::with_node(
            |me| {
                // SAFETY: passed on from our caller.
                timed_out = unsafe { self.wait_queued(mutex, me, deadline) };
                Queued::Acquired
            },
            || false,
        );
        if !queued {
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
    unsafe fn wait_queued(&self, mutex: &R, me: u32, mut deadline: Option<u64>) -> bool {
        let my = node(me);
        my.reset(crate::qnode::current_place());
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
        // Relaxed, here and for every list field (`first`, `last`, `notified`, `mutex`, the
        // nodes' `next` while listed, `cv_queued`): the list lock orders them.
        my.cv_queued.store(CV_WAITING, Ordering::Relaxed);
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
        let mut spin_first = wait::core_is_free();
        let head = loop {
            if let Some(head) = crate::raw::await_head(my, deadline, spin_first) {
                break head;
            }
            spin_first = true;
            // The deadline passed: leave the list, unless a notify has taken us out of it.
            match self.remove(me) {
                Left::TimedOut => {
                    mutex.lock_queue_lock(Token::new());
                    return true;
                }
                Left::Notified => {
                    mutex.lock_queue_lock(Token::new());
                    return false;
                }
                // In flight: we are in the mutex's queue now (or about to be); wait for our
                // turn there.
                Left::InFlight => deadline = None,
            }
        };
        mutex.lock_as_requeued_head(Token::new(), me, head);
        // We left the list in flight (only a waiter put in flight is ever requeued): now that
        // we hold the mutex, the next notified waiter may follow.
        self.pass_on();
        false
    }

    /// Unlinks the timed-out waiter `me` from the list, unless it was put in flight first.
    fn remove(&self, me: u32) -> Left {
        self.list_lock.lock();
        let my = node(me);
        let listed = my.cv_queued.load(Ordering::Relaxed);
        if listed == 0 {
            self.list_lock.unlock();
            return Left::InFlight;
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
        if listed == CV_NOTIFIED {
            // `me` was in the notified prefix: if it ended it, `prev` (notified too, or 0 if
            // `me` was first) ends it now. In flight stays as it is.
            let notified = self.notified.load(Ordering::Relaxed);
            if notified & !IN_FLIGHT == me {
                self.notified
                    .store(notified & IN_FLIGHT | prev, Ordering::Relaxed);
            }
        }
        if self.first.load(Ordering::Relaxed) == 0 {
            self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        }
        self.list_lock.unlock();
        if listed == CV_NOTIFIED {
            Left::Notified
        } else {
            Left::TimedOut
        }
    }

    /// Notifies the oldest waiter not notified yet; `true` if there was one. It moves into the
    /// mutex's queue at once if no notified waiter is in flight, else when its turn comes.
    pub fn notify_one(&self) -> bool {
        self.list_lock.lock();
        let notified = self.notified.load(Ordering::Relaxed);
        let next = self.first_not_notified(notified);
        if next == 0 {
            self.list_lock.unlock();
            return false;
        }
        node(next).cv_queued.store(CV_NOTIFIED, Ordering::Relaxed);
        self.notified
            .store(notified & IN_FLIGHT | next, Ordering::Relaxed);
        self.take_off_and_unlock();
        true
    }

    /// Notifies every waiter not notified yet; returns how many. They move into the mutex's
    /// queue one at a time, in the order they waited.
    pub fn notify_all(&self) -> usize {
        self.list_lock.lock();
        let notified = self.notified.load(Ordering::Relaxed);
        let mut at = self.first_not_notified(notified);
        if at == 0 {
            self.list_lock.unlock();
            return 0;
        }
        let last = self.last.load(Ordering::Relaxed);
        let mut count = 1;
        node(at).cv_queued.store(CV_NOTIFIED, Ordering::Relaxed);
        while at != last {
            at = node(at).next.load(Ordering::Relaxed);
            node(at).cv_queued.store(CV_NOTIFIED, Ordering::Relaxed);
            count += 1;
        }
        self.notified
            .store(notified & IN_FLIGHT | last, Ordering::Relaxed);
        self.take_off_and_unlock();
        count
    }

    /// With the list lock held and `notified` as loaded under it: the first waiter of the list
    /// that is not notified, 0 if none.
    fn first_not_notified(&self, notified: u32) -> u32 {
        match notified & !IN_FLIGHT {
            0 => self.first.load(Ordering::Relaxed),
            last_notified => node(last_notified).next.load(Ordering::Relaxed),
        }
    }

    /// Called by the waiter in flight once it holds the mutex: ends its flight and puts the next
    /// notified waiter, if any, in flight.
    fn pass_on(&self) {
        self.list_lock.lock();
        let notified = self.notified.load(Ordering::Relaxed);
        debug_assert!(
            notified & IN_FLIGHT != 0,
            "a requeued waiter was not in flight"
        );
        // (1, n) → (0, n), then `take_off_and_unlock` makes it (1, n') or leaves (0, 0).
        self.notified
            .store(notified & !IN_FLIGHT, Ordering::Relaxed);
        self.take_off_and_unlock();
    }

    /// With the list lock held: if the list starts with a notified waiter and none is in flight,
    /// takes that waiter out of the list and puts it in flight, `(0, n)` → `(1, n')`. Releases
    /// the list lock, then requeues the waiter into its mutex's queue.
    fn take_off_and_unlock(&self) {
        let notified = self.notified.load(Ordering::Relaxed);
        if notified & IN_FLIGHT != 0 || notified == 0 {
            self.list_lock.unlock();
            return;
        }
        // The notified waiters are a prefix of the list: `first` is one.
        let first = self.first.load(Ordering::Relaxed);
        let taken = node(first);
        let next = taken.next.load(Ordering::Relaxed);
        self.first.store(next, Ordering::Relaxed);
        let mutex = self.mutex.load(Ordering::Relaxed);
        if next == 0 {
            self.last.store(0, Ordering::Relaxed);
            self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        }
        let rest = if notified == first { 0 } else { notified };
        self.notified.store(IN_FLIGHT | rest, Ordering::Relaxed);
        taken.cv_queued.store(0, Ordering::Relaxed);
        taken.next.store(0, Ordering::Relaxed);
        self.list_lock.unlock();
        // SAFETY: `mutex` was set by a waiter of the list, and every waiter of the list waits
        // with it (`wait_queued` checks). `first` is blocked in `wait` holding a borrow of it
        // until it has the mutex again, which needs this requeue first.
        unsafe { &*mutex }.requeue(Token::new(), first, first);
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

/// `QNode::cv_queued` of a node in the list that is not notified (0: not in the list).
const CV_WAITING: u32 = 1;
/// `QNode::cv_queued` of a notified node still in the list.
const CV_NOTIFIED: u32 = 2;
/// `RawCondvar::notified`: a notified waiter is in flight. Node indices are below 2^20.
const IN_FLIGHT: u32 = 1 << 31;

/// How a timed-out waiter left the list (`RawCondvar::remove`).
enum Left {
    /// Unlinked before any notify reached it.
    TimedOut,
    /// Unlinked while notified, before it was put in flight.
    Notified,
    /// Not unlinked: it was put in flight, and is in the mutex's queue (or about to be).
    InFlight,
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
