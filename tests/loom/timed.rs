//! loom models of timed acquisition: waiters that give up while queued.
//!
//! Loom does not model time: a timed wait returns at once, and the clock (`loom_clock`) advances
//! by one step at every reading by any thread, so whether a waiter's deadline has passed at a
//! given point depends on the interleaving. Each model therefore explores both orders of "the
//! deadline passes" and "headship arrives": a waiter abandons its node behind others, gives up as
//! head, or gets the lock, and the thread passing headship meets the abandoned node before, while
//! or after it is abandoned. Every model checks an exact count of critical sections (a loom cell,
//! so a data race is an error too), that the lock ends free and unreserved, and (through loom)
//! that nothing deadlocks and no wake-up is lost.
use crate::model;
use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::{loom_clock, loom_probe, topology, tunables};

/// The operations the models need from every raw lock.
trait Raw: Send + Sync + 'static {
    fn lock(&self);
    fn try_lock(&self) -> bool;
    fn try_lock_for(&self, timeout: Duration) -> bool;
    /// # Safety
    /// The lock must be held.
    unsafe fn unlock(&self);
    /// Secondary-queue flushes and splices so far (CNA with feature `stats`; 0 otherwise).
    fn flushes(&self) -> u64 {
        0
    }
}

macro_rules! raw {
    ($raw:ty $(, $flushes:item)?) => {
        impl Raw for $raw {
            fn lock(&self) {
                <$raw>::lock(self)
            }
            fn try_lock(&self) -> bool {
                <$raw>::try_lock(self)
            }
            fn try_lock_for(&self, timeout: Duration) -> bool {
                <$raw>::try_lock_for(self, timeout)
            }
            unsafe fn unlock(&self) {
                unsafe { <$raw>::unlock(self) }
            }
            $($flushes)?
        }
    };
}
raw!(RawMcs);
#[cfg(feature = "stats")]
raw!(
    RawCna,
    fn flushes(&self) -> u64 {
        numa_locks::stats::HasStats::stats(self).flushes
    }
);
#[cfg(not(feature = "stats"))]
raw!(RawCna);
raw!(RawHq);

/// Secondary-queue flushes and splices seen across all executions of a model (feature `stats`).
static FLUSHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Asserts (with feature `stats`) that the model just run flushed or spliced a secondary queue in
/// at least one execution, i.e. that a waiter was moved to the secondary queue.
fn assert_secondary_reached() {
    let seen = FLUSHES.swap(0, std::sync::atomic::Ordering::Relaxed);
    assert!(
        seen > 0 || !cfg!(feature = "stats"),
        "the model never moved a waiter to the secondary queue"
    );
}

/// What one thread of a model does: its virtual node, and either a plain `lock()` or a
/// `try_lock_for` whose deadline is `ticks` clock readings away.
#[derive(Clone, Copy)]
enum Waiter {
    Plain(usize),
    Timed(usize, u64),
}

/// The main thread (node `holder_node`) holds the lock while one thread per entry of `waiters`
/// queues; then it releases it. Checks the count of critical sections against the number of
/// successful acquisitions, and that the lock ends free and unreserved.
fn holder_and_waiters<L: Raw>(new: fn() -> L, holder_node: usize, waiters: &'static [Waiter]) {
    loom_clock::reset(1);
    let lock = Arc::new((new(), UnsafeCell::new(0usize), AtomicUsize::new(0)));
    topology::set_thread_node(Some(holder_node));
    lock.0.lock();
    let handles: Vec<_> = waiters
        .iter()
        .map(|&waiter| {
            let lock = lock.clone();
            thread::spawn(move || {
                let acquired = match waiter {
                    Waiter::Plain(node) => {
                        topology::set_thread_node(Some(node));
                        lock.0.lock();
                        true
                    }
                    Waiter::Timed(node, ticks) => {
                        topology::set_thread_node(Some(node));
                        lock.0.try_lock_for(Duration::from_nanos(ticks))
                    }
                };
                if acquired {
                    lock.1.with_mut(|c| unsafe { *c += 1 });
                    lock.2.fetch_add(1, Ordering::Relaxed);
                    unsafe { lock.0.unlock() };
                }
            })
        })
        .collect();
    thread::yield_now();
    lock.1.with_mut(|c| unsafe { *c += 1 });
    unsafe { lock.0.unlock() };
    for h in handles {
        h.join().unwrap();
    }
    let acquired = lock.2.load(Ordering::Relaxed);
    assert_eq!(lock.1.with(|c| unsafe { *c }), 1 + acquired);
    let plain = waiters
        .iter()
        .filter(|w| matches!(w, Waiter::Plain(_)))
        .count();
    assert!(acquired >= plain, "a plain waiter never got the lock");
    assert!(lock.0.try_lock(), "the lock ends held or reserved");
    unsafe { lock.0.unlock() };
    FLUSHES.fetch_add(lock.0.flushes(), std::sync::atomic::Ordering::Relaxed);
}

use Waiter::{Plain, Timed};

/// MCS: a plain waiter and a timed one queue behind the holder in either order. The timed one
/// abandons behind the other (whose handoff then skips it, racing with the abandonment), is made
/// head and gives up (handing headship to the plain waiter, or emptying the queue), or gets the
/// lock.
#[test]
fn mcs_timed_waiter_races_the_handoff() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_handed_stores();
    model(2, || {
        holder_and_waiters(RawMcs::new, 0, &[Plain(0), Timed(0, 4)])
    });
    assert!(
        loom_probe::take_handed_stores() > 0,
        "no execution took a handed lock with a plain store (HANDED) while a timed waiter raced the handoff"
    );
}

/// MCS: two timed waiters: the holder's handoff may find a chain of abandoned nodes, skip and
/// recycle each, and empty the queue (clearing the reservation that stealing-off handoffs set).
#[test]
fn mcs_chain_of_abandoned_nodes() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_handed_stores();
    model(2, || {
        holder_and_waiters(RawMcs::new, 0, &[Timed(0, 2), Timed(0, 3)])
    });
    assert!(
        loom_probe::take_handed_stores() > 0,
        "no execution took a handed lock with a plain store (HANDED) beside the abandoned nodes"
    );
}

/// MCS with stealing on: a timed head's patience and `NO_STEAL` race with the unlock.
#[test]
fn mcs_timed_head_with_stealing() {
    tunables::reset_defaults();
    tunables::set_stealing(true).unwrap();
    model(2, || holder_and_waiters(RawMcs::new, 0, &[Timed(0, 3)]));
}

/// MCS: the holder releases with `unlock_fair` while the only waiter, a timed head, gives up:
/// whichever lands first, the reservation `unlock_fair` sets for the head must not outlive the
/// queue (the randomized simulator tests found this race; `LockWord::unlock_fair` now looks at
/// the queue again after a fence that pairs with the leaving waiter's).
#[test]
fn mcs_unlock_fair_races_timed_head() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(3, || {
        loom_clock::reset(1);
        let lock = Arc::new(RawMcs::new());
        lock.lock();
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || {
                if lock.try_lock_for(Duration::from_nanos(2)) {
                    unsafe { lock.unlock() };
                }
            })
        };
        thread::yield_now();
        unsafe { lock.unlock_fair() };
        waiter.join().unwrap();
        assert!(
            lock.try_lock(),
            "the lock ends reserved for a waiter that left"
        );
        unsafe { lock.unlock() };
    });
}

/// CNA: the holder is on node 0; a node-0 waiter, a node-1 timed waiter and another node-0
/// waiter queue. When the first is head it moves the node-1 waiter to the secondary queue, where
/// that waiter's deadline passes: the node is abandoned in the secondary queue, and the splice or
/// flush that reaches it must skip it without losing the rest.
#[test]
fn cna_abandoned_in_secondary_queue() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        holder_and_waiters(RawCna::new, 0, &[Plain(0), Timed(1, 6), Plain(0)])
    });
    assert_secondary_reached();
}

/// CNA: a timed head carrying a secondary queue gives up: it must hand the secondary queue on,
/// or splice it back when it is the tail.
#[test]
fn cna_timed_head_leaves_with_secondary_queue() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        holder_and_waiters(RawCna::new, 0, &[Timed(0, 5), Plain(1), Plain(0)])
    });
    assert_secondary_reached();
}

/// HQ (hierarchical from the start): two node-0 waiters share a local queue, the second timed; a
/// node-1 waiter is in the FIFO. The timed one abandons in the local queue (the local handoff
/// skips it), or, as the representative or after a local handoff, gives up as head (its local
/// successor takes its place in the FIFO, or the next node's entry becomes head).
#[test]
fn hq_abandoned_in_local_queue() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        holder_and_waiters(
            RawHq::new_hierarchical,
            0,
            &[Plain(0), Timed(0, 4), Plain(1)],
        )
    });
}

/// HQ: a timed representative of node 1 behind node 0's: the node FIFO skips its abandoned
/// entry; deferred handoffs from node 0 meet it too.
#[test]
fn hq_abandoned_fifo_entry() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        holder_and_waiters(
            RawHq::new_hierarchical,
            0,
            &[Timed(1, 4), Plain(0), Plain(0)],
        )
    });
}

// ---- Condition variables -------------------------------------------------------------------

use numa_locks::raw::{QueueLock, RawCondvar};

/// A mutex, a condvar of its kind, and (threads counted, flag) under the mutex.
type FlagShared<L> = Arc<(L, RawCondvar<L>, UnsafeCell<(usize, bool)>)>;

/// Spawns two waiters that each count themselves (+1), wait on the condvar for the flag, then
/// add 10 and release; returns once both have counted themselves (and so are waiting or about
/// to), with the mutex held by the caller.
fn two_flag_waiters<L: Raw + QueueLock>(
    new: fn() -> L,
) -> (FlagShared<L>, Vec<thread::JoinHandle<()>>) {
    let shared: FlagShared<L> = Arc::new((
        new(),
        RawCondvar::<L>::new(),
        UnsafeCell::new((0usize, false)),
    ));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.0.lock();
                shared.2.with_mut(|s| unsafe { (*s).0 += 1 });
                while !shared.2.with(|s| unsafe { (*s).1 }) {
                    unsafe { shared.1.wait(&shared.0) };
                }
                shared.2.with_mut(|s| unsafe { (*s).0 += 10 });
                unsafe { shared.0.unlock() };
            })
        })
        .collect();
    lock_when(&shared.0, || shared.2.with(|s| unsafe { (*s).0 }) == 2);
    (shared, waiters)
}

/// Takes `lock` and returns holding it once `ready` (read under it) holds, yielding between
/// tries.
fn lock_when<L: Raw>(lock: &L, ready: impl Fn() -> bool) {
    loop {
        lock.lock();
        if ready() {
            return;
        }
        unsafe { lock.unlock() };
        thread::yield_now();
    }
}

/// A waiter waits for a flag that another thread sets under the mutex and then notifies, with
/// the notify before or after the unlock: whatever the interleaving (the notify landing before
/// the waiter is in the list, between its append and its release of the mutex, or after), the
/// waiter returns (no lost wake-up) holding the mutex and sees the flag.
fn cv_wait_races_notify<L: Raw + QueueLock>(new: fn() -> L, notify_under_lock: bool) {
    loom_clock::reset(0);
    let shared = Arc::new((new(), RawCondvar::<L>::new(), UnsafeCell::new(false)));
    let waiter = {
        let shared = shared.clone();
        thread::spawn(move || {
            shared.0.lock();
            while !shared.2.with(|ready| unsafe { *ready }) {
                unsafe { shared.1.wait(&shared.0) };
            }
            unsafe { shared.0.unlock() };
        })
    };
    shared.0.lock();
    shared.2.with_mut(|ready| unsafe { *ready = true });
    if notify_under_lock {
        shared.1.notify_one();
        unsafe { shared.0.unlock() };
    } else {
        unsafe { shared.0.unlock() };
        shared.1.notify_one();
    }
    waiter.join().unwrap();
    assert!(shared.0.try_lock(), "the mutex ends held or reserved");
    unsafe { shared.0.unlock() };
}

#[test]
fn mcs_condvar_wait_races_notify() {
    tunables::reset_defaults();
    model(2, || cv_wait_races_notify(RawMcs::new, false));
    model(2, || cv_wait_races_notify(RawMcs::new, true));
}

#[test]
fn cna_condvar_wait_races_notify() {
    tunables::reset_defaults();
    model(2, || cv_wait_races_notify(RawCna::new, true));
}

#[test]
fn hq_condvar_wait_races_notify() {
    tunables::reset_defaults();
    model(2, || cv_wait_races_notify(RawHq::new_hierarchical, true));
}

/// A timed wait races a notify: if the notify reports that it notified a waiter, the wait must
/// report "not timed out", and the other way round (no spurious wake-up, no lost notification);
/// either way the waiter ends holding the mutex once and the mutex ends free.
#[test]
fn mcs_condvar_timed_wait_races_notify() {
    tunables::reset_defaults();
    model(2, || {
        loom_clock::reset(1);
        let shared = Arc::new((
            RawMcs::new(),
            RawCondvar::<RawMcs>::new(),
            UnsafeCell::new(0),
        ));
        let waiter = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.0.lock();
                let timed_out = unsafe { shared.1.wait_for(&shared.0, Duration::from_nanos(3)) };
                shared.2.with_mut(|c| unsafe { *c += 1 });
                unsafe { shared.0.unlock() };
                timed_out
            })
        };
        let notified = shared.1.notify_one();
        let timed_out = waiter.join().unwrap();
        assert!(
            !(notified && timed_out),
            "a notified wait reported a timeout"
        );
        // A wait that did not time out was notified: by this notify, or... by nobody else.
        assert!(
            notified || timed_out,
            "a wait returned without notify or timeout"
        );
        assert_eq!(shared.2.with(|c| unsafe { *c }), 1);
        assert!(shared.0.try_lock());
        unsafe { shared.0.unlock() };
    });
}

/// `notify_all` wakes two waiters while the notifier holds the mutex, and they take it as
/// arriving threads do: every one of them gets the mutex exactly once.
#[test]
fn mcs_condvar_notify_all_wakes_behind_holder() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        loom_clock::reset(0);
        let (shared, waiters) = two_flag_waiters(RawMcs::new);
        shared.2.with_mut(|s| unsafe { (*s).1 = true });
        assert_eq!(shared.1.notify_all(), 2);
        unsafe { shared.0.unlock() };
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(shared.2.with(|s| unsafe { (*s).0 }), 22);
        assert!(shared.0.try_lock());
        unsafe { shared.0.unlock() };
    });
}

/// Two waiters wait for a flag; the notifier sets it and calls `notify_all`, under the mutex or
/// after releasing it. Both leave the list at once; a sleeper is woken after the list lock is
/// released, or under it once the batch is full (a batch of 1 under loom): both must return
/// (no lost wake-up, whatever the interleaving of their sleeps with the notify), each exactly
/// once, and the mutex ends free.
fn cv_notify_all_wakes_both<L: Raw + QueueLock>(new: fn() -> L, notify_under_lock: bool) {
    loom_clock::reset(0);
    let (shared, waiters) = two_flag_waiters(new);
    shared.2.with_mut(|s| unsafe { (*s).1 = true });
    let notified = if notify_under_lock {
        let n = shared.1.notify_all();
        unsafe { shared.0.unlock() };
        n
    } else {
        unsafe { shared.0.unlock() };
        shared.1.notify_all()
    };
    assert_eq!(notified, 2, "both waiters were in the list");
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(shared.2.with(|s| unsafe { (*s).0 }), 22);
    assert!(shared.0.try_lock(), "the mutex ends held or reserved");
    unsafe { shared.0.unlock() };
}

#[test]
fn mcs_condvar_notify_all_wakes_both() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_cv_wakes();
    loom_probe::take_cv_wakes_under_lock();
    model(1, || cv_notify_all_wakes_both(RawMcs::new, true));
    model(1, || cv_notify_all_wakes_both(RawMcs::new, false));
    assert!(loom_probe::take_cv_wakes() > 0, "no notify woke a sleeper");
    assert!(
        loom_probe::take_cv_wakes_under_lock() > 0,
        "no sleeper was woken under the list lock"
    );
}

#[test]
fn cna_condvar_notify_all_wakes_both() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || cv_notify_all_wakes_both(RawCna::new, true));
    model(1, || cv_notify_all_wakes_both(RawCna::new, false));
}

#[test]
fn hq_condvar_notify_all_wakes_both() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        cv_notify_all_wakes_both(RawHq::new_hierarchical, true)
    });
    model(1, || {
        cv_notify_all_wakes_both(RawHq::new_hierarchical, false)
    });
}

/// Two waiters; the notifier calls `notify_one` under the mutex (the first waiter leaves the
/// list and is woken, but cannot take the mutex before the notifier unlocks), then again after
/// unlocking, racing the first waiter's return: both notifies notify, both waiters return once.
#[test]
fn mcs_condvar_notify_one_around_the_unlock() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    model(1, || {
        loom_clock::reset(0);
        let (shared, waiters) = two_flag_waiters(RawMcs::new);
        shared.2.with_mut(|s| unsafe { (*s).1 = true });
        assert!(shared.1.notify_one());
        unsafe { shared.0.unlock() };
        assert!(
            shared.1.notify_one(),
            "the second waiter was still in the list"
        );
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(shared.2.with(|s| unsafe { (*s).0 }), 22);
        assert!(shared.0.try_lock());
        unsafe { shared.0.unlock() };
    });
}

/// A timed waiter and a plain one; the notifier calls `notify_one` twice under the mutex, the
/// second reaching the timed waiter only if its deadline has not taken it out of the list
/// first. It must report "not timed out" exactly when a notify reported notifying it, and
/// return holding the mutex once, however its deadline interleaves with the notifies; the
/// probe shows a deadline passing after the notify took the waiter off the list.
#[test]
fn mcs_condvar_timed_waiter_races_the_second_notify() {
    tunables::reset_defaults();
    tunables::set_stealing(false).unwrap();
    loom_probe::take_cv_notified_at_deadline();
    model(2, || {
        loom_clock::reset(1);
        // (waiting count, flag, critical sections after the wait)
        let shared = Arc::new((
            RawMcs::new(),
            RawCondvar::<RawMcs>::new(),
            UnsafeCell::new((0usize, false, 0usize)),
        ));
        let plain = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.0.lock();
                shared.2.with_mut(|s| unsafe { (*s).0 += 1 });
                while !shared.2.with(|s| unsafe { (*s).1 }) {
                    unsafe { shared.1.wait(&shared.0) };
                }
                shared.2.with_mut(|s| unsafe { (*s).2 += 1 });
                unsafe { shared.0.unlock() };
            })
        };
        let timed = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.0.lock();
                shared.2.with_mut(|s| unsafe { (*s).0 += 1 });
                let timed_out = unsafe { shared.1.wait_for(&shared.0, Duration::from_nanos(3)) };
                shared.2.with_mut(|s| unsafe { (*s).2 += 1 });
                unsafe { shared.0.unlock() };
                timed_out
            })
        };
        lock_when(&shared.0, || shared.2.with(|s| unsafe { (*s).0 }) == 2);
        shared.2.with_mut(|s| unsafe { (*s).1 = true });
        // Under the mutex: the first waiter leaves the list, then the second (if it is still
        // in the list).
        assert!(shared.1.notify_one());
        let notified_timed = shared.1.notify_one();
        unsafe { shared.0.unlock() };
        plain.join().unwrap();
        let timed_out = timed.join().unwrap();
        assert_eq!(
            notified_timed, !timed_out,
            "a notified wait reported a timeout, or a wait returned without notify or timeout"
        );
        assert_eq!(shared.2.with(|s| unsafe { (*s).2 }), 2);
        assert!(shared.0.try_lock());
        unsafe { shared.0.unlock() };
    });
    assert!(
        loom_probe::take_cv_notified_at_deadline() > 0,
        "no deadline passed after a notify"
    );
}
