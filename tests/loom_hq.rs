//! loom models of `RawHq`'s handoff paths. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_hq -- --test-threads=1`.
//!
//! As in `tests/loom.rs`, spinning is skipped under loom, so every wait goes through the
//! park/unpark path and each model also checks for lost wake-ups. Models run one at a time
//! because the tunables are process-wide.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::RawHq;
use numa_locks::{loom_clock, topology, tunables};

/// Bounds the preemptions loom explores, keeping each model within CI time.
fn model(max_preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(max_preemptions);
    builder.check(f);
}

/// Runs one thread per entry of `plan` (the main thread takes entry 0): thread `t` sets its
/// virtual node to `plan[t].0`, then takes the lock `plan[t].1` times, incrementing a
/// loom-checked cell. Checks the final count and that the lock ends free.
fn contend(new: fn() -> RawHq, plan: &'static [(usize, usize)]) {
    loom_clock::reset(0);
    let lock = Arc::new((new(), UnsafeCell::new(0usize)));
    let run = |lock: &(RawHq, UnsafeCell<usize>), (node, iters): (usize, usize)| {
        topology::set_thread_node(Some(node));
        for _ in 0..iters {
            lock.0.lock();
            lock.1.with_mut(|c| unsafe { *c += 1 });
            unsafe { lock.0.unlock() };
        }
    };
    let handles: Vec<_> = plan[1..]
        .iter()
        .map(|&step| {
            let lock = lock.clone();
            thread::spawn(move || run(&lock, step))
        })
        .collect();
    run(&lock, plan[0]);
    for h in handles {
        h.join().unwrap();
    }
    let total: usize = plan.iter().map(|&(_, iters)| iters).sum();
    assert_eq!(lock.1.with(|c| unsafe { *c }), total);
    assert!(!lock.0.is_locked());
    assert!(lock.0.try_lock(), "the lock ends reserved");
    unsafe { lock.0.unlock() };
}

/// Threads of one node in hierarchical mode: headship passes along the local queue, and the
/// local tail's `me → 0` CAS races with arrivals.
#[test]
fn hq_local_handoff() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(0, 1), (0, 1), (0, 1)])
    });
}

/// Two threads of one node, twice each: local handoffs back and forth.
#[test]
fn hq_local_handoff_repeated() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(3, || contend(RawHq::new_hierarchical, &[(0, 2), (0, 2)]));
}

/// Limit 1: every handoff goes to the next node in the FIFO; a representative whose turn ends
/// with local waiters behind it re-joins the FIFO at the tail.
#[test]
fn hq_remote_handoff() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    tunables::set_hq_local_handoffs(1).unwrap();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(1, 2), (0, 1), (0, 1)])
    });
}

/// A node's last local waiter leaves its local queue (`local_tail: me → 0`) while another
/// thread of that node arrives and becomes its new representative, joining the FIFO behind a
/// thread of another node.
#[test]
fn hq_node_joins_fifo_while_last_local_waiter_leaves() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(0, 2), (1, 1), (0, 1)])
    });
}

/// A holder whose node has been handing the lock around defers the handoff to the next node
/// until its unlock; a thread of its node arriving meanwhile claims it. The claim races with
/// the unlock's own `deferred → 0`.
#[test]
fn hq_deferred_handoff_claim_race() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(0, 2), (0, 2), (1, 1)])
    });
}

/// The first sustained contention allocates the per-node queues while other threads arrive
/// and read the pointer (and the mode); then the lock goes back to flat when it drains.
#[test]
fn hq_allocation_race() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        contend(|| RawHq::new_switching_after(1), &[(0, 2), (1, 1), (0, 1)])
    });
}

/// A hierarchical lock whose turn is barren (a representative with nobody of its node behind it
/// hands to another node's) goes flat at once in this model (`new_switching_after(1)`: one
/// barren turn) while representatives and flat arrivals are queued: they are served either way.
#[test]
fn hq_goes_flat_with_waiters_queued() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        contend(|| RawHq::new_switching_after(1), &[(0, 2), (1, 2), (2, 1)])
    });
}

/// Switching to hierarchical and back while threads keep arriving, with stealing on.
#[test]
fn hq_mode_switches_with_stealing() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    model(2, || {
        contend(|| RawHq::new_switching_after(1), &[(0, 2), (0, 1), (1, 1)])
    });
}

/// `unlock_fair` hands the lock to the next node; it never leaves the lock reserved.
#[test]
fn hq_fair_unlock() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || {
        let lock = Arc::new((RawHq::new_hierarchical(), UnsafeCell::new(0usize)));
        let handles: Vec<_> = [0usize, 1]
            .into_iter()
            .map(|node| {
                let lock = lock.clone();
                thread::spawn(move || {
                    topology::set_thread_node(Some(node));
                    lock.0.lock();
                    lock.1.with_mut(|c| unsafe { *c += 1 });
                    unsafe { lock.0.unlock_fair() };
                })
            })
            .collect();
        topology::set_thread_node(Some(0));
        lock.0.lock();
        lock.1.with_mut(|c| unsafe { *c += 1 });
        unsafe { lock.0.unlock_fair() };
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(lock.1.with(|c| unsafe { *c }), 3);
        assert!(lock.0.try_lock(), "a fair unlock left the lock reserved");
        unsafe { lock.0.unlock() };
    });
}
