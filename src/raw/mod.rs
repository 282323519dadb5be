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
mod hq;
mod mcs;

pub use crate::condvar::RawCondvar;
pub use cna::RawCna;
pub use hq::RawHq;
pub use mcs::RawMcs;

use std::time::Duration;

use crate::qnode::{self, QNode, Queued, status};
#[cfg(feature = "stats")]
use crate::stats::{Acquired, Counters};
use crate::sync::{AtomicU32, EXHAUSTIVE, Ordering, PathEvent, const_fn, fence, note, now_ns};
use crate::tunables;
use crate::wait::{self, SpinBudget};

/// The lock word: a futex word holding the lock bit and the flags that coordinate the queue head
/// with lockers and unlockers. The queue tail lives in a separate word of each lock.
///
/// - `0`: free; stealing allowed;
/// - `LOCKED`: held;
/// - `LOCKED | PARKED`: held; the queue head sleeps on this word: the unlock must wake it;
/// - `NO_STEAL` (with any of the above): the queue head is owed the lock: arrivals must queue;
/// - `FAIR | NO_STEAL` (± `LOCKED`, `PARKED`): set by `unlock_fair`: the head's next handoff is
///   fair;
/// - `HANDED | NO_STEAL` (± `LOCKED`, `FAIR`): the holder made its marked successor head with a
///   reserved lock (HqMutex, or stealing off); the reservation is that head's alone, and it takes
///   the free lock with a plain store;
/// - `LOCAL | node << LOCAL_NODE_SHIFT` (± `LOCKED`, `PARKED`): CnaMutex's holder made its marked
///   successor of node `node` head: only arrivals of that node may take the free lock before that
///   head;
/// - `LOCKED | proxy << PROXY_SHIFT`: held; the holder deferred its handoff: CNA left the proxy
///   node `proxy` in the queue, HQ marks a deferral in its per-node state with 1 (only the holder
///   writes these bits);
/// - `proxy << PROXY_SHIFT` (± flags): still held (`HELD`): the unlocker has released `LOCKED` and
///   is making the deferred handoff.
///
/// `NO_STEAL` is set only while a queue head exists or is being made (so someone will clear it).
///
/// Transitions (who performs them):
/// - lock fast path: `0 → LOCKED` (CAS, Acquire);
/// - steal (slow path, only while `NO_STEAL` is clear): `x → x | LOCKED` (CAS, Acquire);
/// - queue head acquires: `x → LOCKED` when `x & HELD == 0` (CAS, Acquire; a CAS even when
///   the lock is reserved for it, since `clear_reservation` may lift the reservation meanwhile);
///   this clears `PARKED`, `NO_STEAL` and `FAIR`, which only the head consumes;
/// - queue head, when it has been overtaken too long, stealing is off, or it has marked its
///   successor `NEXT` (see `acquire_as_head`): `x → x | NO_STEAL` (fetch_or);
/// - queue head, before sleeping, lifting the reservation it made only for its mark:
///   `x → x & !NO_STEAL` (CAS, unless `FAIR` or the steal bound wants it);
/// - the holder, handing headship to a successor while stealing is off: `x → x | NO_STEAL`;
/// - the new holder, handing headship to the successor it marked, reserved (`Handoff`):
///   `LOCKED → LOCKED | NO_STEAL | HANDED` (plain store: before that successor is head, nobody
///   else writes a held word);
/// - CnaMutex's new holder, handing headship to the successor of its own node it marked, with
///   stealing on: `LOCKED → LOCKED | LOCAL | node << LOCAL_NODE_SHIFT` (plain store, as above);
///   an arrival of that node takes the free word with `x → (x | LOCKED) & !LOCAL` (CAS), the
///   head with its CAS to `LOCKED`;
/// - that head, finding the word free with `HANDED`: `x → LOCKED` (plain store: nobody else
///   can take a free word with `HANDED`, and the other writers of a free word only clear
///   bits: the unlocker's `PARKED`, a stale `clear_reservation`); before it parks or gives
///   up, it clears `HANDED` (with the reservation it lifts);
/// - queue head, before sleeping: `x → x | PARKED` (only while `HELD`, so an unlock follows);
/// - unlock: `x → x - LOCKED` (fetch_sub, Release: one RMW that cannot fail, whatever flags the
///   head set); if it returned proxy bits, the unlocker makes the deferred handoff and then
///   frees the lock, `x → x & FLAGS & !PARKED` (fetch_and, Release); otherwise, if `PARKED`
///   was set, `x → x & !PARKED` (fetch_and); then wake if `PARKED` was set. Clearing
///   `PARKED` with the wake matters: if a stealer retakes the lock before the woken head runs,
///   its unlock must not pay for another wake (the head sets `PARKED` again if it sleeps again);
/// - unlock_fair with waiters queued: `x → (x - LOCKED - PARKED) | NO_STEAL | FAIR` (CAS,
///   Release), then wake if `PARKED` was set;
/// - CNA or HQ holder deferring its handoff: `x → x | proxy << PROXY_SHIFT` (fetch_or); the
///   thread that unlocks takes it back: `unlock` as above, and `unlock_fair` with
///   `x → x & FLAGS` (fetch_and) before its CAS;
/// - a thread that empties the queue without the lock (a timed head giving up, or a handoff
///   whose every remaining waiter had abandoned its place): `x → x & !(NO_STEAL | FAIR)`, since
///   no head is left to consume the reservation (`clear_reservation`). `PARKED` is never cleared
///   there: a new head may already sleep behind it; nor `HANDED`: it belongs to a head.
///
/// Only the queue head ever sleeps on the lock word, and `PARKED` is only ever set with `HELD`
/// (by the head) and cleared by the unlock that wakes it, before the wake (or by the head's
/// acquisition): any unlock that frees the lock while `PARKED` is set issues a wake, so the head
/// cannot sleep through a release (see `wait.rs` for why a wake cannot be lost).
pub(crate) struct LockWord {
    state: AtomicU32,
}

const LOCKED: u32 = 1;
const PARKED: u32 = 2;
const NO_STEAL: u32 = 4;
const FAIR: u32 = 8;
/// Set with `NO_STEAL` by a holder that makes its marked successor head
/// ([`LockWord::hand_to_marked`]): the reservation is that head's alone, and nobody else can
/// take or clear it (arrivals treat it as `NO_STEAL`; `clear_reservation` leaves it), so the
/// head takes the free lock with a plain store instead of a CAS (see `acquire_as_head`).
const HANDED: u32 = 16;
/// How many times an arriving thread looks at a busy lock before it queues
/// ([`LockWord::spin_steal`]): the first [`STEAL_SPINS`] after 2, 4 and 8 `pause`s, the others
/// after yielding the CPU (parking_lot's `SpinWait` schedule). Yielding keeps the looks rare
/// enough not to slow the holder down, and gives the core away when threads outnumber cores.
///
/// On a machine with one NUMA node, the first yield is timed, and if it came back within
/// [`ALONE_YIELD_NS`] (nobody else was waiting for the core) a pause phase follows: it spins
/// until half the spin time (`tunables::spin_time`, 2.5 µs by default) has passed, looking at
/// the lock halfway and at the end. It is bounded by the clock, not by a count, because a
/// `pause` costs 10 to 140 cycles depending on the CPU.
///
/// Why: with two threads on two cores, a waiter that queues and parks makes every unlock of the
/// running thread pay a futex wake; the yield test keeps the phase away from crowded cores. On
/// several nodes the phase is left out: it lets arrivals from any node take turns ahead of the
/// queue (docs/DESIGN.md, "Decision record: the arrivals' spin").
const STEAL_TRIES: u32 = 10;
const STEAL_SPINS: u32 = 3;
/// `pause`s between two clock reads of the pause phase.
const STEAL_PAUSE_BATCH: u32 = 16;
/// A `sched_yield` that returns within this found nobody else to run (see `wait::crowded`).
const ALONE_YIELD_NS: u64 = wait::ALONE_YIELD_NS;
/// Set (with the holder's NUMA node in [`LOCAL_NODE_MASK`]) by a CnaMutex holder that makes its
/// marked successor of the same node head with stealing on ([`LockWord::hand_to_marked`],
/// [`Handoff::Local`]): until someone takes the lock, only arrivals of that node may take it
/// ahead of the new head. It makes the one-CAS fast path (from 0) fail; an arrival of that node
/// then takes it with a second CAS (`take_local`), any other arrival goes on to `spin_steal`,
/// which leaves it to the queue. Whoever takes the lock clears it (the head's CAS to `LOCKED`,
/// a stealer's CAS), and so does `clear_reservation`.
///
/// Why: an open handoff (McsMutex's, [`Handoff::Open`]) lets the holder re-take the lock, but
/// until the new head's CAS, arrivals of every node could take it through the fast path and
/// send the lock across sockets; a reservation for the head alone ([`Handoff::Reserved`])
/// costs the holder's re-takes (see `hand_to_marked`; docs/DESIGN.md, "Decision record: local
/// handoffs").
const LOCAL: u32 = 32;
/// The node of a [`LOCAL`] reservation: bits 6-10 (nodes 0-31; a holder on a node above gets no
/// `LOCAL`).
const LOCAL_NODE_SHIFT: u32 = 6;
const LOCAL_NODE_MASK: u32 = 31 << LOCAL_NODE_SHIFT;
/// The bits of a [`LOCAL`] reservation, which whoever takes the lock clears.
const LOCAL_BITS: u32 = LOCAL | LOCAL_NODE_MASK;

/// Bits above the flags: the index of a CNA proxy node (registry indices are at most 2^20).
const PROXY_SHIFT: u32 = 11;
const FLAGS: u32 = (1 << PROXY_SHIFT) - 1;
/// The lock is held while any of these is set: `LOCKED`, or the proxy bits, which outlive
/// `LOCKED` for the moment `unlock` makes the deferred handoff (see `LockWord::unlock`).
const HELD: u32 = LOCKED | !FLAGS;

/// A value of the lock word (the table at [`LockWord`]), with the protocol's questions as
/// methods and its transitions as constructors, so that no call site spells out a mask. It is
/// the word's bits and nothing else: every method compiles to the mask test it names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct State(u32);

impl State {
    /// Free, no flags: the fast path's only expected value.
    const FREE: State = State(0);
    /// Held, no flags: what a head's acquisition leaves.
    const LOCKED: State = State(LOCKED);

    /// Held: `LOCKED`, or the proxy bits of a deferred handoff still being made (`HELD`).
    #[inline(always)]
    const fn held(self) -> bool {
        self.0 & HELD != 0
    }

    /// The queue head sleeps on the word: the release that frees it must wake it.
    #[inline(always)]
    const fn parked(self) -> bool {
        self.0 & PARKED != 0
    }

    /// Reserved for the queue head (`NO_STEAL`): arrivals must queue.
    #[inline(always)]
    const fn reserved(self) -> bool {
        self.0 & NO_STEAL != 0
    }

    /// `unlock_fair` asked the head's next handoff to be fair (`FAIR`, always with `NO_STEAL`).
    #[inline(always)]
    const fn fair(self) -> bool {
        self.0 & FAIR != 0
    }

    /// The reservation belongs to the head its holder made (`HANDED`): it takes the free lock
    /// with a plain store, and nobody else clears it.
    #[inline(always)]
    const fn handed(self) -> bool {
        self.0 & HANDED != 0
    }

    /// Free and owed to no head: an arrival may take it (unless a [`LOCAL`] reservation names
    /// another node, see [`arrival_may_take`](Self::arrival_may_take)).
    #[inline(always)]
    const fn open(self) -> bool {
        self.0 & (HELD | NO_STEAL | HANDED) == 0
    }

    /// Carries a [`LOCAL`] reservation, for any node.
    #[inline(always)]
    const fn local(self) -> bool {
        self.0 & LOCAL != 0
    }

    /// Carries a [`LOCAL`] reservation for NUMA node `node`.
    #[inline(always)]
    const fn local_for(self, node: u32) -> bool {
        self.local() && (self.0 & LOCAL_NODE_MASK) >> LOCAL_NODE_SHIFT == node
    }

    /// Whether an arrival may take the lock now: it is [`open`](Self::open), and a [`LOCAL`]
    /// reservation names the arrival's node `node` (with `None`, a `LOCAL` reservation does
    /// not stop it: `try_lock` and the pause phase ignore it).
    #[inline(always)]
    fn arrival_may_take(self, node: Option<u32>) -> bool {
        self.open()
            && match node {
                Some(node) => !self.local() || self.local_for(node),
                None => true,
            }
    }

    /// The proxy bits: a CNA proxy node's index, or HQ's deferral mark; 0 if none.
    #[inline(always)]
    const fn proxy(self) -> u32 {
        self.0 >> PROXY_SHIFT
    }

    /// Whether the holder deferred its handoff (proxy bits set).
    #[inline(always)]
    const fn has_proxy(self) -> bool {
        self.0 & !FLAGS != 0
    }

    /// An arrival's acquisition of an open word: `x → (x | LOCKED) & !LOCAL_BITS` (the other
    /// flags stay for the head).
    #[inline(always)]
    const fn taken_by_arrival(self) -> State {
        State((self.0 | LOCKED) & !LOCAL_BITS)
    }

    /// `unlock_fair` with waiters queued: `x → (x - LOCKED - PARKED) | NO_STEAL | FAIR`.
    #[inline(always)]
    const fn released_fair(self) -> State {
        State(((self.0 - LOCKED) & !PARKED) | NO_STEAL | FAIR)
    }

    /// A holder's handoff to the successor it marked, reserved for that head alone:
    /// `LOCKED | NO_STEAL | HANDED`.
    const HANDED_TO_HEAD: State = State(LOCKED | NO_STEAL | HANDED);

    /// CnaMutex's holder's handoff to a marked successor of its own node `node`:
    /// `LOCKED | LOCAL | node << LOCAL_NODE_SHIFT`; `None` for a node the field cannot hold.
    #[inline(always)]
    const fn local_to(node: usize) -> Option<State> {
        if node <= (LOCAL_NODE_MASK >> LOCAL_NODE_SHIFT) as usize {
            Some(State(LOCKED | LOCAL | (node as u32) << LOCAL_NODE_SHIFT))
        } else {
            None
        }
    }

    /// The legal combinations, checked (in debug builds) on every value a transition writes:
    /// `FAIR` only with `NO_STEAL`; a `LOCAL` node only with `LOCAL`; `HANDED` and `LOCAL`
    /// never together (each is written by a plain store of a whole value, which drops the
    /// other). The held, parked and proxy bits combine freely: `PARKED` outlives `LOCKED` for
    /// the moment between a release's two RMWs, and the proxy bits outlive `LOCKED` while the
    /// deferred handoff is made.
    #[inline(always)]
    const fn is_legal(self) -> bool {
        (!self.fair() || self.reserved())
            && (self.0 & LOCAL_NODE_MASK == 0 || self.local())
            && !(self.handed() && self.local())
    }

    /// The bits, for a write, after checking (debug builds) that they are a legal word.
    #[inline(always)]
    fn bits(self) -> u32 {
        debug_assert!(self.is_legal(), "illegal lock word {:#x}", self.0);
        self.0
    }
}

impl LockWord {
    const_fn! {
        pub(crate) const fn new() -> Self {
            LockWord {
                state: AtomicU32::new(0),
            }
        }
    }

    /// The uncontended path: one CAS `0 → LOCKED`; if it found a free word reserved for this
    /// thread's node ([`LOCAL`]), a second CAS right after, while the failed one still holds
    /// the line.
    #[inline(always)]
    pub(crate) fn try_lock_fast(&self) -> bool {
        // Acquire: pairs with the Release of the previous unlock.
        // (free) → LOCKED.
        match self.state.compare_exchange(
            State::FREE.0,
            State::LOCKED.0,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => true,
            Err(s) => State(s).local() && self.take_local(State(s), current_node_id()),
        }
    }

    /// Takes a free word `s` with a [`LOCAL`] reservation if it names this thread's node: the
    /// holder's own re-take, most often. Without this, the re-take cost a failed fast path, a
    /// load and a CAS, each a transfer of the line whenever the new head's looks had taken it
    /// (docs/DESIGN.md, "Decision record: local handoffs").
    #[cold]
    fn take_local(&self, s: State, node: u32) -> bool {
        if !s.open() || !s.local_for(node) {
            return false;
        }
        // (free, LOCAL of our node) → LOCKED, other flags kept. Acquire: as above.
        let taken = self
            .state
            .compare_exchange(
                s.0,
                s.taken_by_arrival().bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok();
        #[cfg(loom)]
        if taken {
            crate::sync::loom_probe::local_steal();
        }
        taken
    }

    /// Takes the lock if it is free and nobody is owed it: `x → x | LOCKED` unless `x` has
    /// `LOCKED` or `NO_STEAL`. Used by `try_lock` and by arriving threads before they queue.
    #[inline]
    pub(crate) fn try_steal(&self) -> bool {
        self.try_steal_from(None)
    }

    /// [`try_steal`](Self::try_steal) for an arrival of NUMA node `node` (if given): it leaves a
    /// [`LOCAL`] reservation of another node alone. Clears `LOCAL` when it takes the lock.
    #[inline]
    fn try_steal_from(&self, node: Option<u32>) -> bool {
        let mut s = self.look();
        while s.open() {
            if !s.arrival_may_take(node) {
                return false;
            }
            // (free, not owed to a head) → LOCKED, `LOCAL` cleared. Acquire: pairs with the
            // Release of the previous unlock.
            match self.state.compare_exchange_weak(
                s.0,
                s.taken_by_arrival().bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = State(now),
            }
        }
        false
    }

    /// An arriving thread's stealing: while nobody is queued, spin a little (at most
    /// [`STEAL_TRIES`] looks and, on one node, a pause phase that ends by `deadline`; see
    /// there) and take the lock as soon as it is free.
    ///
    /// This is qspinlock's "pending" waiter without the bit: the first contender of a lock held
    /// for a moment gets it without touching the queue (no node, no tail RMWs, no handoff),
    /// which is what keeps two threads taking turns as fast as parking_lot. As soon as someone
    /// queues, arrivals queue behind it, so this never overtakes a waiter that has been waiting
    /// longer than this brief spin.
    ///
    /// An arrival that finds the lock free while waiters are queued does not take it either: the
    /// lock is between a release and its head's reservation. Since the release is one RMW (see
    /// [`unlock`](Self::unlock)), that window is open at most handoffs, and arrivals from any
    /// node taking the lock through it send it across sockets (docs/DESIGN.md, "Decision
    /// record: one RMW to release").
    ///
    /// The rule holds only where heads mark and reserve ([`wait::may_mark`]: 3 or more CPUs and
    /// a core that is not crowded). On a crowded core the head it would wait for may be
    /// preempted, and stealing is what keeps the queue moving then (docs/DESIGN.md, "Handoffs:
    /// marking, premarking and stealing"); applied there too, the rule cost real threads
    /// throughput on 2 cores (same decision record).
    #[inline]
    pub(crate) fn spin_steal(
        &self,
        nobody_queued: impl Fn() -> bool,
        deadline: Option<u64>,
    ) -> bool {
        // A free lock with waiters queued is in the middle of a handoff: its head has not
        // reserved it yet. Leave it to the head (the fast path's CAS from 0 still takes it),
        // where heads mark and reserve at all. Relaxed: a hint; the CAS that takes the lock
        // carries the ordering.
        let s = self.look();
        // Our node, if a `LOCAL` reservation asks for it (looked up only then).
        let node = s.local().then(current_node_id);
        if s.open() {
            if let Some(n) = node
                && s.local_for(n)
            {
                // Reserved for our node (the holder's re-take, most often): take it at once,
                // without the look at the queue.
                if self.take_local(s, n) {
                    return true;
                }
            } else if !nobody_queued() && (s.local() || wait::may_mark()) {
                #[cfg(loom)]
                crate::sync::loom_probe::free_lock_left();
                return false;
            }
        }
        for attempt in 0..STEAL_TRIES {
            if self.try_steal_from(node) {
                return true;
            }
            // Someone is queued: join them, unless this core is crowded (the last verdict; the
            // timed yield below renews it). There the queue's waiters mostly sleep, each
            // handoff waits for a wake-up, and an arrival that queued behind them would sleep
            // too while the lock is mostly free (a convoy); it keeps trying through its yields
            // instead, as long as the head's patience (the steal bound) lets it. See
            // docs/DESIGN.md, "Oversubscription".
            if EXHAUSTIVE || (!nobody_queued() && !wait::crowded_hint()) {
                return false;
            }
            if attempt < STEAL_SPINS {
                for _ in 0..2u32 << attempt {
                    crate::sync::spin_hint();
                }
            } else if attempt == STEAL_SPINS {
                let before = now_ns();
                crate::sync::yield_now();
                let now = now_ns();
                wait::note_yield(now.saturating_sub(before), now);
                if crate::topology::node_count() == 1 && now.saturating_sub(before) < ALONE_YIELD_NS
                {
                    let end = now.saturating_add(tunables::spin_ns() / 2);
                    let until = deadline.map_or(end, |d| end.min(d));
                    if let Some(acquired) = self.pause_phase(&nobody_queued, now, until) {
                        return acquired;
                    }
                }
            } else {
                crate::sync::yield_now();
            }
        }
        false
    }

    /// [`spin_steal`](Self::spin_steal)'s pause phase: spins from `start` (the clock as the
    /// caller last read it) until `until`, and looks at the lock only twice, halfway and at the
    /// end. `Some(acquired)` ends the spin-steal (the lock taken, or someone queued); `None` goes
    /// on to the yields.
    ///
    /// Fewer looks, more throughput: each look reads the lock's line and the queue tail's, which
    /// the holder then has to take back. The two looks are placed in time rather than counted in
    /// `pause`s, which cost 10 to 140 cycles (docs/DESIGN.md, "Decision record: the arrivals'
    /// spin").
    #[cold]
    fn pause_phase(
        &self,
        nobody_queued: &impl Fn() -> bool,
        start: u64,
        until: u64,
    ) -> Option<bool> {
        // The loop only reads, until the lock or the queue changes, or the time is up.
        crate::sync::spin_deadline(until);
        let mut look_at = start + until.saturating_sub(start) / 2;
        loop {
            for _ in 0..STEAL_PAUSE_BATCH {
                crate::sync::spin_hint();
            }
            let now = now_ns();
            if now >= look_at {
                if self.try_steal() {
                    return Some(true);
                }
                if !nobody_queued() {
                    return Some(false);
                }
                if now >= until {
                    return None;
                }
                look_at = until;
            }
        }
    }

    /// Releases the lock and wakes the queue head if it sleeps: `x → x - LOCKED`, one
    /// read-modify-write that cannot fail, whatever flags the queue head set meanwhile (a CAS
    /// expecting `LOCKED` would fail on every contended handoff, which reserves the lock, and
    /// cost a second round trip on the handoff's critical path). The flags stay for the head to
    /// consume. Release: publishes the critical section to the next holder (pairs with the
    /// Acquire of every acquisition).
    ///
    /// A CNA proxy or HQ deferral (proxy bits, see [`record_proxy`](Self::record_proxy)) keeps
    /// the lock held (`HELD`) after the `fetch_sub`: the returned word tells us, and
    /// `hand_on(proxy)` makes the deferred handoff before `unlock_slow` clears the bits. So the
    /// common release is this one RMW, with no look at the word before it: a load first pays a
    /// second transfer whenever a waiter's look has taken the line meanwhile (docs/DESIGN.md,
    /// "Decision record: one RMW to release").
    #[inline(always)]
    pub(crate) fn unlock(&self, hand_on: impl FnOnce(u32)) {
        // (LOCKED, x) → (x): the flags stay for the head. Release: see above.
        let old = State(self.state.fetch_sub(LOCKED, Ordering::Release));
        debug_assert!(
            old.0 & LOCKED != 0,
            "unlock of a free lock word {:#x}",
            old.0
        );
        if old.parked() || old.has_proxy() {
            self.unlock_slow(old, hand_on);
        }
    }

    /// The rest of a release after its `fetch_sub` returned `old`: with a recorded proxy, the
    /// deferred handoff, then `x → x & FLAGS & !PARKED`, which frees the lock; then wake the
    /// head if it slept (`PARKED` in `old`, or set while we handed on).
    ///
    /// Clearing `PARKED` with the wake matters: if a stealer retakes the lock before the woken
    /// head runs, its unlock must not pay for another wake (the head sets `PARKED` again if it
    /// sleeps again). The clear comes before the wake, so a head that set `PARKED` again
    /// meanwhile is woken too (its futex wait sees the word changed or gets the wake).
    #[cold]
    fn unlock_slow(&self, old: State, hand_on: impl FnOnce(u32)) {
        let word: *const AtomicU32 = &self.state;
        let was = State(if !old.has_proxy() {
            // (PARKED, x) → (x). Relaxed: the flag carries no data; the caller still borrows
            // the lock, so it is alive.
            self.and(!PARKED, Ordering::Relaxed)
        } else {
            #[cfg(loom)]
            crate::sync::loom_probe::deferred_release();
            hand_on(old.proxy());
            // (proxy, PARKED, x) → (x): frees the lock. Release: the handoff's queue writes
            // (and the critical section) are published to the next holder, whose acquisition
            // can only read this store or a later one.
            self.and(FLAGS & !PARKED, Ordering::Release)
        });
        if was.parked() {
            wait::unpark(word);
        }
    }

    /// Releases the lock for the queue head: `x → (x - LOCKED) | NO_STEAL | FAIR`, so no arrival
    /// can steal it and the head's next handoff is fair. Without waiters, a plain unlock.
    ///
    /// `has_waiters` looks at the lock's queue tail. A timed head may leave the queue without the
    /// lock while we release it: if the last waiter left just before our reservation landed, it
    /// found nothing to clear, so we look again after setting it and clear it ourselves if
    /// nobody is left (`clear_reservation` on both sides; see there for the fences).
    ///
    /// A recorded proxy is taken back first and `hand_on(proxy)` makes the deferred handoff,
    /// as in [`unlock`](Self::unlock), while `LOCKED` still holds the lock.
    pub(crate) fn unlock_fair(&self, has_waiters: impl Fn() -> bool, hand_on: impl FnOnce(u32)) {
        if self.has_proxy() {
            hand_on(self.take_recorded_proxy());
        }
        if !has_waiters() {
            return self.unlock(|_| {});
        }
        let word: *const AtomicU32 = &self.state;
        let mut s = self.look();
        loop {
            // (LOCKED, PARKED, x) → (NO_STEAL, FAIR, x). Release: as in `unlock`.
            match self.state.compare_exchange_weak(
                s.0,
                s.released_fair().bits(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = State(now),
            }
        }
        if s.parked() {
            wait::unpark(word);
        }
        // SeqCst fence: pairs with the one in `clear_reservation`. Either the leaving waiter
        // sees our reservation after its tail update, or we see its tail update here.
        fence(Ordering::SeqCst);
        if !has_waiters() {
            self.clear_reservation();
        }
    }

    /// The holder records a deferred handoff (CNA: the proxy node standing in the queue for it;
    /// HQ: a mark, see `RawHq`):
    /// `x → x | proxy << PROXY_SHIFT`. Relaxed: only the holder writes these bits, and only a
    /// thread that holds the lock (the holder, or one it passed the guard to, which implies
    /// happens-before) reads them back, in `take_recorded_proxy`.
    #[inline]
    pub(crate) fn record_proxy(&self, proxy: u32) {
        debug_assert!(proxy != 0 && proxy <= u32::MAX >> PROXY_SHIFT);
        // (LOCKED, x) → (LOCKED, proxy, x).
        self.or(proxy << PROXY_SHIFT, Ordering::Relaxed);
    }

    /// Whether the holder left a proxy node in the queue (a snapshot; exact for the holder).
    #[inline]
    fn has_proxy(&self) -> bool {
        self.look().has_proxy()
    }

    /// Clears and returns the proxy index recorded by [`record_proxy`](Self::record_proxy) (0
    /// if none). Called by the thread that holds the lock, before it releases it (`unlock_fair`).
    /// Relaxed: see `record_proxy`.
    #[inline]
    fn take_recorded_proxy(&self) -> u32 {
        // (proxy, x) → (x).
        State(self.and(FLAGS, Ordering::Relaxed)).proxy()
    }

    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.look().held()
    }

    /// `x → x | bits`, returning `x`; checks (debug builds) that the result is a legal word.
    #[inline(always)]
    fn or(&self, bits: u32, order: Ordering) -> u32 {
        let old = self.state.fetch_or(bits, order);
        debug_assert!(
            State(old | bits).is_legal(),
            "illegal lock word {:#x}",
            old | bits
        );
        old
    }

    /// `x → x & bits`, returning `x`; checks (debug builds) that the result is a legal word.
    #[inline(always)]
    fn and(&self, bits: u32, order: Ordering) -> u32 {
        let old = self.state.fetch_and(bits, order);
        debug_assert!(
            State(old & bits).is_legal(),
            "illegal lock word {:#x}",
            old & bits
        );
        old
    }

    /// The word now. Relaxed: a look; the CAS or fence that acts on what it saw carries the
    /// ordering.
    #[inline(always)]
    fn look(&self) -> State {
        State(self.state.load(Ordering::Relaxed))
    }

    /// The queue head's wait: spin, then park, until the lock is free and this thread takes it,
    /// or until `deadline` (if given) passes.
    ///
    /// Stops stealing (`NO_STEAL`) at once if stealing is off, once this head has waited longer
    /// than the steal bound (checked while it spins, not only before it parks: a head that keeps
    /// losing the race for a free lock must not spin past the bound), and while it has a
    /// successor marked `NEXT` (below): then the lock is *reserved* for it. Returns the
    /// acquisition (whether it was requested to be fair, by `unlock_fair`, which CNA and HQ
    /// honour when they choose the next head; and the successor still marked) once this thread
    /// holds the lock; `None` if the deadline passed first (the caller then passes headship on
    /// without the lock; no successor is marked then).
    ///
    /// **Marking** (a handoff in as few serial transfers as the kernel's; docs/DESIGN.md,
    /// "Handoffs: marking, premarking and stealing"): unless this thread's core is crowded (see
    /// [`wait::crowded`]), the head marks the waiter `successor()` names (the one it will make
    /// head next, 0 if none yet) `NEXT`: that waiter spins and neither parks nor abandons, so
    /// the head can later make it head with plain stores
    /// ([`LockWord::hand_to_marked`]). The caller may have marked it already, before this
    /// head's first look (`premarked`, see [`premark`]); otherwise the head marks it once it
    /// finds the lock busy. A head with a marked successor reserves the lock while it is busy,
    /// so no arrival takes it first. A head that was itself made head by `hand_to_marked` with
    /// a reserved lock (`HANDED`: HqMutex, or stealing off) owns its reservation and takes the
    /// free lock with a plain store; any other head takes it with a CAS, since a thread that
    /// emptied the queue without the lock (`clear_reservation`) may clear a reservation between
    /// the head's look and its store, and an arrival's fast path could then take the lock too.
    /// Before it parks, the head takes the mark back and lifts a reservation it made only for that
    /// reason, and `HANDED` (stealers may take the lock while it sleeps, and its successor may
    /// sleep too).
    ///
    /// `while_busy` puts the wait to use (CNA reorders its queue there): it is called while the
    /// lock is held by someone else, at least once before the first park, until it returns
    /// `false`.
    ///
    /// `watch` is the lockup check (feature `lockup`): while a threshold is set, the head parks
    /// for at most a quarter of it at a time and checks after every wake-up.
    #[cfg_attr(not(feature = "lockup"), allow(unused_mut, unused_variables))]
    pub(crate) fn acquire_as_head(
        &self,
        mut while_busy: impl FnMut() -> bool,
        successor: impl Fn() -> u32,
        premarked: u32,
        deadline: Option<u64>,
        mut watch: HeadWatch<'_>,
    ) -> Option<HeadAcquired> {
        let mut marked = premarked;
        let stealing = tunables::stealing();
        let since = if stealing { now_ns() } else { 0 };
        // Stealing stops for good (until we have the lock) when it is off or the bound passed;
        // for as long as we have a marked successor otherwise.
        let mut bound_passed = !stealing;
        let mut may_mark = wait::may_mark();
        if !may_mark && marked != 0 {
            // Premarked on a verdict that no longer stands (see `premark`).
            unmark_next(qnode::node(marked));
            marked = 0;
        }
        let mut budget = SpinBudget::head(deadline);
        let mut busy_work = true;
        let mut looks = 0u32;
        loop {
            let s = self.look();
            if !s.held() {
                match self.take_free(s) {
                    Some(fair) => return Some(HeadAcquired { fair, marked }),
                    None => {
                        // Overtaken between our look and our CAS. A head that only ever sees
                        // the lock free and loses the race (a holder re-taking it every few
                        // ns) never reaches the checks below: reserve now if we may, and keep
                        // the steal bound.
                        looks = looks.wrapping_add(1);
                        if !bound_passed && looks.is_multiple_of(STEAL_BOUND_LOOKS) {
                            bound_passed = steal_bound_passed(since);
                        }
                        if bound_passed || may_mark {
                            self.set_no_steal();
                            budget.redeclare();
                        }
                        continue;
                    }
                }
            }
            // The lock is busy: mark our successor (if `premark` did not, or it changed).
            if may_mark {
                let was = marked;
                marked = keep_marked(marked, successor());
                if marked != was {
                    budget.redeclare();
                }
            }
            if !s.reserved() && (bound_passed || may_mark) {
                self.set_no_steal();
                budget.redeclare();
                continue;
            }
            if busy_work {
                busy_work = while_busy();
            }
            // Back off while stealers may take the lock ahead of us (our looks would only slow
            // the holder down); look eagerly once the lock is owed to us.
            let spun = if !s.reserved() {
                budget.spin()
            } else {
                budget.spin_eager()
            };
            looks = looks.wrapping_add(1);
            if !bound_passed && (!spun || looks.is_multiple_of(STEAL_BOUND_LOOKS)) {
                bound_passed = steal_bound_passed(since);
                if bound_passed {
                    continue;
                }
            }
            if spun {
                continue;
            }
            // About to sleep: first check the deadline (the lock was busy when we last looked).
            let now = now_ns();
            if deadline.is_some_and(|deadline| now >= deadline) {
                self.release_mark(&mut marked, s, bound_passed);
                if self.look().handed() {
                    // A `HANDED` we could not lift with the CAS (the word moved): it is ours
                    // alone (only the holder that made us head sets it, before we are head,
                    // and only we clear it), so no other head may find it. Relaxed: a flag.
                    // (HANDED, x) → (x).
                    self.and(!HANDED, Ordering::Relaxed);
                }
                return None;
            }
            // Sleeping: take the mark back and lift the reservation we made for it (and mark
            // nobody until we are awake again).
            may_mark = false;
            if self.release_mark(&mut marked, s, bound_passed) {
                continue;
            }
            // (LOCKED, x) → (LOCKED, x | PARKED), then sleep while the word is unchanged.
            #[cfg(feature = "lockup")]
            let park_deadline = match &watch {
                Some(check) => {
                    Some(deadline.map_or(check.wake_by(now), |d| d.min(check.wake_by(now))))
                }
                None => deadline,
            };
            #[cfg(not(feature = "lockup"))]
            let park_deadline = deadline;
            note(PathEvent::HeadPark);
            wait::announce_and_park(&self.state, s.0, PARKED, park_deadline);
            #[cfg(feature = "lockup")]
            if let Some(check) = &mut watch {
                check.check();
            }
            // A wake-up means the lock was released: headship is near, spin and mark again.
            may_mark = wait::may_mark();
            budget = SpinBudget::head(deadline);
        }
    }

    /// The queue head takes the lock it found free (`s`, with `s & HELD == 0`): with a plain
    /// store if it was handed to it (`HANDED`), else with a CAS. Returns whether the
    /// acquisition was requested to be fair (`FAIR`); `None` if the CAS lost the word.
    #[inline]
    fn take_free(&self, s: State) -> Option<bool> {
        let fair = s.fair();
        if s.handed() {
            // Handed to us (see `HANDED`): nobody else can take the free lock or set a flag on
            // it (the word's other writers now only clear bits), so a plain store takes it. It
            // does not wait for the line as a CAS does: the critical section's loads start
            // while the store drains. The Acquire fence makes our load of the free word pair
            // with the unlocker's Release.
            fence(Ordering::Acquire);
            // (free, HANDED, x) → LOCKED.
            self.state.store(State::LOCKED.0, Ordering::Relaxed);
            #[cfg(loom)]
            crate::sync::loom_probe::handed_store();
            return Some(fair);
        }
        // (free, any flags) → LOCKED. Acquire: pairs with the unlocker's Release.
        self.state
            .compare_exchange_weak(s.0, State::LOCKED.0, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(fair)
    }

    /// The head stops marking (before it parks or gives up): takes back the mark of `*marked`,
    /// if any, and lifts the reservation (`NO_STEAL` in `seen`, unless the steal bound, stealing
    /// being off, or an `unlock_fair` asks for it): stealers may take the lock while it sleeps.
    /// Returns `true` if it changed the word (the caller then looks again).
    fn release_mark(&self, marked: &mut u32, seen: State, bound_passed: bool) -> bool {
        if *marked != 0 {
            unmark_next(qnode::node(*marked));
            *marked = 0;
        }
        // A sleeping head takes no lock by a plain store: `HANDED` goes in any case.
        let mut lift = seen.0 & HANDED;
        if seen.reserved() && !seen.fair() && !bound_passed {
            lift |= NO_STEAL;
        }
        if lift != 0 {
            // (HANDED?, NO_STEAL?, x) → (x). Relaxed: the flags only steer who acquires next.
            // A failure means the word moved: the caller looks again anyway.
            let _ = self.state.compare_exchange(
                seen.0,
                State(seen.0 & !lift).bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return true;
        }
        false
    }

    /// The new holder makes `next`, which it marked `NEXT` (so `next` spins and neither parks
    /// nor abandons), the queue head, with plain stores only: `next`'s status becomes
    /// `HEAD | payload`. With stealing off, the lock stays reserved for it first
    /// (`LOCKED | NO_STEAL | HANDED`), as `hand_to` reserves it, and the new head takes it with a
    /// plain store. Called by the thread that has just taken the lock, before anyone else is
    /// head: it is then the only writer of the word (a head that sets flags, the one other
    /// writer of a held word, exists only once `next` sees its status) and of `next`'s status
    /// (a `NEXT` status is written only by the head that marked it).
    ///
    /// With stealing on, `how` decides ([`Handoff`]). Reserved, no arrival takes the lock
    /// before the new head, the holder's re-take included; since the heads premark (nearly
    /// every handoff comes this way), that makes every handoff first-come (docs/DESIGN.md,
    /// "Decision record: heads premark").
    #[inline]
    pub(crate) fn hand_to_marked(&self, next: &QNode, payload: u32, how: Handoff) {
        debug_assert!(payload <= status::PAYLOAD_MAX);
        debug_assert_eq!(self.look(), State::LOCKED);
        if !tunables::stealing() || matches!(how, Handoff::Reserved) {
            // Relaxed: ordered before the status store below by its Release, so the new head's
            // first look at the word (after its Acquire load of the status) sees the
            // reservation, and `HANDED`: it may take the lock with a plain store.
            // LOCKED → (LOCKED, NO_STEAL, HANDED).
            self.state
                .store(State::HANDED_TO_HEAD.bits(), Ordering::Relaxed);
        } else {
            if let Handoff::Local(home) = how
                && let Some(local) = State::local_to(home)
            {
                // LOCKED → (LOCKED, LOCAL of `home`). Relaxed: only steers who takes the free
                // lock; ordered before the status store below, so the new head's looks see it
                // too (it takes it with a CAS).
                self.state.store(local.bits(), Ordering::Relaxed);
            }
            #[cfg(loom)]
            crate::sync::loom_probe::unreserved_handoff();
        }
        // Release: pairs with the Acquire load in `await_head`; publishes our writes to the queue
        // (links, CNA's secondary queue) and the reservation.
        next.status
            .store(status::head_with(payload), Ordering::Release);
    }

    /// The lock holder (or a head leaving without the lock) hands queue headship to `next` (see
    /// [`make_head`]); returns `false` if `next` had been abandoned by its timed waiter, in
    /// which case the caller owns it and must pass headship on from it. With stealing off, it
    /// first sets `NO_STEAL` so that the window before the new head runs (it may be asleep) is
    /// not a chance for arrivals, the holder itself included, to take the lock out of turn.
    /// The new head clears the flag when it acquires and sets it again only if it has a
    /// successor, so a lock with no waiters is never left reserved (a queue emptied without a
    /// head calls [`clear_reservation`](Self::clear_reservation)).
    #[inline]
    #[must_use]
    pub(crate) fn hand_to(&self, next: &QNode, payload: u32) -> bool {
        if !tunables::stealing() {
            // (x) → (NO_STEAL, x). Relaxed: as in `set_no_steal`; the holder's unlock
            // (Release) follows.
            self.or(NO_STEAL, Ordering::Relaxed);
        }
        make_head(next, payload)
    }

    /// The queue emptied while no waiter took headship (a timed head gave up, or every waiter
    /// left had abandoned its place): nobody will consume `NO_STEAL` or `FAIR`, so clear them,
    /// or `try_lock` would fail on a free lock. `x → x & !(NO_STEAL | FAIR)`. A waiter that
    /// became head meanwhile sets `NO_STEAL` again if it needs it; `PARKED` stays, since such a
    /// head may sleep behind it. Relaxed: the flags only steer who acquires next.
    pub(crate) fn clear_reservation(&self) {
        // SeqCst fence: pairs with the one in `unlock_fair`. We update the tail (emptying the
        // queue) before this; `unlock_fair` sets the reservation before it re-reads the tail.
        // With a fence between the write and the read on both sides, at least one of us sees
        // the other's write, so a reservation is never left with nobody to clear it.
        fence(Ordering::SeqCst);
        const RESERVATIONS: u32 = NO_STEAL | FAIR | LOCAL_BITS;
        if self.look().0 & RESERVATIONS != 0 {
            // (NO_STEAL, FAIR, LOCAL, x) → (x).
            self.and(!RESERVATIONS, Ordering::Relaxed);
        }
    }

    /// The head reserves the lock: `x → x | NO_STEAL`, whatever `x` is (a head exists to consume
    /// the flag: us). Unconditional: a CAS expecting the word the head last read loses to every
    /// stealer that changed it meanwhile, and a head on another socket than the stealers could
    /// then go on failing to set the flag (docs/DESIGN.md, "Decision record: the head's
    /// reservation"). Relaxed: the flag only steers which thread acquires next; the acquisition
    /// carries the ordering.
    fn set_no_steal(&self) {
        // (x) → (NO_STEAL, x).
        self.or(NO_STEAL, Ordering::Relaxed);
    }
}

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
    /// whether this thread holds the lock: always `true` without a `deadline`; with one, `false`
    /// once it has passed (never before).
    #[cold]
    #[cfg_attr(feature = "lockup", track_caller)]
    pub(crate) fn lock_contended(
        &self,
        nobody_queued: impl Fn() -> bool,
        queued: impl FnOnce(u32) -> Queued,
        deadline: Option<u64>,
    ) -> bool {
        #[cfg(feature = "stats")]
        let since = Some(crate::sync::ticks());
        if tunables::stealing() && self.word.spin_steal(nobody_queued, deadline) {
            note(PathEvent::Steal);
            #[cfg(feature = "stats")]
            self.on_acquire(Acquired::Stolen, since);
            return true;
        }
        if wait::expired(deadline) {
            // A timed try whose time is up before it would queue: it only tried stealing.
            return false;
        }
        let acquired = qnode::with_node(queued, || acquire_unqueued(&self.word, deadline));
        if acquired {
            note(PathEvent::Queued);
        }
        #[cfg(feature = "stats")]
        if acquired {
            self.on_acquire(Acquired::Queued, since);
        }
        acquired
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

/// Waits until this waiter is made queue head; returns the `HEAD` status with its payload.
/// With a `deadline`, gives up once it has passed: the node is marked `ABANDONED` and left in
/// the queue (`None`); the caller must never touch it again.
pub(crate) fn wait_for_head(me: &QNode, deadline: Option<u64>) -> Option<u32> {
    loop {
        if let Some(head) = await_head(me, deadline) {
            return Some(head);
        }
        // Acquire: as in `await_head`.
        let s = me.status.load(Ordering::Acquire);
        if s & status::HEAD != 0 {
            return Some(s);
        }
        if s == status::NEXT {
            // Marked meanwhile: we may not give up until the head takes the mark back.
            continue;
        }
        // (WAITING | PARKED) → ABANDONED, unless headship (or a mark) arrived first. Release: our
        // last accesses to the node happen before the thread that passes headship over it (its
        // swap acquires) recycles it for someone else.
        if me
            .status
            .compare_exchange(s, status::ABANDONED, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return None;
        }
    }
}

/// Spins, then parks, until this waiter is made queue head (returns the `HEAD` status with its
/// payload) or `deadline`, if given, passes (returns `None`, leaving the node as it is). After
/// every wake-up it spins again before parking: a pre-wake means headship is near.
fn await_head(me: &QNode, deadline: Option<u64>) -> Option<u32> {
    let mut budget = SpinBudget::waiting(deadline);
    loop {
        // Acquire: pairs with the Release of the swap in `make_head`, so everything the previous
        // head wrote for us (queue links, secondary queue, payload) is visible.
        let s = me.status.load(Ordering::Acquire);
        if s & status::HEAD != 0 {
            return Some(s);
        }
        if s == status::NEXT {
            // Marked by the head: spin, without parking or giving up, until it makes us head
            // or takes the mark back (it does before it parks).
            crate::sync::spin_deadline(u64::MAX);
            while me.status.load(Ordering::Relaxed) == status::NEXT {
                crate::sync::spin_hint();
            }
            budget = SpinBudget::waiting(deadline);
            continue;
        }
        if budget.spin() {
            continue;
        }
        if wait::expired(deadline) {
            return None;
        }
        note(PathEvent::WaiterPark);
        wait::announce_and_park(&me.status, s, status::PARKED, deadline);
        budget = SpinBudget::waiting(deadline);
    }
}

/// Makes `next` the queue head, handing it `payload`; wakes it if it sleeps. Returns `false` if
/// `next` had been abandoned by its timed waiter: the caller then owns the node, must pass
/// headship on from it as a departing head would, and must recycle it.
#[inline]
#[must_use]
pub(crate) fn make_head(next: &QNode, payload: u32) -> bool {
    debug_assert!(payload <= status::PAYLOAD_MAX);
    let word: *const AtomicU32 = &next.status;
    // Release: pairs with the Acquire load in `wait_for_head`. Acquire: pairs with the Release
    // CAS of a waiter that abandoned the node, which we may then recycle.
    let old = next
        .status
        .swap(status::head_with(payload), Ordering::AcqRel);
    if old == status::PARKED {
        wait::unpark(word);
    }
    old != status::ABANDONED
}

/// What a queue head's wait ([`LockWord::acquire_as_head`]) ended with: the lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadAcquired {
    /// The acquisition was requested to be fair (`unlock_fair`).
    pub(crate) fair: bool,
    /// The successor still marked `NEXT` (0: none): the caller makes it head with
    /// [`LockWord::hand_to_marked`], or takes the mark back ([`unmark_next`]) if it chooses
    /// another.
    pub(crate) marked: u32,
}

/// How [`LockWord::hand_to_marked`] leaves the lock word for the marked successor it makes
/// head. With stealing off, every kind reserves it for that head (`Reserved`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Handoff {
    /// Reserved for the new head (`NO_STEAL | HANDED`), which takes it with a plain store: no
    /// arrival, the holder included, takes it first. HqMutex's choice while its queues are per
    /// node or per domain (see `RawHq`).
    Reserved,
    /// Not reserved: arrivals, the holder's re-take above all, may take the free lock until the
    /// new head finds it busy and reserves it. McsMutex's choice, and a flat HqMutex's.
    Open,
    /// Reserved for the arrivals of this NUMA node ([`LOCAL`]), the holder's re-take among them.
    /// CnaMutex's choice when the new head waits on the holder's node ([`local_home`]).
    Local(usize),
}

/// Marks `next` (a waiter of the calling head's queue, not abandoned) `NEXT`: from now on it
/// spins and neither parks nor abandons, and only this head writes its status, until this head
/// takes the mark back or makes it head (see `qnode::status`). Wakes it if it slept. Returns
/// whether it is marked (`false` if its timed waiter abandoned it). Relaxed: nothing is
/// published; the waiter re-reads its status, and the head that made us head ordered the
/// queue's links before our reading them.
#[inline]
pub(crate) fn mark_next(next: &QNode) -> bool {
    // Expect a spinning waiter: the CAS alone, without a load first, is one transfer of the
    // waiter's line, not two.
    let mut s = status::WAITING;
    loop {
        match next
            .status
            .compare_exchange(s, status::NEXT, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => {
                if s == status::PARKED {
                    wait::unpark(&next.status);
                }
                return true;
            }
            Err(now) => {
                if now == status::NEXT {
                    return true;
                }
                if now != status::WAITING && now != status::PARKED {
                    return false;
                }
                s = now;
            }
        }
    }
}

/// Takes back the `NEXT` mark of `next` (the calling head marked it): `NEXT → WAITING`, after
/// which its waiter may park or give up again. Relaxed: as in [`mark_next`].
#[inline]
pub(crate) fn unmark_next(next: &QNode) {
    let unmarked = next
        .status
        .compare_exchange(
            status::NEXT,
            status::WAITING,
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
        .is_ok();
    debug_assert!(unmarked, "only the marking head writes a NEXT status");
}

/// The head's marking step: keeps `marked` (0: none) in line with `successor` (0: none yet),
/// taking the old mark back if the successor changed. Returns the node now marked.
#[inline]
fn keep_marked(marked: u32, successor: u32) -> u32 {
    if successor == marked {
        return marked;
    }
    if marked != 0 {
        unmark_next(qnode::node(marked));
    }
    if successor != 0 && mark_next(qnode::node(successor)) {
        successor
    } else {
        0
    }
}

/// Looks the steal bound up at most once in this many looks of a spinning head.
const STEAL_BOUND_LOOKS: u32 = 64;

/// Whether a head that became head at `since` has tolerated stealers for the steal bound.
#[inline]
fn steal_bound_passed(since: u64) -> bool {
    now_ns().saturating_sub(since) >= tunables::steal_bound_ns()
}

/// The calling thread's NUMA node as a [`LOCAL`] reservation names it: the node of its
/// [`qnode::current_place`], as the queue nodes record it.
#[inline]
fn current_node_id() -> u32 {
    qnode::place_node(qnode::current_place()) as u32
}

/// How CnaMutex's holder, whose place the queue nodes recorded as `mine`, hands the lock to the
/// marked successor `next` it makes head ([`LockWord::hand_to_marked`]): reserved for its own
/// node ([`Handoff::Local`]) if `next` waits on that node, else open: where the handoff leaves
/// the node anyway, a reservation would only cost the holder's re-takes (docs/DESIGN.md,
/// "Decision record: local handoffs"). The places are the ones
/// the nodes recorded when their threads queued, as [`current_node_id`] reads them: no
/// topology lookup on the handoff's path. Relaxed: `next` is marked, so its line is ours, and
/// its place was written before it queued.
#[inline]
pub(crate) fn local_home(next: &QNode, mine: u64) -> Handoff {
    let mine = qnode::place_node(mine);
    if qnode::place_node(next.numa.load(Ordering::Relaxed)) == mine {
        Handoff::Local(mine)
    } else {
        Handoff::Open
    }
}

/// A new head's first step towards its successor `next` (0: none linked yet), for McsMutex,
/// CnaMutex and a flat HqMutex: where heads mark (by the last crowding verdict,
/// [`wait::may_mark_hint`], so that no clock read comes before the head's first look), marks it
/// `NEXT` at once and returns it (0 if its timed waiter abandoned it); elsewhere [`prewake`]s it
/// and returns 0. The caller passes the result to [`LockWord::acquire_as_head`] as
/// `premarked`.
///
/// Why at once: a head usually finds the lock free at its first look (the holder's critical
/// section is shorter than the time it takes to become head), takes it, and used to make its
/// successor head with `make_head`'s swap, a read-modify-write that waits for the successor's
/// line before the critical section starts. Marked, the successor is made head with
/// [`LockWord::hand_to_marked`]'s plain stores. The mark's CAS costs the same one transfer as
/// `prewake`'s load, which it replaces, before the lock is taken instead of after
/// (docs/DESIGN.md, "Decision record: heads premark").
#[inline]
pub(crate) fn premark(next: u32) -> u32 {
    if next == 0 {
        return 0;
    }
    if wait::may_mark_hint() {
        if !mark_next(qnode::node(next)) {
            return 0;
        }
        #[cfg(loom)]
        crate::sync::loom_probe::premarked();
        return next;
    }
    prewake(qnode::node(next));
    0
}

/// Wakes a sleeping successor early, so that it is spinning by the time it becomes head
/// (the blocking-ShflLock idea). Only the current head calls this, on its own successor, and
/// only the same thread later makes that successor head, so `PARKED → WAITING` cannot undo a
/// `HEAD`. Relaxed: no data is published, the waiter re-reads its status after waking.
#[inline]
pub(crate) fn prewake(next: &QNode) {
    if next.status.load(Ordering::Relaxed) == status::PARKED
        && next
            .status
            .compare_exchange(
                status::PARKED,
                status::WAITING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    {
        wait::unpark(&next.status);
    }
}

/// Most nodes a lockup report's walk of a queue visits (the walk races with the queue's changes
/// and only reports what it saw, so it must also end if links form a cycle meanwhile).
pub(crate) const WALK_LIMIT: usize = 1 << 20;

/// Visits the NUMA node of `from` and of every waiter linked after it through `link`, as far as
/// they are linked (feature `lockup`: the queue shape in a report).
pub(crate) fn walk_links(from: u32, link: fn(&QNode) -> &AtomicU32, visit: &mut dyn FnMut(u64)) {
    let mut at = from;
    for _ in 0..WALK_LIMIT {
        if at == 0 {
            return;
        }
        let n = qnode::node(at);
        // Relaxed / Acquire: a racy snapshot for a report; every index names a live node.
        visit(qnode::place_node(n.numa.load(Ordering::Relaxed)) as u64);
        at = link(n).load(Ordering::Acquire);
    }
}

/// Waits for the successor of `me` to link itself (it has swapped the tail but not yet written
/// `me.next`); returns its index.
#[inline]
pub(crate) fn wait_for_next(link: &AtomicU32) -> u32 {
    // Acquire: pairs with the successor's Release store of the link; its node is initialized.
    wait::wait_until(|| {
        let next = link.load(Ordering::Acquire);
        (next != 0).then_some(next)
    })
}

/// Acquires `word` without a queue position (the thread has no queue node: see
/// `qnode::with_node`), giving up once `deadline` (if any) has passed. Correct but unfair;
/// practically unreachable.
#[cold]
pub(crate) fn acquire_unqueued(word: &LockWord, deadline: Option<u64>) -> bool {
    while !word.try_lock_fast() && !word.try_steal() {
        if wait::expired(deadline) {
            return false;
        }
        crate::sync::yield_now();
    }
    true
}

/// The deadline on the `now_ns` clock `timeout` from now; saturates (a timeout of centuries
/// never expires).
#[inline]
pub(crate) fn deadline_after(timeout: Duration) -> u64 {
    now_ns().saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX))
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
                // The one-CAS fast path. With stealing off, every handoff (`LockWord::hand_to`)
                // sets `NO_STEAL` until the new head has the lock, so this CAS cannot jump the
                // queue.
                if !self.core.try_lock_fast() {
                    self.lock_slow(None);
                }
            }

            /// The slow path of `lock` (`deadline: None`) and of the timed tries; see
            /// `LockCore::lock_contended`.
            #[cfg_attr(feature = "lockup", track_caller)]
            fn lock_slow(&self, deadline: Option<u64>) -> bool {
                self.core.lock_contended(
                    || $crate::raw::QueuePolicy::nobody_queued(self),
                    |me| $crate::raw::QueuePolicy::lock_queued(self, me, deadline),
                    deadline,
                )
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
