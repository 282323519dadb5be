//! `RawNumaRwLock`'s operations: the compact (one-word) lock and its inflation, and the
//! entry points that dispatch to the inflated protocol (`inflated`).

use super::*;

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
    pub(super) fn load_word(&self) -> *mut Inflated<M> {
        self.word.load(Ordering::Acquire)
    }

    /// One compact transition `from → to`, with the caller's ordering on success (Acquire for
    /// the acquiring transitions, Release for the releasing ones). `Err` carries the word
    /// found instead.
    #[inline(always)]
    pub(super) fn compact_cas(
        &self,
        from: usize,
        to: usize,
        success: Ordering,
    ) -> Result<(), *mut Inflated<M>> {
        self.look_then_cas(from, to, success, false)
    }

    /// A look at the word, then, if it is `from`, a CAS to `to` (weak or strong as the caller
    /// says): [`compact_cas`](Self::compact_cas) and [`fast_cas`](Self::fast_cas).
    #[inline(always)]
    fn look_then_cas(
        &self,
        from: usize,
        to: usize,
        success: Ordering,
        weak: bool,
    ) -> Result<(), *mut Inflated<M>> {
        // Look before the CAS: once the lock is inflated the word never changes again, and
        // every node keeps a shared copy of its line; a CAS, even a failing one, would take
        // the line exclusive at every acquisition and release, which serialized the readers
        // of an inflated lock in the simulator (8 readers on 4 sockets ran no faster than 1).
        // Acquire (the load, as `load_word`, and the CAS on failure): the value returned may be
        // the block's pointer, which the caller follows (pairs with the Release of `inflate`'s
        // CAS; on x86 a plain load).
        let now = self.load_word();
        if now.addr() != from {
            return Err(now);
        }
        let new = compact(to);
        let result = if weak {
            self.word
                .compare_exchange_weak(now, new, success, Ordering::Acquire)
        } else {
            self.word
                .compare_exchange(now, new, success, Ordering::Acquire)
        };
        result.map(|_| ())
    }

    /// The block behind an inflated `word`.
    #[inline(always)]
    pub(super) fn block(&self, word: *mut Inflated<M>) -> &Inflated<M> {
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

    /// How many times in a row writers revoked the readers' bias before it had lived
    /// `REBIAS_INHIBIT` times what revoking it took, so that the bias now stays off longer
    /// (0 to 7 doublings); `None` while the lock is compact. For tests and diagnostics.
    #[doc(hidden)]
    pub fn bias_inhibition_doublings(&self) -> Option<u32> {
        let word = self.load_word();
        (!is_compact(word)).then(|| {
            // Relaxed: a diagnostic; the holder of `M` writes it.
            self.block(word)
                .drain
                .inhibit_backoff
                .load(Ordering::Relaxed)
        })
    }

    /// Moves the lock from the compact state `seen` (or whatever it is by then) to an inflated
    /// block holding the same state, and returns the block. See the module docs.
    #[cold]
    #[inline(never)]
    pub(super) fn inflate(&self, mut seen: *mut Inflated<M>) -> &Inflated<M> {
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
            block.slots[0].store(u64::from(state & C_READER != 0), Ordering::Relaxed);
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
        if let Err(word) = self.fast_cas(FREE, FREE | C_READER, Ordering::Acquire) {
            self.lock_shared_slow(word, None);
        }
    }

    /// The uncontended transition `from → to` in one look and one weak CAS, nothing else on
    /// the path (the callers' slow paths are out of line, so that this one needs no stack
    /// frame). Acquire or Release on success as the caller says. `Err` carries the word it
    /// looked at, and the slow path starts from it instead of loading the word again (an
    /// inflated lock's writer goes straight to its block; one access less on the way from a
    /// release back to `M`, which a queued writer races: docs/DESIGN.md, "Write mode").
    #[inline(always)]
    pub(super) fn fast_cas(
        &self,
        from: usize,
        to: usize,
        success: Ordering,
    ) -> Result<(), *mut Inflated<M>> {
        self.look_then_cas(from, to, success, true)
    }

    /// The slow path of `lock_shared` and of its timed tries, from the `word` a fast path
    /// found.
    #[cold]
    #[inline(never)]
    pub(super) fn lock_shared_slow(
        &self,
        mut word: *mut Inflated<M>,
        deadline: Option<u64>,
    ) -> bool {
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
                return self.block(word).try_lock_shared(RECURSIVE);
            }
            match word.addr() {
                FREE => match self.compact_cas(FREE, FREE | C_READER, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                },
                state if state & C_WRITER != 0 => return false,
                // A reader or an upgradable reader: sharing is possible, in the inflated lock.
                _ => return self.inflate(word).try_lock_shared(RECURSIVE),
            }
        }
    }

    /// [`try_lock_shared`](Self::try_lock_shared), waiting at most `timeout`.
    pub fn try_lock_shared_for(&self, timeout: Duration) -> bool {
        self.try_lock_shared()
            || self.lock_shared_slow(self.load_word(), Some(deadline_after(timeout)))
    }

    /// Releases a shared lock.
    ///
    /// # Safety
    /// A shared lock must be held (by this thread, or by a guard it was given).
    #[inline]
    pub unsafe fn unlock_shared(&self) {
        // Release: the reader's accesses happen before the next writer's acquisition.
        if let Err(word) = self.fast_cas(FREE | C_READER, FREE, Ordering::Release) {
            self.unlock_shared_slow(word);
        }
    }

    /// The slow path of `unlock_shared`, from the `word` its fast path found.
    #[cold]
    #[inline(never)]
    pub(super) fn unlock_shared_slow(&self, mut word: *mut Inflated<M>) {
        if is_compact(word) {
            // Release: as in `unlock_shared` (its weak CAS may have failed spuriously).
            match self.compact_cas(FREE | C_READER, FREE, Ordering::Release) {
                Ok(()) => return,
                Err(now) => word = now,
            }
        }
        self.block(word).leave_reader();
    }

    // ---- exclusive ----------------------------------------------------------------------

    /// Acquires an exclusive lock, waiting as long as needed.
    #[inline]
    pub fn lock_exclusive(&self) {
        // Acquire: pairs with the Release of the previous compact unlock.
        if let Err(word) = self.fast_cas(FREE, FREE | C_WRITER, Ordering::Acquire) {
            self.lock_exclusive_slow(word, None);
        }
    }

    /// The slow path of `lock_exclusive` and of its timed tries, from the `word` a fast path
    /// or a compact CAS found.
    #[cold]
    #[inline(never)]
    pub(super) fn lock_exclusive_slow(
        &self,
        mut word: *mut Inflated<M>,
        deadline: Option<u64>,
    ) -> bool {
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
        match self.compact_cas(FREE, FREE | C_WRITER, Ordering::Acquire) {
            Ok(()) => true,
            Err(word) => self.lock_exclusive_slow(word, Some(deadline_after(timeout))),
        }
    }

    /// Releases an exclusive lock.
    ///
    /// # Safety
    /// An exclusive lock must be held.
    #[inline]
    pub unsafe fn unlock_exclusive(&self) {
        // Release: the critical section happens before the next acquisition.
        if let Err(word) = self.fast_cas(FREE | C_WRITER, FREE, Ordering::Release) {
            // SAFETY: the caller's.
            unsafe { self.unlock_exclusive_slow(word) };
        }
    }

    /// The slow path of `unlock_exclusive`, from the `word` its fast path found.
    ///
    /// # Safety
    /// As for `unlock_exclusive`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn unlock_exclusive_slow(&self, mut word: *mut Inflated<M>) {
        if is_compact(word) {
            // Release: as in `unlock_exclusive` (its weak CAS may have failed spuriously).
            match self.compact_cas(FREE | C_WRITER, FREE, Ordering::Release) {
                Ok(()) => return,
                Err(now) => word = now,
            }
        }
        // SAFETY: the caller holds the exclusive lock, hence `M` (inherited or taken).
        unsafe { self.block(word).unlock_exclusive_or_hand_over() };
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
    pub(super) fn lock_upgradable_slow(&self, deadline: Option<u64>) -> bool {
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
                return self.block(word).try_lock_upgradable();
            }
            match word.addr() {
                FREE => match self.compact_cas(FREE, FREE | C_UPGRADABLE, Ordering::Acquire) {
                    Ok(()) => return true,
                    Err(now) => word = now,
                },
                state if state & (C_WRITER | C_UPGRADABLE) != 0 => return false,
                // One reader: sharing is possible, in the inflated lock.
                _ => return self.inflate(word).try_lock_upgradable(),
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
        let block = self.block(word);
        // Relaxed: a snapshot. In write mode no writer is inside unless one holds `M`.
        let state = block.state.word.load(Ordering::Relaxed);
        state & WRITER != 0 && (state & WRITE_MODE == 0 || block.writers.writers_locked())
    }
}
