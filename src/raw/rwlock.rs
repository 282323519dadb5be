//! `RawNumaRwLock`: a reader-writer lock whose readers write only a line no other running
//! reader writes (their thread's row of a process-wide table, or else a line of their NUMA
//! node) and whose writers queue through one of the crate's queue locks (`RawMcs`, `RawCna`,
//! `RawHq`).
//!
//! Ideas from BRAVO, the per-node reader indicators of Calciu et al. and the kernel's
//! percpu-rwsem; written for this crate (docs/DESIGN.md, "The reader-writer lock").
//!
//! ```text
//! word   compact state (bit 0 set) | pointer to Inflated (bit 0 clear)  (8 bytes: the whole lock)
//!
//! Inflated (heap, made on first contention, freed by drop):
//!   state    [ WRITER | HELD | VETO | READERS_PARKED | BIAS | waiting readers ... ], and on
//!            its line the writers' streak (the holder of M's own)
//!   writers  M: the queue lock writers and upgradable readers take (RawMcs, RawCna or RawHq)
//!   drain    the writer's futex word while it waits for readers to leave; the bias inhibition
//!   slots    4 cache-padded reader counters per NUMA node (a power of two, at least 2)
//!
//! The visible-readers table (one per process, `src/raw/rwlock_table.rs`): a row of 16 words per
//! thread; a biased reader of a lock CASes the entry of its row in the lock's column from 0
//! to the lock's key.
//! ```
//!
//! Memory: 8 bytes per lock until it is contended; then one block of 3 lines plus 4 lines per
//! node (2.4 KiB on 4 nodes; `tests/rwlock_memory.rs` measures 100,000 of them), whatever the
//! number of locks, plus the table: 128 KiB for the whole process.
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
//! **Biased readers** (BRAVO): while `BIAS` is set, a reader publishes itself in its row of the
//! table (a CAS of its entry from 0 to the lock's key, on a line no other running thread
//! writes), then looks at `state`: with `BIAS` set and `WRITER` clear it holds the lock. An
//! entry is one *unit* of the reader count, as a slot increment is: a reader leaves by clearing
//! its row's entry if it holds the key, and otherwise by decrementing a slot (its guard may
//! have been dropped on another thread, or another reader of its row cleared its entry and
//! decremented instead); only the sum of entries and slots counts. A writer's revocation clears
//! `BIAS`; it then counts the entries holding the key in every row handed out, with the slots,
//! until the sum is 0, and moves any entry left (balanced by a decrement) into slot 0, so that
//! while `BIAS` is clear no unit lives in the table and writers need not count it. The bias
//! then stays off for 9 times what that revocation took (BRAVO's inhibition): a reader that
//! enters through the slots looks at the clock on one entry in 16 and sets `BIAS` again once
//! the inhibition is over.
//!
//! **Readers** (the bias off, or no row or a busy entry) count themselves in the slot of the
//! node they run on (one of 4 lanes, by thread), then look at `state`: if
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
//! - `WRITER`: set by the holder of `M`, to write (revokes readers); cleared by its unlock,
//!   downgrade or timeout;
//! - `HELD`: set by that writer, once the slots drained (CAS; recursive locks only); cleared with
//!   `WRITER`;
//! - `VETO`: set by a recursive reader that entered while `WRITER` without `HELD`; cleared by the
//!   writer, before it rescans;
//! - `READERS_PARKED`: set by a reader, before sleeping on `state` while `WRITER`; cleared by the
//!   unlock that clears `WRITER` (and wakes);
//! - `BIAS`: set by a fresh block (non-recursive), and by a reader once the inhibition is over;
//!   cleared by a writer's revocation (with `WRITER`);
//! - `waiting` (a count): raised by a reader that found `WRITER` and spun its spin time, once per
//!   acquisition (it registers); lowered by that reader, once it got in or gave up.
//!
//! Transitions of one writer: `M` taken → (maybe: the registered readers' turn) → `WRITER` →
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
//!   So a waiting writer sits through one read phase at most.
//! - **Readers are not starved by writers** (eventual fairness, as parking_lot's): a reader
//!   that finds `WRITER` spins its spin time, then registers in `waiting`. A writer that takes
//!   `M` while readers are registered counts a *streak*; once it is at least
//!   [`WRITER_STREAK_LIMIT`] writers and 20 µs long, the next writer gives the registered
//!   readers a turn before it revokes: it waits (with `WRITER` clear) until they all got in, or
//!   until none of them got in for 5 µs (the others are preempted or still waking: they get
//!   the next turn). A registered reader that runs thus waits about 20 µs plus a critical
//!   section. `unlock_exclusive_fair` ends the streak at once: the next writer gives the
//!   registered readers their turn first.
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
    AtomicPtr, AtomicU32, AtomicU64, EXHAUSTIVE, Ordering, const_fn, fence, now_ns, spin_hint,
    yield_now,
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
/// `state`: 16 is unused (it was a writer sleeping until the registered readers got in; the
/// readers' turn now spins, briefly).
/// `state`: readers may publish themselves in the visible-readers table ([`table`]) instead of
/// counting in a slot (BRAVO's reader bias). Set at first contention and by a reader once the
/// inhibition after a revocation is over; cleared by a writer's revocation, which then counts
/// the table's entries too. Never set in a recursive lock.
const BIAS: u32 = 32;
/// `state`: one registered waiting reader (the count is the bits from here up).
const WAITING_ONE: u32 = 64;

/// After a revocation that found the bias set took `t` ns (counting the table's entries and
/// waiting for those readers), the bias stays off for `REBIAS_INHIBIT * t`: writers pay for
/// counting the table at most about 1 / (1 + `REBIAS_INHIBIT`) of their time (BRAVO's N = 9).
const REBIAS_INHIBIT: u64 = 9;

/// A reader that entered through the slots while the bias is off looks at the clock on one
/// in this many such entries, to set the bias again once the inhibition is over.
const REBIAS_SAMPLE: u32 = 16;

pub(crate) mod table;
use table::note_probe;

/// `drain`: the writer sleeps on `drain` until a reader leaves; readers bump the rest by 2.
const DRAIN_PARKED: u32 = 1;
const DRAIN_BUMP: u32 = 2;

/// The number of consecutive writers that may take the lock while readers are registered as
/// waiting, at least; the streak also lasts at least `READER_TURN_NS` (eventual fairness, as
/// parking_lot's), then the next writer lets those readers in before it revokes. A count alone,
/// with a turn that waits for every registered reader, starves writers where threads outnumber
/// cores: some registered reader is always preempted (docs/DESIGN.md, "Decision record: rwlock
/// reader turns").
pub const WRITER_STREAK_LIMIT: u32 = 4;

/// The shortest streak of writers ahead of registered readers, in ns (see
/// [`WRITER_STREAK_LIMIT`]): a registered reader that runs waits about this long plus the
/// writer inside.
const READER_TURN_NS: u64 = 20_000;

/// `streak`: set by `unlock_exclusive_fair`: the next writer gives the registered readers their
/// turn at once.
const FAIR_TURN: u32 = u32::MAX;

/// The readers' turn ends when none of the registered readers got in for this long, in ns.
const READER_TURN_STALL_NS: u64 = 5_000;

/// Reader slots per NUMA node: a node's readers spread over this many lines, by thread, so
/// that a socket's 18 cores do not all write one line. A writer reads them all, so more slots
/// make writers slower (docs/DESIGN.md, "Decision record: rwlock reader slots").
const SLOTS_PER_NODE: usize = 4;

crate::sync::thread_local! {
    /// The calling thread's lane among its node's [`SLOTS_PER_NODE`] slots; `usize::MAX` until
    /// first asked.
    static READER_LANE: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

crate::sync::thread_local! {
    /// Counts the calling thread's entries through the slots while the bias is off (see
    /// [`REBIAS_SAMPLE`]).
    static REBIAS_TICK: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
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
    state: CachePadded<WriterLine>,
    /// The queue lock of writers and upgradable readers, on a line of its own: its queue head
    /// spins on it while the holder writes `state`.
    writers: CachePadded<M>,
    /// The writer's drain futex and its streak, away from `state` so that leaving readers'
    /// bumps do not invalidate the line every reader reads.
    drain: CachePadded<DrainWord>,
    /// [`SLOTS_PER_NODE`] reader counters per node (see `node_stride`); their wrapping sum is the
    /// number of readers inside (or about to back off).
    slots: Box<[CachePadded<AtomicU32>]>,
    slot_mask: usize,
    /// Whether recursive readers may veto a draining writer (`RECURSIVE`); only then does a
    /// writer set `HELD`.
    recursive: bool,
    /// Node `n`, lane `l` count in slot `(n + l * node_stride) & slot_mask`: the node count
    /// rounded up to a power of two.
    node_stride: usize,
    /// This lock's column in the visible-readers table, drawn when the block is made (see `key`).
    column: usize,
    /// Whether the block was published in a lock word: only then can a reader have entered
    /// through the table with its key (a block that lost the race to inflate never was).
    published: bool,
}

/// The revocation word, with what only the holder of `M` reads and writes (which it touches
/// when it writes the word anyway). `M` has a line of its own: `M`'s queue head spins on its
/// word while the holder writes `state`, and sharing the line slowed read-mostly use more than
/// it saved writers (docs/DESIGN.md, "Decision record: rwlock reader slots").
struct WriterLine {
    word: AtomicU32,
    /// Consecutive writers that took `M` while readers were registered waiting; read and
    /// written only by the holder of `M` (Relaxed: `M` orders them), on the line it holds.
    streak: AtomicU32,
    /// When the current streak began (`now_ns`); as `streak`, the holder of `M`'s own.
    streak_start: AtomicU64,
}

struct DrainWord {
    /// `DRAIN_PARKED | bumps * DRAIN_BUMP`.
    seq: AtomicU32,
    /// The `now_ns` time before which readers do not set `BIAS` again; written by the writer
    /// that revoked a bias, read by a sample of the readers (Relaxed: only a hint).
    inhibit_until: AtomicU64,
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
/// the handshake its place in the single total order of `SeqCst` operations (C++20
/// [atomics.order]), so the real code needs no fence on its fast path (on x86 the locked RMW is a
/// full barrier anyway). Loom models `SeqCst` accesses as acquire/release and only `SeqCst` fences
/// as sequentially consistent; the fence gives the models the same total order, so that they
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
                    let mut block = unsafe { Box::from_raw(made) };
                    // No reader knows its key: dropping it need not sweep the table.
                    block.published = false;
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
            // A fresh lock is biased (BRAVO): its readers go through the table until a writer
            // revokes.
            let bias = if RECURSIVE { 0 } else { BIAS };
            block.state.word.store(inherited | bias, Ordering::Relaxed);
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
        if !self.fast_cas(FREE, FREE | C_READER, Ordering::Acquire) {
            self.lock_shared_slow(None);
        }
    }

    /// The uncontended transition `from → to` in one look and one weak CAS, nothing else on
    /// the path (the callers' slow paths are out of line, so that this one needs no stack
    /// frame); `false` sends the caller to its slow path, which looks again. Acquire or
    /// Release on success as the caller says; Relaxed on failure (the slow path reloads).
    #[inline(always)]
    fn fast_cas(&self, from: usize, to: usize, success: Ordering) -> bool {
        // Look first, as `compact_cas` does: an inflated lock's word is never written again.
        let now = self.word.load(Ordering::Relaxed);
        now.addr() == from
            && self
                .word
                .compare_exchange_weak(now, compact(to), success, Ordering::Relaxed)
                .is_ok()
    }

    /// The slow path of `lock_shared` and of its timed tries.
    #[cold]
    #[inline(never)]
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
        if !self.fast_cas(FREE | C_READER, FREE, Ordering::Release) {
            self.unlock_shared_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn unlock_shared_slow(&self) {
        // Release: as in `unlock_shared` (a weak CAS may have failed spuriously).
        if let Err(word) = self.compact_cas(FREE | C_READER, FREE, Ordering::Release) {
            self.block(word).leave_reader();
        }
    }

    // ---- exclusive ----------------------------------------------------------------------

    /// Acquires an exclusive lock, waiting as long as needed.
    #[inline]
    pub fn lock_exclusive(&self) {
        // Acquire: pairs with the Release of the previous compact unlock.
        if !self.fast_cas(FREE, FREE | C_WRITER, Ordering::Acquire) {
            self.lock_exclusive_slow(None);
        }
    }

    #[cold]
    #[inline(never)]
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
        if !self.fast_cas(FREE | C_WRITER, FREE, Ordering::Release) {
            // SAFETY: the caller's.
            unsafe { self.unlock_exclusive_slow() };
        }
    }

    /// # Safety
    /// As for `unlock_exclusive`.
    #[cold]
    #[inline(never)]
    unsafe fn unlock_exclusive_slow(&self) {
        // Release: as in `unlock_exclusive` (a weak CAS may have failed spuriously).
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
        block.writers.writers_locked() || block.readers(!block.recursive) != 0
    }

    /// Whether a writer holds the lock or waits for its readers to leave (a snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        let word = self.load_word();
        if is_compact(word) {
            return word.addr() & C_WRITER != 0;
        }
        // Relaxed: a snapshot.
        self.block(word).state.word.load(Ordering::Relaxed) & WRITER != 0
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

impl<M> Drop for Inflated<M> {
    fn drop(&mut self) {
        if !self.recursive && self.published {
            table::clear(table::key(ptr::from_ref(self).addr(), self.column));
        }
    }
}

impl<M: WriterLock> Inflated<M> {
    fn new(recursive: bool) -> Self {
        let nodes = topology::node_count().max(topology::virtual_nodes().unwrap_or(1));
        let node_stride = nodes.min(MAX_SLOTS / SLOTS_PER_NODE).next_power_of_two();
        let count = (node_stride * SLOTS_PER_NODE).max(MIN_SLOTS);
        Inflated {
            writers: CachePadded::new(M::new_writer_lock()),
            state: CachePadded::new(WriterLine {
                word: AtomicU32::new(0),
                streak: AtomicU32::new(0),
                streak_start: AtomicU64::new(0),
            }),
            drain: CachePadded::new(DrainWord {
                seq: AtomicU32::new(0),
                inhibit_until: AtomicU64::new(0),
            }),
            slots: (0..count)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            slot_mask: count - 1,
            recursive,
            node_stride,
            column: table::new_column(),
            published: true,
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

    /// The wrapping sum of the slots, plus the table's entries for this lock when `table`: the
    /// readers inside (or about to back off). SeqCst: the writer's side of the handshake (see
    /// the module docs); each load is also an Acquire that pairs with the leaving readers'
    /// Release decrements.
    fn readers(&self, table: bool) -> u32 {
        self.readers_and_units(table).0
    }

    /// [`readers`](Self::readers), and of them the table's entries.
    fn readers_and_units(&self, table: bool) -> (u32, u32) {
        let slots = self.slots.iter().fold(0u32, |sum, slot| {
            sum.wrapping_add(slot.load(Ordering::SeqCst))
        });
        let units = if table { table::count(self.key()) } else { 0 };
        if units != 0 {
            note_probe!(table_units_seen);
        }
        (slots.wrapping_add(units), units)
    }

    /// Run by the writer that revoked the bias, once the readers drained: moves the entries
    /// still holding this lock's key into slot 0, so that no unit of this lock is left in the
    /// table while the bias is off (the writers that revoke without the bias do not count the
    /// table). Such an entry is a reader that published and is about to back off, or one whose
    /// guard was dropped on another thread (that thread decremented a slot instead): its unit
    /// is balanced by a decrement, and moving it keeps the sum. A reader that backs off after
    /// we took its entry finds it gone and decrements a slot, as for any taken unit.
    #[cold]
    fn normalize_table(&self) {
        let moved = table::take_all(self.key());
        if moved != 0 {
            note_probe!(normalized);
            // Relaxed: we hold the lock exclusively (no reader inside, `WRITER` set); our
            // release of `WRITER` orders this before the next writer's slot loads.
            self.slots[0].fetch_add(moved, Ordering::Relaxed);
        }
    }

    /// This lock's key in the visible-readers table: the block's address (never 0, unique while
    /// the lock lives; `Drop` clears what is left of it) with its column in the low bits.
    #[inline(always)]
    fn key(&self) -> u64 {
        table::key(ptr::from_ref(self).addr(), self.column)
    }

    /// The biased read path: publish in the table, then look for a writer (or a revoked bias).
    /// Returns `false` with our unit taken back if either came.
    #[inline(always)]
    fn try_enter_biased(&self) -> bool {
        if !table::publish(self.key()) {
            return false;
        }
        reader_handshake_fence();
        // SeqCst: the reader's side of the handshake (the CAS in `publish` and this load), as
        // on the slot path; also an Acquire that pairs with the last writer's Release.
        let state = self.state.word.load(Ordering::SeqCst);
        if state & (WRITER | BIAS) == BIAS {
            note_probe!(biased_entry);
            return true;
        }
        note_probe!(biased_backoff);
        self.leave_reader();
        false
    }

    /// A reader that entered through the slots with the bias off: on a sample of such entries,
    /// sets the bias again once the inhibition after the last revocation is over.
    #[inline(always)]
    fn maybe_rebias(&self) {
        let due = EXHAUSTIVE
            || REBIAS_TICK
                .try_with(|tick| {
                    let n = tick.get().wrapping_add(1);
                    tick.set(n);
                    n.is_multiple_of(REBIAS_SAMPLE)
                })
                .unwrap_or(false);
        if due {
            self.rebias_if_due();
        }
    }

    #[cold]
    #[inline(never)]
    fn rebias_if_due(&self) {
        // Relaxed: a hint; a bias set early or late only moves cost between readers and writers.
        if now_ns() >= self.drain.inhibit_until.load(Ordering::Relaxed) {
            // Relaxed: an RMW, so it takes its place in `state`'s modification order; a writer
            // whose revocation comes later in it sees the bias and counts the table, and one
            // that came earlier has `WRITER` set, which keeps biased readers out (they check
            // `WRITER | BIAS == BIAS`) until its unlock.
            self.state.word.fetch_or(BIAS, Ordering::Relaxed);
            note_probe!(rebiased);
        }
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
        let early = self.state.word.load(Ordering::Relaxed);
        if early & WRITER != 0 && (!recursive || early & HELD != 0) {
            return false;
        }
        if early & BIAS != 0 && self.try_enter_biased() {
            return true;
        }
        let slot = self.my_slot();
        // SeqCst: the reader's side of the handshake (see the module docs): this increment and
        // the load below cannot both miss the writer's `fetch_or(WRITER)` and slot loads.
        slot.fetch_add(1, Ordering::SeqCst);
        reader_handshake_fence();
        // SeqCst: as above; also an Acquire that pairs with the Release of the last writer's
        // unlock, so the reader sees its writes.
        let mut state = self.state.word.load(Ordering::SeqCst);
        loop {
            if state & WRITER == 0 {
                if !recursive && state & BIAS == 0 {
                    self.maybe_rebias();
                }
                return true;
            }
            if !recursive || state & HELD != 0 {
                break;
            }
            // Recursive: the writer still drains. Setting VETO makes its `HELD` CAS fail, so
            // it rescans and sees our increment. SeqCst: ordered after our increment, before
            // the writer's failing CAS and its rescan.
            match self.state.word.compare_exchange(
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

    /// A reader leaves: clear our row's table entry if it holds this lock, or else decrement
    /// the slot of the node we run on now (one unit either way: see [`table`]).
    #[inline]
    fn leave_reader(&self) {
        if !self.recursive && table::retract(self.key()) {
            reader_handshake_fence();
            // SeqCst: the leaving side of the handshake, as in `leave_slot`.
            if self.state.word.load(Ordering::SeqCst) & WRITER != 0 {
                self.notify_drain();
            }
            return;
        }
        self.leave_slot(self.my_slot());
    }

    #[inline]
    fn leave_slot(&self, slot: &AtomicU32) {
        // SeqCst: the leaving side of the handshake: either the writer's slot loads see this
        // decrement, or the load below sees its WRITER and we bump `drain`. Also a Release
        // that pairs with the writer's (Acquire) slot loads: our reads happen before its writes.
        slot.fetch_sub(1, Ordering::SeqCst);
        reader_handshake_fence();
        if self.state.word.load(Ordering::SeqCst) & WRITER != 0 {
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
                let state = self.state.word.load(Ordering::Acquire);
                if state & WRITER == 0 || (recursive && state & HELD == 0) {
                    break;
                }
                if budget.spin() {
                    continue;
                }
                if !registered {
                    // Registers only once its spin is over: a registration is an RMW on the
                    // line every writer writes and every reader reads, and most readers get in
                    // within their spin. Relaxed: `waiting` only steers the writers' fairness
                    // (which writer lets readers in first); no data is published through it.
                    registered = self
                        .state
                        .word
                        .compare_exchange(
                            state,
                            state + WAITING_ONE,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        )
                        .is_ok();
                    continue;
                }
                if wait::expired(deadline) {
                    break 'outer false;
                }
                wait::announce_and_park(&self.state.word, state, READERS_PARKED, deadline);
            }
            if self.try_enter_reader(recursive) {
                break true;
            }
            if wait::expired(deadline) {
                break false;
            }
        };
        if registered {
            // Relaxed: as for the registration (a writer giving readers their turn spins on
            // the count; nobody sleeps on it).
            self.state.word.fetch_sub(WAITING_ONE, Ordering::Relaxed);
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
    /// registered readers. Once it is [`WRITER_STREAK_LIMIT`] writers and [`READER_TURN_NS`]
    /// long, this writer gives the registered readers their turn (with `WRITER` clear): it
    /// waits until they all got in, or until none of them got in for [`READER_TURN_STALL_NS`]
    /// (those are preempted or still waking: waiting for them would hand the lock to the
    /// scheduler; they get the next turn). `false` at `deadline`.
    fn admit_waiting_readers(&self, deadline: Option<u64>) -> bool {
        // Relaxed: a fairness hint (see the registration in `lock_shared_waiting`).
        if self.state.word.load(Ordering::Relaxed) < WAITING_ONE {
            // Relaxed: only the holder of `M` touches the streak; `M` orders it. Written only
            // when it changes.
            if self.state.streak.load(Ordering::Relaxed) != 0 {
                self.state.streak.store(0, Ordering::Relaxed);
            }
            return true;
        }
        // Relaxed (streak and its start): only the holder of `M` touches them; `M` orders it.
        let streak = self.state.streak.load(Ordering::Relaxed);
        if streak != FAIR_TURN {
            if streak == 0 {
                self.state.streak_start.store(now_ns(), Ordering::Relaxed);
            }
            // The clock is read on one writer in 8 past the count, not on every one.
            if streak < WRITER_STREAK_LIMIT
                || !streak.is_multiple_of(8)
                || now_ns().saturating_sub(self.state.streak_start.load(Ordering::Relaxed))
                    < READER_TURN_NS
            {
                self.state.streak.store(streak + 1, Ordering::Relaxed);
                return true;
            }
        }
        self.state.streak.store(0, Ordering::Relaxed);
        let mut waiting = u32::MAX;
        let mut stalled_at = u64::MAX;
        loop {
            // Relaxed: as above; no data is read through it.
            let state = self.state.word.load(Ordering::Relaxed);
            if state < WAITING_ONE {
                return true;
            }
            let now = now_ns();
            if state / WAITING_ONE < waiting {
                // A registered reader got in (or we just started): the turn goes on.
                waiting = state / WAITING_ONE;
                stalled_at = now.saturating_add(READER_TURN_STALL_NS);
            }
            if now >= stalled_at {
                return true;
            }
            if wait::expired(deadline) {
                return false;
            }
            // Spins, never parks: a sleep (timer slack, then a run queue on a crowded core)
            // would outlast the turn many times over.
            if EXHAUSTIVE {
                yield_now();
            } else {
                spin_hint();
            }
        }
    }

    /// The holder of `M` revokes the readers' fast path and waits for the slots to drain; it
    /// then holds the lock exclusively. At `deadline` it takes the revocation back (still
    /// holding `M`) and returns `false`.
    fn revoke_and_drain(&self, deadline: Option<u64>) -> bool {
        // SeqCst: the writer's side of the handshake (see the module docs).
        // Clears BIAS too: if it was set, the table may hold readers, and we count them until
        // they are gone (then keep the bias off for a while: see `REBIAS_INHIBIT`).
        let mut state = self.state.word.load(Ordering::Relaxed);
        loop {
            match self.state.word.compare_exchange_weak(
                state,
                (state | WRITER) & !BIAS,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        let biased = state & BIAS != 0;
        let started = if biased { now_ns() } else { 0 };
        let drained = self.drain(deadline, biased);
        if biased {
            let now = now_ns();
            let inhibit = now.saturating_sub(started).saturating_mul(REBIAS_INHIBIT);
            // Relaxed: a hint for the readers (see `rebias_if_due`).
            self.drain
                .inhibit_until
                .store(now.saturating_add(inhibit), Ordering::Relaxed);
        }
        if drained {
            true
        } else {
            self.release_writer_bit();
            false
        }
    }

    /// Waits (spin, then sleep on `drain`) until no reader is inside, then (recursive locks
    /// only) sets `HELD`.
    fn drain(&self, deadline: Option<u64>, table: bool) -> bool {
        // Made at the first reader found inside, not before the first look: making it reads the
        // clock, and most writers of a contended lock find no reader.
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
            let (readers, units) = self.readers_and_units(table);
            if readers == 0 {
                if units != 0 {
                    self.normalize_table();
                }
                if !self.recursive {
                    // No recursive reader can veto, and nobody reads `HELD`: drained. This
                    // saves a CAS on `state` that every reader registering as waiting made
                    // fail and retry (docs/DESIGN.md, "Decision record: rwlock reader slots").
                    if seen & DRAIN_PARKED != 0 {
                        // Relaxed: stops the readers' wakes; nobody sleeps on `drain` now.
                        self.drain.seq.fetch_and(!DRAIN_PARKED, Ordering::Relaxed);
                    }
                    return true;
                }
                // SeqCst: ordered after the slot loads; pairs with a recursive reader's VETO.
                let state = self.state.word.load(Ordering::SeqCst);
                if state & VETO != 0 {
                    // A recursive reader entered: rescan (it is in the slots now).
                    self.state.word.fetch_and(!VETO, Ordering::SeqCst);
                    continue;
                }
                // SeqCst: fails if a recursive reader set VETO after our slot loads.
                if self
                    .state
                    .word
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
            .word
            .fetch_and(!(WRITER | HELD | VETO | READERS_PARKED), Ordering::Release);
        if old & READERS_PARKED != 0 {
            wait::unpark(&self.state.word);
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
            self.state.streak.store(FAIR_TURN, Ordering::Relaxed);
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
