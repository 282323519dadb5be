//! loom models of `RawHq`'s handoff paths.
use crate::model;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::RawHq;
use numa_locks::{loom_clock, loom_probe, topology, tunables};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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
    loom_probe::take_handed_stores();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(0, 1), (0, 1), (0, 1)])
    });
    assert!(
        loom_probe::take_handed_stores() > 0,
        "no execution took a handed lock with a plain store (HANDED)"
    );
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
    loom_probe::take_deferred_releases();
    model(2, || {
        contend(RawHq::new_hierarchical, &[(0, 2), (0, 2), (1, 1)])
    });
    assert!(
        loom_probe::take_deferred_releases() > 0,
        "no unlock found a deferral before freeing the lock"
    );
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

/// A flat lock (`RawHq::new`, which stays flat for 8 contended handoffs), stealing on: a new
/// head marks its successor at once (`premark`) and makes it head with plain stores, leaving
/// the lock open, as McsMutex does; the holder's re-take and arrivals race with the new head's
/// first look, and a marked waiter never parks.
#[test]
fn hq_flat_premarked_open_handoff() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    loom_probe::take_premarks();
    loom_probe::take_unreserved_handoffs();
    model(2, || contend(RawHq::new, &[(0, 2), (1, 1), (2, 1)]));
    assert!(
        loom_probe::take_premarks() > 0,
        "no flat head marked its successor at once"
    );
    assert!(
        loom_probe::take_unreserved_handoffs() > 0,
        "no flat holder made its marked successor head with the lock open"
    );
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

/// Over the executions of one domain model: how many executions there were, and in how many
/// the local queues went per domain, went back per node, and an arrival queued in a domain's
/// slot (plain std atomics: loom runs its executions one at a time).
static SWITCHES: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// Like `contend`, with a virtual node and cache domain per thread (two domains per node): thread
/// `t` runs at `(node, domain) = (plan[t].0, plan[t].1)` (`domain` machine-wide: node `n` holds
/// domains `2n` and `2n + 1`) and takes the lock `plan[t].2` times. Turn limits of 1 at both
/// levels make every turn with a waiter of its slot left end at its limit, so the first such
/// node turn makes the queues per domain (`refine`), and the next barren turn (a slot's only
/// waiter hands to another slot) makes them per node again (`coarsen`; the models' lock stays
/// hierarchical). Checks mutual exclusion, the count and that the lock ends free, and that the
/// explored executions include both switches; returns in how many of them an arrival queued in
/// a domain's slot.
fn domain_model(
    max_preemptions: usize,
    stealing: bool,
    plan: &'static [(usize, usize, usize)],
) -> usize {
    tunables::reset_defaults();
    tunables::set_stealing(stealing).unwrap();
    tunables::set_hq_local_handoffs(1).unwrap();
    tunables::set_hq_domain_handoffs(1).unwrap();
    topology::set_virtual_domains(Some(2)).unwrap();
    for count in &SWITCHES {
        count.store(0, Relaxed);
    }
    model(max_preemptions, move || contend_in_domains(plan));
    topology::set_virtual_domains(None).unwrap();
    let [executions, refined, coarsened, domain_arrivals] =
        SWITCHES.each_ref().map(|c| c.load(Relaxed));
    println!(
        "of {executions} executions, {refined} went per domain, {coarsened} back per node, \
         {domain_arrivals} had an arrival queue in a domain's slot"
    );
    assert!(refined > 0, "the queues never went per domain");
    assert!(coarsened > 0, "the queues never went back per node");
    domain_arrivals
}

fn contend_in_domains(plan: &'static [(usize, usize, usize)]) {
    loom_clock::reset(0);
    let lock = Arc::new((RawHq::new_hierarchical(), UnsafeCell::new(0usize)));
    let run = |lock: &(RawHq, UnsafeCell<usize>), (node, domain, iters): (usize, usize, usize)| {
        topology::set_thread_node(Some(node));
        topology::set_thread_domain(Some(domain));
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
    let total: usize = plan.iter().map(|&(_, _, iters)| iters).sum();
    assert_eq!(lock.1.with(|c| unsafe { *c }), total);
    assert!(!lock.0.is_locked());
    assert!(lock.0.try_lock(), "the lock ends reserved");
    unsafe { lock.0.unlock() };
    SWITCHES[0].fetch_add(1, Relaxed);
    for (count, n) in SWITCHES[1..].iter().zip(lock.0.domain_switches()) {
        if n > 0 {
            count.fetch_add(1, Relaxed);
        }
    }
}

/// The local queues' switch between per node and per cache domain (`Arrivals::coarse`): thread
/// 0 (node 0, domain 0) comes back behind node 0's representative (thread 1, domain 1: one local
/// queue with thread 0 while per node) while thread 2 of node 1 waits in the FIFO; thread 1's
/// turn ends with thread 0 left (`refine`), thread 2's turn is barren (`coarsen`). Thread 1
/// comes back too, racing with both switches: it reads either value of `coarse`, and queues in
/// domain 1's slot or node 0's; every waiter leaves through the slot it queued in.
#[test]
fn hq_domain_queues_switch() {
    let domain_arrivals = domain_model(2, false, &[(0, 0, 2), (0, 1, 2), (1, 3, 1)]);
    assert!(domain_arrivals > 0, "no arrival queued in a domain's slot");
}

/// Every thread on one node, in two cache domains: a node's turn that ends at its limit with a
/// waiter of the node left, and nobody of another node in the FIFO, starts again for the node
/// and makes the queues per domain (`refine`); the next barren turn makes them per node again.
#[test]
fn hq_domain_queues_refine_on_one_node() {
    domain_model(2, false, &[(0, 0, 2), (0, 1, 2)]);
}

/// The same switches with stealing on: arrivals may take the free lock ahead of the queues,
/// so turns end and switches happen at other moments. (Within 2 preemptions the thread that
/// comes back after the switch to per domain steals the lock rather than queue: 0 of 37,672
/// executions queue in a domain's slot; 3 preemptions take over 4 minutes.)
#[test]
fn hq_domain_queues_switch_with_stealing() {
    domain_model(2, true, &[(0, 0, 2), (0, 1, 2), (1, 3, 1)]);
}
