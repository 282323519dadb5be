//! The conformance suite: one contract, instantiated for every lock type of the crate.
//!
//! Each test is a generic function over the raw lock; the `conformance!` macro at the bottom
//! instantiates all of them for `RawMcs`, `RawCna` and `RawHq`. Time is asserted only as a
//! generous upper bound that catches hangs, and no assertion depends on how the threads are
//! scheduled: every check holds on one core or a hundred, idle or loaded.
//!
//! Miri (`cargo +nightly miri test --test conformance`, see `.ci/run`) runs the same contract
//! with fewer threads and iterations ([`scaled`]) and without the hang bounds: Miri interprets
//! every instruction 100 to 1000 times slower, one thread at a time, and its clock says nothing
//! about a hang (the CI step has a `timeout` instead).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{GuardSend, Mutex, RawMutex, RawMutexFair};

/// An upper bound for tests that must not hang; far above their normal run time.
const HANG_BOUND: Duration = Duration::from_secs(120);

/// `native` normally; `miri` under Miri, where each lock operation costs about a millisecond
/// and 256 threads would run for over 20 minutes. The Miri sizes still make every path of the
/// test happen (contention, queueing, parking), just fewer times.
const fn scaled(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

/// Asserts that `start` is less than [`HANG_BOUND`] ago, except under Miri (see the module docs).
fn assert_no_hang(start: Instant, what: &str) {
    if !cfg!(miri) {
        assert!(
            start.elapsed() < HANG_BOUND,
            "{what} took {:?}",
            start.elapsed()
        );
    }
}

/// Data that is *not* thread-safe by itself: every access must be under the lock.
struct Unprotected {
    counter: UnsafeCell<u64>,
    inside: AtomicBool,
}
// SAFETY: only accessed while the lock under test is held (that is what the tests check).
unsafe impl Sync for Unprotected {}

/// N threads increment a plain (non-atomic) counter under the lock; the total must be exact,
/// and no thread may ever find another inside the critical section.
pub fn mutual_exclusion<R: RawMutex + Send + Sync + 'static>(threads: usize, iters: usize) {
    exclusion_run::<R>(threads, iters, None);
}

/// [`mutual_exclusion`] with thread `i` on virtual NUMA node `i % nodes`, so that the locks'
/// NUMA-aware paths take part (also under ThreadSanitizer and Miri): CNA's secondary queue,
/// flushes, splices and handoffs deferred behind a proxy node; HQ's per-node queues (allocated
/// on sustained contention, freed on drop), node FIFO and deferred local handoffs. With the
/// default tunables most acquisitions are steals; `tests/tunables.rs` repeats this with
/// stealing off, where every contended acquisition queues.
pub fn mutual_exclusion_on_nodes<R: RawMutex + Send + Sync + 'static>(
    threads: usize,
    iters: usize,
    nodes: usize,
) {
    exclusion_run::<R>(threads, iters, Some(nodes));
}

fn exclusion_run<R: RawMutex + Send + Sync + 'static>(
    threads: usize,
    iters: usize,
    nodes: Option<usize>,
) {
    let lock = Arc::new(Mutex::<R, ()>::new(()));
    let data = Arc::new(Unprotected {
        counter: UnsafeCell::new(0),
        inside: AtomicBool::new(false),
    });
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, data) = (lock.clone(), data.clone());
            thread::spawn(move || {
                if let Some(nodes) = nodes {
                    numa_locks::topology::set_thread_node(Some(t % nodes));
                }
                for i in 0..iters {
                    let _g = lock.lock();
                    assert!(
                        !data.inside.swap(true, Ordering::Relaxed),
                        "two threads inside the critical section"
                    );
                    // SAFETY: under the lock.
                    unsafe { *data.counter.get() += 1 };
                    if nodes.is_some() && i % 8 == 0 {
                        // Let the others queue up behind us (on a machine with fewer cores than
                        // threads they would not run otherwise), so the queues get reordered.
                        thread::yield_now();
                    }
                    data.inside.store(false, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *data.counter.get() }, (threads * iters) as u64);
    assert_no_hang(start, "mutual exclusion");
}

pub fn try_lock_semantics<R: RawMutex + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u32>::new(0));
    {
        let g = lock
            .try_lock()
            .expect("try_lock on a free lock must succeed");
        assert!(lock.is_locked());
        let other = lock.clone();
        let got = thread::spawn(move || other.try_lock().is_some())
            .join()
            .unwrap();
        assert!(!got, "try_lock on a held lock must fail");
        assert!(lock.try_lock().is_none(), "not reentrant");
        drop(g);
    }
    assert!(!lock.is_locked());
    assert!(lock.try_lock().is_some());
    // After contention has come and gone, a free lock is again available to try_lock.
    let (threads, iters) = (scaled(4, 2), scaled(2_000, 50));
    mutual_exclusion_on(&lock, threads, iters);
    assert_eq!(*lock.try_lock().unwrap(), (threads * iters) as u32);
}

fn mutual_exclusion_on<R: RawMutex + Send + Sync + 'static>(
    lock: &Arc<Mutex<R, u32>>,
    threads: usize,
    iters: usize,
) {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                for _ in 0..iters {
                    *lock.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// One thread holds 64 locks at once while other threads contend on each of them.
pub fn many_locks_held<R: RawMutex + Send + Sync + 'static>() {
    let count = scaled(64, 6);
    let locks: Arc<Vec<Mutex<R, u64>>> = Arc::new((0..count).map(|_| Mutex::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let contenders: Vec<_> = (0..scaled(4, 2))
        .map(|t| {
            let (locks, stop) = (locks.clone(), stop.clone());
            thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    *locks[i % count].lock() += 1;
                    i += 1;
                }
            })
        })
        .collect();
    for round in 0..scaled(20, 2) {
        let mut guards: Vec<_> = locks.iter().map(|l| l.lock()).collect();
        for g in guards.iter_mut() {
            let before = **g;
            thread::yield_now();
            assert_eq!(**g, before, "a held lock's data changed (round {round})");
        }
        // Release in a different order than acquisition.
        while let Some(g) = guards.pop() {
            drop(g);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in contenders {
        h.join().unwrap();
    }
}

/// A panic inside the critical section releases the lock (lock_api guards unlock on unwind).
pub fn panic_releases<R: RawMutex + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u32>::new(0));
    let l2 = lock.clone();
    let r = thread::spawn(move || {
        let mut g = l2.lock();
        *g += 1;
        panic!("boom inside the critical section");
    })
    .join();
    assert!(r.is_err());
    assert!(!lock.is_locked());
    *lock.lock() += 1;
    assert_eq!(*lock.lock(), 2);
}

/// A guard taken on one thread is released on another.
pub fn guard_moves<R: RawMutex<Guard = GuardSend> + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u32>::new(0));
    let g = lock.lock();
    let l2 = lock.clone();
    thread::scope(|s| {
        s.spawn(move || {
            let mut g = g;
            *g += 1;
            drop(g);
        });
    });
    assert!(!lock.is_locked());
    let waiter = thread::spawn(move || *l2.lock());
    assert_eq!(waiter.join().unwrap(), 1);
}

/// Forgetting a guard leaves the lock locked; `force_unlock` from another thread frees it.
///
/// The sleep only makes it likely that the waiter has queued behind the forgotten guard before
/// the force unlock (the interesting case); if it has not, it finds the lock free, which is
/// correct too. Both orders must give the waiter the value.
pub fn forget_and_force_unlock<R: RawMutex<Guard = GuardSend> + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u32>::new(7));
    std::mem::forget(lock.lock());
    assert!(lock.is_locked());
    assert!(lock.try_lock().is_none());
    let l2 = lock.clone();
    // A waiter queues behind the forgotten guard.
    let waiter = thread::spawn(move || *l2.lock());
    thread::sleep(Duration::from_millis(20));
    let l3 = lock.clone();
    thread::spawn(move || {
        // SAFETY: the lock is held by the forgotten guard and nothing else will release it.
        unsafe { l3.force_unlock(GuardSend::new()) }
    })
    .join()
    .unwrap();
    assert_eq!(waiter.join().unwrap(), 7);
}

/// `unlock_fair` and `bump` keep mutual exclusion and hand the lock to waiters.
pub fn fair_unlock<R: RawMutexFair + Send + Sync + 'static>() {
    let (threads, iters) = (scaled(4, 2), scaled(2_000, 30));
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                for i in 0..iters {
                    let mut g = lock.lock();
                    *g += 1;
                    if i % 3 == 0 {
                        lock_api::MutexGuard::unlock_fair(g);
                    } else if i % 3 == 1 {
                        lock_api::MutexGuard::bump(&mut g);
                        *g += 0;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*lock.lock(), (threads * iters) as u64);
    assert!(
        lock.try_lock().is_some(),
        "a fair unlock must not leave the lock reserved"
    );
}

/// A lock taken inside a thread-local destructor (the thread's own queue node may be gone).
pub fn lock_in_tls_destructor<R: RawMutex + Send + Sync + 'static>() {
    const IN_DESTRUCTOR: usize = scaled(100, 10);
    let threads = scaled(4, 2);
    struct TakesLock<R: RawMutex + 'static>(Arc<Mutex<R, u32>>);
    impl<R: RawMutex + 'static> Drop for TakesLock<R> {
        fn drop(&mut self) {
            // Contend a little so the slow path (which needs a queue node) is likely taken.
            for _ in 0..IN_DESTRUCTOR {
                *self.0.lock() += 1;
            }
        }
    }
    let lock = Arc::new(Mutex::<R, u32>::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let contender = {
        let (lock, stop) = (lock.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                *lock.lock() += 1;
            }
        })
    };
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                thread_local! {
                    static HOLDER: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
                        const { std::cell::RefCell::new(None) };
                }
                // Take the lock once so this thread's own node exists, then register the
                // destructor, which runs during thread exit.
                *lock.lock() += 1;
                HOLDER.with(|h| *h.borrow_mut() = Some(Box::new(TakesLock(lock.clone()))));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    contender.join().unwrap();
    let total = *lock.lock() as usize;
    assert!(total >= threads * (1 + IN_DESTRUCTOR), "got {total}");
}

/// 256 threads on a 2-core machine: must finish in bounded time (a spin-only lock would not).
pub fn oversubscribed<R: RawMutex + Send + Sync + 'static>() {
    mutual_exclusion::<R>(scaled(256, 8), scaled(200, 3));
}

/// Every thread makes progress while the others keep the lock busy: 8 threads (more than cores
/// on a small machine) hammer the lock until each of them has taken it [`PROGRESS`] times. A
/// lock that starved a thread would let the others go on until the hang bound.
///
/// The run ends when every thread has made its progress, not after a fixed time: how much
/// progress a thread makes in a given time depends on the scheduler (on a loaded machine a
/// runnable thread may not get a core for a long while), how long it takes to make some does not
/// matter to the lock's contract.
pub fn no_starvation<R: RawMutex + Send + Sync + 'static>() {
    const PROGRESS: usize = scaled(100, 2);
    let threads = scaled(8, 3);
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new((0..threads).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, stop, barrier, counts) =
                (lock.clone(), stop.clone(), barrier.clone(), counts.clone());
            thread::spawn(move || {
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let mut g = lock.lock();
                    *g += 1;
                    // A critical section long enough that the lock is always contended.
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                    drop(g);
                    counts[t].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let everyone_progressed = || counts.iter().all(|c| c.load(Ordering::Relaxed) >= PROGRESS);
    // Under Miri the clock means nothing and the CI step's timeout is the hang bound.
    while !everyone_progressed() && (cfg!(miri) || start.elapsed() < HANG_BOUND) {
        thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let per_thread: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    assert!(
        per_thread.iter().all(|&c| c >= PROGRESS),
        "a thread made fewer than {PROGRESS} acquisitions in {:?} while the others went on: {per_thread:?}",
        start.elapsed()
    );
}

/// The sizes the issues promise: MCS and CNA one word, HQ two (without the `stats` counters).
#[test]
fn lock_sizes() {
    use std::mem::size_of;
    if !cfg!(feature = "stats") {
        assert!(size_of::<numa_locks::raw::RawMcs>() <= 8);
        assert!(size_of::<numa_locks::raw::RawCna>() <= 8);
        assert!(size_of::<numa_locks::raw::RawHq>() <= 16);
        assert!(size_of::<numa_locks::McsMutex<()>>() <= 8);
    }
}

macro_rules! conformance {
    ($module:ident, $raw:ty, $mutex:ident) => {
        mod $module {
            use super::*;
            type R = $raw;

            static STATIC_LOCK: numa_locks::$mutex<u64> = numa_locks::$mutex::new(0);

            #[test]
            fn mutual_exclusion_2() {
                mutual_exclusion::<R>(2, scaled(20_000, 200));
            }
            #[test]
            fn mutual_exclusion_4() {
                mutual_exclusion::<R>(4, scaled(10_000, 50));
            }
            #[test]
            fn mutual_exclusion_16() {
                mutual_exclusion::<R>(scaled(16, 6), scaled(2_000, 10));
            }
            #[test]
            fn mutual_exclusion_64() {
                mutual_exclusion::<R>(scaled(64, 10), scaled(500, 3));
            }
            #[test]
            fn mutual_exclusion_on_4_virtual_nodes() {
                mutual_exclusion_on_nodes::<R>(scaled(12, 6), scaled(5_000, 40), 4);
            }
            #[test]
            fn try_lock() {
                try_lock_semantics::<R>();
            }
            #[test]
            fn holds_64_locks() {
                many_locks_held::<R>();
            }
            #[test]
            fn panic_in_critical_section() {
                panic_releases::<R>();
            }
            #[test]
            fn static_lock() {
                let (threads, iters) = (scaled(4, 2), scaled(1_000, 30));
                let handles: Vec<_> = (0..threads)
                    .map(|_| {
                        thread::spawn(move || {
                            for _ in 0..iters {
                                *STATIC_LOCK.lock() += 1;
                            }
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
                assert_eq!(*STATIC_LOCK.lock(), (threads * iters) as u64);
            }
            #[test]
            fn guard_moved_to_another_thread() {
                guard_moves::<R>();
            }
            #[test]
            fn forget_then_force_unlock() {
                forget_and_force_unlock::<R>();
            }
            #[test]
            fn unlock_fair_and_bump() {
                fair_unlock::<R>();
            }
            #[test]
            fn lock_in_thread_local_destructor() {
                lock_in_tls_destructor::<R>();
            }
            #[test]
            fn threads_256_on_2_cores() {
                oversubscribed::<R>();
            }
            #[test]
            fn no_thread_starved() {
                no_starvation::<R>();
            }
        }
    };
}

conformance!(mcs, numa_locks::raw::RawMcs, McsMutex);
conformance!(cna, numa_locks::raw::RawCna, CnaMutex);
conformance!(hq, numa_locks::raw::RawHq, HqMutex);
