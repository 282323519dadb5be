//! loom models of every handoff protocol of McsMutex and CnaMutex.
use crate::model;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use numa_locks::raw::{RawCna, RawMcs};
use numa_locks::{loom_clock, loom_probe, topology, tunables};

/// Secondary-queue flushes and splices seen across all executions of a model (feature `stats`):
/// the CNA models check that they reach the paths they are named after.
#[cfg(feature = "stats")]
static FLUSHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Asserts (with feature `stats`) that the model just run flushed or spliced a secondary queue
/// in at least one execution, i.e. that a waiter was moved to the secondary queue.
fn assert_secondary_reached() {
    #[cfg(feature = "stats")]
    {
        let seen = FLUSHES.swap(0, std::sync::atomic::Ordering::Relaxed);
        assert!(
            seen > 0,
            "the model never moved a waiter to the secondary queue"
        );
    }
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
        #[cfg(feature = "stats")]
        FLUSHES.fetch_add(
            numa_locks::stats::HasStats::stats(&lock.0).flushes,
            std::sync::atomic::Ordering::Relaxed,
        );
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
    loom_probe::take_handed_stores();
    model(2, || contend!(RawMcs, 3usize, 1usize, |_| 0, 0));
    assert!(
        loom_probe::take_handed_stores() > 0,
        "no execution took a handed lock with a plain store (HANDED)"
    );
}

#[test]
fn mcs_stealing_against_head() {
    // Stealing on, and the head's patience expires at its first check: covers steal, NO_STEAL
    // and the head's acquisition racing with arrivals.
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    loom_probe::take_free_locks_left();
    loom_probe::take_premarks();
    loom_probe::take_unreserved_handoffs();
    model(2, || contend!(RawMcs, 3usize, 1usize, |_| 0, 1 << 40));
    assert!(
        loom_probe::take_free_locks_left() > 0,
        "no arrival left a free lock to the queue's head"
    );
    assert!(
        loom_probe::take_premarks() > 0,
        "no new head marked its successor before its first look (premark)"
    );
    assert!(
        loom_probe::take_unreserved_handoffs() > 0,
        "no holder made its marked successor head with the lock left unreserved"
    );
}

/// Runs `body` as a loom model with stealing on and a re-take window that never closes (the
/// clock stands still, `contend!`'s step 0): a marking head leaves the busy lock unreserved, so
/// arrivals and the releasing holder may take it ahead of the head, which still gets the lock,
/// and mutual exclusion holds. Checks that a head did leave a busy lock open.
fn with_open_retake_window(body: impl Fn() + Sync + Send + 'static) {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    tunables::set_retake_window(std::time::Duration::from_millis(10)).unwrap();
    loom_probe::take_left_open_in_window();
    model(2, body);
    tunables::reset_defaults();
    assert!(
        loom_probe::take_left_open_in_window() > 0,
        "no head left a busy lock open within its re-take window"
    );
}

/// The lone head's re-take window (`tunables::lone_retake_window`, on by default), with the
/// clock standing still so that only a thread queueing behind the head closes it. Two threads,
/// two acquisitions each: a head with nobody behind it leaves the busy lock open (spacing its
/// looks), and a free one, for one look, to the releasing thread, which may take it back;
/// mutual exclusion holds and the head still gets the lock. Three threads: a head's window
/// closes when another thread queues behind it, and it reserves the lock.
#[test]
fn mcs_lone_head_leaves_lock_open_until_someone_queues() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    loom_probe::take_left_open_alone();
    loom_probe::take_lone_looks_spaced();
    loom_probe::take_free_locks_held_off();
    model(3, || contend!(RawMcs, 2usize, 2usize, |_| 0, 0));
    assert!(
        loom_probe::take_left_open_alone() > 0,
        "no head with nobody behind it left a busy lock open"
    );
    assert!(
        loom_probe::take_lone_looks_spaced() > 0,
        "no head with nobody behind it spaced its looks at the busy lock"
    );
    assert!(
        loom_probe::take_free_locks_held_off() > 0,
        "no head with nobody behind it left a free lock to the releasing thread"
    );
    loom_probe::take_lone_window_closed();
    model(2, || contend!(RawMcs, 3usize, 1usize, |_| 0, 0));
    tunables::reset_defaults();
    assert!(
        loom_probe::take_lone_window_closed() > 0,
        "no head's lone window closed when a thread queued behind it"
    );
}

/// The same with CnaMutex on one node (the `LOCAL` handoffs meet the window).
#[test]
fn cna_lone_head_leaves_lock_open() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    loom_probe::take_left_open_alone();
    model(3, || contend!(RawCna, 2usize, 2usize, |_| 0, 0));
    tunables::reset_defaults();
    assert!(
        loom_probe::take_left_open_alone() > 0,
        "no head with nobody behind it left a busy lock open"
    );
}

#[test]
fn mcs_retake_window_leaves_lock_open() {
    with_open_retake_window(|| contend!(RawMcs, 3usize, 1usize, |_| 0, 0));
}

/// The same with CnaMutex, one node, two acquisitions per thread: the window meets the `LOCAL`
/// reservations of handoffs to a marked successor of the holder's node, under which arrivals
/// of that node (the releasing holder among them) take the lock ahead of the head.
#[test]
fn cna_retake_window_with_local_handoffs() {
    loom_probe::take_local_steals();
    with_open_retake_window(|| contend!(RawCna, 3usize, 2usize, |_| 0, 0));
    assert!(
        loom_probe::take_local_steals() > 0,
        "no arrival took a lock reserved for its node"
    );
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

// ---- CNA ------------------------------------------------------------------------------------
// Threads alternate between virtual nodes 0 and 1, so a head regularly finds a remote successor
// followed by a local one (the move to the secondary queue), and the secondary queue travels
// with headship, is spliced back when the main queue empties (racing with new arrivals), or is
// flushed when the clock says it is too old.

/// Thread t runs on node t % 2.
fn two_nodes(t: usize) -> usize {
    t % 2
}

#[test]
fn cna_move_to_secondary_and_carry() {
    // 0 (node 0), 1 (node 1), 2 (node 0): when 1 and 2 queue behind 0's successor, the head
    // moves 1 to the secondary queue and hands it, with headship, to 2. Time stands still:
    // no threshold flush, so the secondary queue is spliced or flushed for a remote successor.
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || contend!(RawCna, 3usize, 1usize, two_nodes, 0));
}

#[test]
fn cna_threshold_flush() {
    // Every clock reading is far past the previous one: any secondary queue is flushed at the
    // next handoff.
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || contend!(RawCna, 3usize, 1usize, two_nodes, 1 << 40));
}

#[test]
fn cna_splice_race_with_arrival() {
    // Two rounds each on two nodes: the head that empties the main queue splices the
    // secondary queue back with a CAS on the tail while the other thread re-arrives.
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(2, || contend!(RawCna, 2usize, 2usize, two_nodes, 0));
}

#[test]
fn cna_four_threads_two_nodes() {
    // 4 threads on 2 nodes, stealing on: reordering, carrying, splicing and stealing together.
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    model(1, || contend!(RawCna, 4usize, 1usize, two_nodes, 0));
}

#[test]
fn cna_move_to_secondary_then_splice() {
    // The main thread (node 0) holds the lock while three waiters queue: 1 (node 1), 2 (node 0),
    // 3 (node 1). When they queue in that order, head 1 moves 2 to the secondary queue, hands
    // it with headship to 3, and 3 splices it back when the main queue empties.
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        loom_clock::reset(0);
        let lock = Arc::new((RawCna::new(), UnsafeCell::new(0usize)));
        topology::set_thread_node(Some(0));
        lock.0.lock();
        let handles: Vec<_> = (1..4)
            .map(|t| {
                let lock = lock.clone();
                thread::spawn(move || {
                    topology::set_thread_node(Some(two_nodes(t)));
                    lock.0.lock();
                    lock.1.with_mut(|c| unsafe { *c += 1 });
                    unsafe { lock.0.unlock() };
                })
            })
            .collect();
        for _ in 0..3 {
            thread::yield_now();
        }
        unsafe { lock.0.unlock() };
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(lock.1.with(|c| unsafe { *c }), 3);
        #[cfg(feature = "stats")]
        FLUSHES.fetch_add(
            numa_locks::stats::HasStats::stats(&lock.0).flushes,
            std::sync::atomic::Ordering::Relaxed,
        );
    });
    assert_secondary_reached();
}

/// Stealing on, two threads of node 0 and one of node 1, two rounds each: a holder that makes
/// its marked successor of the same node head leaves the lock reserved for that node (`LOCAL`),
/// and an arrival of node 0 (the holder re-taking it, most often) takes the free lock past the
/// new head while an arrival of node 1 queues. Covers the second CAS after a failed fast path
/// (`take_local`) racing with the head's CAS.
#[test]
fn cna_local_reservation() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    loom_probe::take_unreserved_handoffs();
    loom_probe::take_local_steals();
    model(2, || {
        contend!(RawCna, 3usize, 2usize, |t: usize| usize::from(t == 2), 0)
    });
    assert!(
        loom_probe::take_unreserved_handoffs() > 0,
        "no holder made its marked successor head without reserving the lock for it"
    );
    assert!(
        loom_probe::take_local_steals() > 0,
        "no arrival of the reserved node took the free lock (LOCAL)"
    );
}

#[test]
fn cna_deferred_handoff() {
    // Two threads of node 0 and one of node 1, two rounds each: a head whose successor is
    // remote defers its choice to `unlock` behind its proxy node, and the unlock then finds
    // the other node-0 thread re-queued (or not) and hands over from the proxy. The proxy is
    // reused across rounds, so its release and re-take are checked too.
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_handed_stores();
    loom_probe::take_deferred_releases();
    model(2, || {
        contend!(RawCna, 3usize, 2usize, |t: usize| usize::from(t == 2), 0)
    });
    assert!(
        loom_probe::take_handed_stores() > 0,
        "no execution took a handed lock with a plain store (HANDED)"
    );
    assert!(
        loom_probe::take_deferred_releases() > 0,
        "no unlock handed on from a proxy before freeing the lock"
    );
}
