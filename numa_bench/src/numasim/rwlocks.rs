//! The reader-writer locks users pick instead of this crate's, as **models** written for the
//! simulator on `numa_sim`'s atomics and futex (like baselines.rs: their code's words,
//! transitions and waiting, not that code):
//!
//! - [`PlRwLock`] (`pl-rwlock`): parking_lot 0.13.0's `RawRwLock` (`src/raw_rwlock.rs`, the
//!   non-recursive lock) on parking_lot_core 0.10.0 (`park`, `unpark_filter`, `unpark_one`,
//!   `SpinWait`), through the same parking-lot model as `ttas` ([`ParkingLot`]).
//! - [`StdRwLock`] (`std-rwlock`): Rust std's futex `RwLock`
//!   (`library/std/src/sys/sync/rwlock/futex.rs`, Rust 1.62 and later; read at rust-lang/rust
//!   0787e052ceeb).
//!
//! Only what the `rw` workload takes is modelled: `read`/`write` and their unlocks (not the
//! upgradable, downgrade or timed paths; parking_lot's `UPGRADABLE_BIT` is kept in every
//! condition that tests it, but nothing sets it). No constant is fitted: the spin counts and
//! the bit layouts are those of the sources.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crossbeam_utils::CachePadded;
use numa_sim::atomic::{AtomicU32, AtomicU64};

use crate::numasim::baselines::{
    FilterOp, ParkingLot, SpinWait, TOKEN_HANDOFF, TOKEN_NORMAL, Ttas, UnparkResult, lock_address,
};
use crate::numasim::harness::{RunConfig, SimLock};

/// `RawRwLock::state`: threads are parked on the lock's first key (readers, writers).
const PARKED_BIT: u64 = 0b0001;
/// `RawRwLock::state`: a writer that holds `WRITER_BIT` is parked on the second key, waiting
/// for the readers to leave.
const WRITER_PARKED_BIT: u64 = 0b0010;
/// `RawRwLock::state`: an upgradable reader holds the lock (never set by the `rw` workload).
const UPGRADABLE_BIT: u64 = 0b0100;
/// `RawRwLock::state`: a writer holds the lock, or waits for the readers to leave.
const WRITER_BIT: u64 = 0b1000;
/// `RawRwLock::state`: the reader count, in units of [`ONE_READER`].
const READERS_MASK: u64 = !0b1111;
/// `RawRwLock::state`: one reader.
const ONE_READER: u64 = 0b1_0000;

/// `TOKEN_SHARED`: a parked reader's park token.
const TOKEN_SHARED: u32 = ONE_READER as u32;
/// `TOKEN_EXCLUSIVE`: a parked writer's park token.
const TOKEN_EXCLUSIVE: u32 = WRITER_BIT as u32;

/// A model of parking_lot 0.13's `RawRwLock`: one `usize` state word, its own line.
///
/// | state bits                           | meaning                                           |
/// |--------------------------------------|---------------------------------------------------|
/// | readers (× `ONE_READER`)             | that many readers hold the lock                   |
/// | `WRITER_BIT`, readers 0              | a writer holds the lock                           |
/// | `WRITER_BIT`, readers > 0            | a writer owns `WRITER_BIT` and waits for readers  |
/// | `WRITER_PARKED_BIT`                  | ... and sleeps on the second key (`addr + 1`)     |
/// | `PARKED_BIT`                         | threads sleep on the first key (`addr`)           |
///
/// Read: load; if `WRITER_BIT` is clear, CAS `state + ONE_READER` (the fast path); else (or if
/// the CAS failed) `lock_shared_slow`: a CAS loop with `spin_no_yield` between failures while
/// `WRITER_BIT` is clear, then [`PlRwLock::lock_common`]. Read unlock: `fetch_sub(ONE_READER)`;
/// the last reader wakes the writer parked on the second key (`unpark_one`, which clears
/// `WRITER_PARKED_BIT`). Write: CAS 0 → `WRITER_BIT`, else `lock_exclusive_slow`: `lock_common`
/// to own `WRITER_BIT` (barging: taken whenever `WRITER_BIT | UPGRADABLE_BIT` is clear, even
/// with threads parked), then `wait_for_readers`. Write unlock: `fetch_sub(WRITER_BIT)`; if
/// `PARKED_BIT`, `unpark_filter` on the first key wakes every parked reader and the first
/// writer (the filter stops after a writer), clearing `PARKED_BIT` if none is left.
pub struct PlRwLock {
    state: CachePadded<AtomicU64>,
    /// The lock's (synthetic) address: the first parking key; `key + 1` is the second.
    key: u32,
    lot: Arc<ParkingLot>,
}

impl SimLock for PlRwLock {
    type Shared = ParkingLot;

    /// The same parking lot as `ttas`: a hash table sized for the run's threads, and each
    /// thread's data.
    fn shared(threads: usize, config: &RunConfig) -> ParkingLot {
        <Ttas as SimLock>::shared(threads, config)
    }

    fn new(shared: &Arc<ParkingLot>, index: usize, _config: &RunConfig) -> Self {
        PlRwLock {
            state: CachePadded::new(AtomicU64::new(0)),
            key: lock_address(index),
            lot: shared.clone(),
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        if self
            .state
            .compare_exchange(0, WRITER_BIT, Acquire, Relaxed)
            .is_err()
        {
            self.lock_exclusive_slow(me);
        }
        let result = critical_section();
        if self.state.fetch_sub(WRITER_BIT, Release) & PARKED_BIT != 0 {
            self.unlock_exclusive_slow(me);
        }
        result
    }

    #[inline]
    fn with_read_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        if !self.try_lock_shared_fast() {
            self.lock_shared_slow(me);
        }
        let result = critical_section();
        let state = self.state.fetch_sub(ONE_READER, Release);
        if state & (READERS_MASK | WRITER_PARKED_BIT) == (ONE_READER | WRITER_PARKED_BIT) {
            self.unlock_shared_slow(me);
        }
        result
    }
}

impl PlRwLock {
    /// `try_lock_shared_fast`: one load and one CAS, no retry.
    #[inline]
    fn try_lock_shared_fast(&self) -> bool {
        let state = self.state.load(Relaxed);
        if state & WRITER_BIT != 0 {
            return false;
        }
        self.state
            .compare_exchange(state, state + ONE_READER, Acquire, Relaxed)
            .is_ok()
    }

    /// `lock_shared_slow`: `lock_common` whose `try_lock` retries the reader CAS (with
    /// `spin_no_yield` between failures) while `WRITER_BIT` is clear.
    #[cold]
    fn lock_shared_slow(&self, me: usize) {
        let try_lock = |state: &mut u64| {
            let mut spinwait_shared = SpinWait::new();
            loop {
                if *state & WRITER_BIT != 0 {
                    return false;
                }
                if self
                    .state
                    .compare_exchange(*state, *state + ONE_READER, Acquire, Relaxed)
                    .is_ok()
                {
                    return true;
                }
                // A failed CAS is a write: it ends the spin declaration; the backoff is
                // bounded by its count.
                numa_sim::spin_deadline(0);
                spinwait_shared.spin_no_yield();
                *state = self.state.load(Relaxed);
            }
        };
        self.lock_common(me, TOKEN_SHARED, try_lock, |state| state & WRITER_BIT != 0);
    }

    /// `lock_exclusive_slow`: own `WRITER_BIT` through `lock_common`, then wait for the readers.
    #[cold]
    fn lock_exclusive_slow(&self, me: usize) {
        let try_lock = |state: &mut u64| loop {
            if *state & (WRITER_BIT | UPGRADABLE_BIT) != 0 {
                return false;
            }
            match self
                .state
                .compare_exchange(*state, *state | WRITER_BIT, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => *state = now,
            }
        };
        self.lock_common(me, TOKEN_EXCLUSIVE, try_lock, |state| {
            state & (WRITER_BIT | UPGRADABLE_BIT) != 0
        });
        self.wait_for_readers(me);
    }

    /// `lock_common`: try; spin with `SpinWait` while nobody is parked; set `PARKED_BIT`; park on
    /// the first key while `PARKED_BIT` is set and `should_park(state)`; a handoff token means
    /// the waker already made us the owner.
    fn lock_common(
        &self,
        me: usize,
        token: u32,
        mut try_lock: impl FnMut(&mut u64) -> bool,
        should_park: impl Fn(u64) -> bool,
    ) {
        let mut spinwait = SpinWait::new();
        // Bounded by SpinWait's tries, not by time: the iterations run as written.
        numa_sim::spin_deadline(0);
        let mut state = self.state.load(Relaxed);
        loop {
            if try_lock(&mut state) {
                return;
            }
            if state & (PARKED_BIT | WRITER_PARKED_BIT) == 0 && spinwait.spin() {
                state = self.state.load(Relaxed);
                continue;
            }
            if state & PARKED_BIT == 0
                && let Err(now) =
                    self.state
                        .compare_exchange(state, state | PARKED_BIT, Relaxed, Relaxed)
            {
                state = now;
                continue;
            }
            let validate = || {
                let state = self.state.load(Relaxed);
                state & PARKED_BIT != 0 && should_park(state)
            };
            if self.lot.park(me, self.key, validate, token) == Some(TOKEN_HANDOFF) {
                return;
            }
            spinwait.reset();
            numa_sim::spin_deadline(0);
            state = self.state.load(Relaxed);
        }
    }

    /// `wait_for_readers` (prev_value 0): with `WRITER_BIT` owned, spin with `SpinWait` while
    /// readers remain, then set `WRITER_PARKED_BIT` and park on the second key until the last
    /// reader wakes us.
    fn wait_for_readers(&self, me: usize) {
        let mut spinwait = SpinWait::new();
        numa_sim::spin_deadline(0);
        let mut state = self.state.load(Acquire);
        while state & READERS_MASK != 0 {
            if spinwait.spin() {
                state = self.state.load(Acquire);
                continue;
            }
            if state & WRITER_PARKED_BIT == 0
                && let Err(now) =
                    self.state
                        .compare_exchange(state, state | WRITER_PARKED_BIT, Acquire, Acquire)
            {
                state = now;
                continue;
            }
            let validate = || {
                let state = self.state.load(Relaxed);
                state & READERS_MASK != 0 && state & WRITER_PARKED_BIT != 0
            };
            self.lot.park(me, self.key + 1, validate, TOKEN_EXCLUSIVE);
            numa_sim::spin_deadline(0);
            state = self.state.load(Acquire);
        }
    }

    /// `unlock_exclusive_or_upgradable_slow` through `wake_parked_threads(0, ...)`: wake every
    /// parked reader and the first parked writer (stop after it); clear `PARKED_BIT` if nobody
    /// is left.
    #[cold]
    fn unlock_exclusive_slow(&self, me: usize) {
        let mut new_state = 0u64;
        let filter = |token: u32| {
            let token = u64::from(token);
            if new_state & WRITER_BIT != 0 {
                return FilterOp::Stop;
            }
            if token & (UPGRADABLE_BIT | WRITER_BIT) != 0
                && new_state & (UPGRADABLE_BIT | WRITER_BIT) != 0
            {
                FilterOp::Skip
            } else {
                new_state += token;
                FilterOp::Unpark
            }
        };
        let callback = |result: UnparkResult| {
            if !result.have_more_threads {
                self.state.fetch_and(!PARKED_BIT, Relaxed);
            }
            TOKEN_NORMAL
        };
        self.lot.unpark_filter(me, self.key, filter, callback);
    }

    /// `unlock_shared_slow`: the last reader wakes the writer parked on the second key, clearing
    /// `WRITER_PARKED_BIT` (only one thread parks there).
    #[cold]
    fn unlock_shared_slow(&self, me: usize) {
        let callback = |_result: UnparkResult| {
            self.state.fetch_and(!WRITER_PARKED_BIT, Relaxed);
            TOKEN_NORMAL
        };
        self.lot.unpark_one(me, self.key + 1, callback);
    }
}

/// `RwLock::state`: one reader (the count is bits 0..30).
const READ_LOCKED: u32 = 1;
/// `RwLock::state`: the count's bits.
const MASK: u32 = (1 << 30) - 1;
/// `RwLock::state`: write locked (the count's bits all set).
const WRITE_LOCKED: u32 = MASK;
/// `RwLock::state`: the most readers.
const MAX_READERS: u32 = MASK - 1;
/// `RwLock::state`: readers sleep on `state`.
const READERS_WAITING: u32 = 1 << 30;
/// `RwLock::state`: writers sleep on `writer_notify`.
const WRITERS_WAITING: u32 = 1 << 31;
/// How many times `spin_until` re-reads the state ("chosen by fair dice roll").
const STD_RW_SPINS: u32 = 100;

/// std's `RwLock`: the state and the writers' notification counter, side by side in one
/// 8-byte struct, so on one line.
#[repr(C, align(64))]
struct StdRwWords {
    state: AtomicU32,
    writer_notify: AtomicU32,
}

/// A model of Rust std's futex `RwLock`.
///
/// | `state & MASK`      | meaning                    | flag bits                                    |
/// |---------------------|----------------------------|----------------------------------------------|
/// | 0                   | unlocked                   | `READERS_WAITING`: readers sleep on `state`  |
/// | 1 ..= MAX_READERS   | that many readers          | `WRITERS_WAITING`: writers sleep on          |
/// | `WRITE_LOCKED`      | one writer                 | `writer_notify`                              |
///
/// Read: load; if read-lockable (count below the maximum and no waiting bit: readers yield to
/// waiting writers) CAS `+1`, else `read_contended`: spin up to 100 loads while write locked,
/// CAS when lockable, else set `READERS_WAITING` and `futex_wait(state)`. Read unlock:
/// `fetch_sub(1)`; the last reader, with writers waiting, wakes one. Write: CAS 0 →
/// `WRITE_LOCKED`, else `write_contended`: spin up to 100 loads while locked and no writer
/// waits, CAS when unlocked (keeping `WRITERS_WAITING` once it has waited), else set
/// `WRITERS_WAITING`, read `writer_notify`, re-check, `futex_wait(writer_notify)`. Write
/// unlock: `fetch_sub(WRITE_LOCKED)`; with waiters, `wake_writer_or_readers`: one writer
/// (`writer_notify += 1`, `futex_wake` one), else every reader (`futex_wake_all(state)`).
///
/// `futex_wake` returns whether it woke a thread; numa_sim's does not say, so the model keeps a
/// host count of the writers between announcing a sleep and returning from it (free: not a
/// simulated line): a count above 0 is taken as "a writer was woken", as std also assumes of a
/// writer about to sleep.
pub struct StdRwLock {
    words: StdRwWords,
    /// Writers inside `futex_wait(writer_notify)` (host memory, not simulated).
    sleeping_writers: std::sync::atomic::AtomicU32,
}

fn is_unlocked(state: u32) -> bool {
    state & MASK == 0
}

fn is_write_locked(state: u32) -> bool {
    state & MASK == WRITE_LOCKED
}

fn has_readers_waiting(state: u32) -> bool {
    state & READERS_WAITING != 0
}

fn has_writers_waiting(state: u32) -> bool {
    state & WRITERS_WAITING != 0
}

fn is_read_lockable(state: u32) -> bool {
    state & MASK < MAX_READERS && !has_readers_waiting(state) && !has_writers_waiting(state)
}

impl SimLock for StdRwLock {
    type Shared = ();

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(_shared: &Arc<()>, _index: usize, _config: &RunConfig) -> Self {
        StdRwLock {
            words: StdRwWords {
                state: AtomicU32::new(0),
                writer_notify: AtomicU32::new(0),
            },
            sleeping_writers: std::sync::atomic::AtomicU32::new(0),
        }
    }

    #[inline]
    fn with_lock<R>(&self, _me: usize, critical_section: impl FnOnce() -> R) -> R {
        if self
            .words
            .state
            .compare_exchange(0, WRITE_LOCKED, Acquire, Relaxed)
            .is_err()
        {
            self.write_contended();
        }
        let result = critical_section();
        let state = self.words.state.fetch_sub(WRITE_LOCKED, Release) - WRITE_LOCKED;
        if has_writers_waiting(state) || has_readers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
        result
    }

    #[inline]
    fn with_read_lock<R>(&self, _me: usize, critical_section: impl FnOnce() -> R) -> R {
        let state = self.words.state.load(Relaxed);
        if !is_read_lockable(state)
            || self
                .words
                .state
                .compare_exchange(state, state + READ_LOCKED, Acquire, Relaxed)
                .is_err()
        {
            self.read_contended();
        }
        let result = critical_section();
        let state = self.words.state.fetch_sub(READ_LOCKED, Release) - READ_LOCKED;
        if is_unlocked(state) && has_writers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
        result
    }
}

impl StdRwLock {
    #[cold]
    fn read_contended(&self) {
        let state_word = &self.words.state;
        let mut state = self.spin_read();
        loop {
            if is_read_lockable(state) {
                match state_word.compare_exchange(state, state + READ_LOCKED, Acquire, Relaxed) {
                    Ok(_) => return,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            assert!(
                state & MASK != MAX_READERS,
                "too many active read locks on RwLock"
            );
            if !has_readers_waiting(state)
                && let Err(now) =
                    state_word.compare_exchange(state, state | READERS_WAITING, Relaxed, Relaxed)
            {
                state = now;
                continue;
            }
            numa_sim::futex_wait(state_word, state | READERS_WAITING, None);
            state = self.spin_read();
        }
    }

    #[cold]
    fn write_contended(&self) {
        let state_word = &self.words.state;
        let mut state = self.spin_write();
        let mut other_writers_waiting = 0;
        loop {
            if is_unlocked(state) {
                match state_word.compare_exchange(
                    state,
                    state | WRITE_LOCKED | other_writers_waiting,
                    Acquire,
                    Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => {
                        state = now;
                        continue;
                    }
                }
            }
            if !has_writers_waiting(state)
                && let Err(now) =
                    state_word.compare_exchange(state, state | WRITERS_WAITING, Relaxed, Relaxed)
            {
                state = now;
                continue;
            }
            other_writers_waiting = WRITERS_WAITING;
            let seq = self.words.writer_notify.load(Acquire);
            state = state_word.load(Relaxed);
            if is_unlocked(state) || !has_writers_waiting(state) {
                continue;
            }
            // Host count (see the type's docs): Relaxed, the simulator runs one thread at a time.
            self.sleeping_writers.fetch_add(1, Relaxed);
            numa_sim::futex_wait(&self.words.writer_notify, seq, None);
            self.sleeping_writers.fetch_sub(1, Relaxed);
            state = self.spin_write();
        }
    }

    /// `wake_writer_or_readers`: after an unlock left the lock unlocked with waiters.
    #[cold]
    fn wake_writer_or_readers(&self, mut state: u32) {
        let state_word = &self.words.state;
        if state == WRITERS_WAITING {
            match state_word.compare_exchange(state, 0, Relaxed, Relaxed) {
                Ok(_) => {
                    self.wake_writer();
                    return;
                }
                Err(now) => state = now,
            }
        }
        if state == READERS_WAITING + WRITERS_WAITING {
            if state_word
                .compare_exchange(state, READERS_WAITING, Relaxed, Relaxed)
                .is_err()
            {
                return;
            }
            if self.wake_writer() {
                return;
            }
            state = READERS_WAITING;
        }
        if state == READERS_WAITING
            && state_word
                .compare_exchange(state, 0, Relaxed, Relaxed)
                .is_ok()
        {
            numa_sim::futex_wake(state_word, u32::MAX);
        }
    }

    /// `wake_writer`: bump `writer_notify`, wake one writer; whether one was asleep.
    fn wake_writer(&self) -> bool {
        self.words.writer_notify.fetch_add(1, Release);
        numa_sim::futex_wake(&self.words.writer_notify, 1);
        self.sleeping_writers.load(Relaxed) > 0
    }

    /// `spin_until`: up to 100 loads with a `pause` each, stopping early once `stop(state)`.
    fn spin_until(&self, stop: impl Fn(u32) -> bool) -> u32 {
        // Bounded by its count: the iterations run as written.
        numa_sim::spin_deadline(0);
        let mut spins = STD_RW_SPINS;
        loop {
            let state = self.words.state.load(Relaxed);
            if stop(state) || spins == 0 {
                return state;
            }
            numa_sim::pause();
            spins -= 1;
        }
    }

    /// `spin_write`: stop when unlocked or when writers wait (to keep things somewhat fair).
    fn spin_write(&self) -> u32 {
        self.spin_until(|state| is_unlocked(state) || has_writers_waiting(state))
    }

    /// `spin_read`: stop when not write locked or when anybody waits.
    fn spin_read(&self) -> u32 {
        self.spin_until(|state| {
            !is_write_locked(state) || has_readers_waiting(state) || has_writers_waiting(state)
        })
    }
}

/// `ShardedLock::NUM_SHARDS` (crossbeam-utils 0.8.23, `src/sync/sharded_lock.rs`).
const SHARDS: usize = 8;

/// A model of crossbeam-utils 0.8.23's `ShardedLock` (`src/sync/sharded_lock.rs`): 8 shards,
/// each a cache-padded `std::sync::RwLock<()>` (here the [`StdRwLock`] model, whose words sit in
/// the shard's own padded line). A reader read-locks the shard of its thread index (crossbeam's
/// registry hands out the lowest free index, so the harness's dense thread number `me` stands
/// for it), masked into the 8 shards; a writer write-locks every shard in order, 0 to 7, and
/// unlocks them in reverse order.
pub struct ShardedRw {
    shards: Box<[CachePadded<StdRwLock>]>,
}

impl SimLock for ShardedRw {
    type Shared = ();

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(shared: &Arc<()>, index: usize, config: &RunConfig) -> Self {
        ShardedRw {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(<StdRwLock as SimLock>::new(shared, index, config)))
                .collect(),
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.write_from(0, me, critical_section)
    }

    #[inline]
    fn with_read_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.shards[me & (SHARDS - 1)].with_read_lock(me, critical_section)
    }
}

impl ShardedRw {
    /// Write-locks shards `first..` in order, runs `critical_section`, unlocks them in reverse.
    fn write_from<R>(&self, first: usize, me: usize, critical_section: impl FnOnce() -> R) -> R {
        match self.shards.get(first) {
            Some(shard) => shard.with_lock(me, || self.write_from(first + 1, me, critical_section)),
            None => critical_section(),
        }
    }
}
