//! Feature `lockup`: lockup reports through `numa_locks::lockup`'s hook.
//!
//! A forgotten guard is a lock that truly never moves, so "exactly one report, naming the holder"
//! holds on any machine, however threads are scheduled. That a long but moving queue reports
//! nothing needs exact time (the holders must keep making progress within the threshold), so it
//! is asserted in the simulator (`tests/sim`); here it is checked with wide margins only.
#![cfg(all(feature = "lockup", not(loom)))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use lock_api::{GuardSend, Mutex, RawMutex};
use numa_locks::lockup::{self, LockupReport};
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::tunables;

/// An upper bound for tests that must not hang; far above their normal run time.
const HANG_BOUND: Duration = Duration::from_secs(120);

/// The hook and the threshold are process-wide: the tests take turns (`common::serial`), and
/// each drops its hook when it ends.
struct Serial(#[allow(dead_code)] common::Serial);
fn serial() -> Serial {
    Serial(common::serial())
}
impl Drop for Serial {
    fn drop(&mut self) {
        drop(lockup::take_hook());
    }
}

/// Installs a hook that keeps every report.
fn collect_reports() -> Arc<StdMutex<Vec<LockupReport>>> {
    let reports = Arc::new(StdMutex::new(Vec::new()));
    let sink = reports.clone();
    lockup::set_hook(Box::new(move |report| {
        sink.lock().unwrap().push(report.clone())
    }));
    reports
}

/// A thread named "holder" takes the lock and forgets the guard; three threads queue behind
/// it. Exactly one report comes (the queue head's; the others wait behind it, and the episode
/// is reported once), naming the holder, the line where it locked, the waiter, and a queue of
/// three. Then `force_unlock` lets everyone through.
fn forgotten_guard_reports_once<R: RawMutex<Guard = GuardSend> + Send + Sync + 'static>() {
    let _serial = serial();
    let reports = collect_reports();
    tunables::set_lockup_threshold(Duration::from_millis(20)).unwrap();
    let lock = Arc::new(Mutex::<R, u64>::new(0));
    let (holder_id, line) = {
        let lock = lock.clone();
        thread::Builder::new()
            .name("holder".into())
            .spawn(move || {
                let line = line!() + 1;
                std::mem::forget(lock.lock());
                (lockup::thread_id(), line)
            })
            .unwrap()
            .join()
            .unwrap()
    };
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let lock = lock.clone();
            thread::Builder::new()
                .name(format!("waiter-{i}"))
                .spawn(move || {
                    numa_locks::topology::set_thread_node(Some(i % 2));
                    *lock.lock() += 1
                })
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    while reports.lock().unwrap().is_empty() {
        assert!(start.elapsed() < HANG_BOUND, "no lockup report");
        thread::sleep(Duration::from_millis(5));
    }
    // Give any duplicate time to show up: several more check periods of every waiter.
    thread::sleep(Duration::from_millis(200));
    {
        let reports = reports.lock().unwrap();
        assert_eq!(reports.len(), 1, "{reports:#?}");
        let report = &reports[0];
        eprintln!("{report}");
        assert_eq!(report.lock, unsafe { lock.raw() } as *const R as usize);
        let holder = report.holder.as_ref().expect("the holder is known");
        assert_eq!(holder.id, holder_id);
        assert_eq!(holder.name.as_deref(), Some("holder"));
        let site = report.holder_site.expect("the holder's call site is known");
        assert!(site.file().ends_with("lockup.rs"), "{site}");
        assert_eq!(site.line(), line);
        assert!(
            report
                .waiter
                .name
                .as_deref()
                .unwrap()
                .starts_with("waiter-")
        );
        assert!(report.waited >= Duration::from_millis(20));
        assert!(report.stalled >= Duration::from_millis(20));
        // However many waiters had queued when the head reported (all three, unless the
        // machine was slow to start them), the per-node counts add up to the queue length, on
        // the waiters' virtual nodes 0 and 1; with all three: two on node 0, one on node 1.
        assert!(
            (1..=3).contains(&report.queue_len),
            "queue length {}",
            report.queue_len
        );
        let per_node: usize = report.waiters_per_node.iter().map(|&(_, n)| n).sum();
        assert_eq!(per_node, report.queue_len, "{:?}", report.waiters_per_node);
        assert!(report.waiters_per_node.iter().all(|&(node, _)| node < 2));
        if report.queue_len == 3 {
            assert_eq!(report.waiters_per_node, [(0, 2), (1, 1)]);
        }
        let line = report.to_string();
        assert!(
            line.contains("'holder'") && line.contains("lockup.rs"),
            "{line}"
        );
    }
    // SAFETY: the forgotten guard's acquisition is the one being released.
    unsafe { lock.force_unlock(GuardSend::new()) };
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*lock.lock(), 3);
}

#[test]
fn mcs_forgotten_guard_reports_once() {
    forgotten_guard_reports_once::<RawMcs>();
}

#[test]
fn cna_forgotten_guard_reports_once() {
    forgotten_guard_reports_once::<RawCna>();
}

#[test]
fn hq_forgotten_guard_reports_once() {
    forgotten_guard_reports_once::<RawHq>();
}

/// A busy lock that keeps moving reports nothing (wide margins: a 5 s threshold against
/// critical sections of 100 µs).
#[test]
fn busy_lock_reports_nothing() {
    let _serial = serial();
    let reports = collect_reports();
    tunables::set_lockup_threshold(Duration::from_secs(5)).unwrap();
    let lock = Arc::new(numa_locks::CnaMutex::new(0u64));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || {
                for _ in 0..200 {
                    let mut g = lock.lock();
                    *g += 1;
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_micros(100) {
                        std::hint::spin_loop();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*lock.lock(), 1_600);
    assert!(reports.lock().unwrap().is_empty());
}

/// The hook can be replaced, taken, and put back; the threshold is validated.
#[test]
fn hook_replace_and_restore() {
    let _serial = serial();
    let first = Arc::new(AtomicUsize::new(0));
    let second = Arc::new(AtomicUsize::new(0));
    let counting = |counter: &Arc<AtomicUsize>| -> lockup::Hook {
        let counter = counter.clone();
        Box::new(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
    };
    tunables::set_lockup_threshold(Duration::from_millis(5)).unwrap();
    let stuck = |_: ()| {
        let lock = Arc::new(numa_locks::McsMutex::new(()));
        std::mem::forget(lock.lock());
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || drop(lock.lock()))
        };
        thread::sleep(Duration::from_millis(100));
        // SAFETY: the forgotten guard's acquisition is the one being released.
        unsafe { lock.force_unlock(GuardSend::new()) };
        waiter.join().unwrap();
    };
    lockup::set_hook(counting(&first));
    stuck(());
    assert_eq!(first.load(Ordering::Relaxed), 1);
    let taken = lockup::take_hook();
    lockup::set_hook(counting(&second));
    stuck(());
    assert_eq!(second.load(Ordering::Relaxed), 1);
    lockup::set_hook(taken);
    stuck(());
    assert_eq!(
        first.load(Ordering::Relaxed),
        2,
        "the restored hook gets the next report"
    );
    assert_eq!(second.load(Ordering::Relaxed), 1);

    for bad in [Duration::from_micros(999), Duration::from_secs(3_601)] {
        let err = tunables::set_lockup_threshold(bad).unwrap_err();
        assert!(err.to_string().contains("lockup_threshold"), "{err}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    assert_eq!(tunables::lockup_threshold(), Some(Duration::from_millis(5)));
    tunables::set_lockup_threshold(Duration::ZERO).unwrap();
    assert_eq!(tunables::lockup_threshold(), None);
}
