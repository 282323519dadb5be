//! Per-lock counters (feature `stats`).
//!
//! Every counter is updated by the thread that has just acquired the lock, while it holds it, so
//! the updates never contend and need no read-modify-write: a relaxed load and store suffice
//! (the lock itself orders one holder's update before the next holder's). A snapshot read by
//! another thread while the lock is busy may be a few acquisitions behind.
//!
//! "Handoffs" count every acquisition after the first, split by whether the new holder runs on
//! the same NUMA node (`topology::current_node()`) as the previous holder, so
//! `handoffs_local + handoffs_remote == acquisitions - 1` once the lock has been taken.
//!
//! ```
//! # #[cfg(feature = "stats")] {
//! use numa_locks::CnaMutex;
//!
//! let m = CnaMutex::new(0);
//! *m.lock() += 1;
//! *m.lock() += 1;
//! let s = numa_locks::stats::snapshot(&m);
//! assert_eq!(s.acquisitions, 2);
//! assert_eq!(s.handoffs_local + s.handoffs_remote, 1);
//! # }
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::topology;

/// A snapshot of one lock's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Successful `lock` and `try_lock` calls.
    pub acquisitions: u64,
    /// Acquisitions that waited in the queue.
    pub contended: u64,
    /// Acquisitions whose previous holder ran on the same NUMA node.
    pub handoffs_local: u64,
    /// Acquisitions whose previous holder ran on another NUMA node.
    pub handoffs_remote: u64,
    /// Times a waiter parked (slept) before its acquisition.
    pub parks: u64,
    /// Acquisitions that took a free lock on the slow path without queueing (stealing).
    pub steals: u64,
    /// CNA secondary-queue flushes (threshold reached, fair unlock, or no local waiter).
    pub flushes: u64,
}

/// How an acquisition happened.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The one-CAS fast path or `try_lock`.
    Uncontended,
    /// The slow path took a free lock before queueing.
    Stolen,
    /// The thread waited in the queue.
    Queued,
}

/// The counters embedded in a lock when the feature is on.
#[derive(Default)]
pub(crate) struct Counters {
    acquisitions: AtomicU64,
    contended: AtomicU64,
    handoffs_local: AtomicU64,
    handoffs_remote: AtomicU64,
    parks: AtomicU64,
    steals: AtomicU64,
    flushes: AtomicU64,
    /// The previous holder's node plus one; 0 before the first acquisition.
    last_node: AtomicU64,
}

crate::sync::thread_local! {
    static PARKS: Cell<u64> = const { Cell::new(0) };
}

/// Counts a park of the calling thread; added to the lock it acquires next.
pub(crate) fn note_park() {
    let _ = PARKS.try_with(|p| p.set(p.get() + 1));
}

#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    // Only the lock holder writes (see the module docs), so load + store cannot lose updates.
    counter.store(counter.load(Relaxed) + by, Relaxed);
}

impl Counters {
    pub(crate) const fn new() -> Self {
        Counters {
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            handoffs_local: AtomicU64::new(0),
            handoffs_remote: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            steals: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            last_node: AtomicU64::new(0),
        }
    }

    /// Records an acquisition. Must be called by the new holder.
    pub(crate) fn on_acquire(&self, how: Acquired) {
        bump(&self.acquisitions, 1);
        match how {
            Acquired::Uncontended => {}
            Acquired::Stolen => bump(&self.steals, 1),
            Acquired::Queued => bump(&self.contended, 1),
        }
        let parks = PARKS.try_with(|p| p.replace(0)).unwrap_or(0);
        if parks != 0 {
            bump(&self.parks, parks);
        }
        let node = (topology::current_node() as u64).wrapping_add(1);
        let last = self.last_node.load(Relaxed);
        if last != 0 {
            bump(
                if last == node {
                    &self.handoffs_local
                } else {
                    &self.handoffs_remote
                },
                1,
            );
        }
        self.last_node.store(node, Relaxed);
    }

    /// Records a CNA secondary-queue flush. Must be called by the holder.
    pub(crate) fn on_flush(&self) {
        bump(&self.flushes, 1);
    }

    pub(crate) fn snapshot(&self) -> LockStats {
        LockStats {
            acquisitions: self.acquisitions.load(Relaxed),
            contended: self.contended.load(Relaxed),
            handoffs_local: self.handoffs_local.load(Relaxed),
            handoffs_remote: self.handoffs_remote.load(Relaxed),
            parks: self.parks.load(Relaxed),
            steals: self.steals.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
        }
    }
}

/// A raw lock of this crate that keeps [`LockStats`].
pub trait HasStats {
    /// The lock's counters now.
    fn stats(&self) -> LockStats;
}

/// The counters of a mutex of this crate, e.g. a [`CnaMutex`](crate::CnaMutex).
pub fn snapshot<R: lock_api::RawMutex + HasStats, T: ?Sized>(
    mutex: &lock_api::Mutex<R, T>,
) -> LockStats {
    // SAFETY: reading counters does not touch the lock state, so it cannot invalidate guards
    // or references to the data.
    unsafe { mutex.raw() }.stats()
}
