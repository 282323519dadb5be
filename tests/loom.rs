//! loom models of every handoff protocol. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom -- --test-threads=1`.
//!
//! Under loom, spinning is skipped, so every wait goes through the park/unpark path (the futex
//! emulation built on loom's mutex and condvar): each model therefore also checks for lost
//! wake-ups. Models run one at a time because the tunables are process-wide.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::RawMcs;
use numa_locks::{loom_clock, topology, tunables};

/// Bounds the preemptions loom explores, keeping each model within CI time.
fn model(max_preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(max_preemptions);
    builder.check(f);
}

/// Runs `threads` threads (the main thread included), each taking the lock `iters` times and
/// incrementing a loom-checked cell; checks the final count. `node_of(t)` gives thread t's
/// virtual NUMA node.
macro_rules! contend {
    ($raw:ty, $threads:expr, $iters:expr, $node_of:expr, $clock_step:expr) => {{
        loom_clock::reset($clock_step);
        let lock = Arc::new((<$raw>::new(), UnsafeCell::new(0usize)));
        let handles: Vec<_> = (1..$threads)
            .map(|t| {
                let lock = lock.clone();
                thread::spawn(move || {
                    topology::set_thread_node(Some($node_of(t)));
                    for _ in 0..$iters {
                        lock.0.lock();
                        lock.1.with_mut(|c| unsafe { *c += 1 });
                        unsafe { lock.0.unlock() };
                    }
                })
            })
            .collect();
        topology::set_thread_node(Some($node_of(0)));
        for _ in 0..$iters {
            lock.0.lock();
            lock.1.with_mut(|c| unsafe { *c += 1 });
            unsafe { lock.0.unlock() };
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(lock.1.with(|c| unsafe { *c }), $threads * $iters);
        assert!(!lock.0.is_locked());
    }};
}

#[test]
fn mcs_handoff_2_threads() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(3, || contend!(RawMcs, 2usize, 2usize, |_| 0, 0));
}

#[test]
fn mcs_handoff_3_threads() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || contend!(RawMcs, 3usize, 1usize, |_| 0, 0));
}

#[test]
fn mcs_stealing_against_head() {
    // Stealing on, and the head's patience expires at its first check: covers steal, NO_STEAL
    // and the head's acquisition racing with arrivals.
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    model(2, || contend!(RawMcs, 3usize, 1usize, |_| 0, 1 << 40));
}

#[test]
fn mcs_park_unpark_race() {
    // Two threads, stealing on, patience never expires: the unlocker races with a head that is
    // announcing its sleep on the lock word.
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    model(3, || contend!(RawMcs, 2usize, 2usize, |_| 0, 0));
}

#[test]
fn mcs_fair_unlock() {
    tunables::reset_defaults();
    model(3, || {
        let lock = Arc::new((RawMcs::new(), UnsafeCell::new(0usize)));
        let l2 = lock.clone();
        let t = thread::spawn(move || {
            l2.0.lock();
            l2.1.with_mut(|c| unsafe { *c += 1 });
            unsafe { l2.0.unlock_fair() };
        });
        lock.0.lock();
        lock.1.with_mut(|c| unsafe { *c += 1 });
        unsafe { lock.0.unlock_fair() };
        t.join().unwrap();
        assert_eq!(lock.1.with(|c| unsafe { *c }), 2);
        // A fair unlock never leaves the lock reserved when nobody waits.
        assert!(lock.0.try_lock());
        unsafe { lock.0.unlock() };
    });
}
