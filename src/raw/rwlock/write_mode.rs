//! Write mode (docs/DESIGN.md, "Write mode"): a lock whose writers met no reader for a while
//! keeps the readers revoked between writers; the first reader to come takes `M` to end it.

use super::*;

impl<M: WriterLock> Inflated<M> {
    /// A reader that found the lock in write mode: takes `M` (queueing as writers do, by
    /// `deadline` if there is one), clears the revocation the last writer left, and lets `M` go.
    /// `false` at `deadline`.
    #[cold]
    pub(super) fn leave_write_mode(&self, deadline: Option<u64>) -> bool {
        if !self.lock_writers(deadline) {
            return false;
        }
        self.clear_write_mode_holding_writers();
        true
    }

    /// [`leave_write_mode`](Self::leave_write_mode) with the caller holding `M`; releases it.
    fn clear_write_mode_holding_writers(&self) {
        self.give_back_revocation();
        // SAFETY: taken by our caller.
        unsafe { self.writers.unlock_writers() };
    }

    /// `try_lock_shared` in the inflated lock: enters if no writer revoked; in write mode,
    /// takes a free `M` to leave it first.
    pub(super) fn try_lock_shared(&self, recursive: bool) -> bool {
        if self.try_enter_reader(recursive) {
            return true;
        }
        // Relaxed: a hint; `M` orders what follows.
        if self.state.word.load(Ordering::Relaxed) & WRITE_MODE != 0
            && self.writers.try_lock_writers()
        {
            self.clear_write_mode_holding_writers();
            return self.try_enter_reader(recursive);
        }
        false
    }

    /// Whether the unlocking writer leaves the lock in write mode ([`WRITE_MODE`]): it is in
    /// it already, or the last [`WRITE_MODE_AFTER`] writers found no reader and none waits,
    /// asks or sleeps now (then it sets `WRITE_MODE`, with one CAS that fails if a reader
    /// registered, asked or parked meanwhile).
    #[inline]
    pub(super) fn stays_in_write_mode(&self) -> bool {
        if self.recursive || !crate::tunables::rwlock_write_mode() || !self.take_write_mode_note() {
            return false;
        }
        // Relaxed: only holders of `M` set `WRITE_MODE`, and readers never clear it without
        // `M`; the readers' flags are re-checked by the CAS.
        let state = self.state.word.load(Ordering::Relaxed);
        if state & WRITE_MODE != 0 {
            return true;
        }
        // A note left over (its lock left write mode by a downgrade, or its guard was unlocked
        // on another thread) does not enter without the streak. Relaxed: the holder of `M`'s
        // own.
        if state >= WAITING_ONE
            || state & (READERS_WANT | READERS_PARKED | HELD | VETO) != 0
            || state & WRITER == 0
            || self.drain.quiet.load(Ordering::Relaxed) < WRITE_MODE_AFTER
        {
            return false;
        }
        // Relaxed: nothing is published through the bit itself; a reader that sees it takes
        // `M`, whose Acquire orders our critical section before its entry.
        let entered = self
            .state
            .word
            .compare_exchange(
                state,
                state | WRITE_MODE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok();
        if entered {
            note_probe!(write_mode_entered);
        }
        entered
    }

    /// A sampled writer that found no reader inside: its slots' `sum` (see [`SLOT_LEAVE`])
    /// equal to the one recorded means no reader entered through the slots since, and the
    /// streak grows; once it is [`WRITE_MODE_AFTER`] long, this writer's unlock enters write
    /// mode. A different sum is recorded, and the streak starts again.
    pub(super) fn count_quiet(&self, sum: u64) {
        // Relaxed (both): the holder of `M`'s own; `M` orders them. Written only when they
        // change, on the drain line, which this writer has just read.
        let count = self.drain.quiet.load(Ordering::Relaxed);
        if self.drain.slots_seen.load(Ordering::Relaxed) == sum {
            let next = (count + 1).min(WRITE_MODE_AFTER);
            if next != count {
                self.drain.quiet.store(next, Ordering::Relaxed);
            }
            if next >= WRITE_MODE_AFTER {
                self.note_write_mode();
            }
        } else {
            self.drain.slots_seen.store(sum, Ordering::Relaxed);
            if count != 0 {
                self.drain.quiet.store(0, Ordering::Relaxed);
            }
        }
    }

    /// The holder of `M`, meeting readers: the streak towards write mode starts again.
    pub(super) fn end_quiet_streak(&self) {
        // Relaxed: the holder of `M`'s own; written only when it changes.
        if self.drain.quiet.load(Ordering::Relaxed) != 0 {
            self.drain.quiet.store(0, Ordering::Relaxed);
        }
    }

    /// Tells this thread's unlock of this lock to keep or enter write mode.
    pub(super) fn note_write_mode(&self) {
        let me = ptr::from_ref(self).addr();
        let _ = WRITE_MODE_NOTE.try_with(|note| note.set(me));
    }

    /// Whether this thread noted write mode for this lock (and forgets it). A note left over (a
    /// guard unlocked on another thread, a downgrade) only makes a later unlock look: the
    /// streak and the CAS in `stays_in_write_mode` decide.
    pub(super) fn take_write_mode_note(&self) -> bool {
        let me = ptr::from_ref(self).addr();
        WRITE_MODE_NOTE
            .try_with(|note| {
                let noted = note.get() == me;
                if noted {
                    note.set(0);
                }
                noted
            })
            .unwrap_or(false)
    }
}
