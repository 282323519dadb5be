//! The rwlock contract, instantiated for every rwlock of the crate: `RawMcsRwLock`,
//! `RawCnaRwLock`, `RawHqRwLock` and their recursive variants.
//!
//! As in `tests/conformance.rs`: each test is a generic function over the raw lock, time is
//! asserted only as a generous bound that catches hangs, and nothing depends on how threads are
//! scheduled. Threads run on virtual NUMA nodes (`set_thread_node`), so the per-node reader
//! slots take part, and guards are sent between threads, so readers leave on other slots than
//! they entered. Miri (see `.ci/run`) runs the same contract with fewer threads ([`scaled`]).
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{
    GuardSend, RawRwLockFair, RawRwLockTimed, RawRwLockUpgradeDowngrade, RawRwLockUpgradeFair,
    RawRwLockUpgradeTimed, RwLock, RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard,
};
use numa_locks::topology;

/// An upper bound for tests that must not hang; far above their normal run time.
const HANG_BOUND: Duration = Duration::from_secs(120);

/// `native` normally, `miri` under Miri (each lock operation costs about a millisecond there).
const fn scaled(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

fn assert_no_hang(start: Instant, what: &str) {
    if !cfg!(miri) {
        assert!(
            start.elapsed() < HANG_BOUND,
            "{what} took {:?}",
            start.elapsed()
        );
    }
}

/// Everything the tests need from a raw rwlock.
pub trait Raw:
    RawRwLockFair
    + RawRwLockTimed<Duration = Duration, Instant = Instant>
    + RawRwLockUpgradeDowngrade
    + RawRwLockUpgradeFair
    + RawRwLockUpgradeTimed
    + lock_api::RawRwLock<SharedGuard = GuardSend, ExclusiveGuard = GuardSend>
    + lock_api::RawRwLockUpgrade<UpgradableGuard = GuardSend>
    + Send
    + Sync
    + 'static
{
    /// Whether reads may overtake a waiting writer (parking_lot's `RecursiveRwLock`).
    const RECURSIVE: bool;
}

impl<M: numa_locks::raw::WriterLock + 'static, const RECURSIVE: bool> Raw
    for numa_locks::raw::RawNumaRwLock<M, RECURSIVE>
{
    const RECURSIVE: bool = RECURSIVE;
}

/// Data whose words a writer changes one by one: a reader that overlapped a writer would see
/// them differ. `writers` and `readers` count who is inside, to check exclusion directly.
struct Table {
    words: UnsafeCell<[u64; 8]>,
    writers: AtomicUsize,
    readers: AtomicUsize,
}
// SAFETY: `words` is accessed only under the lock under test (what the tests check).
unsafe impl Sync for Table {}

impl Table {
    fn new() -> Self {
        Table {
            words: UnsafeCell::new([0; 8]),
            writers: AtomicUsize::new(0),
            readers: AtomicUsize::new(0),
        }
    }

    /// Under a shared lock: all words equal, no writer inside.
    fn read_checked(&self) -> u64 {
        self.readers.fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            self.writers.load(Ordering::SeqCst),
            0,
            "a writer inside with a reader"
        );
        // SAFETY: the caller holds a shared lock: no writer changes `words`.
        let words = unsafe { *self.words.get() };
        assert!(
            words.iter().all(|&w| w == words[0]),
            "half-done write seen: {words:?}"
        );
        self.readers.fetch_sub(1, Ordering::SeqCst);
        words[0]
    }

    /// Under an exclusive lock: nobody else inside; every word + 1, one at a time.
    fn write_checked(&self) {
        assert_eq!(
            self.writers.fetch_add(1, Ordering::SeqCst),
            0,
            "two writers inside"
        );
        assert_eq!(
            self.readers.load(Ordering::SeqCst),
            0,
            "a reader inside with a writer"
        );
        for i in 0..8 {
            // SAFETY: the caller holds the exclusive lock.
            unsafe {
                let words = self.words.get();
                (*words)[i] += 1;
            }
            std::hint::spin_loop();
        }
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }

    fn value(&self) -> u64 {
        // SAFETY: called after all threads joined.
        unsafe { (*self.words.get())[0] }
    }
}

/// Readers never see a half-done write, writers exclude everyone, and no update is lost:
/// `threads` threads on 4 virtual nodes mix reads, writes, upgradable reads with upgrades, and
/// downgrades.
pub fn readers_and_writers<R: Raw>(threads: usize, iters: usize) {
    let lock = Arc::new(RwLock::<R, ()>::new(()));
    let table = Arc::new(Table::new());
    let writes = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, table, writes) = (lock.clone(), table.clone(), writes.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(t % 4));
                for i in 0..iters {
                    match (t + i) % 8 {
                        0 => {
                            let _w = lock.write();
                            table.write_checked();
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                        1 => {
                            let u = lock.upgradable_read();
                            table.read_checked();
                            let w = RwLockUpgradableReadGuard::upgrade(u);
                            table.write_checked();
                            writes.fetch_add(1, Ordering::Relaxed);
                            let r = RwLockWriteGuard::downgrade(w);
                            table.read_checked();
                            drop(r);
                        }
                        2 => {
                            let w = lock.write();
                            table.write_checked();
                            writes.fetch_add(1, Ordering::Relaxed);
                            let u = RwLockWriteGuard::downgrade_to_upgradable(w);
                            table.read_checked();
                            let r = RwLockUpgradableReadGuard::downgrade(u);
                            table.read_checked();
                            drop(r);
                        }
                        3 => {
                            if let Some(_w) = lock.try_write() {
                                table.write_checked();
                                writes.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        4 => {
                            if let Some(_r) = lock.try_read() {
                                table.read_checked();
                            }
                        }
                        _ => {
                            let _r = lock.read();
                            table.read_checked();
                        }
                    }
                }
                topology::set_thread_node(None);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_no_hang(start, "readers_and_writers");
    assert_eq!(
        table.value(),
        writes.load(Ordering::Relaxed) as u64,
        "lost update"
    );
    assert!(!lock.is_locked());
}

/// Uncontended, the lock is one word and allocates nothing; contended, it allocates once and
/// frees on drop (Miri checks the freeing).
pub fn compact_until_contended<R: Raw>() {
    assert!(
        std::mem::size_of::<RwLock<R, ()>>() <= 16,
        "RwLock<()> is {} bytes",
        std::mem::size_of::<RwLock<R, ()>>()
    );
    let lock = numa_locks::raw::RawNumaRwLock::<numa_locks::raw::RawCna>::new();
    for _ in 0..10 {
        lock.lock_shared();
        unsafe { lock.unlock_shared() };
        lock.lock_exclusive();
        unsafe { lock.unlock_exclusive() };
        lock.lock_upgradable();
        unsafe { lock.upgrade() };
        unsafe { lock.downgrade() };
        unsafe { lock.unlock_shared() };
    }
    assert!(!lock.has_reader_slots(), "an uncontended lock allocated");
    // Two readers at once: contention, the lock inflates.
    let rw = RwLock::<R, u32>::new(5);
    {
        let a = rw.read();
        let b = rw.read();
        assert_eq!(*a + *b, 10);
        assert!(rw.try_write().is_none());
    }
    assert!(!rw.is_locked());
    *rw.write() += 1;
    assert_eq!(*rw.read(), 6);
}

/// A writer that gives up while readers are inside (`try_write`, a timed write, `try_upgrade`
/// and its timed form) leaves them counted: every later writer still finds them. One of the
/// readers entered through the readers' table (the lock's bias, set at inflation): a writer
/// that revoked the bias and then gave up must hand it back, or the next writer, revoking an
/// unbiased lock, would count the slots alone and get in beside that reader.
pub fn failed_writers_leave_readers_counted<R: Raw>() {
    let lock = RwLock::<R, u32>::new(0);
    // Contention once: the lock inflates, with the bias set.
    {
        let a = lock.read();
        let b = lock.read();
        drop((a, b));
    }
    let reader = lock.read();
    for _ in 0..3 {
        assert!(
            lock.try_write().is_none(),
            "try_write got in beside a reader"
        );
        assert!(
            lock.try_write_for(Duration::from_millis(1)).is_none(),
            "try_write_for got in beside a reader"
        );
        let upgradable = lock.upgradable_read();
        let Err(upgradable) = RwLockUpgradableReadGuard::try_upgrade(upgradable) else {
            panic!("try_upgrade got in beside a reader");
        };
        let Err(upgradable) =
            RwLockUpgradableReadGuard::try_upgrade_for(upgradable, Duration::from_millis(1))
        else {
            panic!("try_upgrade_for got in beside a reader");
        };
        drop(upgradable);
    }
    drop(reader);
    *lock.try_write().expect("no reader left: try_write gets in") += 1;
    *lock.write() += 1;
    assert_eq!(*lock.read(), 2);
    assert!(!lock.is_locked());
}

/// Every compact state is taken over correctly by an inflation: the compact holder then
/// unlocks (or upgrades, downgrades) the inflated way.
pub fn inflation_keeps_the_holder<R: Raw>() {
    // A compact writer, a reader that inflates while it holds.
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let w = lock.write();
    let reader = {
        let lock = lock.clone();
        thread::spawn(move || *lock.read())
    };
    thread::sleep(Duration::from_millis(if cfg!(miri) { 0 } else { 5 }));
    drop(w);
    assert_eq!(reader.join().unwrap(), 0);
    // A compact upgradable reader, a reader joins (inflates), then the upgradable upgrades.
    let lock = RwLock::<R, u64>::new(0);
    let u = lock.upgradable_read();
    let r = lock.read();
    assert!(lock.try_upgradable_read().is_none());
    let u = match RwLockUpgradableReadGuard::try_upgrade(u) {
        Ok(_) => panic!("upgraded with a reader inside"),
        Err(u) => u,
    };
    drop(r);
    let mut w = RwLockUpgradableReadGuard::upgrade(u);
    *w += 1;
    let r = RwLockWriteGuard::downgrade(w);
    assert_eq!(*r, 1);
    let r2 = lock.read();
    drop(r);
    drop(r2);
    assert!(!lock.is_locked());
    // A compact reader, a writer inflates and waits for it; the reader leaves on another thread.
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let r = lock.read();
    let writer = {
        let lock = lock.clone();
        thread::spawn(move || *lock.write() += 1)
    };
    thread::sleep(Duration::from_millis(if cfg!(miri) { 0 } else { 5 }));
    thread::scope(|s| {
        s.spawn(move || {
            topology::set_thread_node(Some(1));
            drop(r);
        });
    });
    writer.join().unwrap();
    assert_eq!(*lock.read(), 1);
}

/// Timed waits time out, and leave no trace: afterwards every kind of lock is available at once.
pub fn timed_waits<R: Raw>() {
    let lock = RwLock::<R, u64>::new(0);
    let short = Duration::from_millis(if cfg!(miri) { 1 } else { 20 });
    // Inflate first, so that the inflated paths time out too.
    drop((lock.read(), lock.read()));

    let w = lock.write();
    let t = Instant::now();
    assert!(lock.try_read_for(short).is_none());
    assert!(lock.try_write_for(short).is_none());
    assert!(lock.try_upgradable_read_for(short).is_none());
    if !cfg!(miri) {
        assert!(
            t.elapsed() >= short * 3,
            "timed out early: {:?}",
            t.elapsed()
        );
    }
    drop(w);

    let r = lock.read();
    assert!(
        lock.try_write_for(short).is_none(),
        "a writer got in with a reader inside"
    );
    // No trace: a reader gets in at once (the writer took its revocation back).
    assert!(lock.try_read().is_some());
    let u = lock
        .try_upgradable_read_for(short)
        .expect("upgradable beside a reader");
    let u = RwLockUpgradableReadGuard::try_upgrade_for(u, short)
        .expect_err("upgraded with a reader inside");
    assert!(lock.try_read().is_some(), "a failed upgrade left a trace");
    drop(r);
    let w = RwLockUpgradableReadGuard::try_upgrade_for(u, short).expect("no reader left");
    drop(w);
    assert!(!lock.is_locked());
    assert!(lock.try_write().is_some());
    assert!(lock.try_read_until(Instant::now() + short).is_some());
    assert!(lock.try_write_until(Instant::now() + short).is_some());
}

/// [`timed_waits`] with every CPU kept busy by spinning threads: a reader that finds the writer
/// on a crowded core yields the CPU a few times before it registers and sleeps, and a timed one
/// still times out no earlier than its deadline and leaves no trace.
/// Not under Miri, which runs one thread at a time (`timed_waits` covers it there).
pub fn timed_waits_crowded<R: Raw>() {
    if cfg!(miri) {
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let cpus = thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..2 * cpus)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    timed_waits::<R>();
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
}

/// A recursive lock lets a reader read again while a writer waits; a plain one makes new
/// readers wait behind the writer (its bound on reader preference).
pub fn recursive_reads<R: Raw>() {
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let first = lock.read();
    let waiting = Arc::new(AtomicBool::new(false));
    let writer = {
        let (lock, waiting) = (lock.clone(), waiting.clone());
        thread::spawn(move || {
            waiting.store(true, Ordering::SeqCst);
            *lock.write() += 1;
        })
    };
    while !waiting.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    // Let the writer revoke (it cannot finish: `first` is inside).
    let start = Instant::now();
    while !lock.is_locked_exclusive() && start.elapsed() < HANG_BOUND {
        thread::yield_now();
    }
    assert!(lock.is_locked_exclusive(), "the writer never revoked");
    let second = lock.try_read();
    assert_eq!(
        second.is_some(),
        R::RECURSIVE,
        "a waiting writer must stop new plain readers"
    );
    drop(second);
    drop(first);
    writer.join().unwrap();
    assert_eq!(*lock.read(), 1);
}

/// A panic inside a critical section releases the lock (lock_api's guards unlock on unwind).
pub fn panic_releases<R: Raw>() {
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    for kind in 0..3 {
        let l = lock.clone();
        let r = thread::spawn(move || match kind {
            0 => {
                let _w = l.write();
                panic!("in a write");
            }
            1 => {
                let _r = l.read();
                let _r2 = l.read();
                panic!("in a read");
            }
            _ => {
                let _u = l.upgradable_read();
                panic!("in an upgradable read");
            }
        })
        .join();
        assert!(r.is_err());
        assert!(!lock.is_locked(), "kind {kind} left the lock held");
    }
    *lock.write() += 1;
    assert_eq!(*lock.read(), 1);
}

/// `const fn new` works in a static; guards are `Send`; `force_unlock_*` takes `GuardSend::new()`.
pub fn statics_and_forced_unlocks<R: Raw>() {
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let g = lock.write();
    std::mem::forget(g);
    assert!(lock.is_locked_exclusive());
    unsafe { lock.force_unlock_write(lock_api::GuardSend::new()) };
    let g = lock.read();
    std::mem::forget(g);
    unsafe { lock.force_unlock_read(lock_api::GuardSend::new()) };
    assert!(!lock.is_locked());
    // A read guard sent to another thread (and node) and dropped there.
    let (a, b) = (lock.read(), lock.read());
    thread::scope(|s| {
        s.spawn(move || {
            topology::set_thread_node(Some(3));
            drop(a);
        });
    });
    drop(b);
    let w = lock.write();
    thread::scope(|s| {
        s.spawn(move || drop(w));
    });
    assert!(!lock.is_locked());
}

/// Writers are not starved: readers that overlap one another without pause never let the lock
/// become free, yet a writer gets in (after the readers inside at its revocation leave).
pub fn writers_not_starved<R: Raw>() {
    if R::RECURSIVE {
        return; // documented: recursive readers can starve writers, as parking_lot's do.
    }
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..scaled(4, 2))
        .map(|t| {
            let (lock, stop) = (lock.clone(), stop.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(t));
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _r = lock.read();
                    reads += 1;
                    thread::yield_now();
                }
                reads
            })
        })
        .collect();
    let start = Instant::now();
    for _ in 0..scaled(50, 3) {
        *lock.write() += 1;
    }
    assert_no_hang(start, "writers behind a stream of readers");
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read(), scaled(50, 3) as u64);
}

/// Readers are not starved: writers that queue back to back never leave the lock free of
/// writers, yet readers get in, each within a bounded number of writers.
pub fn readers_not_starved<R: Raw>() {
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..scaled(3, 2))
        .map(|t| {
            let (lock, stop) = (lock.clone(), stop.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(t));
                while !stop.load(Ordering::Relaxed) {
                    let mut w = lock.write();
                    *w += 1;
                    thread::yield_now();
                }
            })
        })
        .collect();
    let start = Instant::now();
    for _ in 0..scaled(50, 3) {
        let _ = *lock.read();
    }
    assert_no_hang(start, "readers behind a stream of writers");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}

/// 1,000 threads (more than cores by far) mixing reads and writes finish, in bounded time.
pub fn thousand_threads<R: Raw>() {
    let threads = scaled(1000, 8);
    let lock = Arc::new(RwLock::<R, u64>::new(0));
    let barrier = Arc::new(Barrier::new(threads));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, barrier) = (lock.clone(), barrier.clone());
            thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    topology::set_thread_node(Some(t % 8));
                    barrier.wait();
                    for i in 0..scaled(20, 2) {
                        if (t + i) % 10 == 0 {
                            *lock.write() += 1;
                        } else {
                            let _ = *lock.read();
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_no_hang(start, "1000 threads");
    let expected: usize = (0..threads)
        .map(|t| (0..scaled(20, 2)).filter(|i| (t + i) % 10 == 0).count())
        .sum();
    assert_eq!(*lock.read(), expected as u64);
}

/// The fair unlocks and bumps work like the plain ones.
pub fn fair_unlocks_and_bumps<R: Raw>() {
    let lock = RwLock::<R, u64>::new(0);
    let mut w = lock.write();
    *w += 1;
    RwLockWriteGuard::bump(&mut w);
    RwLockWriteGuard::unlock_fair(w);
    let mut r = lock.read();
    RwLockReadGuard::bump(&mut r);
    let r2 = lock.read();
    RwLockReadGuard::unlock_fair(r);
    drop(r2);
    let mut u = lock.upgradable_read();
    RwLockUpgradableReadGuard::bump(&mut u);
    RwLockUpgradableReadGuard::unlock_fair(u);
    assert!(!lock.is_locked());
    assert_eq!(*lock.read(), 1);
}

macro_rules! rwlock_conformance {
    ($module:ident, $raw:ty) => {
        mod $module {
            use super::*;
            type R = $raw;

            #[test]
            fn readers_and_writers() {
                super::readers_and_writers::<R>(scaled(8, 3), scaled(2000, 40));
            }
            #[test]
            fn compact_until_contended() {
                super::compact_until_contended::<R>();
            }
            #[test]
            fn inflation_keeps_the_holder() {
                super::inflation_keeps_the_holder::<R>();
            }
            #[test]
            fn failed_writers_leave_readers_counted() {
                super::failed_writers_leave_readers_counted::<R>();
            }
            #[test]
            fn timed_waits() {
                super::timed_waits::<R>();
            }
            #[test]
            fn timed_waits_crowded() {
                super::timed_waits_crowded::<R>();
            }
            #[test]
            fn recursive_reads() {
                super::recursive_reads::<R>();
            }
            #[test]
            fn panic_releases() {
                super::panic_releases::<R>();
            }
            #[test]
            fn statics_and_forced_unlocks() {
                super::statics_and_forced_unlocks::<R>();
            }
            #[test]
            fn writers_not_starved() {
                super::writers_not_starved::<R>();
            }
            #[test]
            fn readers_not_starved() {
                super::readers_not_starved::<R>();
            }
            #[test]
            fn thousand_threads() {
                super::thousand_threads::<R>();
            }
            #[test]
            fn fair_unlocks_and_bumps() {
                super::fair_unlocks_and_bumps::<R>();
            }
        }
    };
}

rwlock_conformance!(mcs, numa_locks::raw::RawMcsRwLock);
rwlock_conformance!(cna, numa_locks::raw::RawCnaRwLock);
rwlock_conformance!(hq, numa_locks::raw::RawHqRwLock);
rwlock_conformance!(mcs_recursive, numa_locks::raw::RawMcsRecursiveRwLock);
rwlock_conformance!(cna_recursive, numa_locks::raw::RawCnaRecursiveRwLock);
rwlock_conformance!(hq_recursive, numa_locks::raw::RawHqRecursiveRwLock);

/// The aliases exist, are `lock_api` types, and work in statics.
mod aliases {
    use numa_locks::{
        CnaMappedRwLockReadGuard, CnaRecursiveRwLock, CnaRwLock, CnaRwLockReadGuard, HqRwLock,
        McsRwLock,
    };

    static CNA: CnaRwLock<u32> = CnaRwLock::new(3);
    static HQ: HqRwLock<u32> = HqRwLock::new(4);
    static MCS: McsRwLock<u32> = McsRwLock::new(5);
    static RECURSIVE: CnaRecursiveRwLock<u32> = CnaRecursiveRwLock::new(6);

    #[test]
    fn statics() {
        let r: CnaRwLockReadGuard<'_, u32> = CNA.read();
        let m: CnaMappedRwLockReadGuard<'_, u32> = CnaRwLockReadGuard::map(r, |v| v);
        assert_eq!(*m + *HQ.read() + *MCS.read() + *RECURSIVE.read(), 18);
    }

    #[test]
    fn guards_are_send() {
        fn send<T: Send>() {}
        send::<numa_locks::CnaRwLockReadGuard<'static, u32>>();
        send::<numa_locks::HqRwLockWriteGuard<'static, u32>>();
        send::<numa_locks::McsRwLockUpgradableReadGuard<'static, u32>>();
        send::<numa_locks::CnaMappedRecursiveRwLockWriteGuard<'static, u32>>();
    }
}

/// `arc_lock` and `serde` come through `lock_api`, as for parking_lot's RwLock.
mod features {
    #[cfg(feature = "arc_lock")]
    #[test]
    fn arc_guards() {
        let lock = std::sync::Arc::new(numa_locks::CnaRwLock::new(1));
        let read = lock.read_arc();
        assert_eq!(*read, 1);
        drop(read);
        *lock.write_arc() += 1;
        assert_eq!(*lock.upgradable_read_arc(), 2);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_round_trip() {
        let lock = numa_locks::HqRwLock::new(vec![1, 2]);
        let text = serde_json::to_string(&lock).unwrap();
        assert_eq!(text, "[1,2]");
        let back: numa_locks::McsRwLock<Vec<u32>> = serde_json::from_str(&text).unwrap();
        assert_eq!(*back.read(), [1, 2]);
    }
}

/// The contract again with write mode off (`set_rwlock_write_mode`): every writer revokes and
/// drains. As for the handover, the tunable is process-wide and may change at any time: the
/// contract holds either way (the other tests run with the default, on).
#[test]
fn contract_without_write_mode() {
    numa_locks::tunables::set_rwlock_write_mode(false).unwrap();
    tunable_contract::<numa_locks::raw::RawMcsRwLock>();
    tunable_contract::<numa_locks::raw::RawCnaRwLock>();
    tunable_contract::<numa_locks::raw::RawHqRwLock>();
    numa_locks::tunables::set_rwlock_write_mode(true).unwrap();
}

/// The rwlock tunables are process-wide and may change at any time: the contract's mix of
/// reads, writes, tries, upgrades and downgrades runs on every rwlock while another thread
/// turns write mode and the writers' handover on and off, so that locks are left in write mode
/// or with a revocation handed over under one setting and taken over under the other.
#[test]
#[cfg_attr(
    miri,
    ignore = "a stress of tunables changing; the contract itself runs under Miri"
)]
fn contract_while_tunables_change() {
    let stop = Arc::new(AtomicBool::new(false));
    let toggler = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut flips = 0u32;
            while !stop.load(Ordering::Relaxed) {
                numa_locks::tunables::set_rwlock_write_mode(flips & 1 == 0).unwrap();
                numa_locks::tunables::set_rwlock_writer_handover(flips & 2 != 0).unwrap();
                flips = flips.wrapping_add(1);
                thread::sleep(Duration::from_micros(50));
            }
        })
    };
    for _ in 0..3 {
        readers_and_writers::<numa_locks::raw::RawMcsRwLock>(8, 2000);
        readers_and_writers::<numa_locks::raw::RawCnaRwLock>(8, 2000);
        readers_and_writers::<numa_locks::raw::RawHqRwLock>(8, 2000);
        readers_and_writers::<numa_locks::raw::RawCnaRecursiveRwLock>(8, 2000);
    }
    stop.store(true, Ordering::Relaxed);
    toggler.join().unwrap();
    // The defaults, as the other tests of this binary expect them.
    numa_locks::tunables::set_rwlock_write_mode(true).unwrap();
    numa_locks::tunables::set_rwlock_writer_handover(false).unwrap();
}

/// The contract the tests of a process-wide rwlock tunable run again with it changed.
fn tunable_contract<R: Raw>() {
    readers_and_writers::<R>(scaled(8, 3), scaled(2000, 40));
    inflation_keeps_the_holder::<R>();
    failed_writers_leave_readers_counted::<R>();
    timed_waits::<R>();
    panic_releases::<R>();
    writers_not_starved::<R>();
    readers_not_starved::<R>();
    fair_unlocks_and_bumps::<R>();
}

/// Write mode, observed from outside: after a long run of writes with no reader, the lock
/// reads as unlocked and not exclusively locked (no writer holds it, whatever the mode), a
/// `try_read` gets in at once (it ends write mode by taking the free writers' lock), and a
/// reader thread that comes while a writer keeps writing gets in and sees every write before
/// it. Then the same with readers and writers mixed, so that the lock enters and leaves write
/// mode many times, with the data checked as `readers_and_writers` checks it.
#[test]
fn write_mode_ends_for_readers() {
    fn run<R: Raw>() {
        let lock = Arc::new(lock_api::RwLock::<R, u64>::new(0));
        // Contention once, so that the lock has its reader slots.
        {
            let a = lock.read();
            let b = lock.read();
            drop((a, b));
        }
        for _ in 0..1000 {
            *lock.write() += 1;
        }
        assert!(!lock.is_locked());
        assert!(!lock.is_locked_exclusive());
        assert_eq!(lock.try_read().map(|v| *v), Some(1000));
        for _ in 0..1000 {
            *lock.write() += 1;
        }
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                for _ in 0..scaled(20_000, 200) {
                    *lock.write() += 1;
                }
            })
        };
        let mut last = 0;
        for _ in 0..scaled(200, 20) {
            let now = *lock.read();
            assert!(now >= last.max(2000));
            last = now;
        }
        writer.join().unwrap();
        assert_eq!(*lock.read(), 2000 + scaled(20_000, 200) as u64);
        readers_and_writers::<R>(scaled(4, 2), scaled(4000, 80));
    }
    numa_locks::tunables::set_rwlock_write_mode(true).unwrap();
    run::<numa_locks::raw::RawMcsRwLock>();
    run::<numa_locks::raw::RawCnaRwLock>();
    run::<numa_locks::raw::RawHqRwLock>();
}

/// The contract again with the writers' handover on (`set_rwlock_writer_handover`): writers
/// hand the readers' revocation to the next writer, upgradable readers and timed writers take
/// part. The tunable is process-wide and may change at any time, so the other tests of this
/// binary may run with it on meanwhile: the contract holds either way.
#[test]
fn contract_with_writer_handover() {
    numa_locks::tunables::set_rwlock_writer_handover(true).unwrap();
    tunable_contract::<numa_locks::raw::RawMcsRwLock>();
    tunable_contract::<numa_locks::raw::RawCnaRwLock>();
    tunable_contract::<numa_locks::raw::RawHqRwLock>();
    tunable_contract::<numa_locks::raw::RawCnaRecursiveRwLock>();
    numa_locks::tunables::set_rwlock_writer_handover(false).unwrap();
}
