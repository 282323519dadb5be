//! Cache domains in numa_sim: `HqMutex`'s per-lock state (many locks, each contended by one
//! thread per NUMA node or cache domain until it goes hierarchical, each holding at most 1 KiB).
//! The bound on how long a waiter of another domain waits is in the `locks` module, beside the bound
//! for another node.

use crate::tunables;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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
    let _tunables = tunables();
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
    let _tunables = tunables();
    let machine = Machine::by_name("epyc9654-2s").unwrap();
    const LOCKS: usize = 10_000;
    let found = contend(machine, one_per_domain(machine, 4), LOCKS, 64);
    check("epyc9654-2s", LOCKS, found);
}
