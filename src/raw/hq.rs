//! `RawHq`: the hierarchical queued lock (the idea of the HQ-spinlock RFC: a cohort lock in the
//! qspinlock shape), on the crate's queue-lock core.
//!
//! ```text
//! lock word  bits 0-4: LOCKED | PARKED | NO_STEAL | FAIR | HANDED   (LockWord, 4 bytes; bits
//!            11-31 hold 1 while a handoff is deferred; LOCAL, bits 5-10, is CnaMutex's)
//! fifo_tail  index of the last entry of the node FIFO, 0 = none  (4 bytes)
//! queues     -> NodeQueues, null until contention is sustained   (8 bytes)   -> 16 bytes in all
//!
//! NodeQueues { mode, coarse, tails -> [node][domain], deferred, flat_until, refine_after }
//!                                          (heap, one per contended lock, 896 bytes on 4 nodes)
//!
//! node FIFO (linked by fifo_next):   head(R0) ------> R1 ------> W ------> R2 = fifo_tail
//!                                      |               |                    |
//! local queues (linked by next):     R0 -> a -> b     R1 -> c              R2
//!                                    = tail(0)        = tail(1)            = tail(2)
//! ```
//!
//! There are two kinds of **FIFO entries**: a *representative* (`R`), the first waiter of the
//! local queue of its slot (its place: NUMA node and cache domain, see `NodeQueues::slot_of`), and
//! a *flat waiter* (`W`), which joined the FIFO directly and has no local queue. The **head** (the
//! only thread that waits on the lock word) is always the FIFO's front entry. Waiters behind a
//! representative in its local queue touch only their slot's tail word when they arrive: the FIFO,
//! and the lock word, see one entry per waiting node.
//!
//! # Modes and slots
//!
//! Why and when the lock changes shape: docs/DESIGN.md, "HqMutex: a queue per node and a FIFO
//! of nodes". In short, `queues` null or `mode == FLAT` make every waiter a flat waiter (the lock
//! is `RawMcs` with `fifo_tail` as its tail); after [`HIERARCHICAL_AFTER`] contended handoffs (the
//! *streak*, carried in the `HEAD` payload, so it costs no shared write), one of which crossed
//! nodes, the holder allocates `queues` and sets `HIERARCHICAL`; a holder that finds nobody
//! waiting, or whose turns keep nothing local (barren turns, see the payload below), sets `FLAT`
//! again. A local queue serves a slot: a NUMA node (`coarse`), or a cache domain once a node's
//! turn ran to its limit with waiters of the node left, back to per node when per-domain turns
//! are barren (then for [`FLAT_FOR_NS`]). A node's turn ends after
//! `tunables::hq_local_handoffs()` local handoffs, a domain's after
//! `tunables::hq_domain_handoffs()` (an arrival notes its slot's kind in `Local::per_domain`).
//!
//! Only the holder writes `queues`, `mode` and `coarse`; arrivals read them once, and **every
//! path below is correct whichever mode or slot kind an arrival saw**: flat waiters and
//! representatives coexist in the FIFO at any time, a representative serves its local queue
//! whatever the mode is by then, and every waiter records the slot it queued in
//! (`QNode::hq_slot`) and leaves through that one. That is what makes the switches race-free.
//!
//! # States
//!
//! Each word (who writes it): its values and what they mean.
//!
//! - `fifo_tail` (arrivals, head): 0, nobody waits (the holder may still run); `i`, entry `i` is
//!   the last of the FIFO;
//! - `queues` (holder): null, no per-node state yet; a pointer, allocated, freed in `drop`;
//! - `mode` (holder): `FLAT`, arrivals join the FIFO; `HIERARCHICAL`, arrivals join their local
//!   queue;
//! - `tail(s)` (arrivals, head): 0, no waiter of slot `s` in a local queue; `i`, waiter `i` is the
//!   last of slot `s`'s queue;
//! - `deferred` (holder, claimer, unlock): 0, no deferred handoff; or
//!   `front | count << 32 | streak << 51 | s << 56`: the holder (`count` local handoffs into its
//!   node's turn, carrying `streak`) kept the FIFO front `front` waiting: a representative of slot
//!   `s` arriving during the critical section may take headship ahead of it with `count + 1`;
//!   otherwise `unlock` makes `front` head, and at `count = 0` the turn was barren (see
//!   [`Deferral`]).
//!
//! The `HEAD` payload (see `qnode::status`) is `count | streak << 24`: `count` is the number of
//! consecutive local handoffs so far (below `tunables::hq_local_handoffs() <= 2^24`); for a
//! flat waiter (no local queue), which has no local handoffs to count, it is the number of
//! checks of the flat window still to skip (see [`FLAT_CHECKS_SKIPPED`]) and the node slot of
//! the holder that handed it headship (see `payload::FlatCount`); `streak`
//! the number of consecutive contended handoffs, saturating at [`HIERARCHICAL_AFTER`]; a
//! hierarchical holder hands on `HIERARCHICAL_AFTER` plus a *barren score*, which *barren*
//! turns (one acquisition, nobody of its node queued, or came back for a deferral made at the
//! turn's first acquisition) raise and local handoffs lower (see [`BARREN_WEIGHT`]). When it
//! reaches its bound the per-node queues are keeping little local (one or two threads per
//! node, say) and only cost every acquisition: the holder sets the mode to `FLAT` and
//! `flat_until` to [`FLAT_FOR_NS`] from now, before which no streak turns the lock hierarchical
//! again.
//!
//! # Transitions, as (fifo tail, local tail of slot s, lock word)
//!
//! Acquisition:
//! 1. fast path: `(*, *, 0) → (*, *, LOCKED)`; steal (slow path, stealing on, `NO_STEAL`
//!    clear): `(*, *, free) → (*, *, LOCKED)`, as in `RawMcs`. With stealing off, every handoff
//!    goes through `LockWord::hand_to`, which sets `NO_STEAL` until the new head has the lock,
//!    so a thread that finds waiters queues, even in the instant between a new head's selection
//!    and its first look at the lock word;
//! 2. flat waiter (mode `FLAT`, or `queues` null): `(prev, *, *) → (me, *, *)` by swap; link
//!    `prev.fifo_next = me` and wait for headship if `prev != 0`;
//! 3. hierarchical arrival: `(*, prev, *) → (*, me, *)` by swap; if `prev != 0`, link
//!    `prev.next = me` and wait: headship comes straight from a same-slot predecessor (a
//!    *local handoff*). If `prev == 0` we are the slot's representative: first try to claim a
//!    deferred handoff of our slot (`deferred: d → 0` by CAS; we then stand before `front` in
//!    the FIFO and are head at once), else join the FIFO as in 2;
//! 4. as head: a flat waiter premarks the likely next head as McsMutex does (`premark`), a
//!    representative wakes it early if it sleeps; then spin/park on the lock word until we take it
//!    (`(*, *, free) → (*, *, LOCKED)`, which returns whether the last unlock was fair).
//!
//! Leaving the queues (`pass_headship`, run by the new holder, which owns the lock), with
//! `local` = "may keep the lock on our node" = `!fair && count + 1 < limit` (the limit of our
//! slot's level: node or cache domain):
//! 5. local queue first (only if we are in one): `(*, me, L) → (*, 0, L)` by CAS, or wait for our
//!    local successor `S` to link `me.next`. Doing this before looking at the FIFO is what makes
//!    "a node joins the FIFO while its last local waiter leaves" safe: an arrival that finds the
//!    local tail 0 becomes a new representative and joins the FIFO behind us, which step 6 sees.
//! 6. the FIFO: `(me, *, L) → (S or 0, *, L)` by CAS when nobody else is in it (then `S`, if any,
//!    becomes head as the FIFO's only entry, with a fresh count unless `local`); otherwise wait
//!    for our FIFO successor `F` to link `me.fifo_next`, and then
//!    - `S` exists and `local`: `S` takes our place in the FIFO (`S.fifo_next = F`) and becomes
//!      head with `count + 1` (local handoff);
//!    - `S` exists, not `local`: `S` re-joins the FIFO at its tail as its slot's representative
//!      (`(t, *, L) → (S, *, L)`, `t.fifo_next = S`), then `F` becomes head with count 0
//!      (remote handoff);
//!    - no `S`, `local`, and `F` is of our slot (another representative or a flat waiter of
//!      our node): `F` becomes head with `count + 1` (a local handoff after all);
//!    - no `S`, `local` and mode `HIERARCHICAL`: another thread of our node (the previous
//!      holder, or after `count = 0` the one that took the lock last time our node had it) is
//!      likely to be back within our critical section, so **defer**: publish
//!      `deferred = F | count << 32 | streak << 51 | s << 56` (an unclaimed one at `count = 0`
//!      counts as a barren turn; a `count` of 2^19 or more ends the turn instead), mark the
//!      lock word (`x → x | DEFERRED_MARK << PROXY_SHIFT`: the unlock's `fetch_sub` returns
//!      it, and it keeps the lock held until the unlock clears it) and return without a head. A
//!      representative of slot `s` that arrives during the critical section claims it (step
//!      3); `unlock` makes `F` head if nobody did (`deferred: d → 0` by CAS, before the lock
//!      word is freed, so exactly one of them wins), then clears the mark;
//!    - otherwise `F` becomes head with count 0.
//!
//! Deferral moves the choice of the next head to the end of the critical section while the
//! holder still owns no queue node (`unlock` reads only the lock's own state); why:
//! docs/DESIGN.md, "Deferred handoffs".
//!
//! # Timed acquisition
//!
//! A waiter whose deadline passes behind others (in a local queue or in the FIFO) marks its node
//! `ABANDONED` and leaves it in place; its node records where it queued (`QNode::hq_slot`). A
//! head whose deadline passes **leaves headship** without the lock (`leave_headship`): its local
//! successor takes its place in the FIFO, keeping the node's turn (same payload), or else the
//! FIFO's next entry becomes head with a fresh count; if nobody is left, the reservation a head
//! would have consumed is cleared. These are steps 5 and 6 without the lock and without the
//! "keep it local" decisions. Every handoff (local or remote, from `unlock`'s deferred handoff
//! too) goes through `hand_headship`, which treats a node found abandoned as a head that leaves at
//! once: it leaves headship on the node's behalf and recycles it. A representative that claimed
//! a deferred handoff stands before `front` with `fifo_next = front`, so it leaves the same way.
//!
//! Every FIFO entry becomes head after finitely many handoffs: the FIFO is FIFO, an entry's turn
//! lasts at most `limit` consecutive local handoffs (the count travels with headship and every
//! local handoff, claimed deferrals included, adds one), a representative whose turn ended
//! re-joins at the tail, and stealing is bounded by the lock word's `NO_STEAL`. Slots are
//! a function of the waiter's place that maps any node id (even garbage) into the lock's slots,
//! so a place is only a locality hint: two places sharing a slot share a local queue.
//!
//! # Orderings weaker than `SeqCst`
//!
//! - Tail swaps (`fifo_tail`, local tails) are `AcqRel`: Release publishes the arrival's
//!   `reset` node; Acquire makes the predecessor's node visible before we write its link.
//! - Link stores (`fifo_next`, `next`) are `Release`, paired with the `Acquire` in
//!   `wait_for_next`; `S.fifo_next = F` is `Relaxed` because handing headship to `S`
//!   (`make_head`'s Release swap, paired
//!   with the Acquire in `wait_for_head`) publishes it, and only `S` reads it.
//! - Tail CASes `me → 0` / `me → S` are `AcqRel` like `RawMcs`: `me → S` publishes `S` (whose node
//!   we acquired through `me.next`) to the arrival that will swap it out of `fifo_tail`.
//! - `queues` is stored `Release` once and loaded `Acquire` by arrivals: the `NodeQueues` are
//!   initialized before anyone can reach them. `mode` is `Relaxed` everywhere: correctness does not
//!   depend on which mode an arrival sees (see Modes), and the holders, its only writers, are
//!   ordered by the lock word.
//! - `deferred` is stored `Release` by the holder and taken by an `Acquire` CAS (claimer or
//!   unlock): the index `F` and its node are visible to whoever takes it. The unlock's first load
//!   is `Relaxed`: the value it must see was written by this lock's holder, which happens before
//!   the unlock.

mod headship;
mod payload;

use payload::{FlatCount, Payload};

use core::ptr;

use crossbeam_utils::CachePadded;

use crate::qnode::{self, Queued, node, status};
use crate::raw::{
    LockCore, QueueLock, Token, impl_raw_mutex, prewake, wait_for_head, wait_for_next, walk_links,
};
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering, const_fn, now_ns};
use crate::{topology, tunables};

/// Local queues per lock at most (slots); a thread queues in the slot of its place (see
/// [`NodeQueues::slot_of`]). The slot travels in 7-bit and 8-bit fields (see [`FROM_MASK`],
/// [`Deferral`]).
const MAX_SLOTS: usize = 64;

/// Local-queue tails on one line: the tails of one NUMA node's cache domains share a line (as all
/// of a node's arrivals once shared one tail), so the per-lock state grows with the nodes, not
/// with the domains.
const TAILS_PER_LINE: usize = 16;

/// Lines of local-queue tails at least: machines with up to 4 NUMA nodes, and tests that give
/// threads node ids 0-3 on a one-node machine, keep a line per node.
const MIN_GROUPS: usize = 4;

/// `NodeQueues::mode`: arrivals join the FIFO directly (the plain queue lock).
const FLAT: u32 = 0;
/// `NodeQueues::mode`: arrivals join their slot's local queue.
const HIERARCHICAL: u32 = 1;

/// What `pass_headship` records in the lock word's proxy bits (see `LockWord`) when it defers a
/// handoff: any nonzero value keeps the lock held after the unlock's `fetch_sub`, which then
/// makes the deferred handoff (see `LockWord::unlock`). (HQ has no proxy node; the
/// deferral itself is in `NodeQueues::deferred`.)
const DEFERRED_MARK: u32 = 1;

/// A handoff deferred to the end of the critical section, as `NodeQueues::deferred` holds it:
/// `front | count << 32 | streak << 51 | slot << 56` (never 0: `front` is a queue index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Deferral {
    /// The FIFO front the holder kept waiting; `unlock` makes it head if nobody claims.
    front: u32,
    /// The holder's count of local handoffs in its node's turn, below 2^[`DEFERRED_COUNT_BITS`];
    /// a claimer's count is one more. At 0 (the turn's first acquisition) an unclaimed deferral
    /// leaves a barren turn behind.
    ///
    /// Why defer at a turn's first acquisition too: nodes with two threads then keep their turns
    /// instead of ending them after one or two acquisitions; counting an unclaimed deferral as
    /// barren is what still lets one thread per node go flat (docs/DESIGN.md, "Decision record:
    /// HQ barren turns").
    count: u32,
    /// The streak the holder carried (see [`BARREN_WEIGHT`]), 5 bits.
    streak: u32,
    /// The holder's slot: only a representative of it may claim.
    slot: usize,
}

/// Bits of [`Deferral::count`]: a holder whose count does not fit (only with
/// `tunables::hq_local_handoffs()` above 2^19) ends its node's turn instead of deferring.
const DEFERRED_COUNT_BITS: u32 = 19;

impl Deferral {
    const fn pack(self) -> u64 {
        self.front as u64
            | (self.count as u64) << 32
            | (self.streak as u64) << 51
            | (self.slot as u64) << 56
    }

    const fn unpack(d: u64) -> Self {
        Deferral {
            front: d as u32,
            count: (d >> 32) as u32 & ((1 << DEFERRED_COUNT_BITS) - 1),
            streak: (d >> 51) as u32 & 0x1f,
            slot: (d >> 56) as usize & (MAX_SLOTS - 1),
        }
    }
}

/// Consecutive contended handoffs after which the lock turns hierarchical: long enough that a
/// lock with an occasional second waiter stays a plain (allocation-free) queue lock, short
/// enough that sustained contention switches within microseconds.
const HIERARCHICAL_AFTER: u32 = 8;

/// How a hierarchical lock finds that its per-node queues keep nothing local and only cost
/// every acquisition (one thread per node, say), and goes back to flat. A waiter of a local
/// queue carries, in its streak, [`HIERARCHICAL_AFTER`] plus a *barren score*: a *barren* turn
/// (one acquisition, then nobody of the holder's node queued or back for a deferral) adds
/// `BARREN_WEIGHT`, a local handoff (a claimed deferral too) takes 1 off, and a turn that ends
/// after local handoffs leaves it as it is. At `BARREN_WEIGHT` x [`BARREN_TURNS`] the lock goes
/// flat: after [`BARREN_TURNS`] barren turns in a row, or sooner or later whenever barren turns
/// come at more than one per `BARREN_WEIGHT` local handoffs.
///
/// Why a score rather than barren turns in a row: with nodes of one or two threads, the
/// two-thread nodes' turns broke every run, and such a lock stayed hierarchical where flat is
/// faster (docs/DESIGN.md, "Decision record: HQ barren turns").
const BARREN_WEIGHT: u32 = 2;

/// Barren turns in a row after which a hierarchical lock goes back to flat (see
/// [`BARREN_WEIGHT`]). The streak's 5 bits hold 8 + 2 x 7 = 22.
const BARREN_TURNS: u32 = 7;

/// How long a lock that went flat after barren turns stays flat before it tries the per-node
/// queues again (a thread population that changed): 10 ms, when trying costs a few handoffs.
const FLAT_FOR_NS: u64 = 10_000_000;

/// While a lock is flat after barren turns, how many of the checks that would look at the flat
/// window (one in [`HIERARCHICAL_AFTER`] contended handoffs) are skipped after one that found it
/// still open: the count travels in the flat heads' payloads, so the window is looked at once in
/// 2,048 contended handoffs, not once in 8. Each look reads the per-node state's address on the
/// lock's line, which arrivals keep taking away, and the clock (docs/DESIGN.md, "Decision
/// record: HQ barren turns").
const FLAT_CHECKS_SKIPPED: u32 = 255;

/// The streak a local handoff hands on: one less in the barren score (see [`BARREN_WEIGHT`]).
#[inline]
const fn kept_local(streak: u32) -> u32 {
    if streak > HIERARCHICAL_AFTER {
        streak - 1
    } else {
        streak
    }
}

/// The raw hierarchical queued lock behind [`HqMutex`](crate::HqMutex): 16 bytes, one waiter
/// queue per NUMA node plus a FIFO of nodes, spin-then-park; per-node state is allocated when
/// contention is sustained and freed on drop.
///
/// Handoffs stay within the holder's node for up to
/// [`tunables::hq_local_handoffs()`](crate::tunables::hq_local_handoffs) consecutive handoffs,
/// then go to the node that has waited longest; `unlock_fair` hands to that node at once. Where
/// nodes hold several cache domains and the lock queues per domain, a domain's turn lasts up to
/// [`tunables::hq_domain_handoffs()`](crate::tunables::hq_domain_handoffs) handoffs.
///
/// ```
/// use lock_api::{RawMutex, RawMutexFair};
/// use numa_locks::raw::RawHq;
///
/// let raw = RawHq::new();
/// let guard = RawMutex::lock(&raw);
/// assert!(raw.is_locked());
/// unsafe { RawMutex::unlock(&raw, guard) };
/// assert!(raw.try_lock());
/// unsafe { raw.unlock_fair() };
/// assert!(!raw.is_locked());
/// ```
pub struct RawHq {
    core: LockCore,
    /// Index of the last entry of the node FIFO (a representative or a flat waiter); 0 when
    /// nobody waits in the FIFO.
    fifo_tail: AtomicU32,
    /// The per-node queues, null until the first sustained contention; owned by the lock.
    queues: AtomicPtr<NodeQueues>,
    /// Models only: contended handoffs before switching to hierarchical; 0 = always
    /// hierarchical (see [`RawHq::new_hierarchical`]).
    #[cfg(loom)]
    switch_after: u32,
}

/// The per-node state of one contended lock: three lines of holder state and one line of
/// local-queue tails per NUMA node (at least [`MIN_GROUPS`]), sized by the machine when the lock
/// first turns hierarchical: 896 bytes on machines of up to 4 nodes with up to 16 cache domains
/// each (against 8.5 KiB for the 64 padded tails before; see [`RawHq::heap_size`]).
struct NodeQueues {
    /// What every arrival reads: the mode and where the local-queue tails are.
    arrivals: CachePadded<Arrivals>,
    /// A handoff deferred to the end of the critical section (see the state table), or 0.
    deferred: CachePadded<AtomicU64>,
    /// The holders' clocks (one line).
    until: CachePadded<Until>,
    /// Models only: how many times `refine` and `coarsen` switched the local queues, and how
    /// many arrivals queued in a cache domain's slot (plain std atomics, which loom does not
    /// schedule), so that a model can show that the switches happen.
    #[cfg(loom)]
    switches: [std::sync::atomic::AtomicU32; 3],
}

/// The line of [`NodeQueues`] only lock holders read and write.
struct Until {
    /// While `mode` is `FLAT` after barren turns: until when (`now_ns`) it stays flat; 0 if
    /// it did not go flat that way.
    flat_until: AtomicU64,
    /// Until when (`now_ns`) per-node queues that per-domain ones were barren for stay per node
    /// (see [`NodeQueues::refine`]); 0 if never.
    refine_after: AtomicU64,
}

/// The line of [`NodeQueues`] every arrival reads: written once when the state is made, and then
/// only `mode`, on a mode change.
struct Arrivals {
    /// `FLAT` or `HIERARCHICAL`. Read by every arrival, written by the holder on a mode change
    /// only.
    mode: AtomicU32,
    /// 1 while the local queues are per NUMA node rather than per cache domain (see
    /// [`NodeQueues::coarsen`] and [`NodeQueues::refine`]): where nodes have several cache
    /// domains, a lock starts per node, and goes per domain once a node's turn runs to its
    /// limit with waiters of the node left. Always 0 with one domain per node. Written by holders
    /// only; like `mode`, any value an arrival reads is correct.
    coarse: AtomicU32,
    /// log2 of the slots per group (cache domains kept apart per node), at most log2 of
    /// [`TAILS_PER_LINE`].
    per_shift: u32,
    /// Groups (lines) - 1; a power of two minus one.
    group_mask: usize,
    /// The local-queue tails, one line per group of slots (a NUMA node's cache domains): slot
    /// `s`'s tail is `tails[s >> per_shift][s & per_mask]`, the last waiter of its local queue, 0
    /// if none.
    tails: Box<[CachePadded<[AtomicU32; TAILS_PER_LINE]>]>,
}

impl NodeQueues {
    fn new(mode: u32) -> Self {
        let (groups, per) = queue_shape();
        NodeQueues {
            arrivals: CachePadded::new(Arrivals {
                mode: AtomicU32::new(mode),
                coarse: AtomicU32::new(u32::from(per > 1)),
                per_shift: per.trailing_zeros(),
                group_mask: groups - 1,
                tails: (0..groups)
                    .map(|_| CachePadded::new(core::array::from_fn(|_| AtomicU32::new(0))))
                    .collect(),
            }),
            deferred: CachePadded::new(AtomicU64::new(0)),
            until: CachePadded::new(Until {
                flat_until: AtomicU64::new(0),
                refine_after: AtomicU64::new(0),
            }),
            #[cfg(loom)]
            switches: Default::default(),
        }
    }

    /// The slot of a waiter at `place` (see [`qnode::place`]): its node's group, and its cache
    /// domain within the group. A node's domains are numbered contiguously, so the domains of one
    /// node get distinct slots when it has at most the group's slots. Any place (even garbage)
    /// maps to a valid slot; two places sharing one share a local queue, which costs locality
    /// only.
    #[inline]
    fn slot_of(&self, place: u64) -> usize {
        self.place_slot(place).0
    }

    /// [`slot_of`](Self::slot_of), and whether the slot is a cache domain's (the local queues
    /// serve domains: its turns are bounded by `tunables::hq_domain_handoffs()`) rather than a
    /// node's.
    #[inline]
    fn place_slot(&self, place: u64) -> (usize, bool) {
        let Arrivals {
            per_shift,
            group_mask,
            ..
        } = *self.arrivals;
        // Relaxed: see `coarse`; a waiter records the slot it queued in (`hq_slot`). With one
        // slot per node, `coarse` is never read: the lock costs what it did before domains.
        let per_domain = per_shift != 0 && self.arrivals.coarse.load(Ordering::Relaxed) == 0;
        let domain = if per_domain {
            qnode::place_domain(place) & ((1 << per_shift) - 1)
        } else {
            0
        };
        (
            (qnode::place_node(place) & group_mask) << per_shift | domain,
            per_domain,
        )
    }

    /// The local-queue tail of `slot`.
    #[inline]
    fn tail(&self, slot: usize) -> &AtomicU32 {
        let a = &*self.arrivals;
        &a.tails[(slot >> a.per_shift) & a.group_mask][slot & ((1 << a.per_shift) - 1)]
    }

    /// Per-domain local queues keep too little local (a domain's turns are barren: one or two
    /// threads per cache domain): make them per node, if they were per domain. Returns whether
    /// they were. Holders only.
    fn coarsen(&self) -> bool {
        let a = &*self.arrivals;
        // Relaxed: see `Arrivals::coarse`; `refine_after` is the holders' alone.
        let coarsened = a.per_shift > 0 && a.coarse.swap(1, Ordering::Relaxed) == 0;
        if coarsened {
            #[cfg(loom)]
            self.switches[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.until.refine_after.store(
                now_ns().saturating_add(FLAT_FOR_NS).max(1),
                Ordering::Relaxed,
            );
        }
        coarsened
    }

    /// A node's turn ran to its limit with waiters of the node left: enough threads per node that
    /// per-domain queues may keep handoffs within a cache domain (with one thread per domain
    /// they only cost). Holders only.
    ///
    /// Called whether the turn passes to another slot's waiter or, with nobody of another slot
    /// in the FIFO, starts again for the same node: otherwise a lock whose waiters are all on
    /// one node would refine only by chance (docs/DESIGN.md, "Decision record: HQ cache
    /// domains").
    fn refine(&self) {
        let a = &*self.arrivals;
        // Relaxed: see `Arrivals::coarse`. A plain load first: a per-domain lock never writes.
        // Not within `FLAT_FOR_NS` of per-domain queues found barren: the turns that find them
        // barren again cost handoffs.
        if a.per_shift > 0
            && a.coarse.load(Ordering::Relaxed) != 0
            && now_ns() >= self.until.refine_after.load(Ordering::Relaxed)
        {
            a.coarse.store(0, Ordering::Relaxed);
            #[cfg(loom)]
            self.switches[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Back to per-node queues where nodes have several domains (see `Arrivals::coarse`).
    fn reset_coarse(&self) {
        let a = &*self.arrivals;
        // Relaxed: see `Arrivals::coarse`.
        a.coarse
            .store(u32::from(a.per_shift > 0), Ordering::Relaxed);
    }

    /// Bytes of heap this state takes.
    fn heap_size(&self) -> usize {
        size_of::<Self>() + size_of_val(&*self.arrivals.tails)
    }

    #[inline]
    fn is_hierarchical(&self) -> bool {
        // Relaxed: any answer is correct (see the module docs, Modes).
        self.arrivals.mode.load(Ordering::Relaxed) == HIERARCHICAL
    }

    /// Takes the deferred handoff of `slot`, if there is one: returns `(front, payload)`.
    fn claim_deferred(&self, slot: usize) -> Option<(u32, Payload)> {
        let d = self.deferred.load(Ordering::Relaxed);
        if d == 0 || Deferral::unpack(d).slot != slot {
            return None;
        }
        // Acquire: pairs with the Release store in `pass_headship`; `front`'s node is visible.
        self.deferred
            .compare_exchange(d, 0, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let d = Deferral::unpack(d);
        // A claim is a local handoff: one more in the count, one less in the barren score.
        Some((d.front, Payload::new(d.count + 1, kept_local(d.streak))))
    }

    /// `unlock`'s part: if the holder deferred a handoff and nobody claimed it, takes it and
    /// returns the deferred word (its FIFO front must become head). Runs before the lock word
    /// is released.
    #[inline]
    fn take_deferred(&self) -> Option<Deferral> {
        // Relaxed: see the module docs; a claim or this unlock's CAS settles the race.
        let d = self.deferred.load(Ordering::Relaxed);
        // Acquire: pairs with the Release store in `pass_headship`.
        (d != 0
            && self
                .deferred
                .compare_exchange(d, 0, Ordering::Acquire, Ordering::Relaxed)
                .is_ok())
        .then(|| Deferral::unpack(d))
    }
}

/// The local queues' shape for this machine: `(groups, slots per group)`, both powers of two,
/// with at most [`MAX_SLOTS`] slots: a group per NUMA node (at least [`MIN_GROUPS`], more with
/// virtual nodes), and a slot per cache domain of a node (at most [`TAILS_PER_LINE`]).
fn queue_shape() -> (usize, usize) {
    let nodes = topology::node_count()
        .max(topology::virtual_nodes().unwrap_or(0))
        .max(MIN_GROUPS);
    let domains_per_node = topology::domain_count()
        .div_ceil(topology::node_count())
        .max(topology::virtual_domains().unwrap_or(1));
    let groups = nodes.next_power_of_two().min(MAX_SLOTS);
    let per = domains_per_node
        .next_power_of_two()
        .min(TAILS_PER_LINE)
        .min(MAX_SLOTS / groups);
    (groups, per)
}

/// Where an arrival queued in hierarchical mode: its slot's local queue.
#[derive(Clone, Copy)]
struct Local<'a> {
    queues: &'a NodeQueues,
    slot: usize,
    /// Whether `slot` is a cache domain's (see [`NodeQueues::place_slot`]): its turns end after
    /// `tunables::hq_domain_handoffs()` local handoffs, a node's after `hq_local_handoffs()`.
    per_domain: bool,
}

impl Local<'_> {
    /// Consecutive local handoffs a turn of this slot may have.
    #[inline]
    fn turn_limit(self) -> u32 {
        let limit = if self.per_domain {
            tunables::hq_domain_handoffs()
        } else {
            tunables::hq_local_handoffs()
        };
        // The setters keep both within 1..=2^24.
        u32::try_from(limit).unwrap_or(u32::MAX)
    }
}

impl RawHq {
    const_fn! {
        /// An unlocked lock. Allocates nothing.
        pub const fn new() -> Self {
            RawHq {
                core: LockCore::new(),
                fifo_tail: AtomicU32::new(0),
                queues: AtomicPtr::new(ptr::null_mut()),
                #[cfg(loom)]
                switch_after: HIERARCHICAL_AFTER,
            }
        }
    }

    /// Models only: a lock whose per-node queues exist from the start and that stays
    /// hierarchical.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn new_hierarchical() -> Self {
        let mut lock = Self::new();
        lock.switch_after = 0;
        let queues = Box::into_raw(Box::new(NodeQueues::new(HIERARCHICAL)));
        lock.queues.store(queues, Ordering::Release);
        lock
    }

    /// Models only: a flat lock that turns hierarchical after `handoffs` (1 to 8)
    /// consecutive contended handoffs, and (below 8) goes flat again after one barren turn.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn new_switching_after(handoffs: u32) -> Self {
        let mut lock = Self::new();
        lock.switch_after = handoffs.clamp(1, HIERARCHICAL_AFTER);
        lock
    }

    /// Models only: how many times the local queues went per domain (`refine`) and back to per
    /// node (`coarsen`) so far, and how many arrivals queued in a cache domain's slot.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn domain_switches(&self) -> [u32; 3] {
        self.queues().map_or([0; 3], |q| {
            core::array::from_fn(|i| q.switches[i].load(std::sync::atomic::Ordering::Relaxed))
        })
    }

    /// Releases the lock so that the next handoff goes to the node that has waited longest
    /// (the next entry of the node FIFO), whatever the local count; no arriving thread can
    /// steal it.
    ///
    /// # Safety
    /// The lock must be held.
    pub unsafe fn unlock_fair(&self) {
        self.core.on_release();
        // Relaxed (the fences in `LockWord::unlock_fair` order the second look): a local waiter
        // always has its representative in the FIFO, so an empty FIFO means nobody waits.
        self.core.word.unlock_fair(
            || self.fifo_tail.load(Ordering::Relaxed) != 0,
            |_| self.hand_deferred(),
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
        self.fifo_tail.load(Ordering::Acquire) != 0
    }

    /// Bytes of heap the lock holds: 0 until contention across nodes or cache domains is
    /// sustained, then its per-node state (one line of local-queue tails per NUMA node, at least
    /// four, plus three lines: 896 bytes on a machine of up to 4 nodes), kept until the lock is
    /// dropped.
    ///
    /// ```
    /// use numa_locks::raw::RawHq;
    ///
    /// assert_eq!(RawHq::new().heap_size(), 0);
    /// ```
    pub fn heap_size(&self) -> usize {
        self.queues().map_or(0, NodeQueues::heap_size)
    }

    /// The per-node queues, if allocated.
    #[inline]
    fn queues(&self) -> Option<&NodeQueues> {
        // Acquire: pairs with the Release store in `enable_hierarchical`; the queues are
        // initialized before we read them.
        let queues = self.queues.load(Ordering::Acquire);
        // SAFETY: a non-null `queues` was made by `Box::into_raw` and is freed only by `drop`,
        // which has `&mut self`; the returned reference borrows `self`.
        unsafe { queues.as_ref() }
    }

    /// Before the lock is freed, once the release found the deferral's mark in the lock word
    /// (see `LockWord::unlock`): if no arrival claimed the deferred handoff, make the FIFO
    /// front it kept waiting head. Nothing but the lock word's release is touched when nothing
    /// was deferred: reading `queues` and `deferred` on every unlock widened the window in which
    /// a waiting thread's look takes the lock's line away before the unlock (docs/DESIGN.md,
    /// "Decision record: one RMW to release").
    #[cold]
    fn hand_deferred(&self) {
        let Some(queues) = self.queues() else { return };
        if let Some(d) = queues.take_deferred() {
            // Nobody of our node came back: a deferral made at the turn's first acquisition
            // leaves a barren turn behind.
            let streak = if d.count == 0 {
                self.barren_turn(queues, d.streak)
            } else {
                d.streak
            };
            self.hand_headship(d.front, Payload::new(0, streak), false);
        }
    }
}

/// `tail: me → to` if `me` is still the last entry of that queue (the FIFO or a local queue):
/// a plain load first, so that a tail that has moved on costs no exclusive access to its line.
/// AcqRel on success: Release publishes `to`'s node (acquired through our link) to the arrival
/// that will swap it out of the tail, as in `RawMcs`; Acquire orders our later reads after the
/// arrivals that came before. Failure means an arrival swapped the tail: it will link to us.
#[inline]
fn replace_tail(tail: &AtomicU32, me: u32, to: u32) -> bool {
    tail.load(Ordering::Relaxed) == me
        && tail
            .compare_exchange(me, to, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
}

/// A flat waiter's place as its `HEAD` payload carries it (see `payload::FlatCount`): its cache domain
/// (on machines with one domain per node, its node), below [`MAX_SLOTS`]. A streak of handoffs
/// between domains turns the lock hierarchical, so that the local queues keep handoffs within a
/// domain.
#[inline]
fn flat_place(place: u64) -> u32 {
    (qnode::place_domain(place) % MAX_SLOTS) as u32
}

impl Drop for RawHq {
    fn drop(&mut self) {
        // Acquire: pairs with the Release store in `note_contended` (`&mut self` already
        // orders it; the Acquire keeps the reasoning local).
        let queues = self.queues.load(Ordering::Acquire);
        if !queues.is_null() {
            // SAFETY: made by `Box::into_raw` and freed only here; `&mut self` means no thread
            // can reach it any more.
            drop(unsafe { Box::from_raw(queues) });
        }
    }
}

impl QueueLock for RawHq {
    fn lock_queue_lock(&self, _: Token) {
        self.lock();
    }

    unsafe fn unlock_queue_lock(&self, _: Token) {
        // SAFETY: the caller holds the lock (the trait method's contract).
        unsafe { self.unlock() }
    }
}

impl crate::raw::QueuePolicy for RawHq {
    // Docs: `crate::raw::delegate::Locality`.
    const DELEGATE_LOCALITY: crate::raw::delegate::Locality =
        crate::raw::delegate::Locality::Domain;

    #[inline]
    fn nobody_queued(&self) -> bool {
        // Relaxed: only a hint for stealing; the queue orders those who queue.
        self.fifo_tail.load(Ordering::Relaxed) == 0
    }

    #[inline]
    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        RawHq::lock_queued(self, me, deadline)
    }

    #[inline]
    fn hand_on_deferred(&self, proxy: u32) {
        // `unlock` found the deferral's mark (only the holder records one), from the release's
        // one `fetch_sub`: the common release reads nothing first (a load of the word before
        // it cost a second transfer whenever a waiter's look took the line in between; see
        // `LockWord::unlock`). The lock stays held until the deferred handoff is made.
        debug_assert_eq!(proxy, DEFERRED_MARK);
        self.hand_deferred();
    }
}

impl_raw_mutex!(RawHq);
