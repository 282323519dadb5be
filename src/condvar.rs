//! Condition variables for this crate's locks: [`RawCondvar`], behind the `McsCondvar`,
//! `CnaCondvar` and `HqCondvar` aliases (`lock_api::Condvar`s).
//!
//! `parking_lot::Condvar` works only with parking_lot's own mutex, so a program that swaps
//! `parking_lot::Mutex` for a lock of this crate needs these.
//!
//! # Design: waiters wait in the lock's queue
//!
//! A waiter waits on its own queue node (the one every lock of the crate gives each thread),
//! first in the condition variable's list, then in the mutex's queue:
//!
//! ```text
//! condvar list (next)        mutex queue
//! W1 -> W2 -> W3             holder | head -> a -> b -> tail
//!        notify_all:         holder | head -> a -> b -> W1 -> W2 -> W3 = tail   (one tail swap)
//! ```
//!
//! - `wait`: the waiter resets its node as an arriving lock waiter would, appends it to the list
//!   (under a small internal word lock), **then** releases the mutex, and parks at once on its
//!   node's status word (as parking_lot's condvar does; spinning there would only take the CPU
//!   from the notifier when threads outnumber cores). A notify that comes after the release
//!   therefore finds it.
//! - `notify_one` / `notify_all` take the first waiter / the whole list out (under the internal
//!   lock) and **requeue** them into the mutex's queue (`QueueLock::requeue`): one tail swap
//!   appends the chain, exactly as if the waiters had called `lock()` in that order. Nobody is
//!   woken: each waiter sleeps on until the lock's normal handoff makes it head, and then goes on
//!   like any queue head (CNA sorts the requeued waiters by node like any others; HQ takes them
//!   as flat FIFO entries). So `notify_all` with hundreds of waiters makes no stampede: they get
//!   the lock one by one, in the order they waited, woken one at a time by the handoffs (and
//!   early enough by the heads' pre-wake), and the notifier pays one tail swap plus a walk of
//!   the list.
//! - A timed wait whose deadline passes takes the internal lock: if its node is still in the list,
//!   it unlinks it and re-locks the mutex like any thread (`wait_until` returns "timed out");
//!   if a notify already took it, it was notified: it waits for its turn in the mutex's queue.
//!
//! There are no spurious wake-ups, so `notify_one` returns whether it notified a waiter and
//! `notify_all` how many, as `lock_api` documents for such implementations. The one exception: a
//! thread that cannot get any queue node at all (over a million threads alive at once) waits by
//! releasing and re-taking the mutex, a spurious wake-up.
//!
//! As with parking_lot, the waiters of one condition variable must all use the same mutex at any
//! time; using a second mutex while waiters of the first are queued panics in `wait` (before the
//! mutex is released, so the guard unlocks it as the panic unwinds).

use core::ptr;

use crate::qnode::{self, Queued, node};
use crate::raw::{QueueLock, Token, deadline_after};
use crate::sync::{AtomicPtr, AtomicU32, EXHAUSTIVE, Ordering, const_fn, spin_hint};
use crate::{sync, topology, wait};

/// The raw condition variable behind [`McsCondvar`](crate::McsCondvar),
/// [`CnaCondvar`](crate::CnaCondvar) and [`HqCondvar`](crate::HqCondvar), for the mutex `R`
/// (`RawMcs`, `RawCna` or `RawHq`).
///
/// A waiter waits on its queue node, and a notify moves waiters into the mutex's queue in the
/// order they waited (one tail swap for `notify_all`), where the lock's normal handoff wakes
/// them one at a time: no stampede on the lock word, however many wait. No spurious wake-ups,
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
    /// Guards the three fields below.
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
        my.reset(topology::current_node() as u64);
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
        // Relaxed, here and for every list field: the list lock orders them.
        my.cv_queued.store(1, Ordering::Relaxed);
        match self.last.load(Ordering::Relaxed) {
            0 => self.first.store(me, Ordering::Relaxed),
            last => node(last).next.store(me, Ordering::Relaxed),
        }
        self.last.store(me, Ordering::Relaxed);
        self.list_lock.unlock();
        // Only now release the mutex: a notify from here on finds us in the list.
        // SAFETY: the caller holds `mutex`.
        unsafe { mutex.unlock_queue_lock(Token::new()) };
        // Park at once: a notification may be far off, and it only moves us into the mutex's
        // queue, where the head's pre-wake rouses us when our turn is near. Spinning here would
        // only take the CPU from the thread that must notify us when threads outnumber cores.
        let mut spin_first = false;
        let head = loop {
            if let Some(head) = crate::raw::await_head(my, deadline, spin_first) {
                break head;
            }
            spin_first = true;
            // The deadline passed: leave the list, unless a notify has taken us out of it.
            if self.remove(me) {
                mutex.lock_queue_lock(Token::new());
                return true;
            }
            // Notified: we are in the mutex's queue now (or about to be); wait for our turn.
            deadline = None;
        };
        mutex.lock_as_requeued_head(Token::new(), me, head);
        false
    }

    /// Unlinks the timed-out waiter `me` from the list; `false` if a notify took it out first.
    fn remove(&self, me: u32) -> bool {
        self.list_lock.lock();
        let my = node(me);
        let queued = my.cv_queued.load(Ordering::Relaxed) != 0;
        if queued {
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
        }
        self.list_lock.unlock();
        queued
    }

    /// Moves the first waiter into its mutex's queue; `true` if there was one.
    pub fn notify_one(&self) -> bool {
        self.list_lock.lock();
        let first = self.first.load(Ordering::Relaxed);
        if first == 0 {
            self.list_lock.unlock();
            return false;
        }
        let taken = node(first);
        let next = taken.next.load(Ordering::Relaxed);
        self.first.store(next, Ordering::Relaxed);
        let mutex = self.mutex.load(Ordering::Relaxed);
        if next == 0 {
            self.last.store(0, Ordering::Relaxed);
            self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        }
        taken.cv_queued.store(0, Ordering::Relaxed);
        taken.next.store(0, Ordering::Relaxed);
        self.list_lock.unlock();
        // SAFETY: `mutex` was set by the waiter `first`, which is blocked in `wait` holding a
        // borrow of it until it has the mutex again, which needs this requeue first.
        unsafe { &*mutex }.requeue(Token::new(), first, first);
        true
    }

    /// Moves every waiter into the mutex's queue, in the order they waited; returns how many.
    pub fn notify_all(&self) -> usize {
        self.list_lock.lock();
        let first = self.first.load(Ordering::Relaxed);
        if first == 0 {
            self.list_lock.unlock();
            return 0;
        }
        let last = self.last.load(Ordering::Relaxed);
        let mutex = self.mutex.load(Ordering::Relaxed);
        self.first.store(0, Ordering::Relaxed);
        self.last.store(0, Ordering::Relaxed);
        self.mutex.store(ptr::null_mut(), Ordering::Relaxed);
        let mut count = 1;
        let mut at = first;
        node(at).cv_queued.store(0, Ordering::Relaxed);
        while at != last {
            at = node(at).next.load(Ordering::Relaxed);
            node(at).cv_queued.store(0, Ordering::Relaxed);
            count += 1;
        }
        self.list_lock.unlock();
        // SAFETY: as in `notify_one`: every waiter of the chain keeps `mutex` alive.
        unsafe { &*mutex }.requeue(Token::new(), first, last);
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
