//! Cache domains in numa_sim: `HqMutex`'s per-lock state (many locks, each contended by one
//! thread per NUMA node or cache domain until it goes hierarchical, each holding at most 1 KiB),
//! and the bound on how long a waiter of another domain waits.
//!
//! Run with `RUSTFLAGS="--cfg numa_sim" cargo test --release --test sim_domains --target-dir
//! target/sim`.
#![cfg(numa_sim)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use numa_locks::raw::RawHq;
use numa_sim::{Machine, Simulation, thread};

/// The bound: at most 1 KiB for each lock that was ever contended.
const PER_LOCK_BOUND: usize = 1024;

/// What [`contend`] found: locks that went hierarchical, and the largest `heap_size`.
struct Found {
    hierarchical: usize,
    largest: usize,
}

/// `locks` locks, taken in turn by one thread on each hardware thread of `hw`, each lock up to
/// `rounds` times per thread with 300 ns inside the critical section (long enough that the
/// others queue).
fn contend(machine: &'static Machine, hw: Vec<usize>, locks: usize, rounds: usize) -> Found {
    let hierarchical = Arc::new(AtomicUsize::new(0));
    let largest = Arc::new(AtomicUsize::new(0));
    let (h, l) = (hierarchical.clone(), largest.clone());
    Simulation::new(machine).seed(1).run(move || {
        let all: Arc<Vec<RawHq>> = Arc::new((0..locks).map(|_| RawHq::new()).collect());
        let workers: Vec<_> = hw
            .iter()
            .map(|&cpu| {
                let all = all.clone();
                thread::spawn_on(cpu, move || {
                    // Each thread stays on a lock until it went hierarchical (or `rounds`
                    // acquisitions): the threads move on together, and each lock is contended.
                    for lock in all.iter() {
                        let mut n = 0;
                        while n < 4 || (lock.heap_size() == 0 && n < rounds) {
                            lock.lock();
                            numa_sim::work(300);
                            // SAFETY: we hold it.
                            unsafe { lock.unlock() };
                            n += 1;
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        h.store(all.iter().filter(|l| l.heap_size() != 0).count(), Relaxed);
        l.store(all.iter().map(RawHq::heap_size).max().unwrap_or(0), Relaxed);
    });
    Found {
        hierarchical: hierarchical.load(Relaxed),
        largest: largest.load(Relaxed),
    }
}

/// One hardware thread on each of the first `count` distinct (node, cache domain) places of
/// `machine`, nodes first.
fn one_per_place(machine: &'static Machine, count: usize) -> Vec<usize> {
    numa_sim::placement(machine, count).unwrap()
}

fn check(name: &str, locks: usize, found: Found) {
    println!(
        "{name}: {locks} contended locks, {} hierarchical, largest heap_size {} bytes",
        found.hierarchical, found.largest
    );
    assert!(
        found.hierarchical >= locks / 2,
        "{name}: only {} of {locks} locks went hierarchical: the test did not exercise them",
        found.hierarchical
    );
    assert!(
        found.largest <= PER_LOCK_BOUND,
        "{name}: a lock holds {} bytes, above {PER_LOCK_BOUND}",
        found.largest
    );
}

/// The measurement: 100,000 locks contended across the 4 NUMA nodes of the `x5-4`.
#[test]
fn hundred_thousand_locks_on_four_nodes_within_a_kib_each() {
    let machine = Machine::by_name("x5-4").unwrap();
    const LOCKS: usize = 100_000;
    let found = contend(machine, one_per_place(machine, 4), LOCKS, 64);
    check("x5-4", LOCKS, found);
}

/// One hardware thread in each of the first `count` cache domains of each of `machine`'s first
/// two nodes, alternating nodes: `count * 2` threads, no two in one domain.
fn one_per_domain(machine: &'static Machine, count: usize) -> Vec<usize> {
    let first_in = |domain: usize| {
        (0..machine.hw_threads())
            .find(|&hw| machine.domain_of(hw) == domain)
            .unwrap()
    };
    let per_node = machine.domain_count() / machine.node_count();
    (0..count)
        .flat_map(|i| [first_in(i), first_in(per_node + i)])
        .collect()
}

/// The bound on a 2-socket AMD machine: 10,000 locks contended by threads in 8 cache domains of
/// both sockets of the `epyc9654-2s` (12 domains per socket, so per-domain slots are in use).
#[test]
fn locks_on_two_sockets_of_twelve_domains_within_a_kib_each() {
    let machine = Machine::by_name("epyc9654-2s").unwrap();
    const LOCKS: usize = 10_000;
    let found = contend(machine, one_per_domain(machine, 4), LOCKS, 64);
    check("epyc9654-2s", LOCKS, found);
}

/// A waiter of another cache domain of the same node is served within HQ's bound: with a limit
/// of 4 local handoffs, 3 threads of one CCX keep taking the lock while a thread of a second CCX
/// of the same socket arrives 120 times; the 3 overtake it at most `(3 + 1) * 4 + 3` times
/// (their domain's turn, then as many as the FIFO may hold ahead of it), whether the lock's
/// queues are per node or per domain by then.
#[test]
fn hq_serves_another_domain_within_its_bound() {
    const LIMIT: u64 = 4;
    const N0: usize = 3;
    const ROUNDS: u64 = 120;
    const BOUND: u64 = (N0 as u64 + 1) * LIMIT + N0 as u64;
    struct Bypass {
        lock: CachePadded<lock_api::Mutex<RawHq, u64>>,
        // Simulated atomics: a load is a point in virtual time.
        mirror: CachePadded<numa_sim::atomic::AtomicU64>,
        stop: CachePadded<numa_sim::atomic::AtomicBool>,
    }
    numa_locks::tunables::set_stealing(false).unwrap();
    numa_locks::tunables::set_hq_local_handoffs(LIMIT).unwrap();
    for (name, seed) in [("epyc-2s", 1), ("epyc9654-2s", 2)] {
        let machine = Machine::by_name(name).unwrap();
        let in_domain =
            |d: usize| (0..machine.hw_threads()).filter(move |&hw| machine.domain_of(hw) == d);
        let domain0: Vec<usize> = in_domain(0).step_by(2).take(N0).collect();
        let other = in_domain(1).next().unwrap();
        assert_eq!(machine.node_of(other), machine.node_of(domain0[0]));
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        let result = out.clone();
        Simulation::new(machine).seed(seed).run(move || {
            let shared = Arc::new(Bypass {
                lock: CachePadded::new(lock_api::Mutex::new(0)),
                mirror: CachePadded::new(numa_sim::atomic::AtomicU64::new(0)),
                stop: CachePadded::new(numa_sim::atomic::AtomicBool::new(false)),
            });
            let hammers: Vec<_> = domain0
                .iter()
                .map(|&hw| {
                    let shared = shared.clone();
                    thread::spawn_on(hw, move || {
                        while !shared.stop.load(Relaxed) {
                            let mut count = shared.lock.lock();
                            *count += 1;
                            shared.mirror.store(*count, Relaxed);
                            numa_sim::work(50);
                        }
                    })
                })
                .collect();
            let arrivals = {
                let shared = shared.clone();
                thread::spawn_on(other, move || {
                    (0..ROUNDS)
                        .map(|round| {
                            numa_sim::work(2_000 + 173 * round);
                            let before = shared.mirror.load(Relaxed);
                            let count = shared.lock.lock();
                            *count - before
                        })
                        .collect::<Vec<u64>>()
                })
            };
            *out.lock().unwrap() = arrivals.join();
            shared.stop.store(true, Relaxed);
            hammers.into_iter().for_each(|h| h.join());
        });
        let bypasses = result.lock().unwrap().clone();
        println!(
            "HQ bypasses of another domain on {name} (seed {seed}), bound {BOUND}: {bypasses:?}"
        );
        assert_eq!(bypasses.len(), ROUNDS as usize);
        assert!(
            bypasses.iter().all(|&b| b <= BOUND),
            "{name}: domain 0 overtook an arrived domain-1 waiter more than {BOUND} times: {bypasses:?}"
        );
        // Not vacuous: domain 0 was hammering, so arrivals did wait behind its turns.
        assert!(bypasses.iter().any(|&b| b >= LIMIT), "{bypasses:?}");
    }
    numa_locks::tunables::reset_defaults();
}
