//! The queue head's side of the lock word: its wait (spin, mark, reserve, park), how it takes
//! the free lock, and the holder's handoff steps that write the word.

use super::*;

impl LockWord {
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
    /// so no arrival takes it first; with a re-take window (`tunables::retake_window`) set, only
    /// once it has been head that long, and until then the thread that released the lock may
    /// take it back. A head that was itself made head by `hand_to_marked` with
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
    /// `alone` says whether nobody is queued behind this head. While it holds (and for at most
    /// `tunables::lone_retake_window`), a marking head neither reserves the lock nor takes it
    /// at the first look that finds it free: the lone head's window, docs/DESIGN.md,
    /// "Handoffs: marking, premarking and stealing".
    ///
    /// `watch` is the lockup check (feature `lockup`): while a threshold is set, the head parks
    /// for at most a quarter of it at a time and checks after every wake-up.
    #[cfg_attr(not(feature = "lockup"), allow(unused_mut, unused_variables))]
    pub(crate) fn acquire_as_head(
        &self,
        mut while_busy: impl FnMut() -> bool,
        successor: impl Fn() -> u32,
        alone: impl Fn() -> bool,
        premarked: u32,
        deadline: Option<u64>,
        mut watch: HeadWatch<'_>,
    ) -> Option<HeadAcquired> {
        let mut marked = premarked;
        let stealing = tunables::stealing();
        let since = if stealing { now_ns() } else { 0 };
        // Stealing stops for good (until we have the lock) when it is off or the bound passed;
        // for as long as we have a marked successor otherwise. A `delegate` head marks no
        // successor whose closure it will run (`mark_next`), so it reserves at once wherever a
        // head may mark: otherwise an arrival re-taking the lock every few ns holds it off for
        // the whole steal bound, with the closures queued behind it (docs/DESIGN.md,
        // "Delegation").
        let mut may_mark = wait::may_mark();
        let combining = may_mark && crate::raw::delegate::combining();
        let mut bound_passed = !stealing || combining;
        // The re-take window (`tunables::retake_window`, 0 by default): a marking head reserves
        // the lock only once it has been head this long, so that the thread that released the
        // lock may take it back meanwhile (docs/DESIGN.md, "Handoffs: marking, premarking and
        // stealing"). The clock is read only while it is open and the head may mark (a head
        // that may not never reserves for a mark, window or not).
        let window = if bound_passed {
            0
        } else {
            tunables::retake_window_ns()
        };
        let mut window_open = window != 0;
        // The lone head's window (`tunables::lone_retake_window`): while nobody is queued
        // behind this head (`alone`), it leaves the busy lock open that long, so that a thread
        // taking turns with it keeps the lock for a run of sections instead of handing it over
        // at every release (docs/DESIGN.md, "Decision record: a lone head's re-take window").
        // Closed for good once someone queued behind us or the time is up. A combining head
        // has one too: no closure waits behind a head that is alone.
        let lone_window = if !stealing {
            0
        } else {
            tunables::lone_retake_window_ns()
        };
        let lone_open = core::cell::Cell::new(lone_window != 0 && (!bound_passed || combining));
        let still_lone = || {
            let was = lone_open.get();
            let now = was && alone() && window_still_open(since, lone_window);
            lone_open.set(now);
            #[cfg(loom)]
            if was && !now {
                crate::sync::loom_probe::lone_window_closed();
            }
            now
        };
        if !may_mark && marked != 0 {
            // Premarked on a verdict that no longer stands (see `premark`).
            unmark_next(qnode::node(marked));
            marked = 0;
        }
        let mut budget = SpinBudget::head(deadline);
        let mut busy_work = true;
        let mut looks = 0u32;
        // A lone head leaves the lock it finds free to the thread that released it for one
        // look (see `still_lone`): set while it does, cleared when it finds the lock busy.
        let mut held_off = false;
        loop {
            let s = self.look();
            if !s.held() {
                if !held_off
                    && !s.reserved()
                    && (!bound_passed || combining)
                    && may_mark
                    && !window_open
                    && still_lone()
                    // (Under loom, where budgets never spin, the model's interleavings stand in
                    // for the look's wait.)
                    && (crate::sync::EXHAUSTIVE || budget.spin())
                {
                    held_off = true;
                    #[cfg(loom)]
                    crate::sync::loom_probe::free_lock_held_off();
                    continue;
                }
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
                        if may_mark && window_open {
                            window_open = window_still_open(since, window);
                        }
                        if reserve_now(bound_passed, may_mark, window_open, combining, &still_lone)
                        {
                            self.set_no_steal();
                            budget.redeclare();
                        }
                        continue;
                    }
                }
            }
            held_off = false;
            // The lock is busy: mark our successor (if `premark` did not, or it changed).
            if may_mark {
                let was = marked;
                marked = keep_marked(marked, successor());
                if marked != was {
                    budget.redeclare();
                }
            }
            if may_mark && window_open {
                window_open = window_still_open(since, window);
            }
            if !s.reserved()
                && reserve_now(bound_passed, may_mark, window_open, combining, &still_lone)
            {
                self.set_no_steal();
                budget.redeclare();
                continue;
            }
            #[cfg(loom)]
            if !s.reserved() && may_mark && window_open {
                crate::sync::loom_probe::left_open_in_window();
            }
            #[cfg(loom)]
            if !s.reserved() && may_mark && !window_open && (!bound_passed || combining) {
                crate::sync::loom_probe::left_open_alone();
            }
            if busy_work {
                busy_work = while_busy();
            }
            // Back off while stealers may take the lock ahead of us (our looks would only slow
            // the holder down); look eagerly once the lock is owed to us.
            let spun = if !s.reserved() {
                // (`lone_open` holds the verdict `reserve_now` just took from `still_lone`,
                // which it asks whenever a head that may mark has no re-take window open.)
                if may_mark && !window_open && lone_open.get() {
                    // Alone, the lock left open: look seldom, since every look takes the
                    // line from the thread re-taking it (docs/DESIGN.md, "Decision record: a
                    // lone head's looks").
                    #[cfg(loom)]
                    crate::sync::loom_probe::lone_looks_spaced();
                    budget.spin_for(wait::LONE_LOOK_GAP_NS)
                } else {
                    budget.spin()
                }
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

/// Whether the head reserves the busy lock now (`LockWord::acquire_as_head`): past the steal
/// bound, unless it combines for others and is alone; or marking, its re-take window over, and
/// no longer alone. `still_lone` is asked last and only where it decides (it reads the clock and
/// closes the lone window for good).
#[inline]
fn reserve_now(
    bound_passed: bool,
    may_mark: bool,
    window_open: bool,
    combining: bool,
    still_lone: &impl Fn() -> bool,
) -> bool {
    (bound_passed && !(combining && still_lone())) || (may_mark && !window_open && !still_lone())
}

/// Whether a head that became head at `since` is still within its re-take window of `window`
/// ns (see `tunables::retake_window`).
#[inline]
fn window_still_open(since: u64, window: u64) -> bool {
    now_ns().saturating_sub(since) < window
}
