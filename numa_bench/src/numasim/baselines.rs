//! The baselines of `numasim` that users pick instead of this crate, and a reference queue lock:
//! **models** written for the simulator directly on `numa_sim`'s atomics and futex. They follow
//! the published code's shape (which words, which transitions, how waiting is bounded) closely
//! enough to cost the same memory traffic; they are not that code.
//!
//! - [`StdMutex`] (`std`): Rust std's futex mutex (`library/std/src/sys/sync/mutex/futex.rs`,
//!   Rust 1.62 and later).
//! - [`Pthread`] (`pthread`): Rust std's mutex before 1.62, a boxed glibc pthread mutex (what
//!   parking_lot issue #201 measured as `std::sync::Mutex`).
//! - [`Ttas`] (`ttas`): parking_lot 0.13's `RawMutex` (`src/raw_mutex.rs`) on parking_lot_core
//!   0.10 (`park`, `unpark_one`, the bucket's `WordLock`, `SpinWait`, the thread parker), with
//!   parking_lot 0.12's eventual fairness as an option.
//! - [`SpinMcs`] (`spin-mcs`): a plain spinning MCS queue lock, the queue of the kernel's
//!   qspinlock without its lock word (an idealised reference; `kernel.rs` models the real
//!   `qspinlock`).
//!
//! Every object is on its own cache line(s) (`CachePadded`), so where the allocator puts it does
//! not change the simulated costs. Per-thread state (parking_lot's thread data, MCS nodes) is
//! per thread, shared by all the locks of a run ([`SimLock::Shared`]), as it is in the real code.
//! Every wait loop declares its bound with `numa_sim::spin_deadline` before it starts: `u64::MAX`
//! for the loops that wait for a change (the simulator then sleeps them until a line they read is
//! written), 0 for the loops bounded by an iteration count instead (they run as written).

use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crossbeam_utils::CachePadded;
use numa_sim::atomic::{AtomicU32, AtomicU64};

use crate::numasim::harness::{RunConfig, SimLock};

/// "No thread": the end of a queue, an empty tail.
const NONE: u32 = u32::MAX;

/// A simulated thread's index as a queue link.
fn link(me: usize) -> u32 {
    u32::try_from(me).expect("numa_sim machines have at most 256 hardware threads")
}

/// `StdMutex::futex`: unlocked.
const UNLOCKED: u32 = 0;
/// `StdMutex::futex`: locked, no other thread waiting.
const STD_LOCKED: u32 = 1;
/// `StdMutex::futex`: locked, and other threads may be waiting (sleeping on the futex).
const CONTENDED: u32 = 2;
/// How often `StdMutex::spin` re-reads a locked word before the thread goes to sleep.
const STD_SPINS: u32 = 100;

/// A model of Rust std's futex mutex: one word, 0 unlocked / 1 locked / 2 contended.
///
/// Lock: CAS 0 → 1; else spin (up to 100 loads with a `pause` each, while the word reads
/// locked-uncontended); if it then reads unlocked, CAS 0 → 1; else loop: swap in 2 (unless it
/// already reads 2), which takes the lock if it was 0; otherwise `futex_wait(2)` and spin again.
/// Unlock: swap in 0 and wake one sleeper if the word was 2.
pub struct StdMutex {
    futex: CachePadded<AtomicU32>,
}

impl SimLock for StdMutex {
    type Shared = ();

    fn shared(_threads: usize, _config: &RunConfig) {}

    fn new(_shared: &Arc<()>, _index: usize, _config: &RunConfig) -> Self {
        StdMutex {
            futex: CachePadded::new(AtomicU32::new(UNLOCKED)),
        }
    }

    #[inline]
    fn with_lock<R>(&self, _me: usize, critical_section: impl FnOnce() -> R) -> R {
        if self
            .futex
            .compare_exchange(UNLOCKED, STD_LOCKED, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        let result = critical_section();
        if self.futex.swap(UNLOCKED, Release) == CONTENDED {
            numa_sim::futex_wake(&*self.futex, 1);
        }
        result
    }
}

impl StdMutex {
    #[cold]
    fn lock_contended(&self) {
        let mut state = self.spin();
        if state == UNLOCKED {
            match self
                .futex
                .compare_exchange(UNLOCKED, STD_LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
        loop {
            if state != CONTENDED && self.futex.swap(CONTENDED, Acquire) == UNLOCKED {
                return;
            }
            numa_sim::futex_wait(&self.futex, CONTENDED, None);
            state = self.spin();
        }
    }

    /// Loads until the word is not locked-uncontended, at most 100 times.
    fn spin(&self) -> u32 {
        // Bounded by its count: the iterations run as written.
        numa_sim::spin_deadline(0);
        let mut spins = STD_SPINS;
        loop {
            let state = self.futex.load(Relaxed);
            if state != STD_LOCKED || spins == 0 {
                return state;
            }
            numa_sim::pause();
            spins -= 1;
        }
    }
}

/// A glibc `pthread_mutex_t` (40 bytes) as malloc places them one after another: 48-byte chunks,
/// so neighbouring mutexes share cache lines.
const PTHREAD_MUTEX_STRIDE: usize = 48;

/// Every pthread mutex of a run: the heap blocks that `Box::new(pthread_mutex_t)` gave each lock,
/// in allocation order, 64-byte aligned as a fresh arena would start them.
pub struct PthreadHeap {
    words: Box<[CachePadded<[AtomicU32; 16]>]>,
}

impl PthreadHeap {
    /// The mutex of lock `index`: its futex word, owner and user-count fields (the first three
    /// words of glibc's `__pthread_mutex_s`).
    fn mutex(&self, index: usize) -> [&AtomicU32; 3] {
        let word = index * PTHREAD_MUTEX_STRIDE / 4;
        let at = |w: usize| &self.words[w / 16][w % 16];
        [at(word), at(word + 2), at(word + 3)]
    }
}

/// A model of Rust's `std::sync::Mutex` before Rust 1.62 (parking_lot issue #201, January 2020,
/// rustc 1.40): a `Box<pthread_mutex_t>` beside the poison flag and the data, locked with glibc's
/// default (`PTHREAD_MUTEX_NORMAL`) mutex: `lll_lock` (CAS 0 → 1; else swap in 2 until it was 0,
/// sleeping in `futex_wait(2)` between: no spinning), then `__owner` and `__nusers` written;
/// unlock clears them and swaps in 0, waking one sleeper if the word was 2. The mutex is on the
/// heap, not on the data's line, and neighbouring locks' mutexes share lines (48-byte chunks).
pub struct Pthread {
    heap: Arc<PthreadHeap>,
    index: usize,
}

impl SimLock for Pthread {
    type Shared = PthreadHeap;

    fn shared(_threads: usize, config: &RunConfig) -> PthreadHeap {
        let locks = config.lockbench_locks.max(1);
        let lines = (locks * PTHREAD_MUTEX_STRIDE).div_ceil(64) + 1;
        PthreadHeap {
            words: (0..lines)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU32::new(0))))
                .collect(),
        }
    }

    fn new(shared: &Arc<PthreadHeap>, index: usize, _config: &RunConfig) -> Self {
        Pthread {
            heap: shared.clone(),
            index,
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        let [futex, owner, users] = self.heap.mutex(self.index);
        if futex
            .compare_exchange(UNLOCKED, STD_LOCKED, Acquire, Relaxed)
            .is_err()
        {
            // __lll_lock_wait: mark contended; sleep until a swap finds it free.
            while futex.swap(CONTENDED, Acquire) != UNLOCKED {
                numa_sim::futex_wait(futex, CONTENDED, None);
            }
        }
        owner.store(link(me) + 1, Relaxed);
        users.store(users.load(Relaxed) + 1, Relaxed);
        let result = critical_section();
        owner.store(0, Relaxed);
        users.store(users.load(Relaxed) - 1, Relaxed);
        if futex.swap(UNLOCKED, Release) == CONTENDED {
            numa_sim::futex_wake(futex, 1);
        }
        result
    }
}

/// parking_lot_core's `SpinWait`: 3 rounds of 1, 2 and 4 `pause`s, then `sched_yield`s, 10 tries
/// in all; then the caller parks.
pub(crate) struct SpinWait {
    counter: u32,
}

impl SpinWait {
    pub(crate) const fn new() -> Self {
        SpinWait { counter: 0 }
    }

    /// `SpinWait::reset`.
    pub(crate) fn reset(&mut self) {
        self.counter = 0;
    }

    /// `SpinWait::spin_no_yield`: 1, 2, 4 ... up to 512 `pause`s, never a yield (parking_lot's
    /// rwlock between failed reader CASes).
    pub(crate) fn spin_no_yield(&mut self) {
        self.counter = (self.counter + 1).min(10);
        for _ in 0..1u32 << (self.counter - 1) {
            numa_sim::pause();
        }
    }

    /// One more round of spinning; `false` once the 10 tries are used up.
    pub(crate) fn spin(&mut self) -> bool {
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
pub(crate) const TOKEN_NORMAL: u32 = 0;
/// `ThreadData::token`: woken owning the lock (a direct handoff).
pub(crate) const TOKEN_HANDOFF: u32 = 1;

/// The thread parker's futex word: parked (or about to park).
const PARKER_WAITING: u32 = 1;
/// The thread parker's futex word: unparked.
const PARKER_WOKEN: u32 = 0;

/// `WordLock::state`: held.
const WL_LOCKED: u32 = 1;
/// `WordLock::state`: a thread is editing the queue of waiters.
const WL_QUEUE_LOCKED: u32 = 2;
/// `WordLock::state`: the queue's first waiter (thread index + 1) lives above these bits.
const WL_QUEUE_SHIFT: u32 = 2;

/// parking_lot_core's `HashTable`: `LOAD_FACTOR` buckets per thread, rounded up to a power of
/// two.
const LOAD_FACTOR: usize = 3;
/// The stride of lock-bench's `CachePadded<Mutex<u32>>` on x86-64 (128-byte alignment): the
/// distance between two locks' addresses, which the bucket hash sees.
const LOCK_STRIDE: u64 = 128;

/// parking_lot_core's `FilterOp`: what `unpark_filter` does with one parked thread.
pub(crate) enum FilterOp {
    Unpark,
    Skip,
    Stop,
}

/// parking_lot_core's `UnparkResult` (without `be_fair`: parking_lot 0.13 has no eventual
/// fairness).
#[derive(Clone, Copy)]
pub(crate) struct UnparkResult {
    pub(crate) unparked_threads: usize,
    pub(crate) have_more_threads: bool,
}

/// The synthetic address of lock `index` of a run (`index` lock-bench strides apart), which
/// the parking lot hashes: the same for every run, so runs repeat exactly.
pub(crate) fn lock_address(index: usize) -> u32 {
    u32::try_from(0x1000_0000u64 + index as u64 * LOCK_STRIDE)
        .expect("a run has at most 4096 locks")
}

/// parking_lot_core's hash table bucket: the queue of parked threads under a `WordLock`, and
/// parking_lot 0.12's eventual-fairness timer, all on one line as in parking_lot (`Bucket` is
/// 64-byte aligned there too). Shared by every lock whose address hashes to it.
#[repr(align(64))]
struct Bucket {
    /// The `WordLock` guarding the rest.
    word_lock: AtomicU32,
    /// The first parked thread, or [`NONE`].
    head: AtomicU32,
    /// The last parked thread, or [`NONE`].
    tail: AtomicU32,
    /// `FairTimeout::seed` (xorshift32 state).
    fair_seed: AtomicU32,
    /// `FairTimeout::timeout`: the virtual time (ns) after which the next unpark is fair.
    fair_timeout_ns: AtomicU64,
}

/// parking_lot_core's per-thread `ThreadData` (the parking lot's, on a line of its own): its
/// parker's futex word, the key it parks on, its queue link and the token its waker leaves.
#[repr(align(64))]
struct ThreadData {
    /// [`PARKER_WAITING`] from `prepare_park` until woken, then [`PARKER_WOKEN`].
    futex: AtomicU32,
    /// The lock it is parked on (its index + 1).
    key: AtomicU32,
    /// The next parked thread in the bucket's queue, or [`NONE`].
    next: AtomicU32,
    /// [`TOKEN_NORMAL`] or [`TOKEN_HANDOFF`], written by the waker before it wakes the thread.
    token: AtomicU32,
    /// The `ParkToken` it parked with (what it waits for; the rwlock's unpark filter reads it).
    park_token: AtomicU32,
}

/// The `WordLock`'s per-thread `ThreadData` (word_lock.rs keeps its own thread-local): a parker
/// and the queue links, as thread index + 1 (0 for none).
#[repr(align(64))]
struct WordLockWaiter {
    futex: AtomicU32,
    queue_tail: AtomicU32,
    prev: AtomicU32,
    next: AtomicU32,
}

/// What every parking_lot mutex of a run shares: the hash table's buckets, the global
/// `HASHTABLE` pointer every park and unpark reads, and each thread's data.
pub struct ParkingLot {
    hashtable: CachePadded<AtomicU32>,
    buckets: Box<[Bucket]>,
    hash_bits: u32,
    threads: Box<[ThreadData]>,
    word_lock_waiters: Box<[WordLockWaiter]>,
}

impl ParkingLot {
    /// The bucket of lock `index`: parking_lot_core's `hash(key, bits)`, Fibonacci hashing of
    /// the lock's address (here a synthetic one, `index` lock-bench strides apart, so that runs
    /// repeat exactly).
    fn bucket(&self, index: usize) -> &Bucket {
        self.bucket_at(lock_address(index))
    }

    /// The bucket of the parking key `address`: `hash(key, bits)`.
    fn bucket_at(&self, address: u32) -> &Bucket {
        let hash = u64::from(address).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.hash_bits);
        &self.buckets[hash as usize]
    }

    /// `parking_lot_core::park(key, validate, ..., park_token, None)` for the thread `me`: under
    /// the bucket lock, if `validate()` holds, append the thread to the bucket's queue with `key`
    /// and `park_token`, unlock the bucket and sleep on the thread's parker until unparked.
    /// `None` if `validate()` failed (`ParkResult::Invalid`), else the unpark token.
    pub(crate) fn park(
        &self,
        me: usize,
        key: u32,
        validate: impl FnOnce() -> bool,
        park_token: u32,
    ) -> Option<u32> {
        let bucket = self.bucket_at(key);
        self.lock_bucket(bucket, me);
        if !validate() {
            self.word_unlock(bucket);
            return None;
        }
        let data = &self.threads[me];
        data.next.store(NONE, Relaxed);
        data.key.store(key, Relaxed);
        data.park_token.store(park_token, Relaxed);
        data.futex.store(PARKER_WAITING, Relaxed);
        let tail = bucket.tail.load(Relaxed);
        if tail == NONE {
            bucket.head.store(link(me), Relaxed);
        } else {
            self.threads[tail as usize].next.store(link(me), Relaxed);
        }
        bucket.tail.store(link(me), Relaxed);
        self.word_unlock(bucket);
        // Acquire: pairs with the waker's release store, which follows its token store.
        numa_sim::spin_deadline(u64::MAX);
        while data.futex.load(Acquire) != PARKER_WOKEN {
            numa_sim::futex_wait(&data.futex, PARKER_WAITING, None);
        }
        Some(data.token.load(Relaxed))
    }

    /// `parking_lot_core::unpark_filter(key, filter, callback)` by the thread `me`: under the
    /// bucket lock, walk the queue; for each thread parked on `key`, `filter(its park token)`
    /// unparks it (dequeued), skips it or stops the walk (both: `have_more_threads`); then
    /// `callback` (still under the bucket lock) gives the unpark token; release each parker,
    /// unlock the bucket, wake them.
    pub(crate) fn unpark_filter(
        &self,
        me: usize,
        key: u32,
        mut filter: impl FnMut(u32) -> FilterOp,
        callback: impl FnOnce(UnparkResult) -> u32,
    ) {
        let bucket = self.bucket_at(key);
        self.lock_bucket(bucket, me);
        let mut previous = NONE;
        let mut current = bucket.head.load(Relaxed);
        let mut woken = Vec::new();
        let mut result = UnparkResult {
            unparked_threads: 0,
            have_more_threads: false,
        };
        while current != NONE {
            let data = &self.threads[current as usize];
            let next = data.next.load(Relaxed);
            if data.key.load(Relaxed) != key {
                previous = current;
                current = next;
                continue;
            }
            match filter(data.park_token.load(Relaxed)) {
                FilterOp::Unpark => {
                    if previous == NONE {
                        bucket.head.store(next, Relaxed);
                    } else {
                        self.threads[previous as usize].next.store(next, Relaxed);
                    }
                    if bucket.tail.load(Relaxed) == current {
                        bucket.tail.store(previous, Relaxed);
                    }
                    woken.push(current);
                    current = next;
                }
                FilterOp::Skip => {
                    result.have_more_threads = true;
                    previous = current;
                    current = next;
                }
                FilterOp::Stop => {
                    result.have_more_threads = true;
                    break;
                }
            }
        }
        result.unparked_threads = woken.len();
        let token = callback(result);
        for &thread in &woken {
            let data = &self.threads[thread as usize];
            data.token.store(token, Relaxed);
            data.futex.store(PARKER_WOKEN, Release);
        }
        self.word_unlock(bucket);
        for &thread in &woken {
            numa_sim::futex_wake(&self.threads[thread as usize].futex, 1);
        }
    }

    /// `parking_lot_core::unpark_one(key, callback)`: [`ParkingLot::unpark_filter`] that unparks
    /// the first thread parked on `key` and stops at the next one (which makes
    /// `have_more_threads`, as unpark_one's scan of the rest of the queue does).
    pub(crate) fn unpark_one(
        &self,
        me: usize,
        key: u32,
        callback: impl FnOnce(UnparkResult) -> u32,
    ) {
        let mut first = true;
        let filter = |_token| {
            if std::mem::take(&mut first) {
                FilterOp::Unpark
            } else {
                FilterOp::Stop
            }
        };
        self.unpark_filter(me, key, filter, callback);
    }

    /// `lock_bucket`: read the table pointer, lock the bucket, check the table did not change.
    fn lock_bucket(&self, bucket: &Bucket, me: usize) {
        self.hashtable.load(Acquire);
        self.word_lock(bucket, me);
        self.hashtable.load(Relaxed);
    }

    /// `WordLock::lock`.
    fn word_lock(&self, bucket: &Bucket, me: usize) {
        let word = &bucket.word_lock;
        if word
            .compare_exchange(0, WL_LOCKED, Acquire, Relaxed)
            .is_ok()
        {
            return;
        }
        let mut spinwait = SpinWait::new();
        numa_sim::spin_deadline(0);
        let mut state = word.load(Relaxed);
        loop {
            if state & WL_LOCKED == 0 {
                match word.compare_exchange(state, state | WL_LOCKED, Acquire, Relaxed) {
                    Ok(_) => return,
                    Err(now) => state = now,
                }
                continue;
            }
            let queue_head = state >> WL_QUEUE_SHIFT;
            if queue_head == 0 && spinwait.spin() {
                state = word.load(Relaxed);
                continue;
            }
            // Join the queue (at its head; the unlocker finds the tail) and park.
            let waiter = &self.word_lock_waiters[me];
            waiter.futex.store(PARKER_WAITING, Relaxed);
            if queue_head == 0 {
                waiter.queue_tail.store(link(me) + 1, Relaxed);
                waiter.prev.store(0, Relaxed);
            } else {
                waiter.queue_tail.store(0, Relaxed);
                waiter.prev.store(0, Relaxed);
                waiter.next.store(queue_head, Relaxed);
            }
            let with_us =
                (state & (WL_LOCKED | WL_QUEUE_LOCKED)) | ((link(me) + 1) << WL_QUEUE_SHIFT);
            if let Err(now) = word.compare_exchange(state, with_us, AcqRel, Relaxed) {
                state = now;
                continue;
            }
            while waiter.futex.load(Acquire) != PARKER_WOKEN {
                numa_sim::futex_wait(&waiter.futex, PARKER_WAITING, None);
            }
            spinwait = SpinWait::new();
            numa_sim::spin_deadline(0);
            state = word.load(Relaxed);
        }
    }

    /// `WordLock::unlock`.
    fn word_unlock(&self, bucket: &Bucket) {
        let state = bucket.word_lock.fetch_sub(WL_LOCKED, Release);
        if state & WL_QUEUE_LOCKED != 0 || state >> WL_QUEUE_SHIFT == 0 {
            return;
        }
        self.word_unlock_slow(bucket);
    }

    /// `WordLock::unlock_slow`: lock the queue, find its tail (filling in `prev` links on the
    /// way), dequeue it and wake it, unless the lock was taken again meanwhile.
    #[cold]
    fn word_unlock_slow(&self, bucket: &Bucket) {
        let word = &bucket.word_lock;
        let waiter = |link: u32| &self.word_lock_waiters[link as usize - 1];
        let mut state = word.load(Relaxed);
        loop {
            if state & WL_QUEUE_LOCKED != 0 || state >> WL_QUEUE_SHIFT == 0 {
                return;
            }
            match word.compare_exchange(state, state | WL_QUEUE_LOCKED, Acquire, Relaxed) {
                Ok(_) => {
                    state |= WL_QUEUE_LOCKED;
                    break;
                }
                Err(now) => state = now,
            }
        }
        'outer: loop {
            let queue_head = state >> WL_QUEUE_SHIFT;
            let mut current = queue_head;
            let queue_tail = loop {
                let tail = waiter(current).queue_tail.load(Relaxed);
                if tail != 0 {
                    break tail;
                }
                let next = waiter(current).next.load(Relaxed);
                waiter(next).prev.store(current, Relaxed);
                current = next;
            };
            waiter(queue_head).queue_tail.store(queue_tail, Relaxed);
            let new_tail = waiter(queue_tail).prev.load(Relaxed);
            loop {
                if state & WL_LOCKED != 0 {
                    // Someone holds the lock again: let its unlock wake the tail.
                    match word.compare_exchange(state, state & !WL_QUEUE_LOCKED, Release, Acquire) {
                        Ok(_) => return,
                        Err(now) => state = now,
                    }
                    continue;
                }
                if state >> WL_QUEUE_SHIFT != queue_head {
                    continue 'outer;
                }
                if new_tail == 0 {
                    match word.compare_exchange(state, state & WL_LOCKED, Release, Acquire) {
                        Ok(_) => break,
                        Err(now) => state = now,
                    }
                } else {
                    waiter(queue_head).queue_tail.store(new_tail, Relaxed);
                    word.fetch_and(!WL_QUEUE_LOCKED, Release);
                    break;
                }
            }
            let woken = &waiter(queue_tail).futex;
            woken.store(PARKER_WOKEN, Release);
            numa_sim::futex_wake(woken, 1);
            return;
        }
    }
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
/// PARKED and `park`: lock the bucket, check the state is still LOCKED | PARKED, append this
/// thread to the bucket's queue, unlock the bucket and sleep on the thread's own futex word.
/// Woken with [`TOKEN_HANDOFF`], the thread owns the lock; with [`TOKEN_NORMAL`] it starts over.
///
/// Unlock, parking_lot 0.13 (`fairness` off): `fetch_sub(LOCKED)`; if PARKED was set,
/// `unpark_one`: lock the bucket, find the first thread parked on this lock, dequeue it, look
/// for another one behind it (`have_more_threads`), clear PARKED if it was the last, store its
/// token, release its parker, unlock the bucket, then wake it. parking_lot 0.12 (`fairness` on):
/// CAS LOCKED → 0; failing that (PARKED), `unpark_one`, where the bucket's fair timeout (re-armed
/// at a random 0..1 ms, so about every 0.5 ms) decides to hand the lock over (the state stays
/// LOCKED, PARKED cleared if it was the last) or to release it (state PARKED or 0) and wake the
/// thread to compete.
pub struct Ttas {
    state: CachePadded<AtomicU32>,
    /// This lock's key in the parking lot (its index + 1).
    key: u32,
    /// The bucket its key hashes to.
    index: usize,
    lot: Arc<ParkingLot>,
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
    type Shared = ParkingLot;

    fn shared(threads: usize, _config: &RunConfig) -> ParkingLot {
        // The table grows to LOAD_FACTOR buckets per live thread (the harness's too).
        let size = ((threads + 1) * LOAD_FACTOR).next_power_of_two();
        ParkingLot {
            hashtable: CachePadded::new(AtomicU32::new(1)),
            // parking_lot seeds bucket i's timer with i + 1 and arms it at creation, so the
            // first unpark is fair.
            buckets: (0..size)
                .map(|i| Bucket {
                    word_lock: AtomicU32::new(0),
                    head: AtomicU32::new(NONE),
                    tail: AtomicU32::new(NONE),
                    fair_seed: AtomicU32::new(i as u32 + 1),
                    fair_timeout_ns: AtomicU64::new(0),
                })
                .collect(),
            hash_bits: size.trailing_zeros(),
            threads: (0..threads)
                .map(|_| ThreadData {
                    futex: AtomicU32::new(PARKER_WOKEN),
                    key: AtomicU32::new(0),
                    next: AtomicU32::new(NONE),
                    token: AtomicU32::new(TOKEN_NORMAL),
                    park_token: AtomicU32::new(0),
                })
                .collect(),
            word_lock_waiters: (0..threads)
                .map(|_| WordLockWaiter {
                    futex: AtomicU32::new(PARKER_WOKEN),
                    queue_tail: AtomicU32::new(0),
                    prev: AtomicU32::new(0),
                    next: AtomicU32::new(0),
                })
                .collect(),
        }
    }

    fn new(shared: &Arc<ParkingLot>, index: usize, config: &RunConfig) -> Self {
        Ttas {
            state: CachePadded::new(AtomicU32::new(0)),
            key: link(index) + 1,
            index,
            lot: shared.clone(),
            fairness: config.ttas_fairness,
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
        let lot = &*self.lot;
        let bucket = lot.bucket(self.index);
        lot.lock_bucket(bucket, me);
        if self.state.load(Relaxed) != LOCKED | PARKED {
            lot.word_unlock(bucket);
            return Parked::Invalid;
        }
        let data = &lot.threads[me];
        data.next.store(NONE, Relaxed);
        data.key.store(self.key, Relaxed);
        data.futex.store(PARKER_WAITING, Relaxed);
        let tail = bucket.tail.load(Relaxed);
        if tail == NONE {
            bucket.head.store(link(me), Relaxed);
        } else {
            lot.threads[tail as usize].next.store(link(me), Relaxed);
        }
        bucket.tail.store(link(me), Relaxed);
        lot.word_unlock(bucket);
        // Acquire: pairs with the waker's release store, which follows its token store.
        numa_sim::spin_deadline(u64::MAX);
        while data.futex.load(Acquire) != PARKER_WOKEN {
            numa_sim::futex_wait(&data.futex, PARKER_WAITING, None);
        }
        if data.token.load(Relaxed) == TOKEN_HANDOFF {
            Parked::Handoff
        } else {
            Parked::Woken
        }
    }

    fn unlock(&self, me: usize) {
        if self.fairness {
            // parking_lot 0.12: release only if nobody is parked; otherwise unlock_slow decides.
            if self
                .state
                .compare_exchange(LOCKED, 0, Release, Relaxed)
                .is_err()
            {
                self.unlock_slow(me);
            }
        } else {
            // parking_lot 0.13: release first, then wake one parked thread if there is one.
            if self.state.fetch_sub(LOCKED, Release) & PARKED != 0 {
                self.unlock_slow(me);
            }
        }
    }

    /// `RawMutex::unlock_slow` through `parking_lot_core::unpark_one`.
    #[cold]
    fn unlock_slow(&self, me: usize) {
        let lot = &*self.lot;
        let bucket = lot.bucket(self.index);
        lot.lock_bucket(bucket, me);
        // Find the first thread parked on this lock.
        let mut previous = NONE;
        let mut current = bucket.head.load(Relaxed);
        while current != NONE && lot.threads[current as usize].key.load(Relaxed) != self.key {
            previous = current;
            current = lot.threads[current as usize].next.load(Relaxed);
        }
        if current == NONE {
            // Nobody has enqueued yet (a parker between setting PARKED and its validation sees
            // the new state and retries).
            if self.fairness {
                self.state.store(0, Release);
            } else {
                self.state.fetch_and(!PARKED, Relaxed);
            }
            lot.word_unlock(bucket);
            return;
        }
        let woken = &lot.threads[current as usize];
        let next = woken.next.load(Relaxed);
        if previous == NONE {
            bucket.head.store(next, Relaxed);
        } else {
            lot.threads[previous as usize].next.store(next, Relaxed);
        }
        let mut have_more = false;
        if bucket.tail.load(Relaxed) == current {
            bucket.tail.store(previous, Relaxed);
        } else {
            // Look for another thread parked on this lock behind it.
            let mut scan = next;
            while scan != NONE {
                let data = &lot.threads[scan as usize];
                if data.key.load(Relaxed) == self.key {
                    have_more = true;
                    break;
                }
                scan = data.next.load(Relaxed);
            }
        }
        let token = if self.fairness {
            if self.fair_timeout_passed(bucket) {
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
        // The Linux thread parker's unpark_lock: release the parker, then (after the bucket is
        // unlocked) always FUTEX_WAKE.
        woken.futex.store(PARKER_WOKEN, Release);
        lot.word_unlock(bucket);
        numa_sim::futex_wake(&woken.futex, 1);
    }

    /// `FairTimeout::should_timeout` (parking_lot_core 0.9): once the timeout has passed, re-arm
    /// it at now + a random 0..1 ms and answer yes. Called under the bucket lock.
    fn fair_timeout_passed(&self, bucket: &Bucket) -> bool {
        let now = numa_sim::now_ns();
        if now <= bucket.fair_timeout_ns.load(Relaxed) {
            return false;
        }
        let mut seed = bucket.fair_seed.load(Relaxed);
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        bucket.fair_seed.store(seed, Relaxed);
        bucket
            .fair_timeout_ns
            .store(now + u64::from(seed % 1_000_000), Relaxed);
        true
    }
}

/// One simulated thread's MCS queue node, on its own line.
#[repr(align(64))]
pub struct McsNode {
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
    nodes: Arc<Box<[McsNode]>>,
}

impl SimLock for SpinMcs {
    type Shared = Box<[McsNode]>;

    fn shared(threads: usize, _config: &RunConfig) -> Box<[McsNode]> {
        (0..threads)
            .map(|_| McsNode {
                next: AtomicU32::new(NONE),
                waiting: AtomicU32::new(0),
            })
            .collect()
    }

    fn new(shared: &Arc<Box<[McsNode]>>, _index: usize, _config: &RunConfig) -> Self {
        SpinMcs {
            tail: CachePadded::new(AtomicU32::new(NONE)),
            nodes: shared.clone(),
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
