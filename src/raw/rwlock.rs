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
//!   drain    the writer's futex word while it waits for readers to leave; the bias inhibition;
//!            the writers' streak towards write mode (the holder of M's own)
//!   slots    4 cache-padded reader counters per NUMA node (a power of two, at least 2): the
//!            readers inside in the low 32 bits, the readers that left in the high 32 bits
//!
//! The visible-readers table (one per process, `src/raw/rwlock/table.rs`): a row of 16 words per
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
//! while `BIAS` is clear no unit lives in the table and writers need not count it. A writer
//! that gives up before the sum is 0 (a try, or a deadline) sets `BIAS` again before it clears
//! `WRITER`: the entries it counted are readers still inside. The bias
//! then stays off for 9 times what that revocation took (BRAVO's inhibition), twice as long
//! for each bias in a row that writers revoked before it had lived that long (up to 2^7
//! times): a reader that enters through the slots looks at the clock on one entry in 16 and
//! sets `BIAS` again once the inhibition is over.
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
//!   downgrade or timeout; or left set by its unlock and handed over with `M` (below), then
//!   cleared by an upgradable reader that takes `M`, or by a writer that takes it while readers
//!   want in; or left set in write mode (`WRITE_MODE`);
//! - `HELD`: set by that writer, once the slots drained (CAS; recursive locks only); cleared with
//!   `WRITER`, handed over with it;
//! - `VETO`: set by a recursive reader that entered while `WRITER` without `HELD`; cleared by the
//!   writer, before it rescans;
//! - `READERS_PARKED`: set by a reader, before sleeping on `state` while `WRITER`; cleared by the
//!   unlock that clears `WRITER` (and wakes);
//! - `BIAS`: set by a fresh block (non-recursive), and by a reader once the inhibition is over;
//!   cleared by a writer's revocation (with `WRITER`);
//! - `TIMED_WRITERS`: set, for good, by the first writer or upgradable reader that waits for
//!   `M` with a deadline (before it queues); never cleared;
//! - `READERS_WANT`: set by the first reader that finds `WRITER` (one `fetch_or`; the others see
//!   it); cleared with `WRITER`;
//! - `WRITE_MODE` (with `WRITER`): set by a writer's unlock that leaves the readers revoked
//!   with `M` free (write mode, below); cleared with `WRITER`, by the next holder of `M` that
//!   is not a writer (a reader that found it, an upgradable reader), or by a writer's unlock
//!   that does not keep it;
//! - `waiting` (a count): raised by a reader that found `WRITER` and spun its spin time, once per
//!   acquisition (it registers); lowered by that reader, once it got in or gave up.
//!
//! **Writer handover.** A writer that unlocks while another writer (or upgradable reader) is
//! queued for `M`, no reader has found `WRITER` since the revocation (`READERS_WANT` clear, so
//! no reader is registered either) and no waiter with a deadline ever queued here
//! (`TIMED_WRITERS`) releases `M` alone and leaves `state` as it is. Only a holder of `M` sets
//! `WRITER`, so whoever takes `M` next and finds `WRITER` set has been handed the revocation: a
//! writer holds the lock at once, with no write to `state` and no scan of the slots (no reader
//! got in since the last drain); if readers asked meanwhile (`READERS_WANT` or `waiting`), it
//! clears `WRITER` instead and goes the normal way; an upgradable reader clears it (it shares
//! with readers). A stealer may take `M` before the queued writer: it owns the revocation just
//! the same. `M` free with `WRITER` set lasts only until a queued waiter takes `M`, and each
//! such waiter will: a waiter without a deadline never gives up, and the node of one with a
//! deadline (which may give up and leave its node queued) is never counted, thanks to
//! `TIMED_WRITERS`. Readers that come meanwhile set `READERS_WANT`, so they wait one critical
//! section more at most.
//!
//! **Write mode.** A lock that only writers use should cost each writer what a mutex costs: `M`
//! and nothing else. A reader's slot counts in its low 32 bits the readers inside and in its
//! high 32 bits the readers that left (a reader leaves by adding `2^32 - 1`), so the slots' sum
//! changes with every reader that comes and goes, and a writer's drain, which sums the slots
//! anyway, can tell whether any reader came since a recent writer looked. One revocation in 8
//! (per thread) that meets no bias and no reader waiting or asking compares the sum with the
//! one recorded; [`WRITE_MODE_AFTER`] such writers in a row that found it unchanged and no
//! reader inside (a revocation that meets readers restarts the count) make that writer's unlock
//! set `WRITE_MODE` (one CAS, which fails if a reader registered, asked or parked meanwhile)
//! and release `M` with `WRITER` still set. The next holder of `M` that is a writer finds
//! `WRITE_MODE` and holds the lock at once: no reader got in since that drain. A reader that
//! finds it takes `M` (queueing as a writer would), clears `WRITER` and `WRITE_MODE`, releases
//! `M` and enters; nobody waits on `state` for a writer who is not there. The count and the
//! recorded sum live on the drain line (the holder of `M`'s own), and each writer's unlock
//! learns from a thread-local note whether to keep or enter write mode, so that a lock whose
//! writers meet readers pays one load of `state` after `M` for it and nothing at its unlock.
//!
//! Transitions of one writer: `M` taken → (maybe: the registered readers' turn) → `WRITER` →
//! slots drain → (recursive locks: `WRITER | HELD`, a CAS that fails if `VETO` or anything else
//! changed, and then the writer rescans) → critical
//! section → `WRITER`, `HELD`, `VETO`, `READERS_PARKED`, `READERS_WANT` cleared (one
//! `fetch_and`, Release), wake if `READERS_PARKED` was set → `M` released; or, handing over,
//! `M` released with `state` unchanged → the next holder of `M` takes over (critical section
//! at once) or clears `WRITER` as above.
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
//!   that finds `WRITER` spins its spin time (on a crowded core it then yields the CPU up to
//!   `CROWDED_READER_YIELDS` times), then registers in `waiting` and sleeps. A window it loses
//!   to the next writer starts its spin afresh only `READER_FRESH_SPINS` times, so that the
//!   spin ends even where writers revoke back to back. A writer that takes
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
/// `state`: a writer or upgradable reader with a deadline has queued for `M` on this lock once
/// (sticky): writers no longer hand `WRITER` over with `M`, since a waiter that gives up leaves
/// its node in `M`'s queue, where a writer's unlock would count it as one who will come (see
/// [`Inflated::may_hand_over`]).
const TIMED_WRITERS: u32 = 16;
/// `state`: readers may publish themselves in the visible-readers table ([`table`]) instead of
/// counting in a slot (BRAVO's reader bias). Set at first contention and by a reader once the
/// inhibition after a revocation is over; cleared by a writer's revocation, which then counts
/// the table's entries too. Never set in a recursive lock.
const BIAS: u32 = 32;
/// `state`: a reader found `WRITER` set since it was last cleared (set by the first such
/// reader, with one RMW; cleared with `WRITER`): the writer does not hand the revocation over
/// to the next one, so the readers get in between the two.
const READERS_WANT: u32 = 64;
/// `state`: write mode (with `WRITER`): the last writer left the readers revoked although it
/// released `M`, because the writers before it found no reader (see [`WRITE_MODE_AFTER`]). The
/// next holder of `M` holds the lock at once; a reader that finds it takes `M` to clear it.
/// Set by a writer's unlock (CAS from a state with no reader waiting, wanting or parked);
/// cleared with `WRITER`. Never set in a recursive lock.
const WRITE_MODE: u32 = 128;
/// `state`: one registered waiting reader (the count is the bits from here up).
const WAITING_ONE: u32 = 256;

/// What a reader adds to its slot when it leaves: -1 in the low 32 bits (the readers inside),
/// +1 in the high 32 bits (the readers that left). The low half of the slots' sum counts the
/// readers inside; the whole sum changes with every reader that enters and leaves, so that a
/// writer can tell whether any reader came since the last writer looked (write mode).
const SLOT_LEAVE: u64 = (1 << 32) - 1;

/// A writer's unlock leaves the lock in write mode ([`WRITE_MODE`]) once this many sampled
/// writers in a row ([`WRITE_MODE_SAMPLE`]) found no reader inside and the reader slots' sum
/// unchanged since the last (no reader came through the slots), and no writer between them met
/// the bias or readers waiting: a lock that only writers use then costs each writer `M` and two
/// loads of `state`, as a mutex. 1 under loom, whose models reach it in two writes. Why:
/// docs/DESIGN.md, "Decision record: rwlock write mode".
const WRITE_MODE_AFTER: u32 = if EXHAUSTIVE { 1 } else { 16 };

/// After a revocation that found the bias set took `t` ns (counting the table's entries and
/// waiting for those readers), the bias stays off for `REBIAS_INHIBIT * t` (BRAVO's N = 9):
/// writers pay for counting the table at most about 1 / (1 + `REBIAS_INHIBIT`) of their time.
/// That is the inhibition while the bias lives long once it is back; see
/// [`REBIAS_BACKOFF_MAX`] for a bias that writers keep revoking soon after it came back.
const REBIAS_INHIBIT: u64 = 9;

/// A revocation that ends a bias which lived less than `REBIAS_INHIBIT * t` since the last
/// inhibition ended doubles the next inhibition, up to `REBIAS_INHIBIT << REBIAS_BACKOFF_MAX`
/// times `t`; one that ends a longer-lived bias goes back to `REBIAS_INHIBIT`. Why: where writes
/// come often, each bias serves a few reads and costs a revocation that counts the table, while
/// rare writers keep BRAVO's bias (docs/DESIGN.md, "Decision record: a bias that dies young
/// comes back later").
const REBIAS_BACKOFF_MAX: u32 = 7;

/// After a revocation of the bias that took `took` ns, when the bias had lived at most `lived`
/// ns since the last inhibition ended and that inhibition had doubled `backoff` times: how many
/// times the next one doubles, and how long it lasts (ns). See [`REBIAS_BACKOFF_MAX`].
fn next_inhibition(took: u64, lived: u64, backoff: u32) -> (u32, u64) {
    let backoff = if lived < took.saturating_mul(REBIAS_INHIBIT) {
        (backoff + 1).min(REBIAS_BACKOFF_MAX)
    } else {
        0
    };
    (backoff, took.saturating_mul(REBIAS_INHIBIT << backoff))
}

/// A reader that entered through the slots while the bias is off looks at the clock on one
/// in this many such entries, to set the bias again once the inhibition is over.
const REBIAS_SAMPLE: u32 = 16;

mod inflated;
mod ops;
pub(crate) mod table;
mod write_mode;
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

/// How many windows a waiting reader may lose (`WRITER` cleared, and set again by the next
/// writer before the reader got in) with its spin starting afresh after each; from the next one
/// on, its spin goes on where it was, so that it registers once the spin is over and the
/// writers' streak bounds its wait. A spin afresh after every lost window never ends where a
/// writer revokes again every microsecond or so (dedicated writers), and such a reader never
/// registered: why 3, docs/DESIGN.md, "Decision record: a waiting reader's spin does not start
/// afresh for ever".
const READER_FRESH_SPINS: u32 = 3;

/// How many times a reader that found `WRITER` and spun its spin time yields the CPU before it
/// registers and sleeps, where its core is crowded (more runnable threads than CPUs): the writer
/// it waits for, or a reader inside that holds that writer up, may need the CPU, and a reader
/// that sleeps must be woken by the writer's unlock, which then loses its CPU to the woken
/// readers. parking_lot's spin-wait yields up to 7 times before it parks. Why: docs/DESIGN.md,
/// "Decision record: crowded readers yield before they sleep".
const CROWDED_READER_YIELDS: u32 = 8;

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

/// A writer that meets no reader at its revocation checks the streak towards write mode on one
/// revocation in this many (per thread; see `Inflated::count_quiet`): a check that finds the
/// slots' sum changed writes it down, and where readers come between writers that would be
/// a store at every writer, which costs the next one a miss.
const WRITE_MODE_SAMPLE: u32 = 8;

crate::sync::thread_local! {
    /// Counts the calling thread's revocations that met no reader (see [`WRITE_MODE_SAMPLE`]).
    /// Starts one short, so that a thread's first such revocation is sampled: from 0, N threads
    /// that take turns reach write mode only after about `WRITE_MODE_SAMPLE` * N writes (why:
    /// docs/DESIGN.md, decision record, "write mode from a thread's first revocation").
    static WRITE_MODE_TICK: core::cell::Cell<u32> =
        const { core::cell::Cell::new(WRITE_MODE_SAMPLE - 1) };
}

crate::sync::thread_local! {
    /// The block whose write mode this thread's next exclusive unlock keeps or enters (its
    /// address; 0: none). A hint: an unlock acts on it only after checking `state`.
    static WRITE_MODE_NOTE: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Whether this revocation checks the streak towards write mode (one in
/// [`WRITE_MODE_SAMPLE`]; always under loom, whose models reach write mode in two writes).
#[inline]
fn write_mode_sample_due() -> bool {
    EXHAUSTIVE
        || WRITE_MODE_TICK
            .try_with(|tick| one_in(tick, WRITE_MODE_SAMPLE))
            .unwrap_or(false)
}

/// Counts one more event on a thread's `tick`; `true` on one event in `n` (the sampling of
/// [`REBIAS_SAMPLE`] and [`WRITE_MODE_SAMPLE`]).
#[inline(always)]
fn one_in(tick: &core::cell::Cell<u32>, n: u32) -> bool {
    let count = tick.get().wrapping_add(1);
    tick.set(count);
    count.is_multiple_of(n)
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

/// A reader's budget for waiting on `state` while a writer has it revoked: without backoff, to
/// see the writer's release at once, unless crowding is established on its core
/// (`wait::crowded_established`). There it backs off as the writers' drain does: a reader
/// that reads `state` in a tight loop takes the line from the writer at each of the writer's
/// read-modify-writes on it, and a prompt look is worth little where the reader waits for a
/// core as often as not. Why: docs/DESIGN.md, "Decision record: crowded readers back off".
#[inline]
fn reader_budget(deadline: Option<u64>) -> SpinBudget {
    if wait::crowded_established() {
        SpinBudget::with_backoff(deadline)
    } else {
        SpinBudget::new(deadline)
    }
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
    /// Whether a waiter is queued (one that has not taken the lock yet, or the node of one that
    /// gave up). Acquire: a caller that sees a waiter's node sees what that waiter wrote before
    /// it queued.
    #[doc(hidden)]
    fn writers_queued(&self) -> bool;
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
                self.lock_uncounted();
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
            #[inline]
            fn writers_queued(&self) -> bool {
                self.has_queued()
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
/// use numa_locks::raw::RawCnaRwLock;
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
    slots: Box<[CachePadded<AtomicU64>]>,
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
    /// How many times the inhibition doubled (up to [`REBIAS_BACKOFF_MAX`]): written by the
    /// writer that revoked a bias, who holds `M` (Relaxed: `M` orders it).
    inhibit_backoff: AtomicU32,
    /// Writers in a row that revoked an unbiased lock and found no reader (see
    /// [`WRITE_MODE_AFTER`]); the holder of `M`'s own (Relaxed: `M` orders it). On this line,
    /// which the writer's drain reads anyway, not on `state`'s (every reader reads it) or
    /// `M`'s (the next writer spins on it).
    quiet: AtomicU32,
    /// The sum of the slots a recent writer's drain saw (see [`SLOT_LEAVE`]): a writer that
    /// sees the same sum knows no reader entered or left through the slots since; the holder
    /// of `M`'s own, as `quiet`.
    slots_seen: AtomicU64,
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

#[cfg(not(loom))]
mod lock_api_impls;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bias_that_dies_young_comes_back_later() {
        // A bias that lived 9 times its revocation or more: BRAVO's inhibition, 9 times.
        assert_eq!(next_inhibition(100, 900, 0), (0, 900));
        assert_eq!(next_inhibition(100, 5_000_000, 5), (0, 900));
        // Revoked sooner: each time the inhibition doubles, up to 2^7 times BRAVO's.
        let mut backoff = 0;
        for expected in [1, 2, 3, 4, 5, 6, 7, 7] {
            let (next, inhibit) = next_inhibition(100, 899, backoff);
            assert_eq!(next, expected);
            assert_eq!(inhibit, 900 << expected);
            backoff = next;
        }
        // A revocation that took no measurable time never doubles (0 is not less than 0), and
        // nothing overflows.
        assert_eq!(next_inhibition(0, 0, 3), (0, 0));
        assert_eq!(next_inhibition(u64::MAX, 0, 7).0, 7);
        assert_eq!(next_inhibition(u64::MAX, 0, 7).1, u64::MAX);
    }

    #[test]
    fn waiting_readers_back_off_only_where_crowding_is_established() {
        // Verdicts dated a minute ahead stand whatever the scheduler does to the test.
        const AHEAD_NS: u64 = 60_000_000_000;
        std::thread::spawn(|| {
            assert!(!reader_budget(None).backs_off());
            // Two yields in a row that found another thread wanting the core.
            wait::note_yield(wait::ALONE_YIELD_NS, crate::sync::now_ns() + AHEAD_NS);
            assert!(
                !reader_budget(None).backs_off(),
                "one verdict is not enough"
            );
            wait::note_yield(wait::ALONE_YIELD_NS, crate::sync::now_ns() + AHEAD_NS);
            assert!(reader_budget(None).backs_off());
            wait::note_yield(0, crate::sync::now_ns() + AHEAD_NS);
            assert!(!reader_budget(None).backs_off());
        })
        .join()
        .unwrap();
    }
}
