//! The baselines of `numasim`: **models** of two locks this crate is compared with, written for
//! the simulator directly on `numa_sim`'s atomics and futex. They follow the published code's
//! shape (which words, which transitions, how waiting is bounded) closely enough to cost the same
//! memory traffic; they are not that code.
//!
//! - [`Ttas`]: parking_lot's `RawMutex` (parking_lot 0.13 `src/raw_mutex.rs`,
//!   parking_lot_core's `SpinWait` and `park` / `unpark_one`), with parking_lot 0.12's eventual
//!   fairness as an option.
//! - [`SpinMcs`]: a plain spinning MCS queue lock, the queue of the kernel's qspinlock without
//!   its pending bit and lock-word spinning.
//!
//! Every object is on its own cache line(s) (`CachePadded`), so where the allocator puts it does
//! not change the simulated costs. Every wait loop declares its bound with
//! `numa_sim::spin_deadline` before it starts: `u64::MAX` for the loops that wait for a change
//! (the simulator then sleeps them until a line they read is written), 0 for the loop that is
//! bounded by its iteration count instead (SpinWait: its iterations run as written).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crossbeam_utils::CachePadded;
use numa_sim::atomic::{AtomicU32, AtomicU64};

use crate::harness::{RunConfig, SimLock};

/// "No thread": the end of a queue, an empty tail.
const NONE: u32 = u32::MAX;

/// A simulated thread's index as a queue link.
fn link(me: usize) -> u32 {
    u32::try_from(me).expect("numa_sim machines have at most 256 hardware threads")
}

/// parking_lot_core's `SpinWait`: 3 rounds of 1, 2 and 4 `pause`s, then `sched_yield`s, 10 tries
/// in all; then the caller parks.
struct SpinWait {
    counter: u32,
}

impl SpinWait {
    const fn new() -> Self {
        SpinWait { counter: 0 }
    }

    /// One more round of spinning; `false` once the 10 tries are used up.
    fn spin(&mut self) -> bool {
        if self.counter >= 10 {
            return false;
        }
        self.counter += 1;
        if self.counter <= 3 {
            for _ in 0..1u32 << (self.counter - 1) {
                numa_sim::pause();
            }
        } else {
            numa_sim::yield_now();
        }
        true
    }
}

/// `Ttas::state`: the lock is held.
const LOCKED: u32 = 0b01;
/// `Ttas::state`: some thread is (or is about to be) parked in the lock's queue.
const PARKED: u32 = 0b10;

/// `ThreadData::token`: woken to retry.
const TOKEN_NORMAL: u32 = 0;
/// `ThreadData::token`: woken owning the lock (a direct handoff).
const TOKEN_HANDOFF: u32 = 1;

/// `ThreadData::futex`: parked (or about to park).
const PARKER_WAITING: u32 = 1;
/// `ThreadData::futex`: unparked.
const PARKER_WOKEN: u32 = 0;

/// parking_lot_core's hash-table bucket for the lock's address (one lock, one bucket): the
/// queue of parked threads under a small word lock, and the eventual-fairness timer, all on one
/// line as in parking_lot (`Bucket` is 64-byte aligned there too).
#[repr(align(64))]
struct Bucket {
    /// The word lock guarding the rest (parking_lot's `WordLock`; here a test-and-test-and-set
    /// spin lock: it is held for a few accesses): 0 free, 1 held.
    lock: AtomicU32,
    /// The first parked thread, or [`NONE`].
    head: AtomicU32,
    /// The last parked thread, or [`NONE`].
    tail: AtomicU32,
    /// `FairTimeout::seed` (xorshift32 state).
    fair_seed: AtomicU32,
    /// `FairTimeout::timeout`: the virtual time (ns) after which the next unpark is fair.
    fair_timeout_ns: AtomicU64,
}

/// parking_lot_core's per-thread `ThreadData`: its futex word, its queue link and the token its
/// waker leaves.
#[repr(align(64))]
struct ThreadData {
    /// [`PARKER_WAITING`] from enqueueing until woken, then [`PARKER_WOKEN`].
    futex: AtomicU32,
    /// The next parked thread in the bucket's queue, or [`NONE`].
    next: AtomicU32,
    /// [`TOKEN_NORMAL`] or [`TOKEN_HANDOFF`], written by the waker before it wakes the thread.
    token: AtomicU32,
}

/// A model of parking_lot's `RawMutex`: a test-and-test-and-set word with parking.
///
/// `state` (one word, its own line):
///
/// | state             | meaning                                                              |
/// |-------------------|----------------------------------------------------------------------|
/// | 0                 | free, nobody parked                                                  |
/// | LOCKED            | held, nobody parked                                                  |
/// | PARKED            | free, threads parked: the unlock that released it wakes one of them, |
/// |                   | which competes with arriving threads (barging)                       |
/// | LOCKED \| PARKED  | held, threads parked (or about to park): unlock must wake one        |
///
/// Lock: one CAS 0 → LOCKED; else spin with [`SpinWait`] while PARKED is clear, retrying the CAS
/// (`state | LOCKED`, so a free lock is taken even with threads parked: barging); then set
/// PARKED and park, if under the bucket lock the state is still LOCKED | PARKED. Woken with
/// [`TOKEN_HANDOFF`], the thread owns the lock; with [`TOKEN_NORMAL`] it starts over.
///
/// Unlock, parking_lot 0.13 (`fairness` off): `fetch_sub(LOCKED)`; if PARKED was set, dequeue
/// the first parked thread under the bucket lock, clear PARKED if it was the last, and wake it.
/// parking_lot 0.12 (`fairness` on): CAS LOCKED → 0; failing that (PARKED), dequeue the first
/// parked thread and, if the bucket's fair timeout has passed (it is re-armed at a random
/// 0..1 ms, so about every 0.5 ms), hand it the lock (the state stays LOCKED, PARKED cleared if
/// it was the last); otherwise release (state PARKED or 0) and wake it to compete.
pub struct Ttas {
    state: CachePadded<AtomicU32>,
    bucket: CachePadded<Bucket>,
    threads: Box<[CachePadded<ThreadData>]>,
    /// parking_lot 0.12's eventual fairness.
    fairness: bool,
}

/// How a park ended.
enum Parked {
    /// The state was no longer LOCKED | PARKED: not parked, retry.
    Invalid,
    /// Woken to retry.
    Woken,
    /// Woken owning the lock.
    Handoff,
}

impl SimLock for Ttas {
    fn new(threads: usize, config: &RunConfig) -> Self {
        Ttas {
            state: CachePadded::new(AtomicU32::new(0)),
            bucket: CachePadded::new(Bucket {
                lock: AtomicU32::new(0),
                head: AtomicU32::new(NONE),
                tail: AtomicU32::new(NONE),
                // parking_lot seeds bucket i's timer with i + 1 and arms it at creation, so the
                // first unpark is fair.
                fair_seed: AtomicU32::new(1),
                fair_timeout_ns: AtomicU64::new(0),
            }),
            threads: (0..threads)
                .map(|_| {
                    CachePadded::new(ThreadData {
                        futex: AtomicU32::new(PARKER_WOKEN),
                        next: AtomicU32::new(NONE),
                        token: AtomicU32::new(TOKEN_NORMAL),
                    })
                })
                .collect(),
            fairness: config.ttas_fairness,
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.lock(me);
        let result = critical_section();
        self.unlock();
        result
    }
}

impl Ttas {
    fn lock(&self, me: usize) {
        if self
            .state
            .compare_exchange(0, LOCKED, Acquire, Relaxed)
            .is_err()
        {
            self.lock_slow(me);
        }
    }

    /// `RawMutex::lock_slow`.
    #[cold]
    fn lock_slow(&self, me: usize) {
        let mut spinwait = SpinWait::new();
        // Bounded by SpinWait's 10 tries, not by time: the iterations run as written.
        numa_sim::spin_deadline(0);
        let mut state = self.state.load(Relaxed);
        loop {
            // Take the lock if it is free, even with threads parked.
            if state & LOCKED == 0 {
                match self
                    .state
                    .compare_exchange(state, state | LOCKED, Acquire, Relaxed)
                {
                    Ok(_) => return,
                    Err(now) => state = now,
                }
                continue;
            }
            // Spin while nobody is parked (and the tries last).
            if state & PARKED == 0 && spinwait.spin() {
                state = self.state.load(Relaxed);
                continue;
            }
            // Announce the park.
            if state & PARKED == 0
                && let Err(now) =
                    self.state
                        .compare_exchange(state, state | PARKED, Relaxed, Relaxed)
            {
                state = now;
                continue;
            }
            match self.park(me) {
                Parked::Handoff => return,
                Parked::Woken | Parked::Invalid => {}
            }
            spinwait = SpinWait::new();
            numa_sim::spin_deadline(0);
            state = self.state.load(Relaxed);
        }
    }

    /// `parking_lot_core::park` with the mutex's `validate`: enqueue under the bucket lock if the
    /// state is still LOCKED | PARKED, then sleep on the thread's own futex word.
    fn park(&self, me: usize) -> Parked {
        self.bucket_lock();
        if self.state.load(Relaxed) != LOCKED | PARKED {
            self.bucket_unlock();
            return Parked::Invalid;
        }
        let data = &self.threads[me];
        data.next.store(NONE, Relaxed);
        data.futex.store(PARKER_WAITING, Relaxed);
        let tail = self.bucket.tail.load(Relaxed);
        if tail == NONE {
            self.bucket.head.store(link(me), Relaxed);
        } else {
            self.threads[tail as usize].next.store(link(me), Relaxed);
        }
        self.bucket.tail.store(link(me), Relaxed);
        self.bucket_unlock();
        // Acquire: pairs with the waker's release store, which follows its token store.
        while data.futex.load(Acquire) != PARKER_WOKEN {
            numa_sim::futex_wait(&data.futex, PARKER_WAITING, None);
        }
        if data.token.load(Relaxed) == TOKEN_HANDOFF {
            Parked::Handoff
        } else {
            Parked::Woken
        }
    }

    fn unlock(&self) {
        if self.fairness {
            // parking_lot 0.12: release only if nobody is parked; otherwise unlock_slow decides.
            if self
                .state
                .compare_exchange(LOCKED, 0, Release, Relaxed)
                .is_err()
            {
                self.unlock_slow();
            }
        } else {
            // parking_lot 0.13: release first, then wake one parked thread if there is one.
            if self.state.fetch_sub(LOCKED, Release) & PARKED != 0 {
                self.unlock_slow();
            }
        }
    }

    /// `RawMutex::unlock_slow` through `parking_lot_core::unpark_one`.
    #[cold]
    fn unlock_slow(&self) {
        self.bucket_lock();
        let first = self.bucket.head.load(Relaxed);
        if first == NONE {
            // Nobody has enqueued yet (a parker between setting PARKED and its validation sees
            // the new state and retries).
            if self.fairness {
                self.state.store(0, Release);
            } else {
                self.state.fetch_and(!PARKED, Relaxed);
            }
            self.bucket_unlock();
            return;
        }
        let woken = &self.threads[first as usize];
        let next = woken.next.load(Relaxed);
        self.bucket.head.store(next, Relaxed);
        if next == NONE {
            self.bucket.tail.store(NONE, Relaxed);
        }
        let have_more = next != NONE;
        let token = if self.fairness {
            if self.fair_timeout_passed() {
                // Hand the lock over: it stays LOCKED.
                if !have_more {
                    self.state.store(LOCKED, Relaxed);
                }
                TOKEN_HANDOFF
            } else {
                self.state
                    .store(if have_more { PARKED } else { 0 }, Release);
                TOKEN_NORMAL
            }
        } else {
            if !have_more {
                self.state.fetch_and(!PARKED, Relaxed);
            }
            TOKEN_NORMAL
        };
        woken.token.store(token, Relaxed);
        self.bucket_unlock();
        // The Linux thread parker's unpark: store, then always FUTEX_WAKE.
        woken.futex.store(PARKER_WOKEN, Release);
        numa_sim::futex_wake(&woken.futex, 1);
    }

    /// `FairTimeout::should_timeout` (parking_lot_core 0.9): once the timeout has passed, re-arm
    /// it at now + a random 0..1 ms and answer yes. Called under the bucket lock.
    fn fair_timeout_passed(&self) -> bool {
        let now = numa_sim::now_ns();
        if now <= self.bucket.fair_timeout_ns.load(Relaxed) {
            return false;
        }
        let mut seed = self.bucket.fair_seed.load(Relaxed);
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        self.bucket.fair_seed.store(seed, Relaxed);
        self.bucket
            .fair_timeout_ns
            .store(now + u64::from(seed % 1_000_000), Relaxed);
        true
    }

    fn bucket_lock(&self) {
        let lock = &self.bucket.lock;
        while lock.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
            // Test-and-test-and-set: wait until it looks free, then try again.
            numa_sim::spin_deadline(u64::MAX);
            while lock.load(Relaxed) != 0 {
                numa_sim::pause();
            }
        }
    }

    fn bucket_unlock(&self) {
        self.bucket.lock.store(0, Release);
    }
}

/// One simulated thread's MCS queue node, on its own line.
#[repr(align(64))]
struct McsNode {
    /// The successor in the queue, or [`NONE`].
    next: AtomicU32,
    /// 1 while the owner waits for its predecessor's handoff, 0 once it holds the lock.
    waiting: AtomicU32,
}

/// A model of a plain spinning MCS queue lock (Mellor-Crummey & Scott; the queue of the kernel's
/// qspinlock, `kernel/locking/mcs_spinlock.h`): waiters never park, each spins on its own node.
///
/// `tail` (its own line) is the last queued thread or [`NONE`] (free). Lock: swap yourself into
/// the tail; if there was a predecessor, link behind it and spin on your node's `waiting` until
/// it hands over. Unlock: if nobody is linked behind you, CAS the tail back to [`NONE`]; if that
/// fails a successor is linking: wait for the link; then clear the successor's `waiting`.
pub struct SpinMcs {
    tail: CachePadded<AtomicU32>,
    nodes: Box<[CachePadded<McsNode>]>,
}

impl SimLock for SpinMcs {
    fn new(threads: usize, _config: &RunConfig) -> Self {
        SpinMcs {
            tail: CachePadded::new(AtomicU32::new(NONE)),
            nodes: (0..threads)
                .map(|_| {
                    CachePadded::new(McsNode {
                        next: AtomicU32::new(NONE),
                        waiting: AtomicU32::new(0),
                    })
                })
                .collect(),
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.lock(me);
        let result = critical_section();
        self.unlock(me);
        result
    }
}

impl SpinMcs {
    fn lock(&self, me: usize) {
        let node = &self.nodes[me];
        node.next.store(NONE, Relaxed);
        node.waiting.store(1, Relaxed);
        // AcqRel: acquire the predecessor's node state, release our node's initialisation.
        let prev = self.tail.swap(link(me), AcqRel);
        if prev == NONE {
            return;
        }
        self.nodes[prev as usize].next.store(link(me), Release);
        // Pairs with the predecessor's release store in `unlock`.
        numa_sim::spin_deadline(u64::MAX);
        while node.waiting.load(Acquire) != 0 {
            numa_sim::pause();
        }
    }

    fn unlock(&self, me: usize) {
        let node = &self.nodes[me];
        let mut next = node.next.load(Acquire);
        if next == NONE {
            if self
                .tail
                .compare_exchange(link(me), NONE, Release, Relaxed)
                .is_ok()
            {
                return;
            }
            // A successor swapped itself in and is about to link.
            numa_sim::spin_deadline(u64::MAX);
            loop {
                next = node.next.load(Acquire);
                if next != NONE {
                    break;
                }
                numa_sim::pause();
            }
        }
        self.nodes[next as usize].waiting.store(0, Release);
    }
}
