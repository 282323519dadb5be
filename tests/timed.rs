//! Timed locking (`lock_api::RawMutexTimed`): `try_lock_for` / `try_lock_until` on every lock.
//!
//! Assertions here hold on any machine: exact counts, mutual exclusion, "never gives up before
//! its deadline" (a lower bound on the time a failed try took, which no scheduler can break),
//! "succeeds when the lock is released well within the timeout" (with a timeout of a minute),
//! and generous hang bounds. How long a waiter overstays its deadline depends on scheduling and
//! is only printed.
#![cfg(not(loom))]

mod common;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::serial;
use lock_api::{Mutex, RawMutex, RawMutexFair, RawMutexTimed};
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::{topology, tunables};

/// An upper bound for tests that must not hang; far above their normal run time.
const HANG_BOUND: Duration = Duration::from_secs(120);
/// A timeout that a lock released "soon" always meets, however loaded the machine.
const PATIENT: Duration = Duration::from_secs(60);

/// Thread counts and iterations, smaller under Miri.
fn scaled(n: u64) -> u64 {
    if cfg!(miri) { n.div_ceil(20).max(2) } else { n }
}

/// Data that is *not* thread-safe by itself: every access must be under the lock.
struct Unprotected {
    counter: UnsafeCell<u64>,
    inside: AtomicBool,
}
// SAFETY: only accessed while the lock under test is held (that is what the tests check).
unsafe impl Sync for Unprotected {}

impl Unprotected {
    fn new() -> Self {
        Unprotected {
            counter: UnsafeCell::new(0),
            inside: AtomicBool::new(false),
        }
    }

    /// The critical section: one increment, checking that nobody else is inside.
    fn enter(&self) {
        assert!(
            !self.inside.swap(true, Ordering::Relaxed),
            "two threads inside the critical section"
        );
        // SAFETY: the caller holds the lock.
        unsafe { *self.counter.get() += 1 };
        self.inside.store(false, Ordering::Relaxed);
    }

    fn total(&self) -> u64 {
        // SAFETY: called after every thread has been joined.
        unsafe { *self.counter.get() }
    }
}

/// A held lock: `try_lock_for` fails, and not before its timeout.
fn times_out_not_early<R: RawMutexTimed<Duration = Duration> + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, ()>::new(()));
    let guard = lock.lock();
    for timeout in [0, 1, 50, 2_000, 20_000] {
        let timeout = Duration::from_micros(timeout);
        let lock2 = lock.clone();
        let (got, took) = thread::spawn(move || {
            let start = Instant::now();
            let got = lock2.try_lock_for(timeout).is_some();
            (got, start.elapsed())
        })
        .join()
        .unwrap();
        assert!(!got, "try_lock_for acquired a held lock");
        assert!(
            took >= timeout,
            "gave up after {took:?}, before its timeout {timeout:?}"
        );
        eprintln!("timeout {timeout:?}: gave up after {took:?}");
    }
    drop(guard);
    assert!(lock.try_lock_for(Duration::ZERO).is_some(), "free lock");
}

/// The same with `try_lock_until`, with other waiters queued in front (so the timed waiter waits
/// behind others and abandons its node, rather than only failing as head).
fn times_out_behind_others<
    R: RawMutexTimed<Duration = Duration, Instant = Instant> + Send + Sync + 'static,
>() {
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let guard = lock.lock();
    // Two plain waiters queue first.
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || *lock.lock() += 1)
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    let timed: Vec<_> = (0..3)
        .map(|i| {
            let lock = lock.clone();
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_millis(5 * (i + 1));
                let got = lock.try_lock_until(deadline).is_some();
                (got, Instant::now() >= deadline)
            })
        })
        .collect();
    for t in timed {
        let (got, after_deadline) = t.join().unwrap();
        assert!(!got, "the lock was held throughout");
        assert!(after_deadline, "try_lock_until gave up before its deadline");
    }
    drop(guard);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(
        *lock.lock(),
        2,
        "the queued waiters behind abandoned nodes got the lock"
    );
    assert!(
        lock.try_lock().is_some(),
        "the lock ends free and unreserved"
    );
}

/// A lock released soon is acquired by a patient `try_lock_for`.
fn succeeds_when_released<R: RawMutexTimed<Duration = Duration> + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let guard = lock.lock();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || match lock.try_lock_for(PATIENT) {
                Some(mut g) => *g += 1,
                None => panic!("a patient try_lock_for gave up"),
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(10));
    drop(guard);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*lock.lock(), 4);
}

/// `threads` threads on 4 virtual nodes mix `lock()` with `try_lock_for` of tiny random timeouts
/// (0 to ~50 µs, so waiters give up as queue head, behind others, in CNA's secondary queue and in
/// HQ's local queues) and `unlock_fair`. Exact counts, never two inside, nobody hung, and the lock
/// ends free.
fn storm<R: RawMutexTimed<Duration = Duration> + RawMutexFair + Send + Sync + 'static>(
    threads: u64,
    iters: u64,
) {
    let lock = Arc::new(Mutex::<R, ()>::new(()));
    let data = Arc::new(Unprotected::new());
    let timeouts = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads as usize));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, data, timeouts, barrier) = (
                lock.clone(),
                data.clone(),
                timeouts.clone(),
                barrier.clone(),
            );
            thread::spawn(move || {
                topology::set_thread_node(Some(t as usize % 4));
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                let mut acquired = 0;
                barrier.wait();
                for i in 0..iters {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let guard = if i % 3 == 0 {
                        Some(lock.lock())
                    } else {
                        lock.try_lock_for(Duration::from_nanos(rng % 50_000))
                    };
                    let Some(guard) = guard else {
                        timeouts.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    data.enter();
                    // A short critical section, so that waiters queue even with stealing on.
                    for _ in 0..rng % 64 {
                        std::hint::spin_loop();
                    }
                    acquired += 1;
                    if rng.is_multiple_of(7) {
                        lock_api::MutexGuard::unlock_fair(guard);
                    } else {
                        drop(guard);
                    }
                }
                acquired
            })
        })
        .collect();
    let acquired: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let timeouts = timeouts.load(Ordering::Relaxed);
    eprintln!(
        "{threads} threads x {iters}: {acquired} acquisitions, {timeouts} timed out, {:?}",
        start.elapsed()
    );
    assert_eq!(data.total(), acquired);
    assert_eq!(acquired + timeouts, threads * iters);
    assert!(
        start.elapsed() < HANG_BOUND || cfg!(miri),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        lock.try_lock().is_some(),
        "the lock ends held or reserved after the storm"
    );
}

/// Timeouts with stealing on and off: with stealing off every contended acquisition is a queue
/// handoff, so abandoned nodes are met on every handoff path.
fn storm_both_ways<R: RawMutexTimed<Duration = Duration> + RawMutexFair + Send + Sync + 'static>() {
    let _serial = serial();
    for stealing in [true, false] {
        tunables::set_stealing(stealing).unwrap();
        storm::<R>(scaled(8), scaled(4_000));
    }
}

/// The threads that abandoned nodes go on locking with fresh nodes, and the abandoned nodes are
/// recycled: many rounds in which every waiter times out (the holder keeps the lock until each
/// has, however the threads are scheduled) do not exhaust anything and leave the lock working.
fn abandon_rounds<R: RawMutexTimed<Duration = Duration> + Send + Sync + 'static>() {
    const WAITERS: u64 = 4;
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let start = Instant::now();
    let mut timeouts = 0;
    for _ in 0..scaled(50) {
        let timed_out = Arc::new(AtomicU64::new(0));
        let guard = lock.lock();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let (lock, timed_out) = (lock.clone(), timed_out.clone());
                thread::spawn(move || {
                    let mut mine = 0;
                    loop {
                        match lock.try_lock_for(Duration::from_micros(200)) {
                            Some(mut g) => {
                                *g += 1;
                                break;
                            }
                            None if mine == 0 => {
                                mine = 1;
                                timed_out.fetch_add(1, Ordering::Relaxed);
                            }
                            None => mine += 1,
                        }
                    }
                    // Then a plain lock with whatever node this thread has now.
                    *lock.lock() += 1;
                    mine
                })
            })
            .collect();
        while timed_out.load(Ordering::Relaxed) < WAITERS {
            assert!(
                start.elapsed() < HANG_BOUND || cfg!(miri),
                "waiters never timed out"
            );
            thread::sleep(Duration::from_micros(200));
        }
        drop(guard);
        timeouts += waiters.into_iter().map(|w| w.join().unwrap()).sum::<u64>();
    }
    eprintln!("{timeouts} timeouts");
    assert_eq!(*lock.lock(), 2 * WAITERS * scaled(50));
}

/// A timed waiter that is head when the lock's holder frees it takes the lock, whatever its
/// remaining time: the head's last look before it gives up must not lose a free lock.
fn head_takes_free_lock<R: RawMutexTimed<Duration = Duration> + Send + Sync + 'static>() {
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    for round in 0..scaled(200) {
        let guard = lock.lock();
        let lock2 = lock.clone();
        let t = thread::spawn(move || {
            lock2
                .try_lock_for(Duration::from_micros(round % 40))
                .is_some()
        });
        if round % 2 == 0 {
            thread::yield_now();
        }
        drop(guard);
        let _ = t.join().unwrap();
        assert!(
            lock.try_lock().is_some(),
            "round {round}: the lock ends reserved"
        );
    }
}

macro_rules! timed {
    ($module:ident, $raw:ty) => {
        mod $module {
            use super::*;
            type R = $raw;

            #[test]
            fn try_lock_for_gives_up_not_before_its_timeout() {
                times_out_not_early::<R>();
            }
            #[test]
            fn try_lock_until_behind_other_waiters() {
                times_out_behind_others::<R>();
            }
            #[test]
            fn try_lock_for_succeeds_when_released() {
                succeeds_when_released::<R>();
            }
            #[test]
            fn storm_of_lock_and_tiny_timeouts() {
                storm_both_ways::<R>();
            }
            #[test]
            fn abandoned_nodes_are_recycled() {
                abandon_rounds::<R>();
            }
            #[test]
            fn timed_head_takes_a_free_lock() {
                head_takes_free_lock::<R>();
            }
        }
    };
}

timed!(mcs, RawMcs);
timed!(cna, RawCna);
timed!(hq, RawHq);

/// The statics still work with timed locking (const `new`).
#[test]
fn static_timed() {
    static LOCK: numa_locks::CnaMutex<u32> = numa_locks::CnaMutex::new(0);
    *LOCK.try_lock_for(PATIENT).unwrap() += 1;
    assert_eq!(*LOCK.lock(), 1);
    let _unused: fn() = || {
        let _ = <RawMcs as RawMutex>::INIT;
    };
}
