//! `RawHq`'s queued acquisition and its headship: waiting in a node's queue or the FIFO, taking
//! the lock as head, and passing headship on (within the node for up to a turn, else to the
//! FIFO's next node), with the turn counts and the flat/hierarchical switch.

use super::*;

impl RawHq {
    pub(super) fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        let my = node(me);
        let numa = qnode::current_place();
        my.reset(numa);
        let local = self
            .queues()
            .filter(|queues| queues.is_hierarchical())
            .map(|queues| {
                let (slot, per_domain) = queues.place_slot(numa);
                #[cfg(loom)]
                if per_domain {
                    queues.switches[2].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Local {
                    queues,
                    slot,
                    per_domain,
                }
            });
        let mut head_payload = None;
        if let Some(Local { queues, slot, .. }) = local {
            // Relaxed: published with the node by the tail swap below.
            my.hq_slot.store(slot as u32 + 1, Ordering::Relaxed);
            // (*, prev, *) → (*, me, *). AcqRel: as for the FIFO tail below.
            let prev = queues.tail(slot).swap(me, Ordering::AcqRel);
            if prev != 0 {
                // Release: pairs with the Acquire in `wait_for_next`; `prev` may now make us
                // head (a local handoff).
                node(prev).next.store(me, Ordering::Release);
                match wait_for_head(my, deadline) {
                    Some(status::DONE) => return Queued::Served,
                    Some(head) => head_payload = Some(Payload::of_status(head)),
                    None => return Queued::Abandoned,
                }
            } else if let Some((front, payload)) = queues.claim_deferred(slot) {
                // We are head now, standing before `front` in the FIFO. Relaxed: only we read
                // our `fifo_next` until we hand headship on (which publishes it).
                my.fifo_next.store(front, Ordering::Relaxed);
                head_payload = Some(payload);
            }
        }
        let payload = match head_payload {
            Some(payload) => payload,
            None => {
                // A flat waiter or a representative: (prev, *, *) → (me, *, *). AcqRel:
                // Release publishes `my.reset`; Acquire makes `prev`'s node (and its registry
                // chunk) visible before we write its link.
                let prev = self.fifo_tail.swap(me, Ordering::AcqRel);
                if prev != 0 {
                    // Release: pairs with the Acquire in `wait_for_next`.
                    node(prev).fifo_next.store(me, Ordering::Release);
                    match wait_for_head(my, deadline) {
                        Some(status::DONE) => return Queued::Served,
                        Some(head) => Payload::of_status(head),
                        None => return Queued::Abandoned,
                    }
                } else {
                    Payload::FIRST
                }
            }
        };
        self.lock_as_head(me, local, payload, deadline)
    }

    /// `me` is now head (the FIFO's front), with `payload`: take the lock (or give up at
    /// `deadline`), then choose the next head (steps 4 to 6).
    pub(super) fn lock_as_head(
        &self,
        me: u32,
        local: Option<Local<'_>>,
        payload: Payload,
        deadline: Option<u64>,
    ) -> Queued {
        let my = node(me);
        // Wake the likely next head early if it sleeps: our local successor while the count
        // allows a local handoff, else our FIFO successor.
        let count = payload.count();
        // A flat waiter (no local queue) makes no local handoffs: its limit is never read.
        let limit = local.map_or(u32::MAX, Local::turn_limit);
        let likely = || {
            // Acquire: pairs with the successors' Release link stores.
            let local_next = my.next.load(Ordering::Acquire);
            let fifo_next = my.fifo_next.load(Ordering::Acquire);
            if local.is_some() && count + 1 < limit {
                // With no local successor yet and a local run going on, we will likely defer:
                // nobody to wake.
                if local_next == 0 && count == 0 {
                    fifo_next
                } else {
                    local_next
                }
            } else if fifo_next != 0 {
                fifo_next
            } else {
                local_next
            }
        };
        // A flat waiter (no local queue: the lock is flat, a plain queue lock) hands off as
        // McsMutex does: it marks its successor at once (`premark`) and leaves the lock open
        // when it makes that successor head (`Handoff::Open`). A waiter of a local queue wakes
        // its likely successor early if it sleeps, and reserves the lock for a marked one
        // (`Handoff::Reserved`): premarked with that reservation every handoff goes strictly
        // first-come, and left open it lets arrivals of other nodes in (docs/DESIGN.md,
        // "Decision record: heads premark").
        let first = likely();
        let open = local.is_none();
        let premarked = if open {
            crate::raw::premark(first)
        } else {
            if first != 0 {
                prewake(node(first));
            }
            0
        };
        // Lockup reports: the node FIFO from us, and each entry's local queue.
        let walk = |visit: &mut dyn FnMut(u64)| {
            walk_links(me, |n| &n.fifo_next, visit);
            let mut entry = me;
            for _ in 0..crate::raw::WALK_LIMIT {
                if entry == 0 {
                    break;
                }
                let n = node(entry);
                // Relaxed: a racy snapshot for a report.
                if n.hq_slot.load(Ordering::Relaxed) != 0 {
                    walk_links(n.next.load(Ordering::Relaxed), |n| &n.next, visit);
                }
                entry = n.fifo_next.load(Ordering::Acquire);
            }
        };
        let watch = self
            .core
            .head_watch(self as *const Self as *const (), &walk);
        // The likely next head is the one to mark (see `LockWord::acquire_as_head`).
        let Some(crate::raw::HeadAcquired { fair, marked }) = self.core.word.acquire_as_head(
            || false,
            likely,
            // A flat lock with nobody queued behind us. Relaxed: only steers when we
            // reserve.
            || open && self.fifo_tail.load(Ordering::Relaxed) == me,
            premarked,
            deadline,
            watch,
        ) else {
            // Time is up while we were head: leave headship without the lock.
            if let Some((next, payload, keep_turn)) = self.leave_headship(me, payload, false) {
                self.hand_headship(next, payload, keep_turn);
            }
            return Queued::GaveUp;
        };
        self.pass_headship(me, local, payload, fair, limit, marked);
        Queued::Acquired
    }

    /// Makes `next` head with `payload` from `pass_headship`: with plain stores if it is the
    /// successor we marked while we waited (`marked`), leaving the lock open if `open` (we are
    /// a flat waiter, see `lock_as_head`) and reserved for `next` otherwise; else taking that
    /// mark back first and going through `hand_headship`.
    pub(super) fn hand_headship_marked(
        &self,
        next: u32,
        payload: Payload,
        marked: u32,
        open: bool,
        keep_turn: bool,
    ) {
        if next == marked {
            let how = if open {
                crate::raw::Handoff::Open
            } else {
                crate::raw::Handoff::Reserved
            };
            self.core
                .word
                .hand_to_marked(node(next), payload.bits(), how);
            return;
        }
        if marked != 0 {
            crate::raw::unmark_next(node(marked));
        }
        self.hand_headship(next, payload, keep_turn);
    }

    /// Makes `next` head with `payload`. A node whose timed waiter abandoned it is treated as a
    /// head that leaves at once: we leave headship on its behalf (recycling it) and try the next
    /// candidate, until a live waiter is head or nobody waits.
    ///
    /// `keep_turn`: `next` is a waiter of our local queue and another node's representative
    /// waits in the FIFO; a combiner then makes `next` head rather than serve it if nobody is
    /// queued behind it (`delegate::keeping_turn`), so that the node's turn goes on.
    pub(super) fn hand_headship(&self, mut next: u32, mut payload: Payload, mut keep_turn: bool) {
        while !crate::raw::delegate::keeping_turn(keep_turn, || {
            self.core.word.hand_to(node(next), payload.bits())
        }) {
            match self.leave_headship(next, payload, true) {
                Some((candidate, candidate_payload, candidate_keep_turn)) => {
                    (next, payload, keep_turn) = (candidate, candidate_payload, candidate_keep_turn)
                }
                None => return,
            }
        }
    }

    /// Headship leaves `me`, the FIFO front, without the lock: a head whose time ran out, or
    /// (`owned`) an abandoned node that was just made head, which we recycle once done with it.
    /// Returns the next head, its payload and whether it is a local successor while another
    /// node waits (`keep_turn`, see `hand_headship`), or `None` when nobody waits (the
    /// reservation a head would have consumed is then cleared). Steps 5 and 6 of the module
    /// docs, with no lock and no choice: a local successor `S` takes our place and keeps our
    /// payload (the node's turn goes on), else the FIFO's next entry becomes head with a fresh
    /// count.
    pub(super) fn leave_headship(
        &self,
        me: u32,
        payload: Payload,
        owned: bool,
    ) -> Option<(u32, Payload, bool)> {
        let my = node(me);
        // Relaxed: written by the node's owner before the tail swap that published it.
        let slot = my.hq_slot.load(Ordering::Relaxed);
        let local = (slot != 0)
            .then(|| self.queues())
            .flatten()
            .map(|queues| Local {
                queues,
                slot: slot as usize - 1,
                // Not read: leaving headship makes no choice that a limit bounds.
                per_domain: false,
            });
        let successor = self.leave_local_queue(me, local);
        // A served `delegate` waiter (read before the node is recycled below).
        let served = owned && my.request() != 0;
        let served_flat = served && local.is_none();
        // A served waiter of a local queue counts as a local handoff of the node's turn (its
        // closure ran on the node), so that combining cannot stretch a turn beyond its limit
        // by more than one batch.
        let payload = if served && local.is_some() {
            payload.one_more()
        } else {
            payload
        };
        // Nobody else in the FIFO: (me, *) → (S or 0, *).
        if replace_tail(&self.fifo_tail, me, successor.unwrap_or(0)) {
            if owned {
                qnode::recycle(me);
            }
            return match successor {
                Some(s) => Some((s, payload, false)),
                None => {
                    self.core.word.clear_reservation();
                    None
                }
            };
        }
        let front = wait_for_next(&my.fifo_next);
        if owned {
            qnode::recycle(me);
        }
        match successor {
            Some(s) => {
                // `S` takes our place. Relaxed: published by `make_head`'s Release, as in
                // `pass_headship`.
                node(s).fifo_next.store(front, Ordering::Relaxed);
                Some((s, payload, true))
            }
            // A served flat waiter never held the lock: `front` gets what it was handed,
            // which tells where the holder's streak has been (`FlatCount`).
            None if served_flat => {
                #[cfg(loom)]
                crate::sync::loom_probe::flat_payload_passed();
                Some((front, payload, false))
            }
            None => Some((front, Payload::new(0, payload.streak()), false)),
        }
    }

    /// Step 5: if `me` is in a local queue, leaves it: `(*, me) → (*, 0)` by CAS, or waits for
    /// our local successor to link and returns it.
    pub(super) fn leave_local_queue(&self, me: u32, local: Option<Local<'_>>) -> Option<u32> {
        local.and_then(|Local { queues, slot, .. }| {
            // A successor that has linked itself needs no look at the local tail (a line every
            // arrival of the node writes). Acquire: as in `wait_for_next`.
            let linked = node(me).next.load(Ordering::Acquire);
            if linked != 0 {
                return Some(linked);
            }
            // (*, me, L) → (*, 0, L); failure means a successor swapped the local tail.
            if replace_tail(queues.tail(slot), me, 0) {
                None
            } else {
                Some(wait_for_next(&node(me).next))
            }
        })
    }

    /// Leaves the queues after taking the lock: chooses the next head (steps 5 and 6 of the
    /// module docs), or defers the choice to `unlock`. `marked`: the waiter we marked `NEXT`
    /// while we waited (0: none); made head with plain stores if chosen, its mark taken back
    /// otherwise.
    pub(super) fn pass_headship(
        &self,
        me: u32,
        local: Option<Local<'_>>,
        payload: Payload,
        fair: bool,
        limit: u32,
        marked: u32,
    ) {
        let my = node(me);
        // A flat waiter's marked handoffs leave the lock open (see `lock_as_head`).
        let open = local.is_none();
        let unmark = || {
            if marked != 0 {
                crate::raw::unmark_next(node(marked));
            }
        };
        let count = payload.count();
        let streak = payload.streak();
        let stay_local = !fair && count + 1 < limit;
        // A flat waiter's count is the number of flat-window checks still to skip, the slot of
        // the holder that handed it headship and whether its streak crossed nodes (see
        // `FROM_SHIFT`). Our own slot: `numa` is ours, written when we queued.
        let (skip, my_slot, crossed) = if local.is_none() {
            let my_slot = flat_place(my.numa.load(Ordering::Relaxed));
            let flat = FlatCount::decode(count);
            let crossed = flat.crossed || flat.from.is_some_and(|from| from != my_slot);
            (flat.skip, my_slot, crossed)
        } else {
            (0, 0, false)
        };
        // Whether the streak tells of waiters on more than one node: a waiter of a local queue
        // belongs to a lock that is hierarchical already.
        let nodes_differ = local.is_some() || crossed;
        // What the streak becomes (see `HIERARCHICAL_AFTER` and `BARREN_WEIGHT`): a flat waiter
        // counts one more contended handoff; a waiter of a local queue carries the barren score
        // on, one less after a local handoff (`kept_local`), more after a barren turn (below).
        let streak = if local.is_some() {
            streak.max(HIERARCHICAL_AFTER)
        } else {
            streak.min(HIERARCHICAL_AFTER - 1) + 1
        };
        // 5. Our local successor, if we are in a local queue.
        let successor = self.leave_local_queue(me, local);
        // 6. The FIFO. An entry that has linked itself behind us is the next front: no need to
        // look at the tail word, on the lock's line, which arrivals and stealers keep taking
        // away (as in `RawMcs`). Acquire: pairs with the entry's Release link store, as in
        // `wait_for_next`. Otherwise, if nobody else is in it: (me, *, L) → (S or 0, *, L).
        let linked = my.fifo_next.load(Ordering::Acquire);
        if linked == 0 && replace_tail(&self.fifo_tail, me, successor.unwrap_or(0)) {
            match successor {
                // `S` is the FIFO's only entry (its `fifo_next` is still 0 from its reset).
                Some(s) => {
                    let (streak, _) = self.note_contended(streak, skip, nodes_differ);
                    let payload = if stay_local {
                        Payload::new(count + 1, kept_local(streak))
                    } else {
                        if !fair && let Some(Local { queues, .. }) = local {
                            // Our turn ran to its limit, and `S` is still waiting, as below
                            // where another slot's waiter takes the turn; here nobody of
                            // another slot waits (every waiter on one node, say), and this is
                            // where such a lock refines (see `NodeQueues::refine`).
                            queues.refine();
                        }
                        Payload::new(0, streak)
                    };
                    self.hand_headship_marked(s, payload, marked, open, false);
                }
                None => {
                    unmark();
                    self.note_uncontended();
                }
            }
            return;
        }
        let front = if linked != 0 {
            linked
        } else {
            wait_for_next(&my.fifo_next)
        };
        let (streak, skip) = self.note_contended(streak, skip, nodes_differ);
        match successor {
            Some(s) if stay_local => {
                // Local handoff: `S` takes our place in the FIFO. Relaxed: published by
                // `make_head`'s Release; only `S` reads it, after its Acquire in `wait_for_head`.
                node(s).fifo_next.store(front, Ordering::Relaxed);
                // `front` (another node's) waits: a combiner keeps the turn on our node.
                self.hand_headship_marked(
                    s,
                    Payload::new(count + 1, kept_local(streak)),
                    marked,
                    open,
                    true,
                );
            }
            Some(s) => {
                if !fair && let Some(Local { queues, .. }) = local {
                    // Our turn ran to its limit, and `S` is still waiting.
                    queues.refine();
                }
                // Remote handoff; `S` re-joins the FIFO at its tail as its slot's representative
                // (its `fifo_next` is still 0): (t, *, L) → (S, *, L). AcqRel as in
                // `lock_queued`. `t != 0`: `front` is in the FIFO and only we can remove it.
                let t = self.fifo_tail.swap(s, Ordering::AcqRel);
                // Release: pairs with the Acquire in `wait_for_next`.
                node(t).fifo_next.store(s, Ordering::Release);
                self.hand_headship_marked(front, Payload::new(0, streak), marked, open, false);
            }
            None => match local {
                // The FIFO front is of our own slot (another representative or a flat waiter
                // of our node): a local handoff after all. Relaxed: `front`'s owner wrote its
                // `numa` before the Release swap that published it, which our Acquire in
                // `wait_for_next` made visible.
                Some(Local { queues, slot, .. })
                    if stay_local
                        && queues.slot_of(node(front).numa.load(Ordering::Relaxed)) == slot =>
                {
                    self.hand_headship_marked(
                        front,
                        Payload::new(count + 1, kept_local(streak)),
                        marked,
                        open,
                        false,
                    );
                }
                Some(Local { queues, slot, .. })
                    if stay_local
                        && count < 1 << DEFERRED_COUNT_BITS
                        && queues.is_hierarchical() =>
                {
                    unmark();
                    // Defer to the end of the critical section. Release: pairs with the
                    // Acquire CAS of the claimer or of `unlock`; `front`'s node is visible to it.
                    let deferred = Deferral {
                        front,
                        count,
                        streak,
                        slot,
                    };
                    queues.deferred.store(deferred.pack(), Ordering::Release);
                    // Tell `unlock` (its `fetch_sub` returns the mark) to make the deferred
                    // handoff before it frees the lock (see `hand_deferred`).
                    self.core.word.record_proxy(DEFERRED_MARK);
                }
                Some(Local { queues, .. }) if count == 0 => {
                    // A barren turn (without a deferral: a fair unlock, or a limit of 1): ours
                    // was its only acquisition, and nobody of our node is queued.
                    let streak = self.barren_turn(queues, streak);
                    self.hand_headship_marked(front, Payload::new(0, streak), marked, open, false);
                }
                Some(_) => {
                    self.hand_headship_marked(front, Payload::new(0, streak), marked, open, false)
                }
                None => {
                    // A streak that starts again forgets where it went.
                    let count = FlatCount {
                        skip,
                        from: Some(my_slot),
                        crossed: crossed && streak > 0,
                    }
                    .encode();
                    self.hand_headship_marked(
                        front,
                        Payload::new(count, streak),
                        marked,
                        open,
                        false,
                    );
                }
            },
        }
    }

    /// The holder made a contended handoff with a streak of `streak`: turn hierarchical once
    /// contention is sustained and `nodes_differ` (see [`FROM_SHIFT`]), unless the lock went flat
    /// after barren turns less than [`FLAT_FOR_NS`] ago. `skip` is the number of looks at that
    /// window still to skip (a flat head's count). Returns the streak to hand on, 0 to count again
    /// from scratch when the lock stays flat, and the looks still to skip (see
    /// [`FLAT_CHECKS_SKIPPED`]).
    pub(super) fn note_contended(&self, streak: u32, skip: u32, nodes_differ: bool) -> (u32, u32) {
        if streak < self.switch_after() || !nodes_differ {
            return (streak, skip);
        }
        if skip > 0 {
            return (0, skip - 1);
        }
        match self.queues() {
            Some(queues) => {
                if !queues.is_hierarchical() {
                    // Relaxed: only holders read and write it, ordered by the lock.
                    let until = queues.until.flat_until.load(Ordering::Relaxed);
                    if until != 0 && now_ns() < until {
                        return (0, FLAT_CHECKS_SKIPPED);
                    }
                    // Relaxed: see the module docs (Modes).
                    queues.arrivals.mode.store(HIERARCHICAL, Ordering::Relaxed);
                }
            }
            None => {
                let queues = Box::into_raw(Box::new(NodeQueues::new(HIERARCHICAL)));
                // Release: pairs with the Acquire in `queues()`. Only the holder writes the
                // pointer, so it is still null.
                self.queues.store(queues, Ordering::Release);
            }
        }
        (streak, 0)
    }

    /// A turn ended barren; `streak` is what its holder carried: returns the streak to hand on,
    /// with [`BARREN_WEIGHT`] more in the barren score, or goes flat when the score reaches
    /// `BARREN_WEIGHT` x [`BARREN_TURNS`] and returns 0.
    pub(super) fn barren_turn(&self, queues: &NodeQueues, streak: u32) -> u32 {
        let streak = streak.max(HIERARCHICAL_AFTER) + BARREN_WEIGHT;
        if streak < HIERARCHICAL_AFTER + BARREN_WEIGHT * self.barren_turns() {
            streak
        } else if queues.coarsen() {
            // Per-domain queues were barren: try per-node ones, with a fresh barren score.
            HIERARCHICAL_AFTER
        } else {
            self.go_flat(queues);
            0
        }
    }

    /// The barren score reached its bound (see [`BARREN_WEIGHT`]): the per-node queues keep
    /// little local, and flat is faster then (docs/DESIGN.md, "Decision record: HQ barren
    /// turns"). Flat for [`FLAT_FOR_NS`].
    pub(super) fn go_flat(&self, queues: &NodeQueues) {
        if self.switch_after() == 0 {
            return; // models of an always-hierarchical lock
        }
        // Relaxed: see `note_contended` and the module docs (Modes).
        queues.until.flat_until.store(
            now_ns().saturating_add(FLAT_FOR_NS).max(1),
            Ordering::Relaxed,
        );
        queues.arrivals.mode.store(FLAT, Ordering::Relaxed);
        // The next hierarchical period starts per node again.
        queues.reset_coarse();
    }

    /// The holder found nobody waiting: back to the plain queue lock.
    pub(super) fn note_uncontended(&self) {
        if self.switch_after() == 0 {
            return;
        }
        if let Some(queues) = self.queues()
            && queues.is_hierarchical()
        {
            // Relaxed: see the module docs (Modes).
            queues.arrivals.mode.store(FLAT, Ordering::Relaxed);
        }
    }

    /// [`BARREN_TURNS`]; in the models of a switching lock (`new_switching_after(n)`, n < 8),
    /// 1, so that they explore going flat while waiters are queued.
    #[inline]
    pub(super) fn barren_turns(&self) -> u32 {
        #[cfg(loom)]
        if self.switch_after != HIERARCHICAL_AFTER {
            return 1;
        }
        BARREN_TURNS
    }

    #[inline]
    pub(super) fn switch_after(&self) -> u32 {
        #[cfg(loom)]
        {
            self.switch_after
        }
        #[cfg(not(loom))]
        {
            HIERARCHICAL_AFTER
        }
    }
}
