//! `RawMcs`: the MCS queue lock in the qspinlock shape, with spin-then-park waiting.
//!
//! ```text
//! lock word  bits 0-4: LOCKED | PARKED | NO_STEAL | FAIR | HANDED     (LockWord, 4 bytes; its
//!            LOCAL bits 5-10 and proxy bits 11-31 belong to CnaMutex and HqMutex, unused here)
//! tail       index of the last waiter's QNode, 0 = no waiter        (4 bytes)  -> 8 bytes in all
//!
//!   holder        head (spins/parks on the lock word)   waiter -> waiter -> ... -> tail
//! ```
//!
//! Acquisition, as (tail, lock word) transitions:
//! 1. fast path: `(*, 0) → (*, LOCKED)`: one CAS on the lock word;
//! 2. steal (slow path, if stealing is on and nobody is owed the lock): `(*, free) → (*, LOCKED)`;
//! 3. enqueue: `(prev, *) → (me, *)` by swapping the tail; if `prev != 0` link `prev.next = me`
//!    and wait (spin, then park on `me.status`) until `prev` makes us head;
//! 4. as head: premark our successor (mark it `NEXT`, or wake it early where heads may not
//!    mark; see `premark`), then spin/park on the lock word until we take it;
//! 5. leave the queue: `(me, LOCKED) → (0, LOCKED)` by CAS if we are still the tail, otherwise
//!    wait for our successor to link and make it head. The holder then owns no queue node, so
//!    `unlock` is a single `fetch_sub` on the lock word.
//!
//! Timed acquisition (`try_lock_for`): a waiter whose deadline passes
//! - behind others: marks its node `ABANDONED` and leaves it in the queue (step 3 gives up);
//! - as head: passes headship on without the lock, exactly as in step 5 but with a lock word
//!   it does not hold; if that empties the queue it clears any reservation (`NO_STEAL`, `FAIR`)
//!   meant for a head.
//!
//! Whoever makes an abandoned node head (step 5's `make_head` reports it) owns it: it passes
//! headship on from it by the same step 5, as if the node's waiter had become head and given up
//! at once, and recycles the node. So every path that passes headship skips abandoned nodes, and
//! a queue of abandoned nodes drains without anyone waiting for them.

use crate::qnode::{self, Queued, node, status};
use crate::raw::{
    LockCore, QueueLock, Token, impl_raw_mutex, premark, wait_for_head, wait_for_next, walk_links,
};
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

    /// Releases the lock to the longest-waiting queued thread: no arriving thread can steal it.
    ///
    /// # Safety
    /// The lock must be held.
    pub unsafe fn unlock_fair(&self) {
        self.core.on_release();
        self.core.word.unlock_fair(
            || self.tail.load(Ordering::Relaxed) != 0,
            |proxy| crate::raw::QueuePolicy::hand_on_deferred(self, proxy),
        );
    }

    /// Whether the lock is held (a snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.core.word.is_locked()
    }

    /// Whether the queue holds a node: a waiter yet to take the lock, or one a timed waiter
    /// left when it gave up (a snapshot). Acquire: pairs with the arrivals' AcqRel swaps of
    /// the tail (every write of it is a read-modify-write), so the caller sees what a waiter
    /// wrote before it queued.
    #[inline]
    pub(crate) fn has_queued(&self) -> bool {
        self.tail.load(Ordering::Acquire) != 0
    }

    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        let my = node(me);
        // MCS needs no node id; lockup reports show where the waiters are.
        my.reset(if cfg!(feature = "lockup") {
            crate::qnode::current_place()
        } else {
            0
        });
        // (prev, *) → (me, *). AcqRel: Release publishes `my.reset`; Acquire makes `prev`'s
        // node (and its registry chunk) visible before we write its link.
        let prev = self.tail.swap(me, Ordering::AcqRel);
        if prev != 0 {
            // Release: pairs with the Acquire in `wait_for_next`; `prev` may now make us head.
            node(prev).next.store(me, Ordering::Release);
            match wait_for_head(my, deadline) {
                Some(status::DONE) => return Queued::Served,
                Some(_) => {}
                None => return Queued::Abandoned,
            }
        }
        self.lock_as_head(me, deadline)
    }

    /// Steps 4 and 5 for `me`, now the queue head: take the lock (or give up at `deadline`),
    /// then pass headship on.
    fn lock_as_head(&self, me: u32, deadline: Option<u64>) -> Queued {
        // Mark our successor at once (or wake it early if it sleeps): see `premark`.
        let premarked = premark(node(me).next.load(Ordering::Acquire));
        let walk = |visit: &mut dyn FnMut(u64)| walk_links(me, |n| &n.next, visit);
        let watch = self
            .core
            .head_watch(self as *const Self as *const (), &walk);
        // Our successor, once it has linked itself, is the one to mark (it never changes).
        let successor = || node(me).next.load(Ordering::Acquire);
        let acquired = self.core.word.acquire_as_head(
            || false,
            successor,
            // Nobody queued behind us. Relaxed: only steers when we reserve.
            || self.tail.load(Ordering::Relaxed) == me,
            premarked,
            deadline,
            watch,
        );
        match acquired {
            Some(acquired) => {
                self.pass_headship(me, false, acquired.marked);
                Queued::Acquired
            }
            None => {
                self.pass_headship(me, true, 0);
                Queued::GaveUp
            }
        }
    }

    /// Step 5: headship leaves `me`, the new holder or (`leaving`) a head giving up without the
    /// lock. `(me, *) → (0, *)` if we are still the tail, else the successor becomes head;
    /// abandoned successors are passed over (and recycled) the same way. A successor the new
    /// holder marked while it waited (`marked`, which is then our link) is made head with plain
    /// stores (`LockWord::hand_to_marked`): the handoff's path has no read-modify-write.
    fn pass_headship(&self, me: u32, leaving: bool, marked: u32) {
        if marked != 0 {
            debug_assert_eq!(node(me).next.load(Ordering::Relaxed), marked);
            self.core
                .word
                .hand_to_marked(node(marked), 0, crate::raw::Handoff::Open);
            return;
        }
        let mut from = me;
        // `from` is an abandoned node we own (recycle it once we are done with it).
        let mut owned = false;
        // Whether the lock word may hold a reservation for a head that no longer exists.
        let mut reserved = leaving;
        loop {
            // A successor that has linked itself is the next head: no need to look at the tail
            // word (on the lock's line, which arrivals keep taking away). Acquire: pairs with
            // the successor's Release link store, as in `wait_for_next`.
            let linked = node(from).next.load(Ordering::Acquire);
            // AcqRel on success is more than needed (nothing is published through an empty
            // queue) but keeps every RMW on the tail uniform; failure means a successor swapped
            // the tail.
            if linked == 0
                && self.tail.load(Ordering::Relaxed) == from
                && self
                    .tail
                    .compare_exchange(from, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                if owned {
                    qnode::recycle(from);
                }
                if reserved {
                    self.core.word.clear_reservation();
                }
                return;
            }
            let next = if linked != 0 {
                linked
            } else {
                wait_for_next(&node(from).next)
            };
            if owned {
                qnode::recycle(from);
            }
            if self.core.word.hand_to(node(next), 0) {
                return;
            }
            (from, owned, reserved) = (next, true, true);
        }
    }
}

impl QueueLock for RawMcs {
    fn lock_queue_lock(&self, _: Token) {
        self.lock();
    }

    unsafe fn unlock_queue_lock(&self, _: Token) {
        // SAFETY: the caller holds the lock (the trait method's contract).
        unsafe { self.unlock() }
    }
}

impl crate::raw::QueuePolicy for RawMcs {
    // Docs: `crate::raw::delegate::Locality`.
    const DELEGATE_LOCALITY: crate::raw::delegate::Locality = crate::raw::delegate::Locality::Any;

    #[inline]
    fn nobody_queued(&self) -> bool {
        // Relaxed: only a hint for stealing; the queue orders those who queue.
        self.tail.load(Ordering::Relaxed) == 0
    }

    #[inline]
    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        RawMcs::lock_queued(self, me, deadline)
    }
}

impl_raw_mutex!(RawMcs);
