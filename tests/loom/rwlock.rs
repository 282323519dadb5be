//! loom models of the rwlock (`RawNumaRwLock`): the reader/writer handshake on the per-node
//! slots, revocation and draining (with readers that leave on another node's slot), inflation
//! while a compact holder holds, upgrades, and recursive readers vetoing a draining writer.
//!
//! Under loom spinning is skipped, so every wait parks (the futex emulation on loom's mutex and
//! condvar): the models also check that no wake-up is lost (a lost one is a deadlock, which
//! loom reports). The data is a loom `UnsafeCell`: loom fails a model in which a read and a
//! write of it are not ordered by the lock.
use crate::model;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::{RawCna, RawMcs, RawNumaRwLock};
use numa_locks::{loom_clock, loom_rwlock_probe, topology, tunables};

type Shared<M, const R: bool> = Arc<(RawNumaRwLock<M, R>, UnsafeCell<usize>)>;

fn new_shared<M: numa_locks::raw::WriterLock, const R: bool>(inflated: bool) -> Shared<M, R> {
    let shared = Arc::new((RawNumaRwLock::<M, R>::new(), UnsafeCell::new(0usize)));
    if inflated {
        // Two readers at once inflate the lock; the models then start from the inflated state.
        shared.0.lock_shared();
        shared.0.lock_shared();
        unsafe {
            shared.0.unlock_shared();
            shared.0.unlock_shared();
        }
        assert!(shared.0.has_reader_slots());
    }
    shared
}

fn read<M: numa_locks::raw::WriterLock, const R: bool>(shared: &Shared<M, R>) -> usize {
    shared.0.lock_shared();
    let value = shared.1.with(|v| unsafe { *v });
    unsafe { shared.0.unlock_shared() };
    value
}

fn write<M: numa_locks::raw::WriterLock, const R: bool>(shared: &Shared<M, R>) {
    shared.0.lock_exclusive();
    shared.1.with_mut(|v| unsafe { *v += 1 });
    unsafe { shared.0.unlock_exclusive() };
}

/// A reader on node 1 and a writer on node 0 race on an inflated lock: the slot increment and
/// the revocation cannot miss each other (the data cell checks it), and the writer's drain
/// wait cannot sleep through the reader's leaving.
#[test]
fn reader_writer_race_inflated() {
    tunables::reset_defaults();
    model(3, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        let s2 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            let v = read(&s2);
            assert!(v <= 1);
        });
        topology::set_thread_node(Some(0));
        write(&shared);
        reader.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
}

/// Two readers on two nodes and a writer: the writer revokes while readers are inside or
/// entering; one reader leaves on the other node's slot (it migrated), so the drain must
/// count the sum, not each slot.
#[test]
fn revocation_with_migrating_reader() {
    tunables::reset_defaults();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        let s2 = shared.clone();
        let s3 = shared.clone();
        let migrating = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            s2.0.lock_shared();
            let v = s2.1.with(|v| unsafe { *v });
            topology::set_thread_node(Some(0));
            unsafe { s2.0.unlock_shared() };
            assert!(v <= 1);
        });
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s3);
        });
        topology::set_thread_node(Some(1));
        assert!(read(&shared) <= 1);
        migrating.join().unwrap();
        writer.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
}

/// Inflation races with a compact holder: a compact writer holds, a reader arrives (and
/// inflates), the writer unlocks the inflated way; and a compact reader leaves while a writer
/// inflates.
#[test]
fn inflation_under_compact_holders() {
    tunables::reset_defaults();
    model(3, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(false);
        let s2 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            assert!(read(&s2) <= 1);
        });
        topology::set_thread_node(Some(0));
        write(&shared);
        reader.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
}

/// An upgradable reader upgrades while a reader is inside and a writer queues behind it on
/// the writer lock (CNA): the upgrade drains the reader, and the writer follows.
#[test]
fn upgrade_against_reader_and_writer() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawCna, false>(true);
        let s2 = shared.clone();
        let s3 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            assert!(read(&s2) <= 2);
        });
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            write(&s3);
        });
        topology::set_thread_node(Some(0));
        shared.0.lock_upgradable();
        let before = shared.1.with(|v| unsafe { *v });
        unsafe { shared.0.upgrade() };
        shared.1.with_mut(|v| unsafe { *v = before + 1 });
        unsafe { shared.0.downgrade() };
        assert!(shared.1.with(|v| unsafe { *v }) >= 1);
        unsafe { shared.0.unlock_shared() };
        reader.join().unwrap();
        writer.join().unwrap();
        assert_eq!(read(&shared), 2);
        assert!(!shared.0.is_locked());
    });
}

/// A recursive lock: a thread that reads reads again while a writer drains (it vetoes the
/// writer instead of waiting behind it, which would deadlock); the writer then gets in.
#[test]
fn recursive_reader_vetoes_draining_writer() {
    tunables::reset_defaults();
    model(3, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, true>(true);
        let s2 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            write(&s2);
        });
        topology::set_thread_node(Some(0));
        shared.0.lock_shared();
        let first = shared.1.with(|v| unsafe { *v });
        shared.0.lock_shared();
        let second = shared.1.with(|v| unsafe { *v });
        assert_eq!(first, second, "a writer got in between two nested reads");
        unsafe {
            shared.0.unlock_shared();
            shared.0.unlock_shared();
        }
        writer.join().unwrap();
        assert_eq!(read(&shared), 1);
    });
}

/// A writer whose wait times out (the clock jumps past every deadline) takes its revocation
/// back: the reader inside, and a reader arriving meanwhile, are not left blocked.
#[test]
fn timed_writer_leaves_no_trace() {
    tunables::reset_defaults();
    model(3, || {
        loom_clock::reset(1 << 40);
        let shared = new_shared::<RawMcs, false>(true);
        shared.0.lock_shared();
        let s2 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            if s2
                .0
                .try_lock_exclusive_for(std::time::Duration::from_millis(1))
            {
                s2.1.with_mut(|v| unsafe { *v += 1 });
                unsafe { s2.0.unlock_exclusive() };
            }
        });
        let s3 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            assert_eq!(read(&s3), 0);
        });
        reader.join().unwrap();
        unsafe { shared.0.unlock_shared() };
        writer.join().unwrap();
        assert!(!shared.0.is_locked());
    });
}

// ---- the biased read path (the visible-readers table) ---------------------------------------
//
// Under loom the table has 2 rows of 1 entry, handed out in turn: the main thread takes row 0
// when `new_shared` inflates the lock (a fresh inflated lock is biased), the next thread row 1,
// the one after that row 0 again, so that two threads share a row.

/// A biased reader (publishing in its row of the table) races with a writer that revokes the
/// bias: the CAS of the entry and the revocation cannot miss each other (the data cell checks
/// it), the writer counts the reader's entry and waits for it, and a reader that publishes
/// after the revocation backs off through the slots.
#[test]
fn biased_reader_and_revoking_writer() {
    tunables::reset_defaults();
    loom_rwlock_probe::take_biased_entries();
    loom_rwlock_probe::take_biased_backoffs();
    loom_rwlock_probe::take_table_units_seen();
    model(3, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        let s2 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            assert!(read(&s2) <= 1);
        });
        topology::set_thread_node(Some(0));
        write(&shared);
        reader.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_biased_entries() > 0,
        "no reader entered through the table"
    );
    assert!(
        loom_rwlock_probe::take_table_units_seen() > 0,
        "no writer waited for a table entry"
    );
    assert!(
        loom_rwlock_probe::take_biased_backoffs() > 0,
        "no reader backed off a revoked bias"
    );
}

/// A writer that revokes the bias and gives up (`try_lock_exclusive`: its drain ends at once)
/// while a biased reader is inside must hand the bias back: the reader's unit is still in the
/// table, and the next writer, finding the bias off, would count the slots alone and get in
/// beside it. The reader holds through both tries, so both must fail; after it leaves a try
/// gets in.
#[test]
fn failed_revocation_gives_the_bias_back() {
    tunables::reset_defaults();
    loom_rwlock_probe::take_biased_entries();
    loom_rwlock_probe::take_table_units_seen();
    model(3, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        topology::set_thread_node(Some(0));
        shared.0.lock_shared();
        let s2 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            for _ in 0..2 {
                assert!(
                    !s2.0.try_lock_exclusive(),
                    "a writer got in beside a biased reader"
                );
            }
        });
        assert_eq!(shared.1.with(|v| unsafe { *v }), 0);
        writer.join().unwrap();
        // SAFETY: taken above.
        unsafe { shared.0.unlock_shared() };
        assert!(shared.0.try_lock_exclusive());
        shared.1.with_mut(|v| unsafe { *v += 1 });
        unsafe { shared.0.unlock_exclusive() };
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_biased_entries() > 0,
        "no reader entered through the table"
    );
    assert!(
        loom_rwlock_probe::take_table_units_seen() > 0,
        "no writer counted a table entry"
    );
}

/// A read guard entered through the table on one thread and dropped on another: the entry
/// stays in the first thread's row, balanced by a slot decrement. The writer that revokes the
/// bias moves it to a slot (`normalize_table`); the writers after it, which do not count the
/// table, must still find the lock free (a unit left behind would be a deadlock, which loom
/// reports), while a reader races with the first of them.
#[test]
fn guard_dropped_on_another_thread_is_normalized() {
    tunables::reset_defaults();
    loom_rwlock_probe::take_normalized();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawCna, false>(true);
        let s2 = shared.clone();
        // Takes the read lock through its own row and hands the guard back.
        thread::spawn(move || {
            topology::set_thread_node(Some(1));
            s2.0.lock_shared();
        })
        .join()
        .unwrap();
        topology::set_thread_node(Some(0));
        // SAFETY: the read lock taken above, dropped here.
        unsafe { shared.0.unlock_shared() };
        let s3 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            write(&s3);
        });
        assert!(read(&shared) <= 1);
        writer.join().unwrap();
        write(&shared);
        write(&shared);
        assert_eq!(read(&shared), 3);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_normalized() > 0,
        "no writer moved an entry out of the table"
    );
}

/// Two readers share a row (loom's table has 2 rows): a reader's leaving may clear the entry
/// the other published, and the other then decrements a slot; a writer races with both. Only
/// the sum of entries and slots counts, so the writer neither misses a reader nor waits
/// forever.
#[test]
fn readers_sharing_a_row_with_a_writer() {
    tunables::reset_defaults();
    loom_rwlock_probe::take_biased_entries();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        let (s2, s3) = (shared.clone(), shared.clone());
        let own_row = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            assert!(read(&s2) <= 1);
        });
        let shared_row = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            assert!(read(&s3) <= 1);
        });
        topology::set_thread_node(Some(0));
        assert!(read(&shared) <= 1);
        write(&shared);
        own_row.join().unwrap();
        shared_row.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_biased_entries() > 0,
        "no reader entered through the table"
    );
}

// ---- writer handover (the revocation handed over with `M`; `set_rwlock_writer_handover`) ------

/// Two writers and a reader: a writer that unlocks with the other queued for `M` and no reader
/// asking leaves `WRITER` set and releases `M` alone; the next writer holds the lock without a
/// revocation of its own. The data cell checks that no reader got in between (nor with the
/// second writer), and loom's deadlock check that the reader is never left behind a revocation
/// nobody owns. A reader that finds `WRITER` asks (`READERS_WANT`) and the handover is not
/// made, or given back by the writer that takes `M`.
#[test]
fn writer_hands_revocation_to_writer() {
    tunables::reset_defaults();
    tunables::set_rwlock_writer_handover(true).unwrap();
    tunables::set_stealing(false).unwrap();
    loom_rwlock_probe::take_handed_over();
    loom_rwlock_probe::take_handover_taken();
    loom_rwlock_probe::take_readers_want();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawMcs, false>(true);
        let (s2, s3) = (shared.clone(), shared.clone());
        let first = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s2);
        });
        let second = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            write(&s3);
        });
        topology::set_thread_node(Some(1));
        assert!(read(&shared) <= 2);
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(read(&shared), 2);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_handed_over() > 0,
        "no writer handed the revocation over"
    );
    assert!(
        loom_rwlock_probe::take_handover_taken() > 0,
        "no writer took a handed-over revocation"
    );
    assert!(
        loom_rwlock_probe::take_readers_want() > 0,
        "no reader asked for the next window"
    );
}

/// A writer hands the revocation over to the upgradable reader queued behind it (CNA): the
/// upgradable reader clears `WRITER`, so the reader that waits gets in beside it (a revocation
/// left set would keep the reader out for good, which loom reports as a deadlock).
#[test]
fn upgradable_reader_gives_handed_over_revocation_back() {
    tunables::reset_defaults();
    tunables::set_rwlock_writer_handover(true).unwrap();
    tunables::set_stealing(false).unwrap();
    loom_rwlock_probe::take_handover_returned();
    model(2, || {
        loom_clock::reset(0);
        let shared = new_shared::<RawCna, false>(true);
        let (s2, s3) = (shared.clone(), shared.clone());
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s2);
        });
        let upgradable = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            s3.0.lock_upgradable();
            let v = s3.1.with(|v| unsafe { *v });
            unsafe { s3.0.unlock_upgradable() };
            assert!(v <= 1);
        });
        topology::set_thread_node(Some(1));
        assert!(read(&shared) <= 1);
        writer.join().unwrap();
        upgradable.join().unwrap();
        assert_eq!(read(&shared), 1);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_handover_returned() > 0,
        "no upgradable reader cleared a handed-over revocation"
    );
}

/// A writer with a deadline queues for `M` behind a writer and gives up there, leaving its
/// node in `M`'s queue. It marked the lock `TIMED_WRITERS`
/// first, so the writer ahead does not take that node for a writer who will come: it clears
/// `WRITER` itself, and the reader gets in (otherwise nobody would, a deadlock loom reports).
#[test]
fn timed_writer_in_queue_stops_handover() {
    tunables::reset_defaults();
    tunables::set_rwlock_writer_handover(true).unwrap();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        // 0.2 ms a clock reading: the 1 ms deadline lasts a few readings, so the timed writer
        // queues, then gives up. (Without `TIMED_WRITERS` this model deadlocks.)
        loom_clock::reset(200_000);
        let shared = new_shared::<RawMcs, false>(true);
        let (s2, s3) = (shared.clone(), shared.clone());
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s2);
        });
        let timed = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            if s3
                .0
                .try_lock_exclusive_for(std::time::Duration::from_millis(1))
            {
                s3.1.with_mut(|v| unsafe { *v += 1 });
                unsafe { s3.0.unlock_exclusive() };
            }
        });
        writer.join().unwrap();
        timed.join().unwrap();
        topology::set_thread_node(Some(1));
        assert!(read(&shared) >= 1);
        assert!(!shared.0.is_locked());
    });
}

// ---- write mode (the readers left revoked between writers; `set_rwlock_write_mode`) --------

/// An inflated lock after `writes` writes with no reader between them: the first revokes the
/// fresh lock's bias, the second records the slots' sum, and each one after finds it unchanged
/// (under loom one such writer puts the lock in write mode).
fn inflated_after_writes<M: numa_locks::raw::WriterLock>(writes: usize) -> Shared<M, false> {
    let shared = new_shared::<M, false>(true);
    for _ in 0..writes {
        write(&shared);
    }
    shared
}

/// Writes in a row with no reader between them put the lock in write mode (under loom one
/// quiet writer after the one that records the slots' sum is enough): `WRITER` stays set with `M` free. Then a reader and a writer race:
/// the writer may take the lock over at once, and the reader must take `M` to end write mode;
/// it never waits on `state` for a writer that is not there (loom reports that as a deadlock),
/// and the data cell checks that it never shares the lock with the writer.
#[test]
fn write_mode_is_entered_and_left_by_a_reader() {
    tunables::reset_defaults();
    tunables::set_rwlock_write_mode(true).unwrap();
    tunables::set_stealing(false).unwrap();
    loom_rwlock_probe::take_write_mode_entered();
    loom_rwlock_probe::take_write_mode_taken();
    loom_rwlock_probe::take_write_mode_left();
    model(2, || {
        loom_clock::reset(0);
        // The third write finds the slots' sum unchanged: write mode.
        let shared = inflated_after_writes::<RawMcs>(3);
        assert!(
            !shared.0.is_locked_exclusive(),
            "write mode with M free: no writer holds the lock"
        );
        assert!(!shared.0.is_locked());
        let s2 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s2);
        });
        topology::set_thread_node(Some(1));
        let seen = read(&shared);
        assert!(seen == 3 || seen == 4);
        writer.join().unwrap();
        assert_eq!(read(&shared), 4);
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_write_mode_entered() > 0,
        "no writer's unlock entered write mode"
    );
    assert!(
        loom_rwlock_probe::take_write_mode_taken() > 0,
        "no writer took the lock over in write mode"
    );
    assert!(
        loom_rwlock_probe::take_write_mode_left() > 0,
        "no reader ended write mode"
    );
}

/// A quiet writer (CNA) unlocks while a reader arrives: the reader's registration or its sleep
/// on `state` makes the writer's CAS into write mode fail (it then clears `WRITER` and wakes
/// the reader), or the reader finds write mode and takes `M`. Either way the reader gets in
/// (a reader asleep on a revocation that nobody will clear is a deadlock loom reports), and a
/// `try_lock_shared` on a lock in write mode takes the free `M` to end it.
#[test]
fn write_mode_entry_races_a_reader() {
    tunables::reset_defaults();
    tunables::set_rwlock_write_mode(true).unwrap();
    tunables::set_stealing(false).unwrap();
    loom_rwlock_probe::take_write_mode_entered();
    loom_rwlock_probe::take_write_mode_left();
    model(2, || {
        loom_clock::reset(0);
        // The next writer with no reader before it is quiet.
        let shared = inflated_after_writes::<RawCna>(2);
        let s2 = shared.clone();
        let writer = thread::spawn(move || {
            topology::set_thread_node(Some(0));
            write(&s2);
        });
        topology::set_thread_node(Some(1));
        let seen = read(&shared);
        assert!(seen == 2 || seen == 3);
        writer.join().unwrap();
        // Whatever mode the lock is in now, a try finds it free.
        assert!(shared.0.try_lock_shared());
        unsafe { shared.0.unlock_shared() };
        assert!(!shared.0.is_locked());
    });
    assert!(
        loom_rwlock_probe::take_write_mode_entered() > 0,
        "no writer's unlock entered write mode"
    );
    assert!(
        loom_rwlock_probe::take_write_mode_left() > 0,
        "no reader ended write mode"
    );
}

/// A writer that took the lock over in write mode downgrades while a reader comes: the
/// downgrade ends write mode (the reader gets in beside it), and the writer's next write,
/// whose unlock finds the note its takeover left, does not enter write mode again without a
/// new streak (readers came between): one entry per execution, the setup's.
#[test]
fn write_mode_downgrade_ends_it() {
    static EXECUTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    tunables::reset_defaults();
    tunables::set_rwlock_write_mode(true).unwrap();
    tunables::set_stealing(false).unwrap();
    loom_rwlock_probe::take_write_mode_entered();
    model(2, || {
        EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        loom_clock::reset(0);
        let shared = inflated_after_writes::<RawMcs>(3);
        let s2 = shared.clone();
        let reader = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            let v = read(&s2);
            assert!(v == 3 || v == 4);
        });
        topology::set_thread_node(Some(0));
        shared.0.lock_exclusive();
        shared.1.with_mut(|v| unsafe { *v += 1 });
        unsafe { shared.0.downgrade() };
        assert_eq!(shared.1.with(|v| unsafe { *v }), 4);
        unsafe { shared.0.unlock_shared() };
        reader.join().unwrap();
        write(&shared);
        assert_eq!(read(&shared), 5);
        assert!(!shared.0.is_locked());
    });
    assert_eq!(
        loom_rwlock_probe::take_write_mode_entered(),
        EXECUTIONS.load(std::sync::atomic::Ordering::Relaxed),
        "write mode entered again without a streak"
    );
}
