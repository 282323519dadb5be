//! Per-lock counters and wait/hold time distributions (feature `stats`).
//!
//! Every counter is updated by the thread that holds the lock, while it holds it, so the updates
//! never contend and need no read-modify-write: a relaxed load and store suffice (the lock itself
//! orders one holder's update before the next holder's). A snapshot read by another thread while
//! the lock is busy may be a few acquisitions behind.
//!
//! "Handoffs" count every acquisition after the first, split by whether the new holder runs on
//! the same NUMA node (`topology::current_node()`) as the previous holder, so
//! `handoffs_local + handoffs_remote == acquisitions - 1` once the lock has been taken.
//!
//! Distributions ([`Histogram`]): the **wait** time of every acquisition, from the `lock()` (or
//! `try_lock_for`) call to holding the lock (0 for the uncontended fast path and `try_lock`), and
//! the **hold** time, from acquiring to unlocking: every hold that follows an acquisition that
//! waited, and one in [`HOLD_SAMPLE_EVERY`] of the others, standing for that many in the
//! distribution (the hold count is exact). The new holder records the wait; the unlocking
//! thread records the hold just before it releases the lock. Timestamps are clock ticks (the TSC
//! on x86-64, a few ns), converted to nanoseconds by the snapshot. Acquisitions made inside a
//! condition variable's `wait` count as acquisitions but record no wait time (the wait for the
//! lock cannot be told apart from the wait for the notification), and [`reset`] does not count
//! its own acquisition.
//!
//! Memory: with the feature, every lock carries 8 counters and 2 histograms of 80 buckets, the
//! counters on cache lines of their own: 1,792 bytes per lock on x86-64, at most 2 KiB
//! (`tests/stats.rs` checks it; `CnaMutex<()>` is 8 bytes without the feature). Without the feature
//! nothing of this exists and the lock paths are unchanged.
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
//! assert_eq!(s.wait.count(), 2);
//! assert_eq!(s.hold.count(), 2);
//! println!("p99 wait {:?}, max hold {:?}", s.wait.percentile(99.0), s.hold.max());
//! # }
//! ```

mod histogram;

pub use histogram::Histogram;
use histogram::Recorder;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::{sync, topology};

/// A snapshot of one lock's counters and distributions.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// Wait times: from the `lock()` call to holding the lock, one per acquisition (except the
    /// acquisitions inside a condition variable's `wait`).
    pub wait: Histogram,
    /// Hold times: from acquiring the lock to unlocking it, one per unlock.
    pub hold: Histogram,
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

/// One in this many holds that follow an uncontended acquisition (the fast path or `try_lock`)
/// is timed, and stands for this many in the hold distribution; the holds that follow an
/// acquisition that waited are all timed. Reading the clock is the costly part of the feature:
/// a TSC read costs about as much as an uncontended lock and unlock, so timing every hold would
/// slow the uncontended path several times over (docs/DESIGN.md, "Decision record: hold
/// sampling").
pub const HOLD_SAMPLE_EVERY: u64 = 16;
const _: () = assert!(
    HOLD_SAMPLE_EVERY == 1 << 4,
    "the sampler keeps the hash's top 4 bits"
);

/// `Counters::acquired_at` when the current hold must not be recorded (see [`reset`]).
const UNTIMED: u64 = u64::MAX;
/// `Counters::acquired_at` when the current hold is counted but not timed.
const COUNT_ONLY: u64 = u64::MAX - 1;
/// Set in `Counters::acquired_at` (with the acquisition's ticks) when the hold is a sample that
/// stands for [`HOLD_SAMPLE_EVERY`] holds. Ticks stay below it (2^62 ns is 146 years).
const WEIGHTED: u64 = 1 << 62;

/// The counters embedded in a lock when the feature is on (cache-padded, see `LockCore`).
/// `repr(C)`, in this order: what every uncontended acquisition and release writes comes
/// first, on one cache line.
#[repr(C)]
pub(crate) struct Counters {
    acquisitions: AtomicU64,
    /// The previous holder's node plus one; 0 before the first acquisition.
    last_node: AtomicU64,
    handoffs_local: AtomicU64,
    handoffs_remote: AtomicU64,
    /// When the current holder acquired the lock (clock ticks, maybe with `WEIGHTED`), or
    /// `UNTIMED` or `COUNT_ONLY`.
    acquired_at: AtomicU64,
    /// Holds counted but not timed (see [`HOLD_SAMPLE_EVERY`]).
    untimed_holds: AtomicU64,
    contended: AtomicU64,
    steals: AtomicU64,
    parks: AtomicU64,
    flushes: AtomicU64,
    wait: Recorder,
    hold: Recorder,
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
            last_node: AtomicU64::new(0),
            handoffs_local: AtomicU64::new(0),
            handoffs_remote: AtomicU64::new(0),
            acquired_at: AtomicU64::new(UNTIMED),
            untimed_holds: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            steals: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            wait: Recorder::new(),
            hold: Recorder::new(),
        }
    }

    /// Records an acquisition. Must be called by the new holder; `since` is when its `lock()`
    /// call started (clock ticks), for the acquisitions that waited.
    ///
    /// The uncontended acquisitions (`Acquired::Uncontended`) record no wait sample: their
    /// zero waits are counted at snapshot time, as `acquisitions - steals - contended`. They time
    /// one hold in [`HOLD_SAMPLE_EVERY`].
    #[inline]
    pub(crate) fn on_acquire(&self, how: Acquired, since: Option<u64>) {
        let acquisitions = self.acquisitions.load(Relaxed);
        self.acquisitions.store(acquisitions + 1, Relaxed);
        let at = match how {
            Acquired::Uncontended => {
                // One in HOLD_SAMPLE_EVERY, spread by a multiplicative hash of the count (the
                // golden ratio's bits), so that the samples do not alias with a workload whose
                // hold times repeat with a short period, as `count % N` would.
                if acquisitions.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60 == 0 {
                    sync::ticks() | WEIGHTED
                } else {
                    COUNT_ONLY
                }
            }
            Acquired::Stolen | Acquired::Queued => {
                bump(
                    if how == Acquired::Stolen {
                        &self.steals
                    } else {
                        &self.contended
                    },
                    1,
                );
                let now = sync::ticks();
                self.wait
                    .record(since.map_or(0, |since| now.saturating_sub(since)));
                now
            }
        };
        self.acquired_at.store(at, Relaxed);
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
        if last != node {
            self.last_node.store(node, Relaxed);
        }
    }

    /// Records the hold that ends now. Must be called by the holder, before it releases the
    /// lock.
    #[inline]
    pub(crate) fn on_release(&self) {
        match self.acquired_at.load(Relaxed) {
            UNTIMED => {}
            COUNT_ONLY => bump(&self.untimed_holds, 1),
            at if at & WEIGHTED != 0 => self.hold.record_sample(
                sync::ticks().saturating_sub(at & !WEIGHTED),
                HOLD_SAMPLE_EVERY,
            ),
            at => self.hold.record(sync::ticks().saturating_sub(at)),
        }
    }

    /// Forgets every count and sample, and does not time the current hold. Must be called by the
    /// holder.
    pub(crate) fn reset(&self) {
        for counter in [
            &self.acquisitions,
            &self.contended,
            &self.handoffs_local,
            &self.handoffs_remote,
            &self.parks,
            &self.steals,
            &self.flushes,
            &self.last_node,
            &self.untimed_holds,
        ] {
            counter.store(0, Relaxed);
        }
        self.acquired_at.store(UNTIMED, Relaxed);
        self.wait.reset();
        self.hold.reset();
    }

    /// Acquisitions so far (a snapshot; lockup reports watch it for progress).
    #[cfg(feature = "lockup")]
    pub(crate) fn acquisitions(&self) -> u64 {
        self.acquisitions.load(Relaxed)
    }

    /// Records a CNA secondary-queue flush. Must be called by the holder.
    pub(crate) fn on_flush(&self) {
        bump(&self.flushes, 1);
    }

    pub(crate) fn snapshot(&self) -> LockStats {
        let (steals, contended) = (self.steals.load(Relaxed), self.contended.load(Relaxed));
        let acquisitions = self.acquisitions.load(Relaxed);
        // The uncontended acquisitions' zero waits (see `on_acquire`); saturating, since a
        // snapshot taken while the lock is busy may see the counters at different moments.
        let uncontended = acquisitions.saturating_sub(steals + contended);
        LockStats {
            acquisitions,
            contended,
            handoffs_local: self.handoffs_local.load(Relaxed),
            handoffs_remote: self.handoffs_remote.load(Relaxed),
            parks: self.parks.load(Relaxed),
            steals,
            flushes: self.flushes.load(Relaxed),
            wait: self.wait.snapshot(sync::ns_per_tick(), uncontended, 0),
            hold: self
                .hold
                .snapshot(sync::ns_per_tick(), 0, self.untimed_holds.load(Relaxed)),
        }
    }
}

/// A raw lock of this crate that keeps [`LockStats`].
pub trait HasStats {
    /// The lock's counters now.
    fn stats(&self) -> LockStats;

    /// Takes the lock, forgets its counters and samples, and releases it without recording that
    /// acquisition: a fresh window starts.
    fn reset_stats(&self);
}

/// The counters of a mutex of this crate, e.g. a [`CnaMutex`](crate::CnaMutex).
pub fn snapshot<R: lock_api::RawMutex + HasStats, T: ?Sized>(
    mutex: &lock_api::Mutex<R, T>,
) -> LockStats {
    // SAFETY: reading counters does not touch the lock state, so it cannot invalidate guards
    // or references to the data.
    unsafe { mutex.raw() }.stats()
}

/// Starts a fresh statistics window for `mutex`: takes the lock (so it waits for the current
/// holder), forgets every count and sample, and releases it without recording that acquisition.
///
/// ```
/// use numa_locks::stats;
///
/// let m = numa_locks::McsMutex::new(());
/// drop(m.lock());
/// stats::reset(&m);
/// assert_eq!(stats::snapshot(&m).acquisitions, 0);
/// drop(m.lock());
/// let s = stats::snapshot(&m);
/// assert_eq!((s.acquisitions, s.wait.count(), s.hold.count()), (1, 1, 1));
/// ```
pub fn reset<R: lock_api::RawMutex + HasStats, T: ?Sized>(mutex: &lock_api::Mutex<R, T>) {
    // SAFETY: `reset_stats` takes and releases the lock like any user of it; it touches neither
    // the data nor any guard.
    unsafe { mutex.raw() }.reset_stats();
}
