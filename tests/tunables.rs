//! The tunables' setters: valid values take effect, invalid ones return an error naming the
//! value and the allowed range and change nothing. One test: the tunables are process-wide.
//!
//! This binary also runs under Miri (`.ci/run`): with stealing off, every contended acquisition
//! goes through the queues, so the locks' NUMA paths (CNA's secondary queue, flushes and proxy
//! nodes, HQ's per-node queues) run under Miri's checks too, at sizes scaled down for it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use lock_api::RawMutex;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::topology;
use numa_locks::tunables::{self, TunableError};

/// `native` normally, `miri` under Miri (about a millisecond per lock operation there).
const fn scaled(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

fn assert_rejected(result: Result<(), TunableError>, name: &str, value: &str) {
    let err = result.expect_err("an invalid value must be rejected");
    assert_eq!(err.name, name);
    let text = err.to_string();
    assert!(text.contains(name), "{text}");
    assert!(text.contains(value), "{text} should name {value}");
    assert!(
        text.contains("allowed"),
        "{text} should say what is allowed"
    );
}

#[test]
fn setters_validate_and_take_effect() {
    tunables::reset_defaults();
    assert_eq!(tunables::spin_time(), tunables::DEFAULT_SPIN_TIME);
    assert_eq!(tunables::steal_bound(), tunables::DEFAULT_STEAL_BOUND);
    assert_eq!(
        tunables::cna_flush_threshold(),
        tunables::DEFAULT_CNA_FLUSH_THRESHOLD
    );
    assert_eq!(
        tunables::hq_local_handoffs(),
        tunables::DEFAULT_HQ_LOCAL_HANDOFFS
    );
    assert_eq!(
        tunables::hq_domain_handoffs(),
        tunables::DEFAULT_HQ_DOMAIN_HANDOFFS
    );
    assert!(tunables::stealing());
    assert_eq!(tunables::delegate_batch(), tunables::DEFAULT_DELEGATE_BATCH);
    assert_eq!(
        tunables::delegate_batch_time(),
        tunables::DEFAULT_DELEGATE_BATCH_TIME
    );
    tunables::set_delegate_batch(0).unwrap();
    assert_eq!(tunables::delegate_batch(), 0);
    assert_rejected(
        tunables::set_delegate_batch(65_537),
        "delegate_batch",
        "65537",
    );
    assert_eq!(
        tunables::delegate_batch(),
        0,
        "a rejected value changes nothing"
    );
    tunables::set_delegate_batch(65_536).unwrap();
    tunables::set_delegate_batch_time(Duration::from_micros(3)).unwrap();
    assert_eq!(tunables::delegate_batch_time(), Duration::from_micros(3));
    assert_rejected(
        tunables::set_delegate_batch_time(Duration::ZERO),
        "delegate_batch_time",
        "0ns",
    );
    assert_eq!(tunables::delegate_batch_time(), Duration::from_micros(3));
    assert_eq!(
        tunables::rwlock_writer_handover(),
        tunables::DEFAULT_RWLOCK_WRITER_HANDOVER
    );
    tunables::set_rwlock_writer_handover(true).unwrap();
    assert!(tunables::rwlock_writer_handover());
    assert_eq!(
        tunables::rwlock_write_mode(),
        tunables::DEFAULT_RWLOCK_WRITE_MODE
    );
    tunables::set_rwlock_write_mode(false).unwrap();
    assert!(!tunables::rwlock_write_mode());

    tunables::set_spin_time(Duration::ZERO).unwrap();
    assert_eq!(tunables::spin_time(), Duration::ZERO);
    assert_rejected(
        tunables::set_spin_time(Duration::from_secs(2)),
        "spin_time",
        "2s",
    );
    assert_eq!(
        tunables::spin_time(),
        Duration::ZERO,
        "a rejected value changes nothing"
    );

    tunables::set_steal_bound(Duration::from_micros(50)).unwrap();
    assert_eq!(tunables::steal_bound(), Duration::from_micros(50));
    assert_rejected(
        tunables::set_steal_bound(Duration::ZERO),
        "steal_bound",
        "0ns",
    );
    assert_rejected(
        tunables::set_steal_bound(Duration::from_secs(11)),
        "steal_bound",
        "11s",
    );
    assert_eq!(tunables::steal_bound(), Duration::from_micros(50));

    assert_eq!(tunables::retake_window(), tunables::DEFAULT_RETAKE_WINDOW);
    tunables::set_retake_window(Duration::from_nanos(500)).unwrap();
    assert_eq!(tunables::retake_window(), Duration::from_nanos(500));
    assert_rejected(
        tunables::set_retake_window(Duration::from_millis(11)),
        "retake_window",
        "11ms",
    );
    assert_eq!(
        tunables::retake_window(),
        Duration::from_nanos(500),
        "a rejected value changes nothing"
    );

    assert_eq!(
        tunables::lone_retake_window(),
        tunables::DEFAULT_LONE_RETAKE_WINDOW
    );
    tunables::set_lone_retake_window(Duration::ZERO).unwrap();
    assert_eq!(tunables::lone_retake_window(), Duration::ZERO);
    assert_rejected(
        tunables::set_lone_retake_window(Duration::from_millis(11)),
        "lone_retake_window",
        "11ms",
    );
    assert_eq!(
        tunables::lone_retake_window(),
        Duration::ZERO,
        "a rejected value changes nothing"
    );

    tunables::set_cna_flush_threshold(Duration::from_millis(3)).unwrap();
    assert_eq!(tunables::cna_flush_threshold(), Duration::from_millis(3));
    assert_rejected(
        tunables::set_cna_flush_threshold(Duration::from_nanos(10)),
        "cna_flush_threshold",
        "10ns",
    );
    assert_eq!(tunables::cna_flush_threshold(), Duration::from_millis(3));

    tunables::set_hq_local_handoffs(64).unwrap();
    assert_eq!(tunables::hq_local_handoffs(), 64);
    assert_rejected(tunables::set_hq_local_handoffs(0), "hq_local_handoffs", "0");
    assert_rejected(
        tunables::set_hq_local_handoffs(1 << 30),
        "hq_local_handoffs",
        &(1u64 << 30).to_string(),
    );
    assert_eq!(tunables::hq_local_handoffs(), 64);

    tunables::set_hq_domain_handoffs(8).unwrap();
    assert_eq!(tunables::hq_domain_handoffs(), 8);
    assert_rejected(
        tunables::set_hq_domain_handoffs(0),
        "hq_domain_handoffs",
        "0",
    );
    assert_rejected(
        tunables::set_hq_domain_handoffs((1 << 24) + 1),
        "hq_domain_handoffs",
        &((1u64 << 24) + 1).to_string(),
    );
    assert_eq!(tunables::hq_domain_handoffs(), 8);
    assert_eq!(tunables::hq_local_handoffs(), 64, "the node limit is apart");
    tunables::set_hq_domain_handoffs(1 << 24).unwrap();

    tunables::set_stealing(false).unwrap();
    assert!(!tunables::stealing());

    // The locks keep working with the extreme settings: park at once, no stealing.
    tunables::set_spin_time(Duration::ZERO).unwrap();
    let m = std::sync::Arc::new(numa_locks::CnaMutex::new(0u32));
    let (threads, iters) = (scaled(4, 2), scaled(1_000, 20));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..iters {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*m.lock() as usize, threads * iters);

    // Every lock, its threads on 4 virtual nodes, with those settings: every acquisition that
    // finds the lock held queues, so the queue reordering (CNA) and the per-node queues (HQ) run.
    exclusion_on_virtual_nodes::<RawMcs>();
    exclusion_on_virtual_nodes::<RawCna>();
    exclusion_on_virtual_nodes::<RawHq>();

    tunables::reset_defaults();
    assert_eq!(tunables::spin_time(), tunables::DEFAULT_SPIN_TIME);
    assert!(tunables::stealing());
    assert!(!tunables::rwlock_writer_handover());
    assert!(tunables::rwlock_write_mode());
}

/// Data that is *not* thread-safe by itself: every access must be under the lock.
struct Unprotected {
    counter: UnsafeCell<usize>,
    inside: AtomicBool,
}
// SAFETY: only accessed while the lock under test is held (that is what the test checks).
unsafe impl Sync for Unprotected {}

/// Threads on 4 virtual nodes increment a plain counter under the lock, yielding inside the
/// critical section so that the others queue up: the total is exact and nobody ever finds
/// another thread inside.
fn exclusion_on_virtual_nodes<R: RawMutex + Send + Sync + 'static>() {
    let (threads, iters) = (scaled(8, 6), scaled(1_000, 40));
    let lock = Arc::new(lock_api::Mutex::<R, ()>::new(()));
    let data = Arc::new(Unprotected {
        counter: UnsafeCell::new(0),
        inside: AtomicBool::new(false),
    });
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (lock, data, start) = (lock.clone(), data.clone(), start.clone());
            std::thread::spawn(move || {
                topology::set_thread_node(Some(t % 4));
                start.wait();
                for i in 0..iters {
                    let _g = lock.lock();
                    assert!(
                        !data.inside.swap(true, Ordering::Relaxed),
                        "two threads inside the critical section"
                    );
                    // SAFETY: under the lock.
                    unsafe { *data.counter.get() += 1 };
                    if i % 2 == 0 {
                        std::thread::yield_now();
                    }
                    data.inside.store(false, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *data.counter.get() }, threads * iters);
    assert!(lock.try_lock().is_some(), "the lock is free afterwards");
}
