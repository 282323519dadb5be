//! The inflated rwlock's state and protocol: readers entering through the visible-readers table
//! or a per-node slot, writers revoking the bias and draining, and the readers' turns.

use super::*;

impl<M: WriterLock> Inflated<M> {
    pub(super) fn new(recursive: bool) -> Self {
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
                inhibit_backoff: AtomicU32::new(0),
                quiet: AtomicU32::new(0),
                slots_seen: AtomicU64::new(0),
            }),
            slots: (0..count)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
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
    pub(super) fn my_slot(&self) -> &AtomicU64 {
        let node = topology::current_node();
        let lane = reader_lane() * self.node_stride;
        &self.slots[node.wrapping_add(lane) & self.slot_mask]
    }

    /// The wrapping sum of the slots, plus the table's entries for this lock when `table`: the
    /// readers inside (or about to back off). SeqCst: the writer's side of the handshake (see
    /// the module docs); each load is also an Acquire that pairs with the leaving readers'
    /// Release decrements.
    pub(super) fn readers(&self, table: bool) -> u32 {
        self.readers_units_and_sum(table).0
    }

    /// [`readers`](Self::readers), and of them the table's entries, and the slots' whole sum
    /// (see [`SLOT_LEAVE`]).
    pub(super) fn readers_units_and_sum(&self, table: bool) -> (u32, u32, u64) {
        let sum = self.slots.iter().fold(0u64, |sum, slot| {
            sum.wrapping_add(slot.load(Ordering::SeqCst))
        });
        let units = if table { table::count(self.key()) } else { 0 };
        if units != 0 {
            note_probe!(table_units_seen);
        }
        // The low half: the readers inside (see `SLOT_LEAVE`).
        ((sum as u32).wrapping_add(units), units, sum)
    }

    /// Run by the writer that revoked the bias, once the readers drained: moves the entries
    /// still holding this lock's key into slot 0, so that no unit of this lock is left in the
    /// table while the bias is off (the writers that revoke without the bias do not count the
    /// table). Such an entry is a reader that published and is about to back off, or one whose
    /// guard was dropped on another thread (that thread decremented a slot instead): its unit
    /// is balanced by a decrement, and moving it keeps the sum. A reader that backs off after
    /// we took its entry finds it gone and decrements a slot, as for any taken unit.
    #[cold]
    pub(super) fn normalize_table(&self) {
        let moved = table::take_all(self.key());
        if moved != 0 {
            note_probe!(normalized);
            // Relaxed: we hold the lock exclusively (no reader inside, `WRITER` set); our
            // release of `WRITER` orders this before the next writer's slot loads.
            self.slots[0].fetch_add(u64::from(moved), Ordering::Relaxed);
        }
    }

    /// This lock's key in the visible-readers table: the block's address (never 0, unique while
    /// the lock lives; `Drop` clears what is left of it) with its column in the low bits.
    #[inline(always)]
    pub(super) fn key(&self) -> u64 {
        table::key(ptr::from_ref(self).addr(), self.column)
    }

    /// The biased read path: publish in the table, then look for a writer (or a revoked bias).
    /// Returns `false` with our unit taken back if either came.
    #[inline(always)]
    pub(super) fn try_enter_biased(&self) -> bool {
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
    pub(super) fn maybe_rebias(&self) {
        let due = EXHAUSTIVE
            || REBIAS_TICK
                .try_with(|tick| one_in(tick, REBIAS_SAMPLE))
                .unwrap_or(false);
        if due {
            self.rebias_if_due();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn rebias_if_due(&self) {
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
    pub(super) fn try_enter_reader(&self, recursive: bool) -> bool {
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
    pub(super) fn leave_reader(&self) {
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
    pub(super) fn leave_slot(&self, slot: &AtomicU64) {
        // SeqCst: the leaving side of the handshake: either the writer's slot loads see this
        // decrement, or the load below sees its WRITER and we bump `drain`. Also a Release
        // that pairs with the writer's (Acquire) slot loads: our reads happen before its writes.
        // A decrement of the readers inside, and one more reader that left (`SLOT_LEAVE`).
        slot.fetch_add(SLOT_LEAVE, Ordering::SeqCst);
        reader_handshake_fence();
        if self.state.word.load(Ordering::SeqCst) & WRITER != 0 {
            self.notify_drain();
        }
    }

    /// Tells a draining writer that a reader left: bump `drain`, wake the writer if it sleeps.
    #[cold]
    pub(super) fn notify_drain(&self) {
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
    pub(super) fn count_reader_while_exclusive(&self) {
        self.my_slot().fetch_add(1, Ordering::Relaxed);
    }

    /// A reader's whole acquisition in the inflated lock.
    pub(super) fn lock_shared(&self, recursive: bool, deadline: Option<u64>) -> bool {
        self.try_enter_reader(recursive) || self.lock_shared_waiting(recursive, deadline)
    }

    /// A reader that found `WRITER`: register as waiting, spin then sleep until `WRITER`
    /// clears, enter; give up at `deadline` with no trace left.
    #[cold]
    pub(super) fn lock_shared_waiting(&self, recursive: bool, deadline: Option<u64>) -> bool {
        let mut registered = false;
        // Yields made on a crowded core (`CROWDED_READER_YIELDS`), over the whole acquisition.
        let mut yields = 0;
        let handover = crate::tunables::rwlock_writer_handover();
        let mut budget = reader_budget(deadline);
        let mut lost = 0u32;
        let entered = 'outer: loop {
            loop {
                // Acquire: pairs with the Release of the writer's unlock (re-checked with
                // SeqCst in `try_enter_reader`).
                let state = self.state.word.load(Ordering::Acquire);
                if state & WRITER == 0 || (recursive && state & HELD == 0) {
                    break;
                }
                if state & WRITE_MODE != 0 {
                    // No writer may be inside, and none will clear it for us: take `M` to
                    // clear it (a writer that holds `M` now goes first). Never registered here
                    // (write mode begins only while no reader is registered).
                    if !self.leave_write_mode(deadline) {
                        break 'outer false;
                    }
                    continue;
                }
                if handover && state & READERS_WANT == 0 {
                    // The first reader to find this revocation asks the writers not to hand it
                    // over (one RMW per revocation; the others see the bit). Relaxed: a hint,
                    // as `waiting` (no data is published through it).
                    self.state.word.fetch_or(READERS_WANT, Ordering::Relaxed);
                    budget.redeclare();
                    note_probe!(readers_want);
                }
                if budget.spin() {
                    continue;
                }
                if !registered && yields < CROWDED_READER_YIELDS && wait::crowded() {
                    // Not yet registered: nothing to undo at the deadline.
                    if wait::expired(deadline) {
                        break 'outer false;
                    }
                    yields += 1;
                    yield_now();
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
            // A lost window: the next writer revoked before we got in. The spin starts afresh
            // after the first `READER_FRESH_SPINS` (with handovers, never); after that it goes
            // on from where it was, so that a reader that keeps losing the race to the next
            // writer's revocation registers once its spin is over, and the writers' streak
            // then bounds its wait (see `admit_waiting_readers`). `try_enter_reader` wrote
            // (its slot): declare the spin's end again to numa_sim.
            lost += 1;
            if handover || lost > READER_FRESH_SPINS {
                budget.redeclare();
            } else {
                budget = reader_budget(deadline);
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
    pub(super) fn lock_exclusive(&self, deadline: Option<u64>) -> bool {
        if !self.lock_writers(deadline) {
            return false;
        }
        if self.took_over_revocation() {
            return true;
        }
        if self.admit_waiting_readers(deadline) && self.revoke_and_drain(deadline) {
            return true;
        }
        // SAFETY: taken above.
        unsafe { self.writers.unlock_writers() };
        false
    }

    /// Takes `M`, by `deadline` if there is one. A waiter with a deadline first marks the lock
    /// `TIMED_WRITERS`, for good: it may give up and leave its node in `M`'s queue, and
    /// writers must then no longer hand `WRITER` over (see [`may_hand_over`](Self::may_hand_over)).
    pub(super) fn lock_writers(&self, deadline: Option<u64>) -> bool {
        match deadline {
            None => {
                self.writers.lock_writers();
                true
            }
            Some(deadline) => {
                // Relaxed load: the mark is set once per lock; the RMW only the first time.
                if self.state.word.load(Ordering::Relaxed) & TIMED_WRITERS == 0 {
                    // Relaxed: our swap of `M`'s tail (AcqRel, after this in program order)
                    // carries it to a writer whose `writers_queued` (Acquire) sees our node.
                    self.state.word.fetch_or(TIMED_WRITERS, Ordering::Relaxed);
                }
                self.writers.try_lock_writers_for(left_until(deadline))
            }
        }
    }

    /// Run by a thread that has just taken `M` to write: if the last holder handed `WRITER`
    /// over with `M` (only a holder of `M` sets `WRITER`, so `WRITER` set now means that), this
    /// thread holds the lock exclusively already: no reader got in since that writer drained.
    /// If readers registered as waiting meanwhile, it gives the revocation back instead (they
    /// get in) and returns `false`: the caller goes the normal way (as it does with the handover
    /// off).
    #[inline]
    fn took_over_revocation(&self) -> bool {
        // With both turned off, a writer that finds a revocation left over (a tunable changed
        // meanwhile) just revokes again, and its unlock clears it.
        let handover = crate::tunables::rwlock_writer_handover();
        if !handover && !crate::tunables::rwlock_write_mode() {
            return false;
        }
        // Relaxed: `M`'s Acquire orders this after the last holder's writes to `state`, and
        // only holders of `M` set or clear `WRITER`.
        let state = self.state.word.load(Ordering::Relaxed);
        if state & WRITE_MODE != 0 {
            // Readers that come take `M` to clear it, so none waits on `state`. Our unlock
            // keeps it.
            note_probe!(write_mode_taken);
            self.note_write_mode();
            return true;
        }
        if state & WRITER == 0 || !handover {
            return false;
        }
        if state < WAITING_ONE && state & READERS_WANT == 0 {
            note_probe!(handover_taken);
            // No reader waits: as in `admit_waiting_readers`.
            self.end_streak();
            return true;
        }
        note_probe!(handover_returned);
        self.release_writer_bit();
        false
    }

    /// An upgradable reader's acquisition in the inflated lock: `M` alone.
    pub(super) fn lock_upgradable(&self, deadline: Option<u64>) -> bool {
        if !self.lock_writers(deadline) {
            return false;
        }
        self.give_back_revocation();
        true
    }

    /// An upgradable reader's `try_lock_upgradable` in the inflated lock.
    pub(super) fn try_lock_upgradable(&self) -> bool {
        if !self.writers.try_lock_writers() {
            return false;
        }
        self.give_back_revocation();
        true
    }

    /// Run by an upgradable reader, or a reader ending write mode, that has just taken `M`: a
    /// revocation handed over with `M`, or left in write mode, is cleared (it shares the lock
    /// with readers).
    #[inline]
    pub(super) fn give_back_revocation(&self) {
        // Relaxed: as in `took_over_revocation`.
        let state = self.state.word.load(Ordering::Relaxed);
        if state & WRITER != 0 {
            if state & WRITE_MODE != 0 {
                note_probe!(write_mode_left);
            } else {
                note_probe!(handover_returned);
            }
            self.end_quiet_streak();
            self.release_writer_bit();
        }
    }

    pub(super) fn try_lock_exclusive(&self) -> bool {
        if !self.writers.try_lock_writers() {
            return false;
        }
        if self.took_over_revocation() || self.revoke_and_drain(Some(now_ns())) {
            return true;
        }
        // SAFETY: taken above.
        unsafe { self.writers.unlock_writers() };
        false
    }

    /// The holder of `M`, finding no reader waiting: the streak of writers ahead of registered
    /// readers is over.
    #[inline]
    fn end_streak(&self) {
        // Relaxed: only the holder of `M` touches the streak; `M` orders it. Written only when
        // it changes.
        if self.state.streak.load(Ordering::Relaxed) != 0 {
            self.state.streak.store(0, Ordering::Relaxed);
        }
    }

    /// The holder of `M`, before it revokes: counts the streak of writers that went ahead of
    /// registered readers. Once it is [`WRITER_STREAK_LIMIT`] writers and [`READER_TURN_NS`]
    /// long, this writer gives the registered readers their turn (with `WRITER` clear): it
    /// waits until they all got in, or until none of them got in for [`READER_TURN_STALL_NS`]
    /// (those are preempted or still waking: waiting for them would hand the lock to the
    /// scheduler; they get the next turn). `false` at `deadline`.
    pub(super) fn admit_waiting_readers(&self, deadline: Option<u64>) -> bool {
        // Relaxed: a fairness hint (see the registration in `lock_shared_waiting`).
        if self.state.word.load(Ordering::Relaxed) < WAITING_ONE {
            self.end_streak();
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
    pub(super) fn revoke_and_drain(&self, deadline: Option<u64>) -> bool {
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
        // Towards write mode: a revocation that meets readers (the bias, readers waiting or
        // asking) ends the streak; one writer in 8 (per thread) of the others checks the
        // slots' sum in its drain (see `count_quiet`).
        let mut sampled = false;
        if !self.recursive && crate::tunables::rwlock_write_mode() {
            if biased || state >= WAITING_ONE || state & READERS_WANT != 0 {
                self.end_quiet_streak();
            } else {
                sampled = write_mode_sample_due();
            }
        }
        if self.drain(deadline, biased, sampled) {
            if biased {
                self.inhibit_bias(started);
            }
            return true;
        }
        if biased {
            // Timed out with the bias revoked: readers may still be inside through the table,
            // and the writers that revoke without the bias count only the slots, so the bias
            // goes back before `WRITER` clears (docs/DESIGN.md, "The reader-writer lock"). Relaxed:
            // we hold `M` and `WRITER`; the Release below, later on this word, carries it, and
            // only holders of `M` clear the bias.
            self.state.word.fetch_or(BIAS, Ordering::Relaxed);
        }
        self.release_writer_bit();
        false
    }

    /// After a revocation that began at `started` and found the bias set: keeps the bias off
    /// for a multiple of what the revocation took, `REBIAS_INHIBIT` times it, doubled for each
    /// bias in a row that writers revoked before it had lived that long (up to
    /// `REBIAS_BACKOFF_MAX` doublings). The bias came back no earlier than the last inhibition
    /// ended, so `started` minus that end bounds how long it lived.
    fn inhibit_bias(&self, started: u64) {
        let now = now_ns();
        let took = now.saturating_sub(started);
        // Relaxed: the holder of `M` wrote both last (its `M` orders them); `inhibit_until` is
        // a hint for the readers (see `rebias_if_due`).
        let lived = started.saturating_sub(self.drain.inhibit_until.load(Ordering::Relaxed));
        let (backoff, inhibit) = next_inhibition(
            took,
            lived,
            self.drain.inhibit_backoff.load(Ordering::Relaxed),
        );
        self.drain.inhibit_backoff.store(backoff, Ordering::Relaxed);
        self.drain
            .inhibit_until
            .store(now.saturating_add(inhibit), Ordering::Relaxed);
    }

    /// Waits (spin, then sleep on `drain`) until no reader is inside, then (recursive locks
    /// only) sets `HELD`.
    /// With `sampled`, counts this writer towards write mode if it finds no reader at its
    /// first look and the slots' sum unchanged (`count_quiet`).
    pub(super) fn drain(&self, deadline: Option<u64>, table: bool, sampled: bool) -> bool {
        let mut quiet = sampled;
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
            let (readers, units, sum) = self.readers_units_and_sum(table);
            if readers == 0 {
                if quiet {
                    self.count_quiet(sum);
                }
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
            quiet = false;
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

    /// Writer to writer handover (docs/DESIGN.md, "Writer handover"): whether the unlocking
    /// writer may leave `WRITER` set and release `M` alone. Yes when another writer or
    /// upgradable reader is queued for `M` (it will take `M`, and with it the revocation), no
    /// reader found `WRITER` set since it was last cleared (`READERS_WANT`: under read
    /// pressure readers would lose the window between two writers, more than the writers
    /// gain; that also covers the readers registered as waiting), and no
    /// waiter with a deadline ever queued here (`TIMED_WRITERS`: one that gave up leaves a node
    /// in the queue that would pass for a waiter, and `M` could end up free with `WRITER` set).
    /// A stealer may take `M` first: any holder of `M` owns the revocation, so that is fine.
    #[inline]
    fn may_hand_over(&self) -> bool {
        if !crate::tunables::rwlock_writer_handover() {
            return false;
        }
        // Relaxed: a hint (see `READERS_WANT`); re-read below, ordered for `TIMED_WRITERS`.
        if self.state.word.load(Ordering::Relaxed) & (READERS_WANT | TIMED_WRITERS) != 0 {
            return false;
        }
        // Acquire (`writers_queued`): if the node we see is a timed waiter's, its
        // `TIMED_WRITERS` (set before it queued) is visible to the load after it.
        if !self.writers.writers_queued() {
            return false;
        }
        // Relaxed: the count of waiting readers is a fairness hint (as in
        // `admit_waiting_readers`); `TIMED_WRITERS` is ordered by the Acquire above.
        let state = self.state.word.load(Ordering::Relaxed);
        state < WAITING_ONE && state & (READERS_WANT | TIMED_WRITERS) == 0
    }

    /// Clears `WRITER` (and `HELD`, `VETO`, `READERS_PARKED`, `READERS_WANT`, `WRITE_MODE`),
    /// waking the readers that sleep;
    /// `M` stays held.
    pub(super) fn release_writer_bit(&self) {
        // Release: the critical section happens before the readers that see WRITER clear
        // (their loads are Acquire or SeqCst).
        let old = self.state.word.fetch_and(
            !(WRITER | HELD | VETO | READERS_PARKED | READERS_WANT | WRITE_MODE),
            Ordering::Release,
        );
        if old & WRITE_MODE != 0 {
            // Write mode ends (a reader, a downgrade, a fair unlock): a new one needs a new
            // streak.
            self.end_quiet_streak();
        }
        if old & READERS_PARKED != 0 {
            wait::unpark(&self.state.word);
        }
    }

    /// Releases an exclusive lock, handing the revocation over with `M` to the next writer when
    /// [`may_hand_over`](Self::may_hand_over) says so (nobody but a holder of `M` then gets
    /// in), and otherwise as [`unlock_exclusive`](Self::unlock_exclusive) does. Not for a
    /// downgrade: the downgrading thread stays inside as a reader.
    ///
    /// # Safety
    /// The caller holds the exclusive lock (and so `M`).
    pub(super) unsafe fn unlock_exclusive_or_hand_over(&self) {
        if self.stays_in_write_mode() {
            // SAFETY: the caller holds `M`. `WRITER` stays set, with `WRITE_MODE`.
            unsafe { self.writers.unlock_writers() };
        } else if self.may_hand_over() {
            note_probe!(handed_over);
            // SAFETY: the caller holds `M`. `WRITER` (and `HELD`) stay set: the next holder of
            // `M` takes the revocation over (`took_over_revocation`, `give_back_revocation`).
            unsafe { self.writers.unlock_writers() };
        } else {
            // SAFETY: the caller's.
            unsafe { self.unlock_exclusive(false) };
        }
    }

    /// Releases an exclusive lock: readers first, then `M`.
    ///
    /// # Safety
    /// The caller holds the exclusive lock (and so `M`).
    pub(super) unsafe fn unlock_exclusive(&self, fair: bool) {
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
