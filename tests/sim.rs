//! The locks on a simulated multi-socket machine (`numa_sim`): the real lock code, unchanged,
//! in virtual time and under randomized schedules.
//!
//! Run with `RUSTFLAGS="--cfg numa_sim" cargo test --release --test sim --target-dir target/sim`.
#![cfg(numa_sim)]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use lock_api::RawMutex;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_sim::{Machine, RunReport, Simulation, thread};

/// The data a critical section protects: two 64-byte lines it writes, the count, and an
/// "inside" flag that is not atomic, so that two threads inside at once are caught.
#[repr(align(64))]
struct Protected {
    lines: [[u8; 64]; 2],
    inside: bool,
    count: u64,
}

/// A lock and its protected data, on separate lines at fixed offsets (cache-line layout must not
/// depend on where the allocator puts the `Arc`, or runs would not repeat).
struct Shared<R: RawMutex> {
    lock: CachePadded<lock_api::Mutex<R, ()>>,
    data: CachePadded<UnsafeCell<Protected>>,
}

// SAFETY: `data` is only accessed by a thread holding `lock`, which is exactly what the test
// checks (with the non-atomic `inside` flag).
unsafe impl<R: RawMutex + Send + Sync> Sync for Shared<R> {}

impl<R: RawMutex> Shared<R> {
    fn new() -> Self {
        Shared {
            lock: CachePadded::new(lock_api::Mutex::new(())),
            data: CachePadded::new(UnsafeCell::new(Protected {
                lines: [[0; 64]; 2],
                inside: false,
                count: 0,
            })),
        }
    }

    /// The reference `counter` critical section: write the 2 protected lines, 50 ns of work.
    fn critical_section(&self) {
        self.critical_section_yielding(0);
    }

    /// `critical_section`, with `yields` extra scheduling points inside (randomized mode: so
    /// that arrivals exhaust their steal attempts and queue, parking included).
    fn critical_section_yielding(&self, yields: u32) {
        let _guard = self.lock.lock();
        let data = self.data.get();
        // SAFETY: we hold the lock; `inside` catches anyone else who thinks so too.
        unsafe {
            assert!(!(*data).inside, "two threads inside the critical section");
            (*data).inside = true;
            let lines = &(*data).lines;
            numa_sim::touch(&[lines[0].as_ptr(), lines[1].as_ptr()]);
            numa_sim::work(50);
            for _ in 0..yields {
                numa_sim::yield_now();
            }
            (*data).count += 1;
            assert!((*data).inside, "someone else left the critical section");
            (*data).inside = false;
        }
    }

    fn count(&self) -> u64 {
        // SAFETY: called after every thread was joined.
        unsafe { (*self.data.get()).count }
    }
}

/// `threads` threads spread over `machine`, each taking the lock `acquisitions` times.
fn counter<R: RawMutex + Send + Sync + 'static>(
    machine: &'static Machine,
    seed: u64,
    threads: usize,
    acquisitions: u64,
) -> (RunReport, u64) {
    let total = Arc::new(AtomicU64::new(0));
    let out = total.clone();
    let report = Simulation::new(machine).seed(seed).run(move || {
        let shared = Arc::new(Shared::<R>::new());
        let workers: Vec<_> = numa_sim::placement(machine, threads)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let shared = shared.clone();
                thread::spawn_on(hw, move || {
                    for _ in 0..acquisitions {
                        shared.critical_section();
                        numa_sim::work(200);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        total.store(shared.count(), Relaxed);
    });
    (report, out.load(Relaxed))
}

fn smoke<R: RawMutex + Send + Sync + 'static>(name: &str) {
    let machine = Machine::by_name("x5-4").unwrap();
    let (threads, acquisitions) = (16, 500);
    let (first, count) = counter::<R>(machine, 1, threads, acquisitions);
    assert_eq!(
        count,
        threads as u64 * acquisitions,
        "{name}: lost or extra acquisitions"
    );
    // The same seed again, twice at once on two OS threads: the simulations then share the
    // process-wide queue-node registry, so their threads get other node indices (and nodes at
    // other addresses) than the first run's. The figures must not change.
    let again: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || counter::<R>(machine, 1, threads, acquisitions)))
        .collect();
    for handle in again {
        let (second, count2) = handle.join().unwrap();
        assert_eq!(count2, count);
        assert_eq!(
            (
                first.virtual_end_ns,
                first.simulated_accesses,
                first.scheduling_decisions
            ),
            (
                second.virtual_end_ns,
                second.simulated_accesses,
                second.scheduling_decisions
            ),
            "{name}: the same seed must give the same figures"
        );
    }
    let per_second = count as f64 / (first.virtual_end_ns as f64 * 1e-9);
    println!(
        "{name:>4} on x5-4, {threads} threads x {acquisitions}: {:.2} M acquisitions per simulated \
         second ({} ns virtual), host {:.3} s, {} scheduling decisions ({:.1} per acquisition), \
         {} simulated accesses",
        per_second / 1e6,
        first.virtual_end_ns,
        first.host_time.as_secs_f64(),
        first.scheduling_decisions,
        first.scheduling_decisions as f64 / count as f64,
        first.simulated_accesses,
    );
}

#[test]
fn mcs_counter_on_x5_4() {
    smoke::<RawMcs>("MCS");
}

#[test]
fn cna_counter_on_x5_4() {
    smoke::<RawCna>("CNA");
}

#[test]
fn hq_counter_on_x5_4() {
    smoke::<RawHq>("HQ");
}

/// Every acquisition's (virtual time, hardware thread), with threads that leave at different
/// times, so that later threads reuse queue nodes that earlier ones released.
fn acquisition_trace<R: RawMutex + Send + Sync + 'static>() -> Vec<(u64, usize)> {
    let machine = Machine::by_name("x5-4").unwrap();
    let trace = Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = trace.clone();
    Simulation::new(machine).seed(3).run(move || {
        let shared = Arc::new(Shared::<R>::new());
        let workers: Vec<_> = numa_sim::placement(machine, 16)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(i, hw)| {
                let (shared, trace) = (shared.clone(), trace.clone());
                thread::spawn_on(hw, move || {
                    for _ in 0..100 + 10 * i {
                        shared.critical_section();
                        trace.lock().unwrap().push((numa_sim::now_ns(), hw));
                        numa_sim::work(200);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
    });
    let mut trace = out.lock().unwrap().clone();
    trace.sort_unstable();
    trace
}

/// Simulations running at the same time on other OS threads share the process-wide queue-node
/// registry; the trace must not depend on them (see `qnode::registry::simulation`).
fn same_trace_beside_other_simulations<R: RawMutex + Send + Sync + 'static>() {
    let alone = acquisition_trace::<R>();
    for _ in 0..3 {
        let beside: Vec<_> = (0..2)
            .map(|_| std::thread::spawn(acquisition_trace::<R>))
            .collect();
        for run in beside {
            assert!(run.join().unwrap() == alone, "the trace changed");
        }
    }
}

#[test]
fn mcs_repeats_beside_other_simulations() {
    same_trace_beside_other_simulations::<RawMcs>();
}

#[test]
fn cna_repeats_beside_other_simulations() {
    same_trace_beside_other_simulations::<RawCna>();
}

#[test]
fn hq_repeats_beside_other_simulations() {
    same_trace_beside_other_simulations::<RawHq>();
}

/// 8 threads over 4 sockets, 2 acquisitions each, under random schedules (shuttle's random
/// scheduler, then PCT). The 16 scheduling points inside the critical section make arrivals
/// give up stealing and queue: with stats on, about 40 % of the acquisitions queue and some
/// waiters park (CNA also flushes its secondary queue).
fn randomized<R: RawMutex + Send + Sync + 'static>(seed: u64, schedules: usize) {
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let shared = Arc::new(Shared::<R>::new());
        let workers: Vec<_> = numa_sim::placement(machine, 8)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let shared = shared.clone();
                thread::spawn_on(hw, move || {
                    for _ in 0..2 {
                        shared.critical_section_yielding(16);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(shared.count(), 16);
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 3, 3, body);
    for (what, report, n) in [("random", random, schedules), ("PCT", pct, schedules / 3)] {
        assert_eq!(report.executions, n);
        println!(
            "{n} {what} schedules: {} decisions ({} per schedule), host {:.3} s",
            report.scheduling_decisions,
            report.scheduling_decisions / n as u64,
            report.host_time.as_secs_f64()
        );
    }
}

#[test]
fn mcs_random_schedules() {
    randomized::<RawMcs>(11, 300);
}

#[test]
fn cna_random_schedules() {
    randomized::<RawCna>(12, 300);
}

#[test]
fn hq_random_schedules() {
    randomized::<RawHq>(13, 300);
}

/// The speed figures of numa_sim/README.md: `--ignored` to run.
#[test]
#[ignore]
fn speed() {
    let machine = Machine::by_name("x5-4").unwrap();
    for (threads, acquisitions) in [(32, 2000), (144, 2000)] {
        let (report, count) = counter::<RawMcs>(machine, 1, threads, acquisitions);
        assert_eq!(count, threads as u64 * acquisitions);
        println!(
            "MCS x5-4 {threads} threads x {acquisitions}: host {:.3} s, {} decisions ({:.2} per \
             acquisition), {} accesses ({:.1} per acquisition), {} lookahead skips, {:.2} M \
             acquisitions per simulated second",
            report.host_time.as_secs_f64(),
            report.scheduling_decisions,
            report.scheduling_decisions as f64 / count as f64,
            report.simulated_accesses,
            report.simulated_accesses as f64 / count as f64,
            report.lookahead_skips,
            count as f64 / (report.virtual_end_ns as f64 * 1e-9) / 1e6,
        );
    }
}
