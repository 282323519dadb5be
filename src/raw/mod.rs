//! The raw locks, and the queue-lock core they share.
//!
//! Every lock here has the qspinlock shape (docs/DESIGN.md, "The lock word" and "The queue
//! node"): a 32-bit **lock word** (`LockWord`,
//! the futex word the queue head waits on) plus one or more **queues of waiters** built from
//! per-thread `QNode`s named by 32-bit indices. The locks differ only in how they queue and
//! in whom the queue head passes headship to; the lock word, waiting, parking, stealing and
//! unlocking are shared and live in this module.
//!
//! - [`RawMcs`]: one FIFO queue.
//! - [`RawCna`]: one queue, reordered by the head into a local main queue and a remote secondary
//!   queue.
//! - [`RawHq`]: one queue per NUMA node plus a FIFO of nodes.

mod cna;
mod condvar;
pub(crate) mod delegate;
mod hq;
mod mcs;
pub(crate) mod rwlock;

pub use cna::RawCna;
pub use condvar::RawCondvar;
pub use hq::RawHq;
pub use mcs::RawMcs;
pub use rwlock::{
    RawCnaRecursiveRwLock, RawCnaRwLock, RawHqRecursiveRwLock, RawHqRwLock, RawMcsRecursiveRwLock,
    RawMcsRwLock, RawNumaRwLock, WRITER_STREAK_LIMIT, WriterLock,
};

use std::time::Duration;

use crate::qnode::{self, QNode, Queued, status};
#[cfg(feature = "stats")]
use crate::stats::{Acquired, Counters};
use crate::sync::{AtomicU32, EXHAUSTIVE, Ordering, PathEvent, const_fn, fence, note, now_ns};
use crate::tunables;
use crate::wait::{self, SpinBudget};

mod handoff;
mod word;

pub(crate) use handoff::*;
pub(crate) use word::*;

/// What every lock of the crate holds besides its queues: the lock word and, with feature
/// `stats`, the counters, on cache lines of their own (on the lock word's line, each counter
/// update would take the line from the threads polling the word; docs/DESIGN.md, "Decision
/// record: stats counters"); and the acquisition paths the locks share (the fast path,
/// `try_lock`, and the start of the slow path: spin-steal, then queue).
pub(crate) struct LockCore {
    pub(crate) word: LockWord,
    #[cfg(feature = "stats")]
    pub(crate) stats: crossbeam_utils::CachePadded<Counters>,
    #[cfg(feature = "lockup")]
    pub(crate) lockup: crate::lockup::Tracker,
}

/// Visits the NUMA node of every waiter in a lock's queues (for a lockup report).
pub(crate) type QueueWalk<'a> = &'a dyn Fn(&mut dyn FnMut(u64));

/// What the queue head's wait needs to report a suspected lockup (feature `lockup`, threshold
/// set; see `lockup::HeadCheck`); nothing without the feature.
#[cfg(feature = "lockup")]
pub(crate) type HeadWatch<'a> = Option<crate::lockup::HeadCheck<'a>>;
/// What the queue head's wait needs to report a suspected lockup: nothing without the feature.
#[cfg(not(feature = "lockup"))]
pub(crate) type HeadWatch<'a> = core::marker::PhantomData<&'a ()>;

impl LockCore {
    const_fn! {
        pub(crate) const fn new() -> Self {
            LockCore {
                word: LockWord::new(),
                #[cfg(feature = "stats")]
                stats: crossbeam_utils::CachePadded::new(Counters::new()),
                #[cfg(feature = "lockup")]
                lockup: crate::lockup::Tracker::new(),
            }
        }
    }

    /// The uncontended path: one CAS on the lock word.
    #[inline(always)]
    #[cfg_attr(feature = "lockup", track_caller)]
    pub(crate) fn try_lock_fast(&self) -> bool {
        let taken = self.word.try_lock_fast();
        if taken {
            note(PathEvent::Fast);
        }
        #[cfg(feature = "stats")]
        if taken {
            self.on_acquire(Acquired::Uncontended, None);
        }
        taken
    }

    /// `try_lock`: takes the lock if it is free and no waiter is owed it.
    #[inline]
    #[cfg_attr(feature = "lockup", track_caller)]
    pub(crate) fn try_lock(&self) -> bool {
        let taken = self.word.try_lock_fast() || self.word.try_steal();
        #[cfg(feature = "stats")]
        if taken {
            self.on_acquire(Acquired::Uncontended, None);
        }
        taken
    }

    /// Records an acquisition (features `stats` and `lockup`). Called by the new holder.
    #[cfg(feature = "stats")]
    #[inline(always)]
    #[cfg_attr(feature = "lockup", track_caller)]
    fn on_acquire(&self, how: Acquired, since: Option<u64>) {
        self.stats.on_acquire(how, since);
        #[cfg(feature = "lockup")]
        self.lockup.on_acquire(core::panic::Location::caller());
    }

    /// The lockup check for a queue head that starts waiting now (feature `lockup`, while a
    /// threshold is set); `lock` is the raw lock's address and `walk` visits the NUMA node of
    /// every queued waiter, for the report. Nothing without the feature.
    #[inline]
    pub(crate) fn head_watch<'a>(&'a self, lock: *const (), walk: QueueWalk<'a>) -> HeadWatch<'a> {
        #[cfg(feature = "lockup")]
        {
            crate::lockup::HeadCheck::new(&self.lockup, &self.stats, lock as usize, walk)
        }
        #[cfg(not(feature = "lockup"))]
        {
            let _ = (lock, walk);
            core::marker::PhantomData
        }
    }

    /// Called by every unlock of the crate's locks, while the lock is still held: records the
    /// hold time (feature `stats`; nothing otherwise).
    #[inline(always)]
    pub(crate) fn on_release(&self) {
        #[cfg(feature = "stats")]
        self.stats.on_release();
    }

    /// The slow path's start: if stealing is on, spin-steal while `nobody_queued()`; otherwise
    /// (or if that fails) wait in the lock's queues with `queued(node index, deadline)`. Returns
    /// how it ended: `Acquired` (always, without a `deadline`, unless a `delegate` waiter was
    /// `Served`); with one, `GaveUp` once it has passed (never before).
    #[cold]
    #[cfg_attr(feature = "lockup", track_caller)]
    pub(crate) fn lock_contended(
        &self,
        nobody_queued: impl Fn() -> bool,
        queued: impl FnOnce(u32) -> Queued,
        deadline: Option<u64>,
    ) -> Queued {
        #[cfg(feature = "stats")]
        let since = Some(crate::sync::ticks());
        if tunables::stealing() && self.word.spin_steal(nobody_queued, deadline) {
            note(PathEvent::Steal);
            #[cfg(feature = "stats")]
            self.on_acquire(Acquired::Stolen, since);
            return Queued::Acquired;
        }
        if wait::expired(deadline) {
            // A timed try whose time is up before it would queue: it only tried stealing.
            return Queued::GaveUp;
        }
        #[cfg(not(feature = "stats"))]
        let since = None;
        self.enqueue(queued, deadline, since)
    }

    /// `lock()` straight into the queue, without trying to steal: a thread whose turn on a
    /// crowded core is over (`wait::turn_over`). Waits as long as needed.
    #[cold]
    #[cfg_attr(feature = "lockup", track_caller)]
    pub(crate) fn lock_queued(&self, queued: impl FnOnce(u32) -> Queued) {
        #[cfg(feature = "stats")]
        let since = Some(crate::sync::ticks());
        #[cfg(not(feature = "stats"))]
        let since = None;
        let outcome = self.enqueue(queued, None, since);
        debug_assert!(
            outcome.acquired(),
            "a wait without a deadline ends with the lock"
        );
    }

    /// Waits in the lock's queues (`queued(node index, deadline)`) and records how the
    /// acquisition was made; a queued acquisition starts the thread's turn afresh.
    #[inline]
    #[cfg_attr(feature = "lockup", track_caller)]
    fn enqueue(
        &self,
        queued: impl FnOnce(u32) -> Queued,
        deadline: Option<u64>,
        since: Option<u64>,
    ) -> Queued {
        #[cfg(not(feature = "stats"))]
        let _ = since;
        let outcome = qnode::with_node(queued, || acquire_unqueued(&self.word, deadline));
        if outcome.acquired() {
            note(PathEvent::Queued);
            wait::turn_ended();
            #[cfg(feature = "stats")]
            self.on_acquire(Acquired::Queued, since);
        }
        outcome
    }
}

/// A lock a [`RawCondvar`] works with: `RawMcs`, `RawCna` and `RawHq`. Sealed: its methods
/// take a [`Token`] that only this crate can make.
pub trait QueueLock: Sync {
    /// The lock's `lock()`.
    #[doc(hidden)]
    fn lock_queue_lock(&self, token: Token);

    /// The lock's `unlock()`.
    ///
    /// # Safety
    /// The lock must be held.
    #[doc(hidden)]
    unsafe fn unlock_queue_lock(&self, token: Token);
}

/// Proof of being this crate, for [`QueueLock`]'s methods.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Token(());

impl Token {
    /// Only the crate can make one.
    pub(crate) const fn new() -> Self {
        Token(())
    }
}

/// A queue lock's policy: what differs between `RawMcs`, `RawCna` and `RawHq`. Everything else
/// (the fast paths, the slow path's start, the release, `lock_api`'s traits) is written once,
/// by [`impl_raw_mutex!`], over these hooks.
pub(crate) trait QueuePolicy {
    /// Whether nobody waits in the lock's queues: a hint for an arriving thread's stealing spin
    /// (Relaxed; the queue orders those who queue).
    fn nobody_queued(&self) -> bool;

    /// The queued acquisition of the node `me`, until `deadline` if given (see
    /// `LockCore::lock_contended`).
    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued;

    /// Whose published closures a `delegate` holder of this lock runs (see `crate::delegate`).
    const DELEGATE_LOCALITY: crate::raw::delegate::Locality;

    /// What `unlock` finishes after its `fetch_sub` returned the proxy bits `proxy` (never 0)
    /// and before it frees the lock (see `LockWord::unlock`): CNA hands on from its proxy
    /// node, HQ makes the handoff it deferred. MCS never records a proxy.
    #[inline]
    fn hand_on_deferred(&self, proxy: u32) {
        debug_assert_eq!(
            proxy, 0,
            "a proxy recorded by a lock that defers no handoff"
        );
    }
}

/// Implements the inherent `lock`, `try_lock`, `unlock` and `try_lock_for`, and
/// `lock_api::RawMutex`, `RawMutexFair` and `RawMutexTimed`, for a raw lock that has a field
/// `core: LockCore`, implements [`QueuePolicy`], and has the inherent methods `unlock_fair`,
/// `is_locked` and a `const fn new`.
macro_rules! impl_raw_mutex {
    ($raw:ty) => {
        impl $raw {
            /// Acquires the lock, waiting as long as needed.
            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            pub fn lock(&self) {
                // A thread on a crowded core whose turn is over queues behind the waiters.
                if $crate::wait::turn_over() {
                    self.end_turn();
                    return;
                }
                self.lock_uncounted();
            }

            /// `lock` without counting the thread's turn (`wait::turn_over`): the rwlock's
            /// writer lock `M`, whose writers already give waiting readers their turn (docs/
            /// DESIGN.md, "Decision record: a crowded thread's turn").
            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            pub(crate) fn lock_uncounted(&self) {
                // The one-CAS fast path. With stealing off, every handoff (`LockWord::hand_to`)
                // sets `NO_STEAL` until the new head has the lock, so this CAS cannot jump the
                // queue.
                if !self.core.try_lock_fast() {
                    self.lock_slow(None);
                }
            }

            /// `lock` on a crowded core whose thread has used up its turn
            /// (`wait::turn_over`): it queues behind the waiters, if there are any, instead of
            /// taking the lock ahead of them again.
            #[cold]
            #[cfg_attr(feature = "lockup", track_caller)]
            fn end_turn(&self) {
                if $crate::raw::QueuePolicy::nobody_queued(self) {
                    // Nobody to give the turn to: count afresh (a queued acquisition does
                    // that itself).
                    $crate::wait::turn_ended();
                    self.lock_uncounted();
                    return;
                }
                self.core
                    .lock_queued(|me| $crate::raw::QueuePolicy::lock_queued(self, me, None));
            }

            /// The slow path of `lock` (`deadline: None`) and of the timed tries; see
            /// `LockCore::lock_contended`.
            #[cfg_attr(feature = "lockup", track_caller)]
            fn lock_slow(&self, deadline: Option<u64>) -> bool {
                self.lock_contended(deadline).acquired()
            }

            /// `LockCore::lock_contended` with this lock's queues: how the slow path ended
            /// (`lock_slow`, and `delegate`'s `lock_or_served`).
            #[cfg_attr(feature = "lockup", track_caller)]
            fn lock_contended(&self, deadline: Option<u64>) -> $crate::qnode::Queued {
                self.core.lock_contended(
                    || $crate::raw::QueuePolicy::nobody_queued(self),
                    |me| $crate::raw::QueuePolicy::lock_queued(self, me, deadline),
                    deadline,
                )
            }

            /// Runs `f` under the lock, possibly on another thread that holds it, and returns
            /// its result: the raw form of [`Delegate::delegate`](crate::Delegate::delegate),
            /// for callers that guard their data themselves. A panic in `f` is resumed on this
            /// thread once the lock is released; see `Delegate` for what a delegated closure
            /// may do.
            ///
            /// ```
            #[doc = concat!("use numa_locks::raw::", stringify!($raw), ";")]
            ///
            #[doc = concat!("let raw = ", stringify!($raw), "::new();")]
            /// assert_eq!(raw.delegate(|| 6 * 7), 42);
            /// assert!(!raw.is_locked());
            /// ```
            #[inline]
            pub fn delegate<R: Send, F: FnOnce() -> R + Send>(&self, f: F) -> R {
                $crate::raw::delegate::run(self, f)
            }

            /// Acquires the lock if it is free and no waiter is owed it.
            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            pub fn try_lock(&self) -> bool {
                self.core.try_lock()
            }

            /// Releases the lock.
            ///
            /// # Safety
            /// The lock must be held (by this thread or by a guard this thread was given).
            #[inline]
            pub unsafe fn unlock(&self) {
                self.core.on_release();
                self.core
                    .word
                    .unlock(|proxy| $crate::raw::QueuePolicy::hand_on_deferred(self, proxy));
            }

            /// Acquires the lock if it can within `timeout`: `true` once this thread holds it,
            /// `false` once `timeout` has passed (never earlier). A waiter that gives up leaves
            /// the lock's queue without disturbing it. `lock_api`'s `try_lock_for` and
            /// `try_lock_until` call this.
            ///
            /// ```
            #[doc = concat!("use numa_locks::raw::", stringify!($raw), ";")]
            /// use std::time::Duration;
            ///
            #[doc = concat!("let raw = ", stringify!($raw), "::new();")]
            /// assert!(raw.try_lock_for(Duration::from_millis(1)));
            /// assert!(!raw.try_lock_for(Duration::from_millis(1)), "held: times out");
            /// unsafe { raw.unlock() };
            /// ```
            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            pub fn try_lock_for(&self, timeout: std::time::Duration) -> bool {
                self.core.try_lock_fast()
                    || self.lock_slow(Some($crate::raw::deadline_after(timeout)))
            }
        }

        #[cfg(not(loom))]
        // SAFETY: `lock`/`try_lock` return only once this thread holds the lock exclusively
        // (the lock word's LOCKED bit is set by this thread's acquiring CAS), and `unlock`
        // releases it with Release ordering; the guard state is stateless (`GuardSend`) because
        // unlocking needs no per-acquisition data (docs/DESIGN.md, "The queue node").
        unsafe impl lock_api::RawMutex for $raw {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();
            type Guard = lock_api::GuardSend;

            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            fn lock(&self) -> lock_api::GuardSend {
                <$raw>::lock(self);
                lock_api::GuardSend::new()
            }

            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            fn try_lock(&self) -> Option<lock_api::GuardSend> {
                <$raw>::try_lock(self).then(lock_api::GuardSend::new)
            }

            #[inline]
            unsafe fn unlock(&self, _guard: lock_api::GuardSend) {
                // SAFETY: the caller holds the lock (lock_api's contract for `unlock`).
                unsafe { <$raw>::unlock(self) }
            }

            #[inline]
            fn is_locked(&self) -> bool {
                <$raw>::is_locked(self)
            }
        }

        #[cfg(not(loom))]
        // SAFETY: as for `RawMutex`; `unlock_fair` releases the lock like `unlock`.
        unsafe impl lock_api::RawMutexFair for $raw {
            #[inline]
            unsafe fn unlock_fair(&self, _guard: lock_api::GuardSend) {
                // SAFETY: the caller holds the lock (lock_api's contract for `unlock_fair`).
                unsafe { <$raw>::unlock_fair(self) }
            }
        }

        #[cfg(not(loom))]
        // SAFETY: as for `RawMutex`: a `true` return means this thread took the lock; a waiter
        // that times out leaves without it (its queue node is abandoned or passed on).
        unsafe impl lock_api::RawMutexTimed for $raw {
            type Duration = std::time::Duration;
            type Instant = std::time::Instant;

            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            fn try_lock_for(&self, timeout: std::time::Duration) -> Option<lock_api::GuardSend> {
                <$raw>::try_lock_for(self, timeout).then(lock_api::GuardSend::new)
            }

            #[inline]
            #[cfg_attr(feature = "lockup", track_caller)]
            fn try_lock_until(&self, timeout: std::time::Instant) -> Option<lock_api::GuardSend> {
                // The lock's clock is `now_ns`: convert the instant into a time left on it.
                let left = timeout.saturating_duration_since(std::time::Instant::now());
                <$raw>::try_lock_for(self, left).then(lock_api::GuardSend::new)
            }
        }

        impl $crate::raw::delegate::DelegateRaw for $raw {
            const LOCALITY: $crate::raw::delegate::Locality =
                <$raw as $crate::raw::QueuePolicy>::DELEGATE_LOCALITY;

            #[inline(always)]
            fn try_lock_fast(&self) -> bool {
                self.core.try_lock_fast()
            }

            #[inline]
            fn lock_or_served(&self) -> bool {
                self.lock_contended(None) != $crate::qnode::Queued::Served
            }

            #[inline]
            unsafe fn unlock(&self) {
                // SAFETY: the caller holds the lock (the trait method's contract).
                unsafe { <$raw>::unlock(self) }
            }
        }

        impl Default for $raw {
            fn default() -> Self {
                Self::new()
            }
        }

        #[cfg(feature = "stats")]
        impl crate::stats::HasStats for $raw {
            fn stats(&self) -> crate::stats::LockStats {
                self.core.stats.snapshot()
            }

            fn reset_stats(&self) {
                <$raw>::lock(self);
                self.core.stats.reset();
                // SAFETY: taken just above.
                unsafe { <$raw>::unlock(self) };
            }
        }
    };
}
pub(crate) use impl_raw_mutex;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// A thread on a crowded core whose turn is over (`wait::turn_over`) finds the lock free
    /// just after its own release, with a waiter queued: it queues behind that waiter instead
    /// of taking the lock ahead of it again (where it would almost always win: the waiter
    /// sleeps and must be woken first).
    fn a_thread_whose_turn_is_over_queues_behind_the_waiter<R: QueueLock + QueuePolicy>(lock: &R) {
        let order = Mutex::new(Vec::new());
        lock.lock_queue_lock(Token::new());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                lock.lock_queue_lock(Token::new());
                order.lock().unwrap().push("waiter");
                // SAFETY: taken above.
                unsafe { lock.unlock_queue_lock(Token::new()) };
            });
            let start = Instant::now();
            while lock.nobody_queued() {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "the waiter never queued"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            // Give the waiter time to fall asleep, then make this thread's core crowded and
            // its turn all but over.
            std::thread::sleep(Duration::from_millis(20));
            wait::note_yield(wait::ALONE_YIELD_NS, crate::sync::now_ns() + 60_000_000_000);
            wait::turn_ended();
            for _ in 1..wait::TURN_BUDGET {
                assert!(!wait::turn_over());
            }
            // SAFETY: taken above.
            unsafe { lock.unlock_queue_lock(Token::new()) };
            lock.lock_queue_lock(Token::new());
            order.lock().unwrap().push("releaser");
            // SAFETY: taken just above.
            unsafe { lock.unlock_queue_lock(Token::new()) };
        });
        assert_eq!(*order.lock().unwrap(), ["waiter", "releaser"]);
    }

    #[test]
    fn a_thread_whose_turn_is_over_queues_behind_the_waiters() {
        // Each lock on a thread of its own: the crowded verdict and the turn are per thread.
        std::thread::spawn(|| a_thread_whose_turn_is_over_queues_behind_the_waiter(&RawMcs::new()))
            .join()
            .unwrap();
        std::thread::spawn(|| a_thread_whose_turn_is_over_queues_behind_the_waiter(&RawCna::new()))
            .join()
            .unwrap();
        std::thread::spawn(|| a_thread_whose_turn_is_over_queues_behind_the_waiter(&RawHq::new()))
            .join()
            .unwrap();
    }
}
