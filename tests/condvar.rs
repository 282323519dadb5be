//! Condition variables (`McsCondvar`, `CnaCondvar`, `HqCondvar`) on real threads.
//!
//! Everything asserted holds on any machine: exact counts, exact notify return values (there are
//! no spurious wake-ups), the order in which `notify_all`'s waiters get the mutex, "a timed wait
//! never times out early", and generous hang bounds.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{Condvar, Mutex, RawMutexTimed};
use numa_locks::raw::{QueueLock, RawCna, RawCondvar, RawHq, RawMcs};
use numa_locks::topology;

/// An upper bound for tests that must not hang; far above their normal run time.
const HANG_BOUND: Duration = Duration::from_secs(120);

fn scaled(n: usize) -> usize {
    if cfg!(miri) { n.div_ceil(16).max(2) } else { n }
}

/// The lock types under test: a timed raw mutex with a condition variable.
trait Lock:
    QueueLock + RawMutexTimed<Duration = Duration, Instant = Instant> + Send + Sync + 'static
{
}
impl<R: QueueLock + RawMutexTimed<Duration = Duration, Instant = Instant> + Send + Sync + 'static>
    Lock for R
{
}

/// A bounded queue with `not_empty` / `not_full` condition variables: `producers` threads push
/// `items` numbers each, `consumers` threads pop until they have seen everything. The sum and
/// count of what was popped must be exact.
fn producer_consumer<R: Lock>(producers: usize, consumers: usize, items: usize, nodes: usize) {
    struct Shared<R: Lock> {
        queue: Mutex<R, (Vec<u64>, usize)>,
        not_empty: Condvar<RawCondvar<R>>,
        not_full: Condvar<RawCondvar<R>>,
    }
    const CAPACITY: usize = 4;
    let shared = Arc::new(Shared::<R> {
        queue: Mutex::new((Vec::new(), 0)),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let total = producers * items;
    let start = Instant::now();
    let mut handles = Vec::new();
    for p in 0..producers {
        let shared = shared.clone();
        handles.push(thread::spawn(move || {
            topology::set_thread_node(Some(p % nodes));
            for i in 0..items {
                let mut q = shared.queue.lock();
                shared
                    .not_full
                    .wait_while(&mut q, |q| q.0.len() >= CAPACITY);
                q.0.push((p * items + i) as u64);
                drop(q);
                shared.not_empty.notify_one();
            }
            0u64
        }));
    }
    for c in 0..consumers {
        let shared = shared.clone();
        handles.push(thread::spawn(move || {
            topology::set_thread_node(Some((c + producers) % nodes));
            let mut sum = 0;
            loop {
                let mut q = shared.queue.lock();
                shared
                    .not_empty
                    .wait_while(&mut q, |q| q.0.is_empty() && q.1 < total);
                let Some(item) = q.0.pop() else {
                    // Everything has been consumed.
                    return sum;
                };
                q.1 += 1;
                let done = q.1 == total;
                drop(q);
                sum += item;
                shared.not_full.notify_one();
                if done {
                    // Release the consumers still waiting for items that will never come.
                    shared.not_empty.notify_all();
                }
            }
        }));
    }
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let n = total as u64;
    assert_eq!(sum, n * (n - 1) / 2, "items lost or duplicated");
    assert_eq!(shared.queue.lock().1, total);
    assert!(start.elapsed() < HANG_BOUND || cfg!(miri));
}

/// `waiters` threads wait; once every one of them is in the list, one `notify_all` returns their
/// exact number, and every one of them gets the mutex once more (in any order: woken waiters
/// take the mutex as arriving threads do).
fn notify_all_wakes_each_once<R: Lock>(waiters: usize) {
    let pair = Arc::new((
        Mutex::<R, (usize, Vec<usize>, Vec<usize>, bool)>::new((0, Vec::new(), Vec::new(), false)),
        Condvar::<RawCondvar<R>>::new(),
    ));
    let handles: Vec<_> = (0..waiters)
        .map(|w| {
            let pair = pair.clone();
            thread::spawn(move || {
                topology::set_thread_node(Some(0));
                let mut g = pair.0.lock();
                g.0 += 1;
                g.1.push(w);
                while !g.3 {
                    pair.1.wait(&mut g);
                }
                g.2.push(w);
            })
        })
        .collect();
    let start = Instant::now();
    loop {
        let mut g = pair.0.lock();
        if g.0 == waiters {
            // Every waiter incremented the count under the mutex and then waited, which puts it
            // in the list before releasing the mutex: all of them are in the list now.
            g.3 = true;
            assert_eq!(pair.1.notify_all(), waiters);
            assert_eq!(pair.1.notify_all(), 0, "the list is empty after notify_all");
            break;
        }
        drop(g);
        assert!(start.elapsed() < HANG_BOUND, "waiters never arrived");
        thread::sleep(Duration::from_millis(1));
    }
    for h in handles {
        h.join().unwrap();
    }
    let g = pair.0.lock();
    let (mut waited, mut returned) = (g.1.clone(), g.2.clone());
    waited.sort_unstable();
    returned.sort_unstable();
    assert_eq!(
        returned, waited,
        "a notified waiter returned twice or never"
    );
}

/// Two threads take turns through a condition variable `rounds` times (no lost wake-up: a lost
/// one would hang).
fn ping_pong<R: Lock>(rounds: usize) {
    let pair = Arc::new((Mutex::<R, usize>::new(0), Condvar::<RawCondvar<R>>::new()));
    let other = {
        let pair = pair.clone();
        thread::spawn(move || {
            for i in 0..rounds {
                let mut turn = pair.0.lock();
                pair.1.wait_while(&mut turn, |t| *t != 2 * i + 1);
                *turn += 1;
                pair.1.notify_one();
            }
        })
    };
    for i in 0..rounds {
        let mut turn = pair.0.lock();
        pair.1.wait_while(&mut turn, |t| *t != 2 * i);
        *turn += 1;
        pair.1.notify_one();
    }
    other.join().unwrap();
    assert_eq!(*pair.0.lock(), 2 * rounds);
}

/// Timed waits: with nobody notifying they time out, never early; `wait_while_for` returns at
/// once when the condition already holds; `notify_one` without waiters returns `false`.
fn timed_waits<R: Lock>() {
    let pair = (
        Mutex::<R, bool>::new(false),
        Condvar::<RawCondvar<R>>::new(),
    );
    assert!(!pair.1.notify_one());
    assert_eq!(pair.1.notify_all(), 0);
    let mut g = pair.0.lock();
    for timeout in [0, 1, 200, 5_000] {
        let timeout = Duration::from_micros(timeout);
        let start = Instant::now();
        let result = pair.1.wait_for(&mut g, timeout);
        assert!(result.timed_out());
        assert!(start.elapsed() >= timeout, "timed out early");
    }
    let deadline = Instant::now() + Duration::from_millis(2);
    assert!(pair.1.wait_until(&mut g, deadline).timed_out());
    assert!(Instant::now() >= deadline);
    *g = true;
    let result = pair
        .1
        .wait_while_for(&mut g, |ready| !*ready, Duration::from_secs(60));
    assert!(!result.timed_out());
    drop(g);
    assert!(
        pair.0.try_lock().is_some(),
        "the mutex is free after the waits"
    );
}

/// Waiters with tiny random timeouts race a notifier that calls `notify_one` and `notify_all`.
/// Since nothing wakes spuriously, the notifies' return values add up to exactly the number of
/// waits that report "not timed out".
fn timeouts_race_notifies<R: Lock>(waiters: usize, rounds: usize) {
    let pair = Arc::new((Mutex::<R, u64>::new(0), Condvar::<RawCondvar<R>>::new()));
    let notified_waits = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(waiters + 1));
    let handles: Vec<_> = (0..waiters)
        .map(|w| {
            let (pair, notified_waits, done, barrier) = (
                pair.clone(),
                notified_waits.clone(),
                done.clone(),
                barrier.clone(),
            );
            thread::spawn(move || {
                topology::set_thread_node(Some(w % 4));
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
                barrier.wait();
                for _ in 0..rounds {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let mut g = pair.0.lock();
                    *g += 1;
                    let result = pair.1.wait_for(&mut g, Duration::from_nanos(rng % 100_000));
                    if !result.timed_out() {
                        notified_waits.fetch_add(1, Ordering::Relaxed);
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let mut notified = 0;
    let mut i = 0u64;
    while done.load(Ordering::Relaxed) < waiters {
        i += 1;
        notified += if i.is_multiple_of(5) {
            pair.1.notify_all()
        } else {
            usize::from(pair.1.notify_one())
        };
        if i.is_multiple_of(64) {
            thread::yield_now();
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    // Nobody waits any more.
    assert_eq!(pair.1.notify_all(), 0);
    let notified_waits = notified_waits.load(Ordering::Relaxed);
    eprintln!("{waiters} waiters x {rounds}: {notified_waits} notified waits, the rest timed out");
    assert_eq!(
        notified, notified_waits,
        "a notify counted a waiter that timed out, or a wait woke spuriously"
    );
    assert_eq!(*pair.0.lock(), (waiters * rounds) as u64);
}

/// Two mutexes with one condition variable at once panic in `wait`, before it releases the mutex,
/// so the guard unlocks it as the panic unwinds.
fn two_mutexes_panic<R: Lock>() {
    let a = Arc::new(Mutex::<R, ()>::new(()));
    let b = Arc::new(Mutex::<R, ()>::new(()));
    let cv = Arc::new(Condvar::<RawCondvar<R>>::new());
    let waiting = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (a, cv, waiting) = (a.clone(), cv.clone(), waiting.clone());
        thread::spawn(move || {
            let mut g = a.lock();
            waiting.store(1, Ordering::Relaxed);
            cv.wait(&mut g);
        })
    };
    // Wait until the first waiter is in the list (it holds `a` until it waits).
    while waiting.load(Ordering::Relaxed) == 0 {
        thread::yield_now();
    }
    drop(a.lock());
    let result = {
        let (b, cv) = (b.clone(), cv.clone());
        thread::spawn(move || {
            let mut g = b.lock();
            cv.wait_for(&mut g, Duration::from_secs(60));
        })
        .join()
    };
    let message = result.expect_err("waiting with a second mutex must panic");
    let text = message
        .downcast_ref::<&str>()
        .copied()
        .or(message.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("");
    assert_eq!(
        text, "attempted to use a condition variable with more than one mutex",
        "parking_lot's message, word for word"
    );
    assert!(
        b.try_lock().is_some(),
        "the panicking waiter's mutex is released"
    );
    assert!(cv.notify_one());
    waiter.join().unwrap();
}

macro_rules! condvar_tests {
    ($module:ident, $raw:ty) => {
        mod $module {
            use super::*;
            type R = $raw;

            #[test]
            fn producer_consumer_8_threads() {
                producer_consumer::<R>(4, 4, scaled(2_000), 1);
            }
            #[test]
            fn producer_consumer_4_virtual_nodes() {
                producer_consumer::<R>(4, 4, scaled(2_000), 4);
            }
            #[test]
            fn notify_all_64_waiters_each_once() {
                notify_all_wakes_each_once::<R>(scaled(64));
            }
            #[test]
            fn ping_pong_no_lost_wake_up() {
                ping_pong::<R>(scaled(5_000));
            }
            #[test]
            fn timed_waits_never_early() {
                timed_waits::<R>();
            }
            #[test]
            fn timeouts_race_notifies_exactly() {
                timeouts_race_notifies::<R>(scaled(8), scaled(500));
            }
            #[test]
            fn second_mutex_panics_and_releases() {
                two_mutexes_panic::<R>();
            }
        }
    };
}

condvar_tests!(mcs, RawMcs);
condvar_tests!(cna, RawCna);
condvar_tests!(hq, RawHq);

/// The aliases are drop-ins in statics.
#[test]
fn static_condvar() {
    static READY: numa_locks::HqMutex<bool> = numa_locks::HqMutex::new(false);
    static CV: numa_locks::HqCondvar = numa_locks::HqCondvar::new();
    let t = thread::spawn(|| {
        *READY.lock() = true;
        CV.notify_all();
    });
    let mut ready = READY.lock();
    CV.wait_while(&mut ready, |r| !*r);
    drop(ready);
    t.join().unwrap();
}
