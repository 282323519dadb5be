//! `Delegate::delegate` on real threads, for McsMutex, CnaMutex and HqMutex: results come back,
//! counts stay exact with `lock()` and `delegate` callers mixed, a panicking closure reaches its
//! own caller only, closures borrow from their caller's stack, delegation nests across locks,
//! and a same-lock call panics instead of hanging.
//!
//! Which thread runs a closure depends on scheduling, so no assertion here depends on it; the
//! loom models (`tests/loom/delegate.rs`) show that the combining paths are reached.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use lock_api::{Mutex, RawMutex};
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::{Delegate, topology};

/// Threads and iterations, smaller under Miri.
fn scaled(n: u64) -> u64 {
    if cfg!(miri) { n.div_ceil(50).max(2) } else { n }
}

/// Data that is not thread-safe by itself: the flag catches two closures inside at once.
struct Counted {
    count: u64,
    inside: AtomicBool,
}

/// The tests, for one raw lock type.
trait Case: RawMutex + Send + Sync + Sized + 'static
where
    Mutex<Self, Counted>: Delegate<Counted>,
    Mutex<Self, u64>: Delegate<u64>,
    Mutex<Self, Vec<u64>>: Delegate<Vec<u64>>,
{
}
impl Case for RawMcs {}
impl Case for RawCna {}
impl Case for RawHq {}

/// Sums exact under contention: `threads` threads on `nodes` virtual NUMA nodes, every other
/// one calling `lock()`, the rest `delegate`, each adding its results up.
fn mixed_sum<R: Case>(threads: u64, nodes: usize)
where
    Mutex<R, Counted>: Delegate<Counted>,
    Mutex<R, u64>: Delegate<u64>,
    Mutex<R, Vec<u64>>: Delegate<Vec<u64>>,
{
    let iters = scaled(2_000);
    let lock = Arc::new(Mutex::<R, Counted>::new(Counted {
        count: 0,
        inside: AtomicBool::new(false),
    }));
    let start = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, start) = (lock.clone(), start.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(t as usize % nodes));
                start.wait();
                // What this thread saw the count become after each of its additions: a
                // delegated closure returns it, a `lock()` caller reads it.
                let mut seen = Vec::with_capacity(iters as usize);
                for _ in 0..iters {
                    let critical = |c: &mut Counted| {
                        assert!(
                            !c.inside.swap(true, Ordering::Relaxed),
                            "two inside at once"
                        );
                        c.count += 1;
                        let now = c.count;
                        c.inside.store(false, Ordering::Relaxed);
                        now
                    };
                    seen.push(if t % 2 == 0 {
                        lock.delegate(critical)
                    } else {
                        critical(&mut lock.lock())
                    });
                }
                seen
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    // Every addition returned a distinct count, and together they are 1..=n: nothing lost, and
    // every result went back to its own caller.
    let n = threads * iters;
    assert_eq!(all, (1..=n).collect::<Vec<_>>());
    assert_eq!(lock.lock().count, n);
    assert!(!lock.is_locked());
}

fn results_and_borrows<R: Case>()
where
    Mutex<R, Counted>: Delegate<Counted>,
    Mutex<R, u64>: Delegate<u64>,
    Mutex<R, Vec<u64>>: Delegate<Vec<u64>>,
{
    let lock = Mutex::<R, Vec<u64>>::new(vec![0; 8]);
    // Borrowed from this frame, read and written by the closure.
    let add = [3u64, 4, 5];
    let mut log = Vec::new();
    let total = lock.delegate(|v| {
        for (i, a) in add.iter().enumerate() {
            v[i] += a;
        }
        log.push(v.len());
        v.iter().sum::<u64>()
    });
    assert_eq!(total, 12);
    assert_eq!(log, [8]);
    assert_eq!(lock.lock()[..3], [3, 4, 5]);
    assert!(!lock.is_locked());
}

/// Borrowed stack data under contention: each thread's closure reads and writes its own
/// stack buffer; the results must be its own.
fn borrows_under_contention<R: Case>(threads: u64)
where
    Mutex<R, Counted>: Delegate<Counted>,
    Mutex<R, u64>: Delegate<u64>,
    Mutex<R, Vec<u64>>: Delegate<Vec<u64>>,
{
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let lock = lock.clone();
            thread::spawn(move || {
                topology::set_thread_node(Some(t as usize % 2));
                let mut mine = [t; 16];
                for i in 0..scaled(500) {
                    let got = lock.delegate(|total| {
                        *total += 1;
                        mine[(i % 16) as usize] += 1;
                        mine.iter().sum::<u64>()
                    });
                    assert_eq!(got, mine.iter().sum::<u64>());
                }
                mine.iter().sum::<u64>() - 16 * t
            })
        })
        .collect();
    let per: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(per.iter().all(|&p| p == scaled(500)), "{per:?}");
    assert_eq!(*lock.lock(), threads * scaled(500));
}

/// A panicking closure reaches its own caller only; the lock stays usable, and every other
/// closure (whoever ran it) completes.
fn panics_reach_their_caller<R: Case>(threads: u64)
where
    Mutex<R, Counted>: Delegate<Counted>,
    Mutex<R, u64>: Delegate<u64>,
    Mutex<R, Vec<u64>>: Delegate<Vec<u64>>,
{
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let caught = Arc::new(AtomicU64::new(0));
    let iters = scaled(400);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, caught) = (lock.clone(), caught.clone());
            thread::spawn(move || {
                for i in 0..iters {
                    // Thread 0 panics on every 4th call, after its addition.
                    let bad = t == 0 && i % 4 == 0;
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        lock.delegate(|n| {
                            *n += 1;
                            if bad {
                                panic!("closure {t}/{i}");
                            }
                            t
                        })
                    }));
                    match r {
                        Ok(who) => {
                            assert!(!bad);
                            assert_eq!(who, t, "a result went to another caller");
                        }
                        Err(payload) => {
                            assert!(bad, "a panic reached the wrong caller");
                            let msg = payload.downcast_ref::<String>().unwrap();
                            assert_eq!(*msg, format!("closure {t}/{i}"));
                            caught.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(caught.load(Ordering::Relaxed), iters.div_ceil(4));
    assert_eq!(*lock.lock(), threads * iters);
    assert!(!lock.is_locked());
}

/// A delegated closure delegates to another lock (allowed), and a same-lock call panics.
fn nesting<R: Case>(threads: u64)
where
    Mutex<R, Counted>: Delegate<Counted>,
    Mutex<R, u64>: Delegate<u64>,
    Mutex<R, Vec<u64>>: Delegate<Vec<u64>>,
{
    let outer = Arc::new(Mutex::<R, u64>::new(0));
    let inner = Arc::new(Mutex::<R, u64>::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (outer, inner) = (outer.clone(), inner.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(t as usize % 2));
                for _ in 0..scaled(300) {
                    let i = outer.delegate(|o| {
                        *o += 1;
                        inner.delegate(|i| {
                            *i += 2;
                            *i
                        })
                    });
                    assert_eq!(i % 2, 0);
                    // Plain lock() on the inner lock between, as another caller would.
                    *inner.lock() += 2;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*outer.lock(), threads * scaled(300));
    assert_eq!(*inner.lock(), 4 * threads * scaled(300));

    let same = Mutex::<R, u64>::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        same.delegate(|n| {
            *n += 1;
            same.delegate(|n| *n += 1);
        })
    }));
    let msg = *r.unwrap_err().downcast::<&str>().unwrap();
    assert!(
        msg.contains("same lock") || msg.contains("already running"),
        "{msg}"
    );
    assert!(!same.is_locked(), "the panic released the lock");
    assert_eq!(same.delegate(|n| *n), 1);

    // Two levels down: the same lock found behind another lock's entry, and the other lock
    // itself still usable from there.
    let other = Mutex::<R, u64>::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        same.delegate(|n| {
            *n += 1;
            other.delegate(|o| {
                *o += 1;
                let third = Mutex::<R, u64>::new(5);
                assert_eq!(third.delegate(|t| *t), 5);
                same.delegate(|n| *n += 1);
            })
        })
    }));
    let msg = *r.unwrap_err().downcast::<&str>().unwrap();
    assert!(msg.contains("already running"), "{msg}");
    assert!(
        !same.is_locked() && !other.is_locked(),
        "the panic released both locks"
    );
    assert_eq!((same.delegate(|n| *n), other.delegate(|o| *o)), (2, 1));
    // Back at depth 0: the lock is no longer among this thread's, so this does not panic.
    assert_eq!(same.delegate(|n| other.delegate(|o| *n + *o)), 3);
}

macro_rules! cases {
    ($($name:ident: $raw:ty,)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn results_and_borrowed_stack_data() {
                results_and_borrows::<$raw>();
                borrows_under_contention::<$raw>(scaled(6));
            }

            #[test]
            fn sums_exact_with_lock_and_delegate_mixed() {
                mixed_sum::<$raw>(scaled(8), 2);
                mixed_sum::<$raw>(scaled(4), 1);
            }

            #[test]
            fn panic_reaches_its_own_caller_only() {
                panics_reach_their_caller::<$raw>(scaled(6));
            }

            #[test]
            fn nested_delegation_and_same_lock_panic() {
                nesting::<$raw>(scaled(4));
            }
        }
    )*};
}

cases! {
    mcs: RawMcs,
    cna: RawCna,
    hq: RawHq,
}
