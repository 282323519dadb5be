//! CnaMutex: locality on virtual NUMA nodes, bounded bypass, adversarial node ids, stats.
//!
//! The tunables are process-wide, so the tests of this binary take turns (`common::serial`) and
//! restore the defaults when they finish.
//!
//! Locality and bypass depend on scheduling as much as on the lock: `cargo test` judges them
//! only with margins that hold on any machine (see `common::COMPARISON`); the strict figures
//! are `#[ignore]`d tests that `.ci/run` runs for their report (`cargo test --release --
//! --ignored`), until the deterministic simulator asserts them.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Shape, locality_run, serial};
use numa_locks::raw::{RawCna, RawMcs};
use numa_locks::{topology, tunables};

#[test]
fn size_is_one_word() {
    if !cfg!(feature = "stats") {
        assert!(std::mem::size_of::<RawCna>() <= 8);
        assert!(std::mem::size_of::<numa_locks::CnaMutex<()>>() <= 8);
    }
}

/// Handoffs in these runs take tens of microseconds (the critical section yields, threads sleep
/// and wake), so the default 25 µs flush threshold would be a handful of handoffs, and every
/// flush hands the lock across nodes a few times. A 100 ms threshold keeps the ratio of flush
/// interval to handoff time that a multi-socket server sees with the default (hundreds of local
/// handoffs per flush); `bounded_bypass_of_remote_waiter` tests the flush itself.
const LOCALITY_FLUSH_THRESHOLD: Duration = Duration::from_millis(100);

/// CNA keeps handoffs on the holder's node: its share of remote handoffs is below half of MCS's,
/// measured in the same run (see `common::COMPARISON` for why that margin holds on any machine).
#[test]
fn locality_against_mcs_on_four_virtual_nodes() {
    let _s = serial();
    tunables::set_stealing(false).unwrap();
    tunables::set_cna_flush_threshold(LOCALITY_FLUSH_THRESHOLD).unwrap();
    common::assert_more_local_than_mcs::<RawCna>("cna");
}

/// The strict figure: at most 10% remote handoffs with 2 threads per node and work outside the
/// critical section. On a loaded or small machine the only local waiter is often not queued
/// yet when the handoff is chosen, so the figure measures the scheduler too (12-18% seen on an
/// idle 2-core machine).
#[test]
#[ignore = "report only: scheduling-sensitive strict figure (<= 10% remote); the simulator asserts it, .ci/run prints it"]
fn strict_locality_on_four_virtual_nodes() {
    let _s = serial();
    tunables::set_stealing(false).unwrap();
    tunables::set_cna_flush_threshold(LOCALITY_FLUSH_THRESHOLD).unwrap();
    let shape = Shape {
        nodes: 4,
        threads: 8,
        yield_inside: true,
        work_inside: 0,
        work_outside: 100,
        handoffs: 1_000,
        min_time: Duration::from_millis(500),
    };
    let (cna, _) = locality_run::<RawCna>(shape);
    let (mcs, _) = locality_run::<RawMcs>(shape);
    println!(
        "strict CNA locality: remote handoffs cna {:.1}% of {} (bound 10%), mcs {:.1}% of {} (expected >= 60%)",
        cna.remote_pct(),
        cna.handoffs(),
        mcs.remote_pct(),
        mcs.handoffs()
    );
    // MCS hands over in FIFO order: with 4 nodes, about 3 handoffs in 4 cross nodes.
    assert!(mcs.remote_pct() >= 60.0, "mcs: {:.1}%", mcs.remote_pct());
    assert!(cna.remote_pct() <= 10.0, "cna: {:.1}%", cna.remote_pct());
}

/// The flush threshold of the bypass tests.
const BYPASS_FLUSH_THRESHOLD: Duration = Duration::from_micros(200);

/// Node-0 threads hammer the lock (stealing off, flush threshold [`BYPASS_FLUSH_THRESHOLD`]);
/// the calling thread, on node 1, takes the lock `rounds` times. Returns how long each of its
/// `lock()` calls took, sorted.
///
/// The hammers stop by themselves after [`common::HANG_BOUND`]: a waiter left in the secondary
/// queue would then get the lock (the main queue empties and the secondary queue is spliced
/// back) and report a wait that long, instead of hanging the test.
fn remote_waiter_waits(rounds: usize) -> Vec<Duration> {
    tunables::set_stealing(false).unwrap();
    tunables::set_cna_flush_threshold(BYPASS_FLUSH_THRESHOLD).unwrap();
    let lock = Arc::new(numa_locks::CnaMutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let hammers: Vec<_> = (0..3)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(0));
                while !stop.load(Ordering::Relaxed) && start.elapsed() < common::HANG_BOUND {
                    let mut g = lock.lock();
                    *g += 1;
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    topology::set_thread_node(Some(1));
    let mut waits = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        drop(lock.lock());
        waits.push(t.elapsed());
        thread::sleep(Duration::from_millis(1));
    }
    topology::set_thread_node(None);
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
    waits.sort();
    waits
}

/// A remote waiter is not left behind: node-0 threads hammer the lock, a node-1 thread arrives
/// 50 times and gets the lock every time within 5 s. A waiter forgotten in the secondary queue
/// would wait until the hammers give up (see [`remote_waiter_waits`]). The strict figure, the
/// flush threshold plus a critical section, is [`strict_bypass_of_remote_waiter`]'s.
#[test]
fn bounded_bypass_of_remote_waiter() {
    let _s = serial();
    let waits = remote_waiter_waits(50);
    let worst = *waits.last().unwrap();
    println!(
        "waits of the remote waiter: median {:?}, worst {worst:?}",
        waits[waits.len() / 2]
    );
    assert!(
        worst < Duration::from_secs(5),
        "remote waiter waited {worst:?}"
    );
}

/// The strict figure: the remote waiter gets the lock within the flush threshold (200 µs) plus
/// a critical section, with 1 ms allowed for its wake-up. On a loaded machine the waiter or the
/// head that would flush may simply not be running, so this measures the scheduler too.
#[test]
#[ignore = "report only: scheduling-sensitive strict figure (wait <= flush threshold + 1 ms); the simulator asserts it, .ci/run prints it"]
fn strict_bypass_of_remote_waiter() {
    let _s = serial();
    let bound = BYPASS_FLUSH_THRESHOLD + Duration::from_millis(1);
    let waits = remote_waiter_waits(200);
    let over = waits.iter().filter(|&&w| w > bound).count();
    let worst = *waits.last().unwrap();
    println!(
        "strict CNA bypass: waits of the remote waiter median {:?}, 90th percentile {:?}, worst {worst:?}; {over} of {} over {bound:?}",
        waits[waits.len() / 2],
        waits[waits.len() * 9 / 10],
        waits.len()
    );
    assert!(worst <= bound, "remote waiter waited {worst:?} > {bound:?}");
}

#[test]
fn adversarial_node_ids() {
    // Random node ids on every call, huge values included: mutual exclusion and progress.
    let _s = serial();
    let lock = Arc::new(numa_locks::CnaMutex::new(0u64));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                for i in 0..5_000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let node = match i % 4 {
                        0 => usize::MAX - (x % 3) as usize,
                        1 => (x % 1_000) as usize,
                        2 => x as usize,
                        _ => (x % 4) as usize,
                    };
                    topology::set_thread_node(Some(node));
                    *lock.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*lock.lock(), 8 * 5_000);
}

#[test]
fn no_secondary_left_behind_after_contention() {
    // After a contended run on 4 nodes, every waiter has been served (the run ends) and the lock
    // is free with nobody owed it.
    let _s = serial();
    tunables::set_stealing(true).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let lock = Arc::new(numa_locks::CnaMutex::new(()));
    let handles: Vec<_> = (0..12)
        .map(|i| {
            let (lock, counter) = (lock.clone(), counter.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(i % 4));
                for _ in 0..2_000 {
                    let _g = lock.lock();
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), 24_000);
    assert!(lock.try_lock().is_some());
}

#[cfg(feature = "stats")]
#[test]
fn stats_agree_with_own_count() {
    let _s = serial();
    tunables::set_stealing(false).unwrap();
    let threads = 6;
    let lock = Arc::new(numa_locks::CnaMutex::new(common::Handoffs::default()));
    // All threads start together, and each yields while it holds the lock: the others find it
    // held, so some acquisitions are contended on any machine (in parallel on many cores, by
    // taking turns on one).
    let start = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (lock, start) = (lock.clone(), start.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(i % 3));
                start.wait();
                for _ in 0..2_000 {
                    let mut g = lock.lock();
                    g.record(topology::current_node());
                    thread::yield_now();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // The reading acquisition is counted too, with this thread's node: pin it, so that it is
    // the same node when the counters record it and below (a real thread may migrate).
    let reader_node = 7;
    topology::set_thread_node(Some(reader_node));
    let own = lock.lock();
    let stats = numa_locks::stats::snapshot(&*lock);
    topology::set_thread_node(None);
    // The snapshot includes the acquisition that is reading it.
    assert_eq!(stats.acquisitions, own.acquisitions + 1);
    assert_eq!(
        stats.handoffs_local + stats.handoffs_remote,
        own.acquisitions
    );
    assert_eq!(
        stats.handoffs_remote,
        own.remote + u64::from(own.last_node != Some(reader_node))
    );
    assert!(stats.contended > 0);
}
