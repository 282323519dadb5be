//! The queue-node side of a handoff: waiting to be made head, making a waiter head, marking
//! and premarking, and walking a queue.

use super::*;

/// Waits until this waiter is made queue head; returns the `HEAD` status with its payload, or
/// `DONE` for a `delegate` waiter whose closure the holder ran. With a `deadline` (never for a
/// `delegate` waiter), gives up once it has passed: the node is marked `ABANDONED` and left in
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
/// `next` had been abandoned by its timed waiter, or if the caller (a `delegate` holder) ran the
/// closure `next`'s waiter published instead (`delegate::try_serve`): the caller then owns the
/// node's place, must pass headship on from it as a departing head would, and must recycle it
/// (which, for a served node, releases its waiter).
#[inline]
#[must_use]
pub(crate) fn make_head(next: &QNode, payload: u32) -> bool {
    debug_assert!(payload <= status::PAYLOAD_MAX);
    if crate::raw::delegate::try_serve(next) {
        return false;
    }
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
///
/// A `delegate` holder does not mark a waiter whose published closure it will run instead
/// (`delegate::would_serve`): a marked waiter is made head with plain stores, past the hook
/// where it serves. It returns `false` for it, as for an abandoned one.
#[inline]
pub(crate) fn mark_next(next: &QNode) -> bool {
    if crate::raw::delegate::would_serve(next) {
        return false;
    }
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
pub(super) fn keep_marked(marked: u32, successor: u32) -> u32 {
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
pub(super) const STEAL_BOUND_LOOKS: u32 = 64;

/// Whether a head that became head at `since` has tolerated stealers for the steal bound.
#[inline]
pub(super) fn steal_bound_passed(since: u64) -> bool {
    now_ns().saturating_sub(since) >= tunables::steal_bound_ns()
}

/// The calling thread's NUMA node as a [`LOCAL`] reservation names it: the node of its
/// [`qnode::current_place`], as the queue nodes record it.
#[inline]
pub(super) fn current_node_id() -> u32 {
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
