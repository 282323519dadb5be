//! `RawMcs`: the MCS queue lock in the qspinlock shape, with spin-then-park waiting.
//!
//! ```text
//! lock word  [ LOCKED | PARKED | NO_STEAL | FAIR ]   (see LockWord)
//! tail       index of the last waiter's QNode, 0 = no waiter
//!
//!   holder        head (spins/parks on the lock word)   waiter -> waiter -> ... -> tail
//! ```
//!
//! Acquisition, as (tail, lock word) transitions:
//! 1. fast path: `(*, 0) → (*, LOCKED)`: one CAS on the lock word;
//! 2. steal (slow path, if stealing is on and nobody is owed the lock): `(*, free) → (*, LOCKED)`;
//! 3. enqueue: `(prev, *) → (me, *)` by swapping the tail; if `prev != 0` link `prev.next = me`
//!    and wait (spin, then park on `me.status`) until `prev` makes us head;
//! 4. as head: pre-wake our successor, then spin/park on the lock word until we take it;
//! 5. leave the queue: `(me, LOCKED) → (0, LOCKED)` by CAS if we are still the tail, otherwise
//!    wait for our successor to link and make it head. The holder then owns no queue node, so
//!    `unlock` is a single `fetch_sub` on the lock word.

use crate::qnode::node;
use crate::raw::{LockCore, impl_raw_mutex, prewake, wait_for_head, wait_for_next};
use crate::sync::{AtomicU32, Ordering, const_fn};

/// The raw MCS queue lock behind [`McsMutex`](crate::McsMutex): 8 bytes, FIFO among queued
/// waiters, spin-then-park.
///
/// ```
/// use lock_api::RawMutex;
/// use numa_locks::raw::RawMcs;
///
/// let raw = RawMcs::new();
/// let guard = RawMutex::lock(&raw);
/// assert!(raw.is_locked());
/// unsafe { RawMutex::unlock(&raw, guard) };
/// assert!(!raw.is_locked());
/// ```
pub struct RawMcs {
    core: LockCore,
    /// Index of the last queued waiter's node; 0 when nobody waits.
    tail: AtomicU32,
}

impl RawMcs {
    const_fn! {
        /// An unlocked lock.
        pub const fn new() -> Self {
            RawMcs {
                core: LockCore::new(),
                tail: AtomicU32::new(0),
            }
        }
    }

    /// Acquires the lock, waiting as long as needed.
    #[inline]
    pub fn lock(&self) {
        if !self.core.try_lock_fast() {
            // Relaxed: only a hint for stealing; the queue orders those who queue.
            self.core.lock_contended(
                || self.tail.load(Ordering::Relaxed) == 0,
                |me| self.lock_queued(me),
            );
        }
    }

    /// Acquires the lock if it is free and no waiter is owed it.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.core.try_lock()
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The lock must be held (by this thread or by a guard this thread was given).
    #[inline]
    pub unsafe fn unlock(&self) {
        self.core.word.unlock();
    }

    /// Releases the lock to the longest-waiting queued thread: no arriving thread can steal it.
    ///
    /// # Safety
    /// The lock must be held.
    pub unsafe fn unlock_fair(&self) {
        self.core
            .word
            .unlock_fair(self.tail.load(Ordering::Relaxed) != 0);
    }

    /// Whether the lock is held (a snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.core.word.is_locked()
    }

    fn lock_queued(&self, me: u32) {
        let my = node(me);
        my.reset(0);
        // (prev, *) → (me, *). AcqRel: Release publishes `my.reset`; Acquire makes `prev`'s
        // node (and its registry chunk) visible before we write its link.
        let prev = self.tail.swap(me, Ordering::AcqRel);
        if prev != 0 {
            // Release: pairs with the Acquire in `wait_for_next`; `prev` may now make us head.
            node(prev).next.store(me, Ordering::Release);
            wait_for_head(my);
        }
        // We are the queue head. Wake our successor early if it sleeps.
        let next = my.next.load(Ordering::Acquire);
        if next != 0 {
            prewake(node(next));
        }
        self.core.word.acquire_as_head(|| false);
        self.pass_headship(me);
    }

    /// Leaves the queue after taking the lock: `(me, LOCKED) → (0, LOCKED)`, or make the
    /// successor head.
    fn pass_headship(&self, me: u32) {
        // AcqRel on success is more than needed (nothing is published through an empty queue)
        // but keeps every RMW on the tail uniform; failure means a successor swapped the tail.
        if self.tail.load(Ordering::Relaxed) == me
            && self
                .tail
                .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
        let next = wait_for_next(&node(me).next);
        self.core.word.hand_to(node(next), 0);
    }
}

impl_raw_mutex!(RawMcs);
