//! `RawNumaRwLock`: a reader-writer lock whose readers write only a line of their own NUMA node
//! and whose writers queue through one of the crate's queue locks (`RawMcs`, `RawCna`, `RawHq`).
//!
//! Ideas from BRAVO (Dice & Kogan, ATC 2019: a reader fast path that a writer revokes), the
//! per-node reader indicators of Calciu et al. ("NUMA-Aware Reader-Writer Locks", PPoPP 2013)
//! and the kernel's percpu-rwsem (per-CPU counters whose *sum* is the reader count, so a reader
//! may leave on another CPU than it entered); written for this crate.
//!
//! ```text
//! word   compact state (bit 0 set)  |  pointer to Inflated (bit 0 clear)   (8 bytes: the whole lock)
//!
//! Inflated (heap, made on first contention, freed by drop):
//!   state    [ WRITER | HELD | VETO | READERS_PARKED | WRITER_WAITS | waiting readers ... ]
//!   drain    the writer's futex word while it waits for readers to leave; the writer streak
//!   writers  M: the queue lock writers and upgradable readers take (RawMcs, RawCna or RawHq)
//!   slots    one cache-padded reader counter per NUMA node (a power of two, at least 2)
//! ```
//!
//! # Compact mode: never contended, never allocates
//!
//! A lock that nobody contends is one word holding one of four compact states, each with bit
//! `C_TAG` set (a pointer to the heap block is 128-byte aligned, so its bit 0 is clear):
//!
//! | `word`                    | meaning                                                      |
//! |---------------------------|--------------------------------------------------------------|
//! | `C_TAG`                   | free                                                         |
//! | `C_TAG \| C_READER`        | one reader                                                   |
//! | `C_TAG \| C_WRITER`        | one writer                                                   |
//! | `C_TAG \| C_UPGRADABLE`    | one upgradable reader                                        |
//! | pointer                   | inflated: the state lives in the `Inflated` block, for good  |
//!
//! Every compact transition is one CAS between two of these states (`free → one reader`,
//! `one writer → free`, `one upgradable → one writer`, ...), as cheap as parking_lot's. Any
//! other arrival (a second reader, a writer finding a reader, ...) is contention: it
//! **inflates** the lock with one CAS from the compact state it saw to a pointer to a new block
//! that already holds that state: a compact reader becomes a count of 1 in slot 0, a compact
//! writer or upgradable reader becomes a holder of the block's writer lock `M`, taken on its
//! behalf before the block is published (a fresh lock, so the take cannot fail), and a compact
//! writer also sets `WRITER | HELD`. The compact holder does not know about it: its compact
//! unlock CAS fails because the word is a pointer now, and it unlocks the inflated way, which
//! is exactly right for the state the block inherited. The block is never deflated; `drop`
//! frees it.
//!
//! # Inflated mode
//!
//! **Readers** count themselves in the slot of the node they run on, then look at `state`: if
//! no writer has revoked the readers' fast path (`WRITER` clear) they hold the lock, having
//! written only their node's line (`state` is read-shared by every node and changes only when a
//! writer comes). A reader leaves by decrementing the slot of the node it runs on *then*, which
//! may be another slot (the thread migrated, or the guard was sent to another thread): only the
//! wrapping sum of the slots means anything, as in percpu-rwsem.
//!
//! **Writers** (and upgradable readers) take the queue lock `M` first, so writers queue, park
//! and hand over exactly as `CnaMutex`'s or `HqMutex`'s waiters do (NUMA-local handoffs with
//! `RawCna`/`RawHq`). The holder of `M` is the only thread that sets `WRITER`. A writer sets
//! `WRITER` (revoking the readers' fast path), then waits for the sum of the slots to reach 0
//! (spinning, then parking on `drain`); in a recursive lock it then sets `HELD` (see below). An
//! upgradable reader holds `M` without
//! `WRITER`, so it shares the lock with readers and excludes writers and other upgradable
//! readers; upgrading is the writer's revoke-and-drain.
//!
//! `state` (the revocation word; bits, and who sets/clears them):
//!
//! | bit               | set by                                  | cleared by                          |
//! |-------------------|-----------------------------------------|-------------------------------------|
//! | `WRITER`          | the holder of `M`, to write (revokes readers) | its unlock, downgrade or timeout |
//! | `HELD`            | that writer, once the slots drained (CAS; recursive locks only) | with `WRITER` |
//! | `VETO`            | a recursive reader that entered while `WRITER` without `HELD` | the writer, before it rescans |
//! | `READERS_PARKED`  | a reader, before sleeping on `state` while `WRITER` | the unlock that clears `WRITER` (and wakes) |
//! | `WRITER_WAITS`    | a writer holding `M`, before sleeping on `state` until waiting readers got in | the writer, when it sets `WRITER` or gives up |
//! | `waiting` (count) | a reader that found `WRITER`, once per acquisition (register) | that reader, once it got in or gave up |
//!
//! Transitions of one writer: `M` taken → (maybe: wait for `waiting == 0`) → `WRITER` →
//! slots drain → (recursive locks: `WRITER | HELD`, a CAS that fails if `VETO` or anything else
//! changed, and then the writer rescans) → critical
//! section → `WRITER`, `HELD`, `VETO`, `READERS_PARKED` cleared (one `fetch_and`, Release), wake
//! if `READERS_PARKED` was set → `M` released.
//!
//! # Memory ordering: the reader/writer handshake
//!
//! A reader does `slot += 1` then loads `state`; a writer does `state |= WRITER` then loads the
//! slots. Both pairs are `SeqCst` (Dekker's pattern): in the single total order of `SeqCst`
//! operations, either the reader's load comes after the writer's `fetch_or` (the reader sees
//! `WRITER` and backs off) or the reader's increment comes before the writer's slot loads (the
//! writer sees the reader and waits for it). Both cannot miss each other. A leaving reader
//! likewise does `slot -= 1` then loads `state`, and bumps `drain` if it sees `WRITER`; the
//! writer reads `drain` before the slots and sleeps only while `drain` is unchanged, so the
//! last reader's bump cannot be lost (see [`Inflated::drain`]).
//!
//! # Bounded unfairness, both ways
//!
//! - **Writers are not starved by readers** (non-recursive locks): once a writer has set
//!   `WRITER`, no reader can enter (the fast path backs off; waiting readers wait for `WRITER`
//!   to clear). The writer waits only for the readers already inside when it revoked.
//! - **Readers are not starved by writers**: a reader that finds `WRITER` registers in
//!   `waiting`. A writer that takes `M` while readers are registered counts a *streak*; after
//!   [`WRITER_STREAK_LIMIT`] consecutive such writers, the next one does not revoke until the
//!   registered readers got in (`waiting == 0`; with `WRITER` clear no new reader registers, so
//!   this ends). A registered reader thus waits for at most `WRITER_STREAK_LIMIT + 1` writers'
//!   critical sections (plus the current one). `unlock_exclusive_fair` ends the streak at once:
//!   the next writer lets the registered readers in first.
//! - A **recursive** lock (`RECURSIVE = true`, parking_lot's `RecursiveRwLock`) lets a reader
//!   in while a writer has revoked but not yet drained (`WRITER` without `HELD`), by setting
//!   `VETO`, which makes the writer rescan. Like parking_lot's, it can starve writers under a
//!   stream of overlapping readers; that is what makes recursive reads deadlock-free.

use core::marker::PhantomData;
use core::ptr;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::raw::{RawCna, RawHq, RawMcs};
use crate::sync::{
    AtomicPtr, AtomicU32, EXHAUSTIVE, Ordering, const_fn, fence, now_ns, spin_hint, yield_now,
};
use crate::topology;
use crate::wait::{self, SpinBudget};

/// Compact state: the tag every compact value has (an `Inflated` pointer never has it).
const C_TAG: usize = 1;
/// Compact state: one writer holds the lock.
const C_WRITER: usize = 2;
/// Compact state: one upgradable reader holds the lock.
const C_UPGRADABLE: usize = 4;
/// Compact state: one reader holds the lock.
const C_READER: usize = 8;
/// The free compact lock.
const FREE: usize = C_TAG;

/// `state`: the holder of `M` revoked the readers' fast path (it writes, or waits to).
const WRITER: u32 = 1;
/// `state`: the writer saw the slots drained; it holds the lock exclusively.
const HELD: u32 = 2;
/// `state`: a recursive reader entered while the writer drained; the writer must rescan.
const VETO: u32 = 4;
/// `state`: a reader sleeps on `state` until `WRITER` clears.
const READERS_PARKED: u32 = 8;
/// `state`: a writer holding `M` sleeps on `state` until `waiting` is 0.
const WRITER_WAITS: u32 = 16;
/// `state`: one registered waiting reader (the count is the bits from here up).
const WAITING_ONE: u32 = 32;

/// `drain`: the writer sleeps on `drain` until a reader leaves; readers bump the rest by 2.
const DRAIN_PARKED: u32 = 1;
const DRAIN_BUMP: u32 = 2;

/// The number of consecutive writers that may take the lock while readers are registered as
/// waiting; the next writer lets those readers in before it revokes. 4 keeps writer-heavy
/// workloads batched (a writer handoff through `M` is cheaper than a reader phase) while a
/// reader waits for at most 5 writers' critical sections.
pub const WRITER_STREAK_LIMIT: u32 = 4;

/// Reader slots per NUMA node: a node's readers spread over this many lines, by thread, so
/// that a socket's 18 cores do not all write one line. A writer reads them all, so more slots
/// make writers slower. Measured in numa_sim on the X5-4 (`read_mostly_table_on_x5_4` in
/// `tests/sim_rwlock.rs`, 72 threads, ops/µs at 100 / 95 / 0 % reads; one thread alone: 3.6):
/// 4 slots 146 / 5.4 / 1.5, 8 slots 184 / 4.8 / 1.3. With 1 slot per node, only readers reached
/// 43 (measured before writers dropped the `HELD` CAS).
const SLOTS_PER_NODE: usize = 4;

crate::sync::thread_local! {
    /// The calling thread's lane among its node's [`SLOTS_PER_NODE`] slots; `usize::MAX` until
    /// first asked.
    static READER_LANE: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// The calling thread's lane (see [`READER_LANE`]): a hash of its thread seed, so threads
/// spread evenly whatever their thread-locals' alignment; 0 during thread-local destruction,
/// and always 0 under loom, whose models must not depend on where a thread-local lies.
#[inline(always)]
fn reader_lane() -> usize {
    if EXHAUSTIVE {
        return 0;
    }
    READER_LANE
        .try_with(|lane| {
            let known = lane.get();
            if known != usize::MAX {
                return known;
            }
            let seed = crate::sync::thread_seed(ptr::from_ref(lane).addr());
            let fresh = (seed.wrapping_mul(0x9E37_79B9) >> 24) as usize % SLOTS_PER_NODE;
            lane.set(fresh);
            fresh
        })
        .unwrap_or(0)
}

/// At least this many reader slots, even on one node: 2 lets the tests (and loom) put readers
/// on two slots, so that leaving on another slot than the one entered is always exercised.
const MIN_SLOTS: usize = 2;
/// At most this many reader slots (node ids are masked into the range).
const MAX_SLOTS: usize = 256;

/// The queue lock that writers and upgradable readers of a [`RawNumaRwLock`] take:
/// [`RawMcs`], [`RawCna`] or [`RawHq`]. Sealed; its methods are the locks' own.
pub trait WriterLock: Send + Sync + sealed::Sealed {
    /// An unlocked lock.
    #[doc(hidden)]
    fn new_writer_lock() -> Self;
    /// `lock()`.
    #[doc(hidden)]
    fn lock_writers(&self);
    /// `try_lock()`.
    #[doc(hidden)]
    fn try_lock_writers(&self) -> bool;
    /// `try_lock_for(timeout)`.
    #[doc(hidden)]
    fn try_lock_writers_for(&self, timeout: Duration) -> bool;
    /// `unlock()`.
    ///
    /// # Safety
    /// The lock must be held.
    #[doc(hidden)]
    unsafe fn unlock_writers(&self);
    /// `unlock_fair()`.
    ///
    /// # Safety
    /// The lock must be held.
    #[doc(hidden)]
    unsafe fn unlock_writers_fair(&self);
    /// `is_locked()`.
    #[doc(hidden)]
    fn writers_locked(&self) -> bool;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! writer_lock {
    ($raw:ty) => {
        impl sealed::Sealed for $raw {}
        impl WriterLock for $raw {
            #[inline]
            fn new_writer_lock() -> Self {
                <$raw>::new()
            }
            #[inline]
            fn lock_writers(&self) {
                self.lock();
            }
            #[inline]
            fn try_lock_writers(&self) -> bool {
                self.try_lock()
            }
            #[inline]
            fn try_lock_writers_for(&self, timeout: Duration) -> bool {
                self.try_lock_for(timeout)
            }
            #[inline]
            unsafe fn unlock_writers(&self) {
                // SAFETY: the caller holds the lock (this trait method's contract).
                unsafe { self.unlock() }
            }
            #[inline]
            unsafe fn unlock_writers_fair(&self) {
                // SAFETY: the caller holds the lock (this trait method's contract).
                unsafe { self.unlock_fair() }
            }
            #[inline]
            fn writers_locked(&self) -> bool {
                self.is_locked()
            }
        }
    };
}
writer_lock!(RawMcs);
writer_lock!(RawCna);
writer_lock!(RawHq);

/// A NUMA-aware reader-writer lock for `lock_api::RwLock`: readers write only their own node's
/// counter, writers queue through the queue lock `M` ([`RawMcs`], [`RawCna`] or [`RawHq`]).
///
/// One word (8 bytes) until the lock is first contended; then a heap block with one reader
/// counter per NUMA node, freed on drop. `RECURSIVE = true` is parking_lot's
/// `RawRwLockRecursive`: a reader may enter while a writer waits for readers to leave, so a
/// thread may read-lock twice, at the price of writers that can be starved. See the module
/// source for the protocol, its state table and its fairness bounds.
///
/// ```
/// use numa_locks::RawCnaRwLock;
///
/// assert_eq!(std::mem::size_of::<RawCnaRwLock>(), 8);
/// let raw = RawCnaRwLock::new();
/// raw.lock_shared();
/// assert!(!raw.has_reader_slots(), "one reader: still compact");
/// raw.lock_shared(); // a second reader: contention, the per-node slots are made
/// assert!(raw.has_reader_slots());
/// assert!(!raw.try_lock_exclusive());
/// unsafe {
///     raw.unlock_shared();
///     raw.unlock_shared();
/// }
/// assert!(!raw.is_locked());
/// ```
pub struct RawNumaRwLock<M: WriterLock, const RECURSIVE: bool = false> {
    /// A compact state (bit 0 set) or a pointer to the `Inflated` block (see the module docs).
    word: AtomicPtr<Inflated<M>>,
    /// The lock owns its block.
    _block: PhantomData<Box<Inflated<M>>>,
}

/// The state of an inflated lock (see the module docs).
struct Inflated<M> {
    /// Read by every reader on every acquisition; written only when writers come.
    state: CachePadded<AtomicU32>,
    /// The writer's drain futex and its streak, away from `state` so that leaving readers'
    /// bumps do not invalidate the line every reader reads.
    drain: CachePadded<DrainWord>,
    /// The queue lock of writers and upgradable readers.
    writers: CachePadded<M>,
    /// [`SLOTS_PER_NODE`] reader counters per node (see `node_stride`); their wrapping sum is the number
    /// of readers inside (or about to back off).
    slots: Box<[CachePadded<AtomicU32>]>,
    slot_mask: usize,
    /// Whether recursive readers may veto a draining writer (`RECURSIVE`); only then does a
    /// writer set `HELD`.
    recursive: bool,
    /// Node `n`, lane `l` count in slot `(n + l * node_stride) & slot_mask`: the node count
    /// rounded up to a power of two.
    node_stride: usize,
}

struct DrainWord {
    /// `DRAIN_PARKED | bumps * DRAIN_BUMP`.
    seq: AtomicU32,
    /// Consecutive writers that took `M` while readers were registered waiting; read and
    /// written only by the holder of `M` (Relaxed: `M` orders them).
    streak: AtomicU32,
}

#[inline(always)]
fn compact<M>(bits: usize) -> *mut Inflated<M> {
    ptr::without_provenance_mut(bits)
}

#[inline(always)]
fn is_compact<M>(word: *mut Inflated<M>) -> bool {
    word.addr() & C_TAG != 0
}

/// Between a reader's slot update and its load of `state` (both `SeqCst`): nothing on real
/// hardware and in the simulator, a `SeqCst` fence under loom.
///
/// A `SeqCst` read-modify-write followed by a `SeqCst` load already gives the reader's side of
/// the handshake its place in the single total order of `SeqCst` operations (C++20 [atomics.order]),
/// so the real code needs no fence on its fast path (on x86 the locked RMW is a full barrier
/// anyway). Loom models `SeqCst` accesses as acquire/release and only `SeqCst` fences as
/// sequentially consistent; the fence gives the models the same total order, so that they
/// check the protocol rather than report the handshake loom cannot see.
#[inline(always)]
fn reader_handshake_fence() {
    if EXHAUSTIVE {
        fence(Ordering::SeqCst);
    }
}

/// Exponential backoff between two compact CAS attempts that failed because the word changed.
///
/// Needed for progress, not speed: a thread that toggles the compact word in a tight loop
/// (`free → one writer → free`) can make another thread's CAS fail at every attempt when the
/// two keep the same rhythm. The simulator, deterministic, found exactly that: a reader that
/// wanted to inflate the lock next to a writer looping on it retried forever. Growing waits
/// (2^step `pause`s, then yielding the CPU) break the rhythm.
struct CasBackoff {
    step: u32,
}

impl CasBackoff {
    fn new() -> Self {
        CasBackoff { step: 0 }
    }

    fn snooze(&mut self) {
        if EXHAUSTIVE || self.step > 6 {
            yield_now();
        } else {
            for _ in 0..1u32 << self.step {
                spin_hint();
            }
        }
        self.step += 1;
    }
}

/// The deadline on the `now_ns` clock `timeout` from now.
#[inline]
fn deadline_after(timeout: Duration) -> u64 {
    now_ns().saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX))
}

/// The time left until `deadline`, for the queue lock's `try_lock_for`.
#[inline]
fn left_until(deadline: u64) -> Duration {
    Duration::from_nanos(deadline.saturating_sub(now_ns()))
}

// SAFETY: the lock owns its block (freed only by `drop`, with `&mut self`), and every shared
// access to it goes through atomics or `M`, which is `Send + Sync`.
unsafe impl<M: WriterLock, const RECURSIVE: bool> Send for RawNumaRwLock<M, RECURSIVE> {}
// SAFETY: as for `Send`: all shared state is atomic or behind `M`'s own synchronization.
unsafe impl<M: WriterLock, const RECURSIVE: bool> Sync for RawNumaRwLock<M, RECURSIVE> {}

impl<M: WriterLock, const RECURSIVE: bool> RawNumaRwLock<M, RECURSIVE> {
    const_fn! {
        /// An unlocked lock; allocates nothing.
        pub const fn new() -> Self {
            RawNumaRwLock {
                word: AtomicPtr::new(ptr::without_provenance_mut(FREE)),
                _block: PhantomData,
            }
        }
    }

    /// The current word. Acquire: when it is a pointer, pairs with the Release of the CAS
    /// that published the block (`inflate`), so the block's initial state is visible.
    #[inline(always)]
    fn load_word(&self) -> *mut Inflated<M> {
        self.word.load(Ordering::Acquire)
    }

    /// One compact transition `from → to`, with the caller's ordering on success (Acquire for
    /// the acquiring transitions, Release for the releasing ones). `Err` carries the word
    /// found instead.
    #[inline(always)]
    fn compact_cas(
        &self,
        from: usize,
        to: usize,
        success: Ordering,
    ) -> Result<(), *mut Inflated<M>> {
        // Look before the CAS: once the lock is inflated the word never changes again, and
        // every node keeps a shared copy of its line; a CAS, even a failing one, would take
        // the line exclusive at every acquisition and release, which serialized the readers
        // of an inflated lock in the simulator (8 readers on 4 sockets ran no faster than 1).
        let now = self.load_word();
        if now.addr() != from {
            return Err(now);
        }
        // Failure Acquire: the value returned may be the block's pointer, which the caller
        // dereferences (pairs with the Release of `inflate`'s CAS).
        self.word
            .compare_exchange(now, compact(to), success, Ordering::Acquire)
            .map(|_| ())
    }

    /// The block behind an inflated `word`.
    #[inline(always)]
    fn block(&self, word: *mut Inflated<M>) -> &Inflated<M> {
        debug_assert!(!is_compact(word));
        // SAFETY: a word without `C_TAG` is a pointer made by `Box::into_raw` in `inflate` and
        // published with Release (read here with Acquire); it is freed only by `drop`, which
        // has `&mut self`, so it lives at least as long as `&self`.
        unsafe { &*word }
    }

    /// Whether the per-node reader slots exist: the lock was contended at least once, and
    /// holds a heap block until it is dropped.
    pub fn has_reader_slots(&self) -> bool {
        !is_compact(self.load_word())
    }

    /// Moves the lock from the compact state `seen` (or whatever it is by then) to an inflated
    /// block holding the same state, and returns the block. See the module docs.
    #[cold]
    #[inline(never)]
    fn inflate(&self, mut seen: *mut Inflated<M>) -> &Inflated<M> {
        let mut made: *mut Inflated<M> = ptr::null_mut();
        let mut writers_held = false;
        let mut backoff = CasBackoff::new();
        loop {
            if !is_compact(seen) {
                if !made.is_null() {
                    // SAFETY: `made` came from `Box::into_raw` below and was never published.
                    let block = unsafe { Box::from_raw(made) };
                    if writers_held {
                        // SAFETY: taken below on this unpublished block.
                        unsafe { block.writers.unlock_writers() };
                    }
                }
                return self.block(seen);
            }
            if made.is_null() {
                made = Box::into_raw(Box::new(Inflated::new(RECURSIVE)));
            }
            // SAFETY: `made` is a live, unpublished block that only this thread can see.
            let block = unsafe { &*made };
            let state = seen.addr();
            let exclusive = state & (C_WRITER | C_UPGRADABLE) != 0;
            if exclusive && !writers_held {
                // A fresh lock nobody else can see: the try cannot fail.
                let taken = block.writers.try_lock_writers();
                debug_assert!(taken, "a fresh writer lock is free");
                writers_held = true;
            } else if !exclusive && writers_held {
                // SAFETY: taken above on this unpublished block.
                unsafe { block.writers.unlock_writers() };
                writers_held = false;
            }
            // Relaxed: the block is not published yet; the Release CAS below publishes these.
            block.slots[0].store(u32::from(state & C_READER != 0), Ordering::Relaxed);
            let inherited = if state & C_WRITER != 0 {
                WRITER | HELD
            } else {
                0
            };
            block.state.store(inherited, Ordering::Relaxed);
            // Release: publishes the block's initial state to whoever reads the pointer
            // (Acquire in `load_word`/`compact_cas`). Acquire: the compact holder's accesses
            // we take over (its reader count, its exclusive hold) happen before ours.
            match self
                .word
                .compare_exchange(seen, made, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return block,
                Err(now) => {
                    seen = now;
                    backoff.snooze();
                }
            }
        }
    }

    // ---- shared -------------------------------------------------------------------------

    /// Acquires a shared lock, waiting as long as needed.
    #[inline]
    pub fn lock_shared(&self) {
        let word = self.load_word();
        // Acquire: pairs with the Release of the previous compact unlock.
        if word.addr() == FREE
            && self
                .compact_cas(FREE, FREE | C_READER, Ordering::Acquire)
                .is_ok()
        {
            return;
        }
        self.lock_shared_slow(None);
    }

    /// The slow path of `lock_shared` and of its timed tries.
    #[cold]
    fn lock_shared_slow(&self, deadline: Option<u64>) -> bool {
        let mut word = self.load_word();
        let mut backoff = CasBackoff::new();
        loop {
            if !is_compact(word) {
                return self.block(word).lock_shared(RECURSIVE, deadline);
            }
            if word.addr() == FREE {
                match self.compact_cas(FREE, FREE | C_READER, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                }
                backoff.snooze();
                continue;
            }
            // A reader, writer or upgradable reader is inside: contention.
            return self.inflate(word).lock_shared(RECURSIVE, deadline);
        }
    }

    /// Acquires a shared lock if no writer holds it or has revoked the readers (for a
    /// recursive lock: if no writer holds it).
    #[inline]
    pub fn try_lock_shared(&self) -> bool {
        let mut word = self.load_word();
        loop {
            if !is_compact(word) {
                return self.block(word).try_enter_reader(RECURSIVE);
            }
            match word.addr() {
                FREE => match self.compact_cas(FREE, FREE | C_READER, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                },
                state if state & C_WRITER != 0 => return false,
                // A reader or an upgradable reader: sharing is possible, in the inflated lock.
                _ => return self.inflate(word).try_enter_reader(RECURSIVE),
            }
        }
    }

    /// [`try_lock_shared`](Self::try_lock_shared), waiting at most `timeout`.
    pub fn try_lock_shared_for(&self, timeout: Duration) -> bool {
        self.try_lock_shared() || self.lock_shared_slow(Some(deadline_after(timeout)))
    }

    /// Releases a shared lock.
    ///
    /// # Safety
    /// A shared lock must be held (by this thread, or by a guard it was given).
    #[inline]
    pub unsafe fn unlock_shared(&self) {
        // Release: the reader's accesses happen before the next writer's acquisition.
        if let Err(word) = self.compact_cas(FREE | C_READER, FREE, Ordering::Release) {
            self.block(word).leave_reader();
        }
    }

    // ---- exclusive ----------------------------------------------------------------------

    /// Acquires an exclusive lock, waiting as long as needed.
    #[inline]
    pub fn lock_exclusive(&self) {
        // Acquire: pairs with the Release of the previous compact unlock.
        if self
            .compact_cas(FREE, FREE | C_WRITER, Ordering::Acquire)
            .is_err()
        {
            self.lock_exclusive_slow(None);
        }
    }

    #[cold]
    fn lock_exclusive_slow(&self, deadline: Option<u64>) -> bool {
        let mut word = self.load_word();
        let mut backoff = CasBackoff::new();
        loop {
            if !is_compact(word) {
                return self.block(word).lock_exclusive(deadline);
            }
            if word.addr() == FREE {
                match self.compact_cas(FREE, FREE | C_WRITER, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                }
                backoff.snooze();
                continue;
            }
            return self.inflate(word).lock_exclusive(deadline);
        }
    }

    /// Acquires an exclusive lock if it is free.
    #[inline]
    pub fn try_lock_exclusive(&self) -> bool {
        match self.compact_cas(FREE, FREE | C_WRITER, Ordering::Acquire) {
            Ok(()) => true,
            Err(word) if is_compact(word) => false,
            Err(word) => self.block(word).try_lock_exclusive(),
        }
    }

    /// [`try_lock_exclusive`](Self::try_lock_exclusive), waiting at most `timeout`.
    pub fn try_lock_exclusive_for(&self, timeout: Duration) -> bool {
        self.compact_cas(FREE, FREE | C_WRITER, Ordering::Acquire)
            .is_ok()
            || self.lock_exclusive_slow(Some(deadline_after(timeout)))
    }

    /// Releases an exclusive lock.
    ///
    /// # Safety
    /// An exclusive lock must be held.
    #[inline]
    pub unsafe fn unlock_exclusive(&self) {
        // Release: the critical section happens before the next acquisition.
        if let Err(word) = self.compact_cas(FREE | C_WRITER, FREE, Ordering::Release) {
            // SAFETY: the caller holds the exclusive lock, hence `M` (inherited or taken).
            unsafe { self.block(word).unlock_exclusive(false) };
        }
    }

    /// Releases an exclusive lock; waiting readers go before the next writer, and the queue
    /// lock hands over fairly.
    ///
    /// # Safety
    /// An exclusive lock must be held.
    pub unsafe fn unlock_exclusive_fair(&self) {
        // Release: as in `unlock_exclusive`.
        if let Err(word) = self.compact_cas(FREE | C_WRITER, FREE, Ordering::Release) {
            // SAFETY: as in `unlock_exclusive`.
            unsafe { self.block(word).unlock_exclusive(true) };
        }
    }

    // ---- upgradable ---------------------------------------------------------------------

    /// Acquires an upgradable shared lock (shared with readers, exclusive of writers and of
    /// other upgradable readers), waiting as long as needed.
    #[inline]
    pub fn lock_upgradable(&self) {
        // Acquire: pairs with the Release of the previous compact unlock.
        if self
            .compact_cas(FREE, FREE | C_UPGRADABLE, Ordering::Acquire)
            .is_err()
        {
            self.lock_upgradable_slow(None);
        }
    }

    #[cold]
    fn lock_upgradable_slow(&self, deadline: Option<u64>) -> bool {
        let mut word = self.load_word();
        let mut backoff = CasBackoff::new();
        loop {
            if !is_compact(word) {
                return self.block(word).lock_upgradable(deadline);
            }
            if word.addr() == FREE {
                match self.compact_cas(FREE, FREE | C_UPGRADABLE, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                }
                backoff.snooze();
                continue;
            }
            return self.inflate(word).lock_upgradable(deadline);
        }
    }

    /// Acquires an upgradable lock if no writer or upgradable reader holds or awaits it.
    #[inline]
    pub fn try_lock_upgradable(&self) -> bool {
        let mut word = self.load_word();
        loop {
            if !is_compact(word) {
                return self.block(word).writers.try_lock_writers();
            }
            match word.addr() {
                FREE => match self.compact_cas(FREE, FREE | C_UPGRADABLE, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                },
                state if state & (C_WRITER | C_UPGRADABLE) != 0 => return false,
                // One reader: sharing is possible, in the inflated lock.
                _ => return self.inflate(word).writers.try_lock_writers(),
            }
        }
    }

    /// [`try_lock_upgradable`](Self::try_lock_upgradable), waiting at most `timeout`.
    pub fn try_lock_upgradable_for(&self, timeout: Duration) -> bool {
        self.try_lock_upgradable() || self.lock_upgradable_slow(Some(deadline_after(timeout)))
    }

    /// Releases an upgradable lock.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    #[inline]
    pub unsafe fn unlock_upgradable(&self) {
        // Release: the critical section happens before the next acquisition.
        if let Err(word) = self.compact_cas(FREE | C_UPGRADABLE, FREE, Ordering::Release) {
            // SAFETY: the upgradable reader holds `M` (inherited or taken).
            unsafe { self.block(word).writers.unlock_writers() };
        }
    }

    /// Releases an upgradable lock, handing the queue lock over fairly.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    pub unsafe fn unlock_upgradable_fair(&self) {
        // Release: as in `unlock_upgradable`.
        if let Err(word) = self.compact_cas(FREE | C_UPGRADABLE, FREE, Ordering::Release) {
            // SAFETY: the upgradable reader holds `M`.
            unsafe { self.block(word).writers.unlock_writers_fair() };
        }
    }

    /// Upgrades an upgradable lock to an exclusive one, waiting for the readers to leave.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    pub unsafe fn upgrade(&self) {
        // Acquire: the readers that shared the compact lock are gone (there were none: a
        // compact upgradable lock has no readers).
        if let Err(word) = self.compact_cas(FREE | C_UPGRADABLE, FREE | C_WRITER, Ordering::Acquire)
        {
            let upgraded = self.block(word).revoke_and_drain(None);
            debug_assert!(upgraded);
        }
    }

    /// Upgrades if no reader is inside; otherwise stays upgradable and returns `false`.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    pub unsafe fn try_upgrade(&self) -> bool {
        match self.compact_cas(FREE | C_UPGRADABLE, FREE | C_WRITER, Ordering::Acquire) {
            Ok(()) => true,
            Err(word) => self.block(word).revoke_and_drain(Some(now_ns())),
        }
    }

    /// Upgrades, waiting at most `timeout` for the readers to leave; on timeout stays
    /// upgradable and returns `false`, with no trace left.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    pub unsafe fn try_upgrade_for(&self, timeout: Duration) -> bool {
        match self.compact_cas(FREE | C_UPGRADABLE, FREE | C_WRITER, Ordering::Acquire) {
            Ok(()) => true,
            Err(word) => self
                .block(word)
                .revoke_and_drain(Some(deadline_after(timeout))),
        }
    }

    // ---- downgrades ---------------------------------------------------------------------

    /// Turns an exclusive lock into a shared one, letting waiting readers in.
    ///
    /// # Safety
    /// An exclusive lock must be held.
    pub unsafe fn downgrade(&self) {
        // Release: the critical section happens before the readers that enter now.
        if let Err(word) = self.compact_cas(FREE | C_WRITER, FREE | C_READER, Ordering::Release) {
            let block = self.block(word);
            block.count_reader_while_exclusive();
            // SAFETY: the caller holds the exclusive lock, hence `M`.
            unsafe { block.unlock_exclusive(false) };
        }
    }

    /// Turns an exclusive lock into an upgradable one, letting waiting readers in.
    ///
    /// # Safety
    /// An exclusive lock must be held.
    pub unsafe fn downgrade_to_upgradable(&self) {
        // Release: as in `downgrade`.
        if let Err(word) = self.compact_cas(FREE | C_WRITER, FREE | C_UPGRADABLE, Ordering::Release)
        {
            // Keeps `M`: the upgradable reader holds it.
            self.block(word).release_writer_bit();
        }
    }

    /// Turns an upgradable lock into a shared one, letting writers and upgradable readers in.
    ///
    /// # Safety
    /// An upgradable lock must be held.
    pub unsafe fn downgrade_upgradable(&self) {
        // Release: as in `downgrade`.
        if let Err(word) = self.compact_cas(FREE | C_UPGRADABLE, FREE | C_READER, Ordering::Release)
        {
            let block = self.block(word);
            block.count_reader_while_exclusive();
            // SAFETY: the upgradable reader holds `M`.
            unsafe { block.writers.unlock_writers() };
        }
    }

    // ---- queries ------------------------------------------------------------------------

    /// Whether the lock is held in any mode (a snapshot).
    pub fn is_locked(&self) -> bool {
        let word = self.load_word();
        if is_compact(word) {
            return word.addr() != FREE;
        }
        let block = self.block(word);
        block.writers.writers_locked() || block.readers() != 0
    }

    /// Whether a writer holds the lock or waits for its readers to leave (a snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        let word = self.load_word();
        if is_compact(word) {
            return word.addr() & C_WRITER != 0;
        }
        // Relaxed: a snapshot.
        self.block(word).state.load(Ordering::Relaxed) & WRITER != 0
    }
}

impl<M: WriterLock, const RECURSIVE: bool> Drop for RawNumaRwLock<M, RECURSIVE> {
    fn drop(&mut self) {
        // Acquire: pairs with the Release of `inflate` (`&mut self` already orders it).
        let word = self.word.load(Ordering::Acquire);
        if !is_compact(word) {
            // SAFETY: made by `Box::into_raw` in `inflate` and freed only here; `&mut self`
            // means no thread can reach it any more.
            drop(unsafe { Box::from_raw(word) });
        }
    }
}

impl<M: WriterLock, const RECURSIVE: bool> Default for RawNumaRwLock<M, RECURSIVE> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: WriterLock> Inflated<M> {
    fn new(recursive: bool) -> Self {
        let nodes = topology::node_count().max(topology::virtual_nodes().unwrap_or(1));
        let node_stride = nodes.min(MAX_SLOTS / SLOTS_PER_NODE).next_power_of_two();
        let count = (node_stride * SLOTS_PER_NODE).max(MIN_SLOTS);
        Inflated {
            state: CachePadded::new(AtomicU32::new(0)),
            drain: CachePadded::new(DrainWord {
                seq: AtomicU32::new(0),
                streak: AtomicU32::new(0),
            }),
            writers: CachePadded::new(M::new_writer_lock()),
            slots: (0..count)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            slot_mask: count - 1,
            recursive,
            node_stride,
        }
    }

    /// The calling thread's reader slot: its node's (any node id is masked into range; a stale
    /// one costs locality, never correctness, since only the sum of the slots counts).
    #[inline(always)]
    fn my_slot(&self) -> &AtomicU32 {
        let node = topology::current_node();
        let lane = reader_lane() * self.node_stride;
        &self.slots[node.wrapping_add(lane) & self.slot_mask]
    }

    /// The wrapping sum of the slots: the readers inside (or about to back off). SeqCst: the
    /// writer's side of the handshake (see the module docs); each load is also an Acquire
    /// that pairs with the leaving readers' Release decrements.
    fn readers(&self) -> u32 {
        self.slots.iter().fold(0u32, |sum, slot| {
            sum.wrapping_add(slot.load(Ordering::SeqCst))
        })
    }

    /// The reader fast path: count in our slot, then look for a writer. For a recursive lock
    /// a writer that has not drained yet is vetoed instead. Returns `false` with our count
    /// taken back if a writer revoked.
    #[inline]
    fn try_enter_reader(&self, recursive: bool) -> bool {
        // A look before counting (BRAVO's check of the bias before publishing): while a writer
        // has revoked, an arriving reader leaves the slots and the drain alone, which would
        // otherwise see 2 RMWs per arrival on lines the writer reads. Relaxed: only a
        // shortcut to the slow path, which looks again; a stale `WRITER`-clear value just
        // means the handshake below decides.
        let early = self.state.load(Ordering::Relaxed);
        if early & WRITER != 0 && (!recursive || early & HELD != 0) {
            return false;
        }
        let slot = self.my_slot();
        // SeqCst: the reader's side of the handshake (see the module docs): this increment and
        // the load below cannot both miss the writer's `fetch_or(WRITER)` and slot loads.
        slot.fetch_add(1, Ordering::SeqCst);
        reader_handshake_fence();
        // SeqCst: as above; also an Acquire that pairs with the Release of the last writer's
        // unlock, so the reader sees its writes.
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            if state & WRITER == 0 {
                return true;
            }
            if !recursive || state & HELD != 0 {
                break;
            }
            // Recursive: the writer still drains. Setting VETO makes its `HELD` CAS fail, so
            // it rescans and sees our increment. SeqCst: ordered after our increment, before
            // the writer's failing CAS and its rescan.
            match self.state.compare_exchange(
                state,
                state | VETO,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        self.leave_slot(slot);
        false
    }

    /// A reader leaves: decrement the slot of the node it runs on now.
    #[inline]
    fn leave_reader(&self) {
        self.leave_slot(self.my_slot());
    }

    #[inline]
    fn leave_slot(&self, slot: &AtomicU32) {
        // SeqCst: the leaving side of the handshake: either the writer's slot loads see this
        // decrement, or the load below sees its WRITER and we bump `drain`. Also a Release
        // that pairs with the writer's (Acquire) slot loads: our reads happen before its writes.
        slot.fetch_sub(1, Ordering::SeqCst);
        reader_handshake_fence();
        if self.state.load(Ordering::SeqCst) & WRITER != 0 {
            self.notify_drain();
        }
    }

    /// Tells a draining writer that a reader left: bump `drain`, wake the writer if it sleeps.
    #[cold]
    fn notify_drain(&self) {
        // SeqCst: after our decrement in the total order, so that a writer that read `drain`
        // before its slot loads (and missed the decrement) finds `drain` changed and does not
        // sleep, or is asleep and sees DRAIN_PARKED here.
        let old = self.drain.seq.fetch_add(DRAIN_BUMP, Ordering::SeqCst);
        if old & DRAIN_PARKED != 0 {
            wait::unpark(&self.drain.seq);
        }
    }

    /// Counts a reader for the holder of `M` that turns into a reader (downgrades). Relaxed:
    /// the holder still excludes writers; its release of `M` orders this increment before the
    /// next writer's slot loads.
    fn count_reader_while_exclusive(&self) {
        self.my_slot().fetch_add(1, Ordering::Relaxed);
    }

    /// A reader's whole acquisition in the inflated lock.
    fn lock_shared(&self, recursive: bool, deadline: Option<u64>) -> bool {
        self.try_enter_reader(recursive) || self.lock_shared_waiting(recursive, deadline)
    }

    /// A reader that found `WRITER`: register as waiting, spin then sleep until `WRITER`
    /// clears, enter; give up at `deadline` with no trace left.
    #[cold]
    fn lock_shared_waiting(&self, recursive: bool, deadline: Option<u64>) -> bool {
        let mut registered = false;
        let entered = 'outer: loop {
            let mut budget = SpinBudget::new(deadline);
            loop {
                // Acquire: pairs with the Release of the writer's unlock (re-checked with
                // SeqCst in `try_enter_reader`).
                let state = self.state.load(Ordering::Acquire);
                if state & WRITER == 0 || (recursive && state & HELD == 0) {
                    break;
                }
                if !registered {
                    // Relaxed: `waiting` only steers the writers' fairness (which writer lets
                    // readers in first); no data is published through it.
                    registered = self
                        .state
                        .compare_exchange(
                            state,
                            state + WAITING_ONE,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_ok();
                    continue;
                }
                if budget.spin() {
                    continue;
                }
                if wait::expired(deadline) {
                    break 'outer false;
                }
                wait::announce_and_park(&self.state, state, READERS_PARKED, deadline);
            }
            if self.try_enter_reader(recursive) {
                break true;
            }
            if wait::expired(deadline) {
                break false;
            }
        };
        if registered {
            // Relaxed: as for the registration; the wake is ordered by the futex itself.
            let old = self.state.fetch_sub(WAITING_ONE, Ordering::Relaxed);
            if old / WAITING_ONE == 1 && old & WRITER_WAITS != 0 {
                wait::unpark(&*self.state);
            }
        }
        entered
    }

    /// A writer's whole acquisition in the inflated lock: `M`, fairness to waiting readers,
    /// revocation, drain. At `deadline`, gives everything back.
    fn lock_exclusive(&self, deadline: Option<u64>) -> bool {
        match deadline {
            None => self.writers.lock_writers(),
            Some(deadline) => {
                if !self.writers.try_lock_writers_for(left_until(deadline)) {
                    return false;
                }
            }
        }
        if self.admit_waiting_readers(deadline) && self.revoke_and_drain(deadline) {
            return true;
        }
        // SAFETY: taken above.
        unsafe { self.writers.unlock_writers() };
        false
    }

    /// An upgradable reader's acquisition in the inflated lock: `M` alone.
    fn lock_upgradable(&self, deadline: Option<u64>) -> bool {
        match deadline {
            None => {
                self.writers.lock_writers();
                true
            }
            Some(deadline) => self.writers.try_lock_writers_for(left_until(deadline)),
        }
    }

    fn try_lock_exclusive(&self) -> bool {
        if !self.writers.try_lock_writers() {
            return false;
        }
        if self.revoke_and_drain(Some(now_ns())) {
            return true;
        }
        // SAFETY: taken above.
        unsafe { self.writers.unlock_writers() };
        false
    }

    /// The holder of `M`, before it revokes: counts the streak of writers that went ahead of
    /// registered readers, and once it reaches [`WRITER_STREAK_LIMIT`] waits (with `WRITER`
    /// clear) until those readers got in. `false` at `deadline`.
    fn admit_waiting_readers(&self, deadline: Option<u64>) -> bool {
        // Relaxed: a fairness hint (see the registration in `lock_shared_waiting`).
        if self.state.load(Ordering::Relaxed) < WAITING_ONE {
            // Relaxed: only the holder of `M` touches the streak; `M` orders it.
            self.drain.streak.store(0, Ordering::Relaxed);
            return true;
        }
        let streak = self.drain.streak.load(Ordering::Relaxed);
        if streak < WRITER_STREAK_LIMIT {
            self.drain.streak.store(streak + 1, Ordering::Relaxed);
            return true;
        }
        self.drain.streak.store(0, Ordering::Relaxed);
        let mut budget = SpinBudget::new(deadline);
        loop {
            // Relaxed: as above; no data is read through it.
            let state = self.state.load(Ordering::Relaxed);
            if state < WAITING_ONE {
                return true;
            }
            if budget.spin() {
                continue;
            }
            if wait::expired(deadline) {
                // Relaxed: only a wake-up request; nobody sleeps on it but us.
                self.state.fetch_and(!WRITER_WAITS, Ordering::Relaxed);
                return false;
            }
            wait::announce_and_park(&self.state, state, WRITER_WAITS, deadline);
        }
    }

    /// The holder of `M` revokes the readers' fast path and waits for the slots to drain; it
    /// then holds the lock exclusively. At `deadline` it takes the revocation back (still
    /// holding `M`) and returns `false`.
    fn revoke_and_drain(&self, deadline: Option<u64>) -> bool {
        // SeqCst: the writer's side of the handshake (see the module docs). Clears
        // WRITER_WAITS: our wait for readers (if any) is over.
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            match self.state.compare_exchange_weak(
                state,
                (state | WRITER) & !WRITER_WAITS,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        if self.drain(deadline) {
            true
        } else {
            self.release_writer_bit();
            false
        }
    }

    /// Waits (spin, then sleep on `drain`) until no reader is inside, then (recursive locks
    /// only) sets `HELD`.
    fn drain(&self, deadline: Option<u64>) -> bool {
        // Made at the first reader found inside, not before the first look: making it reads the
        // clock, and most writers of a contended lock find no reader (locktorture `rw` at 0 %
        // reads on 2 cores: the clock read was 39 % of the profile's samples).
        let mut budget: Option<SpinBudget> = None;
        loop {
            // SeqCst: read before the slots; a reader that leaves after our slot loads bumps
            // `drain` after its decrement, so `seq` differs from `seen` and we do not sleep
            // through it (see `notify_drain`).
            let seen = self.drain.seq.load(Ordering::SeqCst);
            // The writer's side of the handshake: our `WRITER` (set before the first pass) and
            // this `seen` come before the slot loads in the `SeqCst` order. A fence on this slow
            // path costs little, and states the order for every model (loom included).
            fence(Ordering::SeqCst);
            if self.readers() == 0 {
                if !self.recursive {
                    // No recursive reader can veto, and nobody reads `HELD`: drained. This
                    // saves a CAS on `state` that every reader registering as waiting made
                    // fail and retry: at 95 % reads on the X5-4 (72 threads, numa_sim's `rw`
                    // table in tests/sim_rwlock.rs) cna-rw went from 0.8 to 5.4 ops/µs.
                    if seen & DRAIN_PARKED != 0 {
                        // Relaxed: stops the readers' wakes; nobody sleeps on `drain` now.
                        self.drain.seq.fetch_and(!DRAIN_PARKED, Ordering::Relaxed);
                    }
                    return true;
                }
                // SeqCst: ordered after the slot loads; pairs with a recursive reader's VETO.
                let state = self.state.load(Ordering::SeqCst);
                if state & VETO != 0 {
                    // A recursive reader entered: rescan (it is in the slots now).
                    self.state.fetch_and(!VETO, Ordering::SeqCst);
                    continue;
                }
                // SeqCst: fails if a recursive reader set VETO after our slot loads.
                if self
                    .state
                    .compare_exchange(state, state | HELD, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    if seen & DRAIN_PARKED != 0 {
                        // Relaxed: stops the readers' wakes; nobody sleeps on `drain` now.
                        self.drain.seq.fetch_and(!DRAIN_PARKED, Ordering::Relaxed);
                    }
                    return true;
                }
                continue;
            }
            if budget
                .get_or_insert_with(|| SpinBudget::with_backoff(deadline))
                .spin()
            {
                continue;
            }
            if wait::expired(deadline) {
                return false;
            }
            wait::announce_and_park(&self.drain.seq, seen, DRAIN_PARKED, deadline);
        }
    }

    /// Clears `WRITER` (and `HELD`, `VETO`, `READERS_PARKED`), waking the readers that sleep;
    /// `M` stays held.
    fn release_writer_bit(&self) {
        // Release: the critical section happens before the readers that see WRITER clear
        // (their loads are Acquire or SeqCst).
        let old = self
            .state
            .fetch_and(!(WRITER | HELD | VETO | READERS_PARKED), Ordering::Release);
        if old & READERS_PARKED != 0 {
            wait::unpark(&*self.state);
        }
    }

    /// Releases an exclusive lock: readers first, then `M`.
    ///
    /// # Safety
    /// The caller holds the exclusive lock (and so `M`).
    unsafe fn unlock_exclusive(&self, fair: bool) {
        if fair {
            // Relaxed: only the holder of `M` touches the streak. The next writer lets the
            // registered readers in first.
            self.drain
                .streak
                .store(WRITER_STREAK_LIMIT, Ordering::Relaxed);
        }
        self.release_writer_bit();
        if fair {
            // SAFETY: the caller holds `M`.
            unsafe { self.writers.unlock_writers_fair() };
        } else {
            // SAFETY: the caller holds `M`.
            unsafe { self.writers.unlock_writers() };
        }
    }
}

/// Implements the `lock_api` rwlock traits for `RawNumaRwLock<M, RECURSIVE>` with stateless
/// guards. Not under loom, whose atomics cannot be made in the `const INIT`.
#[cfg(not(loom))]
mod lock_api_impls {
    use super::{RawNumaRwLock, WriterLock};
    use lock_api::GuardSend;
    use std::time::{Duration, Instant};

    /// The time left until `instant` (the lock's clock is `now_ns`).
    fn left(instant: Instant) -> Duration {
        instant.saturating_duration_since(Instant::now())
    }

    // SAFETY: a shared lock excludes exclusive holders (readers enter only while no writer
    // has revoked, and a writer holds only once the slots drained); an exclusive lock excludes
    // everyone (a writer holds `M` and has drained the readers). The acquisitions are Acquire
    // and the releases Release (see the module docs); guards are stateless because unlocking
    // needs no per-acquisition data (the reader count is a sum over node slots).
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLock
        for RawNumaRwLock<M, RECURSIVE>
    {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: Self = Self::new();
        type SharedGuard = GuardSend;
        type ExclusiveGuard = GuardSend;

        #[inline]
        fn lock_shared(&self) -> GuardSend {
            RawNumaRwLock::lock_shared(self);
            GuardSend::new()
        }

        #[inline]
        fn try_lock_shared(&self) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_shared(self).then(GuardSend::new)
        }

        #[inline]
        unsafe fn unlock_shared(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract: a shared lock is held.
            unsafe { RawNumaRwLock::unlock_shared(self) }
        }

        #[inline]
        fn lock_exclusive(&self) -> GuardSend {
            RawNumaRwLock::lock_exclusive(self);
            GuardSend::new()
        }

        #[inline]
        fn try_lock_exclusive(&self) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_exclusive(self).then(GuardSend::new)
        }

        #[inline]
        unsafe fn unlock_exclusive(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract: an exclusive lock is held.
            unsafe { RawNumaRwLock::unlock_exclusive(self) }
        }

        fn is_locked(&self) -> bool {
            RawNumaRwLock::is_locked(self)
        }

        fn is_locked_exclusive(&self) -> bool {
            RawNumaRwLock::is_locked_exclusive(self)
        }
    }

    // SAFETY: as for `RawRwLock`; the fair unlocks release like the plain ones.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockFair
        for RawNumaRwLock<M, RECURSIVE>
    {
        unsafe fn unlock_shared_fair(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract. A reader hands nothing over: leaving is fair.
            unsafe { RawNumaRwLock::unlock_shared(self) }
        }

        unsafe fn unlock_exclusive_fair(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract: an exclusive lock is held.
            unsafe { RawNumaRwLock::unlock_exclusive_fair(self) }
        }
    }

    // SAFETY: a downgrade counts the holder as a reader before it lets writers in.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockDowngrade
        for RawNumaRwLock<M, RECURSIVE>
    {
        unsafe fn downgrade(&self, _guard: GuardSend) -> GuardSend {
            // SAFETY: lock_api's contract: an exclusive lock is held.
            unsafe { RawNumaRwLock::downgrade(self) };
            GuardSend::new()
        }
    }

    // SAFETY: as for `RawRwLock`; a timed-out wait gives back everything it took.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockTimed
        for RawNumaRwLock<M, RECURSIVE>
    {
        type Duration = Duration;
        type Instant = Instant;

        fn try_lock_shared_for(&self, timeout: Duration) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_shared_for(self, timeout).then(GuardSend::new)
        }

        fn try_lock_shared_until(&self, timeout: Instant) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_shared_for(self, left(timeout)).then(GuardSend::new)
        }

        fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_exclusive_for(self, timeout).then(GuardSend::new)
        }

        fn try_lock_exclusive_until(&self, timeout: Instant) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_exclusive_for(self, left(timeout)).then(GuardSend::new)
        }
    }

    // SAFETY: an upgradable lock holds `M` (or the compact upgradable state), which excludes
    // writers and other upgradable readers but not readers; an upgrade drains the readers
    // (Acquire on their Release decrements) before it returns.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgrade
        for RawNumaRwLock<M, RECURSIVE>
    {
        type UpgradableGuard = GuardSend;

        fn lock_upgradable(&self) -> GuardSend {
            RawNumaRwLock::lock_upgradable(self);
            GuardSend::new()
        }

        fn try_lock_upgradable(&self) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_upgradable(self).then(GuardSend::new)
        }

        unsafe fn unlock_upgradable(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            unsafe { RawNumaRwLock::unlock_upgradable(self) }
        }

        unsafe fn upgrade(&self, _guard: GuardSend) -> GuardSend {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            unsafe { RawNumaRwLock::upgrade(self) };
            GuardSend::new()
        }

        unsafe fn try_upgrade(&self, guard: GuardSend) -> Result<GuardSend, GuardSend> {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            if unsafe { RawNumaRwLock::try_upgrade(self) } {
                Ok(GuardSend::new())
            } else {
                Err(guard)
            }
        }
    }

    // SAFETY: as for `RawRwLockUpgrade`.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeFair
        for RawNumaRwLock<M, RECURSIVE>
    {
        unsafe fn unlock_upgradable_fair(&self, _guard: GuardSend) {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            unsafe { RawNumaRwLock::unlock_upgradable_fair(self) }
        }
    }

    // SAFETY: as for `RawRwLockDowngrade`.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeDowngrade
        for RawNumaRwLock<M, RECURSIVE>
    {
        unsafe fn downgrade_upgradable(&self, _guard: GuardSend) -> GuardSend {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            unsafe { RawNumaRwLock::downgrade_upgradable(self) };
            GuardSend::new()
        }

        unsafe fn downgrade_to_upgradable(&self, _guard: GuardSend) -> GuardSend {
            // SAFETY: lock_api's contract: an exclusive lock is held.
            unsafe { RawNumaRwLock::downgrade_to_upgradable(self) };
            GuardSend::new()
        }
    }

    // SAFETY: as for `RawRwLockUpgrade` and `RawRwLockTimed`.
    unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeTimed
        for RawNumaRwLock<M, RECURSIVE>
    {
        fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_upgradable_for(self, timeout).then(GuardSend::new)
        }

        fn try_lock_upgradable_until(&self, timeout: Instant) -> Option<GuardSend> {
            RawNumaRwLock::try_lock_upgradable_for(self, left(timeout)).then(GuardSend::new)
        }

        unsafe fn try_upgrade_for(
            &self,
            guard: GuardSend,
            timeout: Duration,
        ) -> Result<GuardSend, GuardSend> {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            if unsafe { RawNumaRwLock::try_upgrade_for(self, timeout) } {
                Ok(GuardSend::new())
            } else {
                Err(guard)
            }
        }

        unsafe fn try_upgrade_until(
            &self,
            guard: GuardSend,
            timeout: Instant,
        ) -> Result<GuardSend, GuardSend> {
            // SAFETY: lock_api's contract: an upgradable lock is held.
            if unsafe { RawNumaRwLock::try_upgrade_for(self, left(timeout)) } {
                Ok(GuardSend::new())
            } else {
                Err(guard)
            }
        }
    }
}

/// The raw rwlock whose writers queue through [`RawMcs`].
pub type RawMcsRwLock = RawNumaRwLock<RawMcs>;
/// The raw rwlock whose writers queue through [`RawCna`].
pub type RawCnaRwLock = RawNumaRwLock<RawCna>;
/// The raw rwlock whose writers queue through [`RawHq`].
pub type RawHqRwLock = RawNumaRwLock<RawHq>;
/// [`RawMcsRwLock`] with recursive reads (parking_lot's `RawRwLockRecursive`).
pub type RawMcsRecursiveRwLock = RawNumaRwLock<RawMcs, true>;
/// [`RawCnaRwLock`] with recursive reads (parking_lot's `RawRwLockRecursive`).
pub type RawCnaRecursiveRwLock = RawNumaRwLock<RawCna, true>;
/// [`RawHqRwLock`] with recursive reads (parking_lot's `RawRwLockRecursive`).
pub type RawHqRecursiveRwLock = RawNumaRwLock<RawHq, true>;
