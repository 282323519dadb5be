//! The lock word (`LockWord`): its states (`State`), the uncontended paths, stealing and the
//! release. The queue head's wait and its handoff steps are in `head`.

mod head;

use super::*;

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
}
