//! The visible-readers table of the rwlocks' biased read path (BRAVO: Dice and Kogan, "BRAVO —
//! Biased Locking for Reader-Writer Locks", USENIX ATC 2019), written for this crate.
//!
//! One process-wide table, whatever the number of locks: [`ROWS`] rows of [`ENTRIES`] words, a
//! row per thread (a thread's row is its own while it lives, so a biased reader writes a line
//! that no other running reader writes). A reader of lock `L` publishes itself by a CAS of the
//! entry in `L`'s column of its row from 0 to `L`'s key; a writer that revokes the bias counts
//! the entries holding its key in that column of every row handed out so far. A key is the
//! lock's block address with its column, drawn when the block is made ([`new_column`]), in the
//! low bits the block's alignment leaves free.
//!
//! An entry is a *unit* of the lock's reader count, as a slot increment is: a reader that leaves
//! clears its row's entry if it holds the lock's key, and otherwise decrements a reader slot.
//! Which reader's unit it removes does not matter (a guard may be dropped on another thread, and
//! a row may change hands when a thread exits): only the total, entries plus the slots' wrapping
//! sum, counts the readers inside (see the rwlock's module docs).
//!
//! Rows: on real threads a thread takes the lowest free row on its first biased read and gives
//! it back when it exits (a thread-local's destructor); a thread without one (more than [`ROWS`]
//! alive, or during thread-local destruction) reads through the slots. In the simulator a
//! thread's row is its hardware thread; under loom rows are handed out in turn and shared
//! (two rows of one entry), so that the models exercise leaving through a row another reader
//! published in.

use crate::sync::{AtomicU64, Ordering};

/// Rows: threads that can read through the table at once (128 KiB in all on real threads).
#[cfg(not(loom))]
pub(crate) const ROWS: usize = 1024;
#[cfg(loom)]
pub(crate) const ROWS: usize = 2;

/// Entries per row: a thread holds read locks on this many locks at once through the table
/// (more, or a collision of two locks' indices, read through the slots). 16 words: two lines.
#[cfg(not(loom))]
const ENTRIES: usize = 16;
#[cfg(loom)]
const ENTRIES: usize = 1;

/// One thread's row, alone on its (spatially prefetched) pair of lines.
#[repr(align(128))]
struct Row([AtomicU64; ENTRIES]);

#[cfg(not(loom))]
static TABLE: [Row; ROWS] = [const { Row([const { AtomicU64::new(0) }; ENTRIES]) }; ROWS];

#[cfg(loom)]
loom::lazy_static! {
    static ref TABLE: Vec<Row> = (0..ROWS)
        .map(|_| Row(core::array::from_fn(|_| AtomicU64::new(0))))
        .collect();
    /// Rows handed out so far in this execution.
    static ref NEXT_ROW: AtomicU64 = AtomicU64::new(0);
}

#[cfg(loom)]
crate::sync::thread_local! {
    static LOOM_ROW: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// The column of `key` in every row: the low bits of the key (see [`new_column`]).
#[inline(always)]
fn column(key: u64) -> usize {
    (key as usize) & (ENTRIES - 1)
}

/// The key of the block at `addr` (aligned to at least [`ENTRIES`] bytes: a `CachePadded`
/// line) whose column is `column`.
#[inline(always)]
pub(crate) fn key(addr: usize, column: usize) -> u64 {
    debug_assert!(addr.is_multiple_of(ENTRIES) && column < ENTRIES);
    (addr | column) as u64
}

/// A column for a lock's new block, drawn from a per-thread xorshift (the key is the block's
/// address, 128-byte aligned, plus this column). Not a hash of the address: ASLR moves the heap
/// by whole pages between runs, and the simulator's runs must repeat exactly, so under
/// `numa_sim` the draw is seeded by the simulation's seed and the simulated thread.
pub(crate) fn new_column() -> usize {
    if ENTRIES == 1 {
        return 0;
    }
    crate::sync::thread_local! {
        static SEED: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    }
    SEED.try_with(|seed| (crate::sync::xorshift_next(seed) >> 24) as usize & (ENTRIES - 1))
        .unwrap_or(0)
}

#[cfg(not(any(loom, numa_sim)))]
mod rows {
    //! Real threads: the lowest free row, given back at thread exit.
    use super::ROWS;
    use core::cell::Cell;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Bit `i % 64` of word `i / 64`: row `i` belongs to a live thread.
    static TAKEN: [AtomicU64; ROWS / 64] = [const { AtomicU64::new(0) }; ROWS / 64];
    /// One more than the highest row ever handed out: writers count rows `0..HIGH`.
    static HIGH: AtomicU32 = AtomicU32::new(0);

    const NONE: usize = usize::MAX;
    /// No row free: do not look again (the thread reads through the slots).
    const FULL: usize = usize::MAX - 1;

    struct MyRow(Cell<usize>);

    impl Drop for MyRow {
        fn drop(&mut self) {
            let row = self.0.get();
            if row < ROWS {
                // Release: this thread's entry CASes happen before the next owner's.
                TAKEN[row / 64].fetch_and(!(1 << (row % 64)), Ordering::Release);
            }
        }
    }

    std::thread_local! {
        static MY_ROW: MyRow = const { MyRow(Cell::new(NONE)) };
    }

    /// The calling thread's row, taking one on first use; `None` without one.
    #[inline(always)]
    pub(super) fn mine() -> Option<usize> {
        let row = MY_ROW.try_with(|mine| mine.0.get()).unwrap_or(FULL);
        if row < ROWS {
            return Some(row);
        }
        if row == FULL { None } else { take() }
    }

    #[cold]
    fn take() -> Option<usize> {
        let row = (0..ROWS / 64).find_map(|word| {
            // Acquire: the previous owner's entry CASes happen before ours.
            let mut bits = TAKEN[word].load(Ordering::Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros() as usize;
                match TAKEN[word].compare_exchange_weak(
                    bits,
                    bits | 1 << bit,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(word * 64 + bit),
                    Err(now) => bits = now,
                }
            }
            None
        });
        // SeqCst: before this thread's first entry CAS (SeqCst) in the total order, so a writer
        // whose count loads `HIGH` after seeing that entry's lock biased counts this row.
        if let Some(row) = row {
            HIGH.fetch_max(row as u32 + 1, Ordering::SeqCst);
        }
        let got = MY_ROW.try_with(|mine| mine.0.set(row.unwrap_or(FULL)));
        if got.is_err()
            && let Some(row) = row
        {
            // Thread-locals are being destroyed: nowhere to keep the row; give it back.
            TAKEN[row / 64].fetch_and(!(1 << (row % 64)), Ordering::Release);
            return None;
        }
        row
    }

    /// Rows a writer counts.
    #[inline]
    pub(super) fn high() -> usize {
        // SeqCst: see `take`.
        HIGH.load(Ordering::SeqCst) as usize
    }
}

#[cfg(numa_sim)]
mod rows {
    //! The simulator: a thread's row is its hardware thread (threads are pinned).
    use super::ROWS;

    #[inline(always)]
    pub(super) fn mine() -> Option<usize> {
        numa_sim::current_hw_thread().map(|hw| hw % ROWS)
    }

    #[inline]
    pub(super) fn high() -> usize {
        numa_sim::cpu_count().unwrap_or(ROWS).min(ROWS)
    }
}

#[cfg(loom)]
mod rows {
    //! Loom: rows handed out in turn, shared once there are more threads than rows.
    use super::{LOOM_ROW, NEXT_ROW, ROWS};
    use crate::sync::Ordering;

    pub(super) fn mine() -> Option<usize> {
        LOOM_ROW
            .try_with(|row| {
                if row.get() == usize::MAX {
                    // SeqCst: as on real threads (`HIGH`).
                    row.set(NEXT_ROW.fetch_add(1, Ordering::SeqCst) as usize % ROWS);
                }
                row.get()
            })
            .ok()
    }

    pub(super) fn high() -> usize {
        // SeqCst: as on real threads.
        (NEXT_ROW.load(Ordering::SeqCst) as usize).min(ROWS)
    }
}

/// The calling thread's entry for `key`, if it has a row.
#[inline(always)]
fn my_entry(key: u64) -> Option<&'static AtomicU64> {
    let row = rows::mine()?;
    Some(&TABLE[row].0[column(key)])
}

/// Publishes the calling thread as a reader of `key`: `true` if its entry was free and now
/// holds `key` (one unit of the lock's reader count).
#[inline(always)]
pub(crate) fn publish(key: u64) -> bool {
    let Some(entry) = my_entry(key) else {
        return false;
    };
    // Look first: a busy entry (another lock, or a reader preempted inside) costs no RMW.
    // Relaxed: the CAS decides.
    if entry.load(Ordering::Relaxed) != 0 {
        return false;
    }
    // SeqCst: the reader's side of the handshake, as a slot increment (see the rwlock's module
    // docs): this CAS and the reader's following load of the lock's state cannot both miss a
    // writer's revocation and its count.
    entry
        .compare_exchange(0, key, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok()
}

/// Removes one unit of `key`'s reader count from the calling thread's row: `true` if its entry
/// held `key` (then cleared), `false` if the caller must decrement a slot instead.
#[inline(always)]
pub(crate) fn retract(key: u64) -> bool {
    let Some(entry) = my_entry(key) else {
        return false;
    };
    // Relaxed: a look; the CAS decides.
    if entry.load(Ordering::Relaxed) != key {
        return false;
    }
    // SeqCst: the leaving side of the handshake, as a slot decrement; also a Release that pairs
    // with the writer's count loads (our reads happen before its writes). A CAS, not a store:
    // another thread may share the row (it retracts `key` too, or publishes meanwhile).
    entry
        .compare_exchange(key, 0, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok()
}

/// The entries holding `key` (units of its reader count), over every row handed out.
pub(crate) fn count(key: u64) -> u32 {
    let column = column(key);
    let mut units = 0u32;
    for row in TABLE.iter().take(rows::high()) {
        // SeqCst: the writer's side of the handshake; also an Acquire that pairs with the
        // leaving readers' Release CAS.
        if row.0[column].load(Ordering::SeqCst) == key {
            units += 1;
        }
    }
    units
}

/// Clears every entry still holding `key`: the units of read guards that were forgotten, at
/// the lock's drop, so that a lock made later at the same address starts with none.
pub(crate) fn clear(key: u64) {
    let column = column(key);
    for row in TABLE.iter().take(rows::high()) {
        // Relaxed: the lock is being dropped (`&mut`): no reader of it is left to race with.
        let _ = row.0[column].compare_exchange(key, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Clears every entry holding `key` and returns how many it cleared: the units a writer moves
/// to a slot once the lock drained (see the rwlock's `normalize_table`).
pub(crate) fn take_all(key: u64) -> u32 {
    let column = column(key);
    let mut taken = 0u32;
    for row in TABLE.iter().take(rows::high()) {
        // SeqCst: as the count's loads; a CAS, as a retracting or publishing reader may race.
        if row.0[column]
            .compare_exchange(key, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            taken += 1;
        }
    }
    taken
}

#[cfg(loom)]
pub mod probe {
    //! Counts of the biased read path's protocol steps across the executions of loom models,
    //! so that the models in tests/loom/rwlock.rs check they reach them (loom only).
    use crate::sync::loom_probe::probe;

    probe!(
        /// A reader entered through the table.
        BIASED_ENTRIES,
        biased_entry,
        take_biased_entries
    );
    probe!(
        /// A reader published in the table, then found the bias revoked and backed off.
        BIASED_BACKOFFS,
        biased_backoff,
        take_biased_backoffs
    );
    probe!(
        /// A writer that revoked the bias counted a reader's entry in the table.
        TABLE_UNITS_SEEN,
        table_units_seen,
        take_table_units_seen
    );
    probe!(
        /// A writer moved entries left in the table into a slot (`normalize_table`).
        NORMALIZED,
        normalized,
        take_normalized
    );
    probe!(
        /// A writer released `M` alone, leaving `WRITER` set for the next holder of `M`.
        HANDED_OVER,
        handed_over,
        take_handed_over
    );
    probe!(
        /// A writer took `M` with `WRITER` set and held the lock without a revocation.
        HANDOVER_TAKEN,
        handover_taken,
        take_handover_taken
    );
    probe!(
        /// A holder of `M` found `WRITER` handed over and cleared it (an upgradable reader, or a
        /// writer with readers registered as waiting).
        HANDOVER_RETURNED,
        handover_returned,
        take_handover_returned
    );
    probe!(
        /// A writer's unlock put the lock in write mode.
        WRITE_MODE_ENTERED,
        write_mode_entered,
        take_write_mode_entered
    );
    probe!(
        /// A writer took `M` in write mode and held the lock without a revocation.
        WRITE_MODE_TAKEN,
        write_mode_taken,
        take_write_mode_taken
    );
    probe!(
        /// A reader (or upgradable reader) holding `M` cleared write mode.
        WRITE_MODE_LEFT,
        write_mode_left,
        take_write_mode_left
    );
    probe!(
        /// A reader found `WRITER` and set `READERS_WANT`.
        READERS_WANT,
        readers_want,
        take_readers_want
    );
    probe!(
        /// A reader set the bias again after the inhibition.
        REBIASED,
        rebiased,
        take_rebiased
    );
}

/// Notes a probe under loom; nothing elsewhere.
macro_rules! note_probe {
    ($note:ident) => {
        #[cfg(loom)]
        table::probe::$note();
    };
}
pub(crate) use note_probe;
