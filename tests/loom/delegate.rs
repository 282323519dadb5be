//! loom models of delegation (`delegate`): a holder that came through the queue runs the
//! closures its waiters published, instead of making them head.
//!
//! Each model has the main thread hold the lock while the others queue with `delegate`, so that
//! a waiter that becomes head finds others behind it; which of them ends up serving, and whom,
//! depends on the interleaving. Every model checks that each closure ran exactly once under the
//! lock (a loom cell, so a race is an error), that each caller got its own result or its own
//! panic, and that the lock ends free; and, through probes, that it reached the path it is
//! named after.
use crate::model;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::{loom_clock, loom_probe, topology, tunables};

/// What one thread of a model does.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    /// `delegate` a closure that adds 1 and returns the thread's number.
    Delegate,
    /// The same, and then panics.
    Panic,
    /// `try_lock_for`, whose deadline `ticks` clock readings away may pass while it is queued.
    Timed,
}

/// Timed waiters that gave up, across the executions of a model.
static GAVE_UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A loom cell the closures share: accessed only under the lock (which loom checks).
struct Count(UnsafeCell<usize>);
// SAFETY: every access is under the lock under test; a racing access fails the model.
unsafe impl Sync for Count {}

macro_rules! delegates {
    ($raw:ty, $ops:expr, $clock_step:expr) => {
        delegates!($raw, $ops, $clock_step, |_| 0)
    };
    ($raw:ty, $ops:expr, $clock_step:expr, $node_of:expr) => {
        delegates!(@new <$raw>::new(), $ops, $clock_step, $node_of)
    };
    (@new $new:expr, $ops:expr, $clock_step:expr, $node_of:expr) => {{
        loom_clock::reset($clock_step);
        let ops: &'static [Op] = $ops;
        let shared = Arc::new(($new, Count(UnsafeCell::new(0usize))));
        topology::set_thread_node(Some(0));
        shared.0.lock();
        let handles: Vec<_> = ops
            .iter()
            .enumerate()
            .map(|(t, &op)| {
                let shared = shared.clone();
                thread::spawn(move || {
                    topology::set_thread_node(Some($node_of(t)));
                    let add = || shared.1.0.with_mut(|c| unsafe { *c += 1 });
                    match op {
                        Op::Delegate => {
                            assert_eq!(
                                shared.0.delegate(|| {
                                    add();
                                    t
                                }),
                                t
                            );
                            1
                        }
                        Op::Panic => {
                            let r = catch_unwind(AssertUnwindSafe(|| {
                                shared.0.delegate(|| {
                                    add();
                                    if t < usize::MAX {
                                        panic!("closure {t}");
                                    }
                                })
                            }));
                            let msg = *r.unwrap_err().downcast::<String>().unwrap();
                            assert_eq!(msg, format!("closure {t}"));
                            1
                        }
                        Op::Timed => {
                            if shared.0.try_lock_for(Duration::from_nanos(1)) {
                                add();
                                unsafe { shared.0.unlock() };
                                1
                            } else {
                                GAVE_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                0
                            }
                        }
                    }
                })
            })
            .collect();
        unsafe { shared.0.unlock() };
        let ran: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(shared.1.0.with(|c| unsafe { *c }), ran);
        assert!(!shared.0.is_locked());
    }};
}

/// Runs `body` with panic messages silenced (the models panic on purpose, in every execution).
fn quietly(body: impl FnOnce()) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(body));
    std::panic::set_hook(hook);
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}

/// Two delegating threads: a holder runs the other's closure, and a combining head with nobody
/// queued behind it leaves the busy lock open (the lone head's re-take window, which combiners
/// have too: no closure waits behind them).
#[test]
fn mcs_delegate_publish_run_result() {
    tunables::reset_defaults();
    loom_probe::take_served();
    loom_probe::take_left_open_alone();
    model(2, || delegates!(RawMcs, &[Op::Delegate, Op::Delegate], 0));
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
    assert!(
        loom_probe::take_left_open_alone() > 0,
        "no combining head with nobody behind it left a busy lock open"
    );
}

#[test]
fn cna_delegate_serves_its_node() {
    tunables::reset_defaults();
    loom_probe::take_served();
    model(2, || delegates!(RawCna, &[Op::Delegate, Op::Delegate], 0));
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
}

/// CnaMutex with waiters of two nodes: a combiner serves its own node's waiters only, reorders
/// from each one it served (`leave_headship`), and hands the lock on to the other node's.
#[test]
fn cna_delegate_with_waiters_of_two_nodes() {
    tunables::reset_defaults();
    loom_probe::take_served();
    model(1, || {
        delegates!(
            RawCna,
            &[Op::Delegate, Op::Delegate, Op::Delegate],
            0,
            |t: usize| t % 2
        )
    });
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
}

#[test]
fn hq_delegate_serves_its_domain() {
    tunables::reset_defaults();
    loom_probe::take_served();
    model(2, || delegates!(RawHq, &[Op::Delegate, Op::Delegate], 0));
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
}

/// HqMutex (flat) with three waiters of one domain: a combiner that serves a waiter with
/// another queued behind it passes that waiter's payload on to it.
#[test]
fn hq_delegate_served_flat_waiter_passes_its_payload() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_flat_payloads_passed();
    model(1, || {
        delegates!(RawHq, &[Op::Delegate, Op::Delegate, Op::Delegate], 0)
    });
    assert!(
        loom_probe::take_flat_payloads_passed() > 0,
        "no combiner served a flat waiter with another queued behind it"
    );
}

/// HqMutex (hierarchical) with two waiters of the holder's node and one of another: a combiner
/// whose local successor is its node's last waiter while the other node waits makes it head
/// instead of serving it, so that the node keeps its turn.
#[test]
fn hq_delegate_keeps_its_nodes_turn() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_kept_turns();
    model(2, || {
        delegates!(
            @new RawHq::new_hierarchical(),
            &[Op::Delegate, Op::Delegate, Op::Delegate],
            0,
            |t: usize| usize::from(t == 2)
        )
    });
    assert!(
        loom_probe::take_kept_turns() > 0,
        "no combiner made its node's last waiter head while another node waited"
    );
}

#[test]
fn delegate_panic_reaches_its_caller() {
    tunables::reset_defaults();
    loom_probe::take_served_panics();
    quietly(|| model(2, || delegates!(RawMcs, &[Op::Delegate, Op::Panic], 0)));
    assert!(
        loom_probe::take_served_panics() > 0,
        "no served closure panicked"
    );
}

#[test]
fn timed_waiter_among_delegates() {
    tunables::reset_defaults();
    loom_probe::take_served();
    // A step of 1 ns per clock reading: the 1 ns deadline passes within the wait in some
    // executions and not in others.
    GAVE_UP.store(0, std::sync::atomic::Ordering::Relaxed);
    model(2, || delegates!(RawMcs, &[Op::Timed, Op::Delegate], 1));
    model(2, || delegates!(RawMcs, &[Op::Delegate, Op::Timed], 1));
    model(2, || delegates!(RawCna, &[Op::Delegate, Op::Timed], 1));
    // A combiner meets the timed waiter's node (abandoned or not) between two delegates.
    model(2, || {
        delegates!(RawMcs, &[Op::Delegate, Op::Timed, Op::Delegate], 1)
    });
    assert!(
        GAVE_UP.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no timed waiter gave up"
    );
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
}

#[test]
fn combiner_stops_at_its_bound() {
    tunables::reset_defaults();
    tunables::set_delegate_batch(1).unwrap();
    loom_probe::take_served();
    loom_probe::take_batch_bounds();
    model(2, || {
        delegates!(RawMcs, &[Op::Delegate, Op::Delegate, Op::Delegate], 0)
    });
    tunables::reset_defaults();
    assert!(
        loom_probe::take_served() > 0,
        "no holder ran a waiter's closure"
    );
    assert!(
        loom_probe::take_batch_bounds() > 0,
        "no holder stopped at its bound"
    );
}
