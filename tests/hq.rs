//! `HqMutex`-specific tests: size, locality on virtual nodes, bounded bypass of the oldest node,
//! garbage node ids, per-node state allocation and release, and the `stats` counters.
//!
//! The tunables are process-wide, so every test takes turns (`common::serial`) and restores the
//! defaults.
//!
//! Locality and bypass depend on scheduling as much as on the lock: `cargo test` judges them
//! only with margins that hold on any machine (see `common::COMPARISON`); the strict figures
//! are `#[ignore]`d tests that `.ci/run` runs for their report (`cargo test --release --
//! --ignored`), until the deterministic simulator asserts them.
#![cfg(not(loom))]

mod common;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{HANG_BOUND, Handoffs, serial};
use numa_locks::raw::RawHq;
use numa_locks::{HqMutex, topology, tunables};

// The counting allocator: live bytes and allocations, allocations per thread.
#[global_allocator]
static ALLOCATOR: common::alloc::Counting = common::alloc::Counting;

// ---------------------------------------------------------------------------------------------

/// Spins for `n` pause instructions: a critical section long enough to keep the lock contended.
fn work(n: u32) {
    for _ in 0..n {
        std::hint::spin_loop();
    }
}

#[test]
#[cfg(not(feature = "stats"))]
fn size_within_16_bytes() {
    use numa_locks::raw::RawHq;
    assert!(size_of::<RawHq>() <= 16, "{}", size_of::<RawHq>());
    assert!(
        size_of::<HqMutex<()>>() <= 16,
        "{}",
        size_of::<HqMutex<()>>()
    );
}

/// HQ keeps handoffs on the holder's node: with stealing off and the default limit of 64
/// local handoffs, its share of remote handoffs is below half of MCS's, measured in the same run
/// (see `common::COMPARISON` for why that margin holds on any machine).
#[test]
fn locality_against_mcs_on_4_virtual_nodes() {
    let _serial = serial();
    tunables::set_stealing(false).unwrap();
    common::assert_more_local_than_mcs::<RawHq>("hq");
}

/// The strict figure: 8 threads (2 per node) on 4 virtual nodes, stealing off, the default limit
/// of 64 local handoffs: at most 10% of the handoffs may cross nodes. With 2 threads per node
/// the one local waiter is often not queued when the handoff is chosen, depending on the
/// scheduler more than on the lock.
#[test]
#[ignore = "report only: scheduling-sensitive strict figure (<= 10% remote); the simulator asserts it, .ci/run prints it"]
fn strict_locality_on_4_virtual_nodes() {
    let _serial = serial();
    tunables::set_stealing(false).unwrap();
    let threads = 8;
    let lock = Arc::new(HqMutex::new(Handoffs::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (lock, stop, barrier) = (lock.clone(), stop.clone(), barrier.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(i % 4));
                barrier.wait();
                let mut mine = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut g = lock.lock();
                    g.record(topology::current_node());
                    work(100);
                    drop(g);
                    mine += 1;
                }
                mine
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    // Run for 0.7 s, and at least until the lock has turned hierarchical and made many handoffs.
    while start.elapsed() < Duration::from_millis(700)
        || (lock.lock().acquisitions < 20_000 && start.elapsed() < HANG_BOUND)
    {
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let per_thread: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    #[cfg(feature = "stats")]
    println!("{:?}", numa_locks::stats::snapshot(&lock));
    let h = lock.lock();
    let handoffs = h.local + h.remote;
    assert_eq!(handoffs + 1, h.acquisitions);
    let remote = 100.0 * h.remote as f64 / handoffs as f64;
    println!(
        "strict HQ locality: {} acquisitions, {} handoffs, {} remote ({remote:.2}%, bound 10%), per thread {per_thread:?}",
        h.acquisitions, handoffs, h.remote
    );
    assert!(handoffs >= 1_000, "too few handoffs to judge: {handoffs}");
    assert!(remote <= 10.0, "{remote:.2}% of handoffs crossed nodes");
}

/// The local-handoff limit of the bypass tests.
const BYPASS_LIMIT: u64 = 4;
/// Node-0 threads in the bypass tests.
const BYPASS_N0: usize = 3;
/// The bound on node-0 acquisitions that overtake an arrived node-1 waiter, with
/// `BYPASS_LIMIT` local handoffs and `BYPASS_N0` node-0 threads: `(N0 + 1) * LIMIT`, plus
/// `2 * N0` for fast-path overtakes.
///
/// Derivation: when the node-1 thread joins the node FIFO, each of the `N0` node-0 threads is
/// at most one entry ahead of it (a representative, a flat waiter, or a local waiter behind
/// one), and the holder's own run of local handoffs is in progress. Every entry's turn (and the
/// run in progress) lasts at most `LIMIT` acquisitions: the local count travels with headship
/// and each local handoff (a claimed deferral included) adds one; a representative whose turn
/// ends re-joins at the FIFO's tail, behind the node-1 thread. That makes at most
/// `N0 + 1` turns of at most `LIMIT` acquisitions. Stealing is off, so the only other way to
/// overtake is the one-CAS fast path in the instant between a new head's selection and its
/// first look at the lock word (after which `NO_STEAL` blocks it); on an oversubscribed
/// machine a preempted head can see a few of those, hence the slack.
const BYPASS_BOUND: u64 = (BYPASS_N0 as u64 + 1) * BYPASS_LIMIT + 2 * BYPASS_N0 as u64;

/// With a limit of [`BYPASS_LIMIT`] local handoffs, [`BYPASS_N0`] threads of node 0 hammer the
/// lock and a thread of node 1 arrives, `rounds` times; returns, for each arrival, how many
/// node-0 acquisitions happened between its arrival and its acquisition.
///
/// The count starts when the node-1 thread reads it, just before `lock()`. If the scheduler
/// preempts that thread between the read and its arrival in the queue (on a loaded machine,
/// for milliseconds), node 0 keeps running meanwhile: those acquisitions are not bypasses, but
/// the test cannot tell them apart. So the thread yields first (starting afresh), and the
/// callers judge the distribution, not every round.
///
/// The hammers stop by themselves after [`HANG_BOUND`]: an arrival that node 0 bypassed
/// forever then gets the lock and reports a huge count, instead of hanging the test.
fn node1_bypasses(rounds: usize) -> Vec<u64> {
    tunables::set_stealing(false).unwrap();
    tunables::set_hq_local_handoffs(BYPASS_LIMIT).unwrap();

    struct Shared {
        node0_acquisitions: u64,
    }
    let lock = Arc::new(HqMutex::new(Shared {
        node0_acquisitions: 0,
    }));
    // A copy of `node0_acquisitions` that the node-1 thread can read before it locks.
    let mirror = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let hammers: Vec<_> = (0..BYPASS_N0)
        .map(|_| {
            let (lock, mirror, stop) = (lock.clone(), mirror.clone(), stop.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(0));
                while !stop.load(Ordering::Relaxed) && start.elapsed() < HANG_BOUND {
                    let mut g = lock.lock();
                    g.node0_acquisitions += 1;
                    mirror.store(g.node0_acquisitions, Ordering::Relaxed);
                    work(50);
                }
            })
        })
        .collect();
    let mut bypasses = Vec::with_capacity(rounds);
    for round in 0..rounds as u64 {
        // Let the node-0 threads build up a run first.
        while mirror.load(Ordering::Relaxed) < 2_000 * (round + 1) {
            assert!(
                start.elapsed() < HANG_BOUND,
                "node-0 threads made no progress"
            );
            thread::yield_now();
        }
        let (lock, mirror) = (lock.clone(), mirror.clone());
        let bypassed = thread::spawn(move || {
            topology::set_thread_node(Some(1));
            thread::yield_now();
            // Read before arriving, so any acquisition after the arrival is counted (and a few
            // just before it, which only makes the check stricter).
            let before = mirror.load(Ordering::Relaxed);
            let g = lock.lock();
            g.node0_acquisitions - before
        })
        .join()
        .unwrap();
        bypasses.push(bypassed);
    }
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
    bypasses
}

/// The oldest node is not bypassed for long: node-0 threads hammer the lock and a node-1 thread
/// arrives 40 times; every arrival gets the lock while node 0 is still hammering, and the median
/// number of node-0 acquisitions that overtook it is within 4 times [`BYPASS_BOUND`].
///
/// The median is what a scheduler cannot move: a round is off only if the node-1 thread was
/// preempted in the few instructions between reading the count and arriving in the queue, and
/// that would have to happen in half of the rounds. A lock that let node 0 bypass an arrived
/// waiter (beyond its limit) would exceed the bound in every round. The strict figure, every
/// round within the bound but for a few, is [`strict_oldest_node_bypass`]'s.
#[test]
fn oldest_node_bypass_is_bounded() {
    let _serial = serial();
    let start = Instant::now();
    let mut bypasses = node1_bypasses(40);
    println!("node-1 arrivals were bypassed by node 0 {bypasses:?} times");
    assert!(
        start.elapsed() < HANG_BOUND,
        "an arrival waited for the hammers to give up: {bypasses:?}"
    );
    bypasses.sort_unstable();
    let median = bypasses[bypasses.len() / 2];
    assert!(
        median <= 4 * BYPASS_BOUND,
        "median bypass {median} > 4 * {BYPASS_BOUND}: {bypasses:?}"
    );
}

/// The strict figure: at most `PREEMPTED` of `ROUNDS` arrivals bypassed more than
/// [`BYPASS_BOUND`] times (the rounds where the arrival was preempted before it queued).
/// On a loaded machine more rounds than that are disturbed, and even an idle 2-core machine
/// sometimes sees 4 or more rounds with hundreds or thousands of bypasses.
#[test]
#[ignore = "report only: scheduling-sensitive strict figure ((N0+1)*LIMIT bound); the simulator asserts it, .ci/run prints it"]
fn strict_oldest_node_bypass() {
    const ROUNDS: usize = 40;
    const PREEMPTED: usize = 4;
    let _serial = serial();
    let bypasses = node1_bypasses(ROUNDS);
    let worst = bypasses.iter().copied().max().unwrap_or(0);
    let over = bypasses.iter().filter(|&&b| b > BYPASS_BOUND).count();
    println!(
        "strict HQ bypass: {over} of {ROUNDS} node-1 arrivals bypassed more than {BYPASS_BOUND} times (allowed {PREEMPTED}), worst {worst}: {bypasses:?}"
    );
    assert!(
        over <= PREEMPTED,
        "{over} of {ROUNDS} rounds bypassed more than {BYPASS_BOUND} times (worst {worst}): {bypasses:?}"
    );
}

/// Data that is *not* thread-safe by itself: every access must be under the lock.
struct Unprotected {
    counter: UnsafeCell<u64>,
    inside: AtomicBool,
}
// SAFETY: only accessed while the lock under test is held (that is what the test checks).
unsafe impl Sync for Unprotected {}

/// Node and cache-domain ids drawn at random on every call (usize::MAX, 64..1000, small ones),
/// with 4 virtual domains per node so that the per-domain slots are in use: mutual exclusion and
/// progress must not depend on them.
#[test]
fn garbage_node_ids_keep_mutual_exclusion() {
    let _serial = serial();
    topology::set_virtual_domains(Some(4)).unwrap();
    let threads = 6;
    let iters = 20_000u64;
    for stealing in [false, true] {
        tunables::set_stealing(stealing).unwrap();
        let lock = Arc::new(HqMutex::new(()));
        let data = Arc::new(Unprotected {
            counter: UnsafeCell::new(0),
            inside: AtomicBool::new(false),
        });
        let start = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (lock, data) = (lock.clone(), data.clone());
                thread::spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                    for _ in 0..iters {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let node = match rng % 5 {
                            0 => usize::MAX,
                            1 => 64 + (rng >> 8) as usize % 936,
                            2 => (rng >> 8) as usize,
                            3 => usize::MAX - (rng >> 60) as usize,
                            _ => (rng >> 8) as usize % 4,
                        };
                        topology::set_thread_node(Some(node));
                        topology::set_thread_domain(
                            (!rng.is_multiple_of(3))
                                .then_some(node.rotate_left(7) ^ (rng >> 20) as usize),
                        );
                        let _g = lock.lock();
                        assert!(
                            !data.inside.swap(true, Ordering::Relaxed),
                            "two threads inside the critical section"
                        );
                        // SAFETY: under the lock.
                        unsafe { *data.counter.get() += 1 };
                        work(20);
                        data.inside.store(false, Ordering::Relaxed);
                    }
                    topology::set_thread_node(None);
                    topology::set_thread_domain(None);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // SAFETY: all threads joined.
        assert_eq!(unsafe { *data.counter.get() }, threads as u64 * iters);
        assert!(start.elapsed() < HANG_BOUND, "took {:?}", start.elapsed());
    }
    topology::set_virtual_domains(None).unwrap();
}

/// A lock that is never contended allocates nothing.
#[test]
fn uncontended_lock_never_allocates() {
    let _serial = serial();
    // The thread's one-time setup (with feature `lockup`, its entry in the thread registry) is
    // not the lock's: do it first.
    drop(HqMutex::new(()).lock());
    let before = common::alloc::thread_allocs();
    {
        let m = HqMutex::new(5u32);
        for _ in 0..1_000 {
            *m.lock() += 1;
            *m.try_lock().unwrap() += 1;
        }
        lock_api::MutexGuard::unlock_fair(m.lock());
        assert_eq!(*m.lock(), 2_005);
    }
    assert_eq!(
        common::alloc::thread_allocs(),
        before,
        "an uncontended HqMutex allocated"
    );
}

/// The bound on the per-lock state: at most 1 KiB for each lock that was ever contended,
/// on a machine of up to 4 NUMA nodes (2 sockets with up to 16 cache domains each included).
const PER_LOCK_BOUND: usize = 1024;

/// What [`contend_locks`] measured.
struct Contended {
    /// Locks whose per-node state was allocated.
    hierarchical: usize,
    /// Live bytes per hierarchical lock while every lock was still alive (allocator's count).
    live_bytes_per_lock: usize,
    /// The largest `heap_size()` any lock reported.
    largest_heap_size: usize,
    /// Live allocations and bytes before the locks were made, and after they were dropped.
    allocs: (usize, usize),
    bytes: (usize, usize),
}

/// Contends `locks` locks in turn, each by `workers` threads of virtual nodes `0..workers`, until
/// each has allocated its per-node state (or the hang bound passes); keeps every lock alive until
/// all were contended, measures, then drops them.
fn contend_locks(locks: usize, workers: usize) -> Contended {
    /// Acquisitions per worker and lock, at least.
    const MIN_ACQUISITIONS: u64 = 10;
    let start = Instant::now();

    // A pool of workers that contend on each lock in turn; it also warms up every thread-local
    // and the queue-node registry before the baseline is taken. `current` holds the lock of the
    // round.
    let current: Arc<Mutex<Option<Arc<HqMutex<u64>>>>> = Arc::new(Mutex::new(None));
    let go = Arc::new(Barrier::new(workers + 1));
    let done = Arc::new(Barrier::new(workers + 1));
    let pool: Vec<_> = (0..workers)
        .map(|w| {
            let (current, go, done) = (current.clone(), go.clone(), done.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(w));
                loop {
                    go.wait();
                    let Some(lock) = current.lock().unwrap().clone() else {
                        return;
                    };
                    // Contend until the lock has allocated its per-node state, however long that
                    // takes on this machine, up to the hang bound. Until then, yielding inside
                    // the critical section lets the other workers queue behind the holder even
                    // with fewer cores than workers, so the handoffs are contended, as the
                    // switch to per-node queues requires. (A yield can cost a time slice on a
                    // loaded machine, hence not once the state exists.)
                    let mut n = 0;
                    loop {
                        let allocated = heap_size(&lock) != 0;
                        if n >= MIN_ACQUISITIONS && (allocated || start.elapsed() >= HANG_BOUND) {
                            break;
                        }
                        let mut g = lock.lock();
                        *g += 1;
                        if !allocated {
                            thread::yield_now();
                        }
                        drop(g);
                        n += 1;
                    }
                    drop(lock);
                    done.wait();
                }
            })
        })
        .collect();
    let round = || -> Arc<HqMutex<u64>> {
        let lock = Arc::new(HqMutex::new(0u64));
        *current.lock().unwrap() = Some(lock.clone());
        go.wait();
        done.wait();
        *current.lock().unwrap() = None;
        assert!(*lock.lock() >= MIN_ACQUISITIONS * workers as u64);
        lock
    };
    for _ in 0..20 {
        drop(round());
    }
    let live = || {
        let (bytes, allocs) = common::alloc::live();
        (allocs, bytes)
    };
    let mut all = Vec::with_capacity(locks);
    let (base_allocs, base_bytes) = live();
    for _ in 0..locks {
        all.push(round());
    }
    let (_, alive_bytes) = live();
    let hierarchical = all.iter().filter(|lock| heap_size(lock) != 0).count();
    let largest_heap_size = all.iter().map(|lock| heap_size(lock)).max().unwrap_or(0);
    // The locks themselves (the `Arc`s) are not per-node state: count them out.
    let own = locks * (2 * size_of::<usize>() + size_of::<HqMutex<u64>>());
    drop(all);
    let (allocs, bytes) = live();
    go.wait();
    for w in pool {
        w.join().unwrap();
    }
    Contended {
        hierarchical,
        live_bytes_per_lock: (alive_bytes - base_bytes).saturating_sub(own) / hierarchical.max(1),
        largest_heap_size,
        allocs: (base_allocs, allocs),
        bytes: (base_bytes, bytes),
    }
}

fn heap_size(lock: &HqMutex<u64>) -> usize {
    // SAFETY: `raw()` only exposes the raw lock; `heap_size` neither locks nor unlocks it.
    unsafe { lock.raw() }.heap_size()
}

/// Hundreds of contended locks (so that their per-node state is allocated), each holding at most
/// `PER_LOCK_BOUND` bytes, dropped again: live allocations return to the baseline. A leak of
/// anything per lock would show 500 times, against a slack of 16 allocations and 16 KiB for what
/// the runtime allocates once.
#[test]
fn contended_locks_free_their_queues() {
    let _serial = serial();
    tunables::set_stealing(false).unwrap();
    const LOCKS: usize = 500;
    let c = contend_locks(LOCKS, 4);
    println!(
        "{LOCKS} contended locks on 4 virtual nodes: {} hierarchical, {} live bytes each (largest \
         heap_size {}); live allocations {} -> {}, bytes {} -> {}",
        c.hierarchical,
        c.live_bytes_per_lock,
        c.largest_heap_size,
        c.allocs.0,
        c.allocs.1,
        c.bytes.0,
        c.bytes.1
    );
    check_contended(LOCKS, &c);
}

/// The measurement on real threads: 100,000 locks, each contended across 4 virtual nodes,
/// hold at most `PER_LOCK_BOUND` bytes each. About 10 s in a release build, so `cargo test` runs
/// the 500-lock test above and `.ci/run` this one (`--ignored`).
#[test]
#[ignore = "100,000 locks: run with --release -- --ignored (as .ci/run does)"]
fn hundred_thousand_contended_locks_within_a_kib_each() {
    let _serial = serial();
    tunables::set_stealing(false).unwrap();
    const LOCKS: usize = 100_000;
    let c = contend_locks(LOCKS, 4);
    println!(
        "{LOCKS} contended locks on 4 virtual nodes: {} hierarchical, {} live bytes each (largest \
         heap_size {})",
        c.hierarchical, c.live_bytes_per_lock, c.largest_heap_size
    );
    check_contended(LOCKS, &c);
}

fn check_contended(locks: usize, c: &Contended) {
    assert!(
        c.hierarchical >= locks / 2,
        "only {} of {locks} locks allocated per-node state: the test did not exercise it",
        c.hierarchical
    );
    assert!(
        c.largest_heap_size <= PER_LOCK_BOUND,
        "a lock holds {} bytes, above {PER_LOCK_BOUND}",
        c.largest_heap_size
    );
    assert!(
        c.live_bytes_per_lock <= PER_LOCK_BOUND,
        "{} live bytes per contended lock, above {PER_LOCK_BOUND}",
        c.live_bytes_per_lock
    );
    // A little slack for allocations made once by the runtime (not per lock).
    common::alloc::assert_freed("HqMutex", c.allocs, c.bytes, 16, 16 * 1024);
}

/// The `stats` counters agree with what the critical sections saw.
#[test]
#[cfg(feature = "stats")]
fn stats_agree_with_the_critical_sections() {
    let _serial = serial();
    tunables::set_stealing(false).unwrap();
    tunables::set_hq_local_handoffs(16).unwrap();
    let threads = 6;
    let iters = 5_000;
    let lock = Arc::new(HqMutex::new(Handoffs::default()));
    // All threads start together and each yields while it holds the lock now and then: the
    // others find it held, so some acquisitions are contended on any machine.
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (lock, start) = (lock.clone(), start.clone());
            thread::spawn(move || {
                topology::set_thread_node(Some(i % 3));
                start.wait();
                for n in 0..iters {
                    let mut g = lock.lock();
                    g.record(topology::current_node());
                    work(50);
                    if n % 16 == 0 {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = numa_locks::stats::snapshot(&lock);
    let h = lock.lock();
    println!("{s:?}; seen local {} remote {}", h.local, h.remote);
    assert_eq!(s.acquisitions, threads as u64 * iters);
    assert_eq!(h.acquisitions, s.acquisitions);
    assert_eq!(s.handoffs_local, h.local);
    assert_eq!(s.handoffs_remote, h.remote);
    assert!(s.contended > 0);
    assert_eq!(s.steals, 0);
}
