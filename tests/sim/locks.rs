//! The locks on a simulated multi-socket machine (`numa_sim`): the real lock code, unchanged,
//! in virtual time and under randomized schedules.

use crate::tunables;
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use lock_api::RawMutex;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_sim::{Machine, RunReport, Simulation, thread};

// The `numasim` tool's harness, workloads and baseline models (numa_bench, whose `numasim`
// example prints them), for the headline figures: the test measures exactly what `numasim`
// prints.
use numa_bench::numasim::{baselines, cli, harness, kernel, report, rwlocks};

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
    let _defaults = tunables();
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
    let _defaults = tunables();
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
    let _defaults = tunables();
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

// ---- Locality, bypass and throughput, exactly (issues 10 and 11) -----------------------------
//
// Everything below is deterministic: the figures are the same on every run and every machine,
// so the assertions are exact bounds, not margins.

/// What one timed run of the reference `counter` workload measured.
#[derive(Clone, Debug, Default)]
struct Measure {
    /// Critical sections, all threads.
    ops: u64,
    /// Critical sections per thread.
    per_thread: Vec<u64>,
    /// Handoffs (an acquisition after another thread's) and how many crossed NUMA nodes.
    handoffs: u64,
    remote: u64,
    /// The longest time (virtual ns) a thread waited for the lock.
    max_wait_ns: u64,
}

impl Measure {
    fn remote_pct(&self) -> f64 {
        100.0 * self.remote as f64 / self.handoffs.max(1) as f64
    }
}

/// The critical section's shared state for [`measure`]: the protected lines, and who held the
/// lock last (written only under the lock).
#[repr(align(64))]
struct Tracked {
    lines: [[u8; 64]; 2],
    last_thread: usize,
    last_node: usize,
    handoffs: u64,
    remote: u64,
    count: u64,
}

struct TrackedShared<R: RawMutex> {
    lock: CachePadded<lock_api::Mutex<R, ()>>,
    data: CachePadded<UnsafeCell<Tracked>>,
}

// SAFETY: `data` is only accessed under `lock` (the counts at the end prove it).
unsafe impl<R: RawMutex + Send + Sync> Sync for TrackedShared<R> {}

/// `hw.len()` threads, thread i pinned to `hw[i]`, run the reference `counter` workload (lock,
/// write 2 protected lines, 50 ns of work, unlock, 200 ns of work) for `duration_ns` of virtual
/// time with the default tunables.
fn measure<R: RawMutex + Send + Sync + 'static>(
    machine: &'static Machine,
    hw: Vec<usize>,
    duration_ns: u64,
) -> Measure {
    let starts = vec![0; hw.len()];
    measure_phased::<R>(machine, hw, &starts, 0, duration_ns)
}

/// [`measure`], with thread i joining `starts[i]` ns into the run, and handoffs counted only
/// from `count_from_ns` on.
fn measure_phased<R: RawMutex + Send + Sync + 'static>(
    machine: &'static Machine,
    hw: Vec<usize>,
    starts: &[u64],
    count_from_ns: u64,
    duration_ns: u64,
) -> Measure {
    let starts = starts.to_vec();
    let out = Arc::new(std::sync::Mutex::new(Measure::default()));
    let result = out.clone();
    Simulation::new(machine).seed(1).run(move || {
        let shared = Arc::new(TrackedShared::<R> {
            lock: CachePadded::new(lock_api::Mutex::new(())),
            data: CachePadded::new(UnsafeCell::new(Tracked {
                lines: [[0; 64]; 2],
                last_thread: usize::MAX,
                last_node: usize::MAX,
                handoffs: 0,
                remote: 0,
                count: 0,
            })),
        });
        let begin = numa_sim::now_ns();
        let (end, count_from) = (begin + duration_ns, begin + count_from_ns);
        let workers: Vec<_> = hw
            .iter()
            .enumerate()
            .map(|(t, &hw)| {
                let shared = shared.clone();
                let start = starts[t];
                thread::spawn_on(hw, move || {
                    let (mut mine, mut max_wait) = (0u64, 0u64);
                    numa_sim::work(start);
                    while numa_sim::now_ns() < end {
                        let asked = numa_sim::now_ns();
                        let guard = shared.lock.lock();
                        max_wait = max_wait.max(numa_sim::now_ns() - asked);
                        let data = shared.data.get();
                        // SAFETY: we hold the lock.
                        unsafe {
                            let node = numa_sim::current_node();
                            if (*data).last_thread != usize::MAX
                                && (*data).last_thread != t
                                && numa_sim::clock_ns() >= count_from
                            {
                                (*data).handoffs += 1;
                                (*data).remote += u64::from((*data).last_node != node);
                            }
                            (*data).last_thread = t;
                            (*data).last_node = node;
                            let lines = &(*data).lines;
                            numa_sim::touch(&[lines[0].as_ptr(), lines[1].as_ptr()]);
                            numa_sim::work(50);
                            (*data).count += 1;
                        }
                        drop(guard);
                        mine += 1;
                        numa_sim::work(200);
                    }
                    (mine, max_wait)
                })
            })
            .collect();
        let results: Vec<(u64, u64)> = workers.into_iter().map(|w| w.join()).collect();
        let data = shared.data.get();
        let mut out = out.lock().unwrap();
        // SAFETY: every worker has been joined.
        unsafe {
            out.ops = (*data).count;
            out.handoffs = (*data).handoffs;
            out.remote = (*data).remote;
        }
        out.per_thread = results.iter().map(|r| r.0).collect();
        out.max_wait_ns = results.iter().map(|r| r.1).max().unwrap_or(0);
    });
    let measured = result.lock().unwrap().clone();
    assert_eq!(measured.per_thread.iter().sum::<u64>(), measured.ops);
    measured
}

/// The hardware threads of `threads` threads spread over `machine` (used by the locality test,
/// which runs without feature `stats`).
#[cfg(not(feature = "stats"))]
fn spread(machine: &'static Machine, threads: usize) -> Vec<usize> {
    numa_sim::placement(machine, threads).unwrap()
}

/// CNA and HQ keep handoffs on one node where MCS's FIFO crosses nodes about every third time
/// (34.0%; 49.8% before the lone head's re-take window let more of its releasing threads take
/// the lock back: its waiters re-queue in the order their releases reach the tail, which groups
/// them less than at random): 16 threads on x5-4 (4 per socket), default tunables, 10 ms of
/// virtual time. (Over 2 ms,
/// HQ's few handoffs between steals include the start-up's: 6% remote.) Without feature
/// `stats`, whose bookkeeping changes the timing (the claim is about the default build).
#[cfg(not(feature = "stats"))]
#[test]
fn locality_16_threads_x5_4() {
    let _defaults = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    let mcs = measure::<RawMcs>(machine, spread(machine, 16), 10_000_000);
    let cna = measure::<RawCna>(machine, spread(machine, 16), 10_000_000);
    let hq = measure::<RawHq>(machine, spread(machine, 16), 10_000_000);
    println!(
        "remote handoffs at 16 threads on x5-4: mcs {:.1}% cna {:.2}% hq {:.2}% (of {} / {} / {})",
        mcs.remote_pct(),
        cna.remote_pct(),
        hq.remote_pct(),
        mcs.handoffs,
        cna.handoffs,
        hq.handoffs
    );
    assert!(mcs.remote_pct() >= 30.0, "mcs {:.1}%", mcs.remote_pct());
    assert!(cna.remote_pct() <= 5.0, "cna {:.2}%", cna.remote_pct());
    assert!(hq.remote_pct() <= 5.0, "hq {:.2}%", hq.remote_pct());
    assert!(cna.handoffs > 1_000 && hq.handoffs > 1_000);
}

/// A waiter of another node is not bypassed forever: 7 threads of socket 0 hammer a CnaMutex and
/// one thread of socket 1 waits, in virtual time, at most the flush threshold (100 µs) plus the
/// handoffs around it, with stealing off. The threshold runs from when the secondary queue was
/// started; before that the waiter sat in the main queue behind at most its 7 predecessors, and
/// after the flush it is woken: at most 9 handoffs to parked waiters, each a wake-up (5 µs on the
/// X5-4 preset) plus a critical section and the cache misses around it, 10 µs apiece allowed.
/// With stealing on (the default) the flushed waiter may still see the lock stolen until, as the
/// queue's head, it has waited the steal bound (1 ms): then the bound adds that.
#[test]
fn cna_remote_waiter_within_flush_threshold() {
    let _defaults = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    let socket0: Vec<usize> = (0..machine.hw_threads())
        .filter(|&hw| machine.node_of(hw) == 0)
        .take(7)
        .collect();
    let remote = (0..machine.hw_threads())
        .find(|&hw| machine.node_of(hw) == 1)
        .unwrap();
    let mut hw = socket0;
    hw.push(remote);
    let flush = numa_locks::tunables::cna_flush_threshold().as_nanos() as u64;
    let steal_bound = numa_locks::tunables::steal_bound().as_nanos() as u64;
    for stealing in [true, false] {
        numa_locks::tunables::set_stealing(stealing).unwrap();
        let m = measure::<RawCna>(machine, hw.clone(), 5_000_000);
        let bound = flush + if stealing { steal_bound } else { 0 } + 9 * 10_000;
        println!(
            "CNA, stealing {stealing}: longest wait {} ns (bound {bound} ns); the remote thread \
             did {} of {}",
            m.max_wait_ns, m.per_thread[7], m.ops
        );
        assert!(
            m.per_thread[7] >= 3,
            "the remote thread starved: {:?}",
            m.per_thread
        );
        assert!(
            m.max_wait_ns <= bound,
            "stealing {stealing}: waited {} ns, bound {bound} ns",
            m.max_wait_ns
        );
    }
}

/// HQ's bypass bound, exactly: with stealing off and a limit of `LIMIT` local handoffs, `N0`
/// threads of node 0 hammer an HqMutex and a thread of node 1 arrives 120 times, at varying
/// phases; node 0 acquires the lock at most `(N0 + 1) * LIMIT` times after the arrival (each
/// node-0 thread is at most one FIFO entry ahead of the arrival, plus the turn in progress; see
/// `BYPASS_BOUND` in tests/hq.rs), plus `N0` for the acquisitions between the arrival's read of
/// the count and its tail swap (a few hundred ns of slow path, one critical section each at
/// most). The real-thread test can only judge a median; here every round is exact.
#[test]
fn hq_oldest_node_bypass_bound() {
    let _tunables = tunables();
    numa_locks::tunables::set_stealing(false).unwrap();
    numa_locks::tunables::set_hq_local_handoffs(BYPASS_LIMIT).unwrap();
    for (name, seed) in [("x5-4", 1), ("x5-4", 2), ("kunpeng920", 3), ("epyc-2s", 4)] {
        let machine = Machine::by_name(name).unwrap();
        let on_node =
            |node: usize| (0..machine.hw_threads()).filter(move |&hw| machine.node_of(hw) == node);
        let node0: Vec<usize> = on_node(0).take(BYPASS_N0).collect();
        let node1 = on_node(1).next().unwrap();
        check_bypasses(machine, seed, node0, node1, "node 0", "node-1");
    }
}

/// The same bound for a waiter of another cache domain of the same node (#26): 3 threads of one
/// CCX keep taking the lock while a thread of a second CCX of the same socket arrives, whether
/// the lock's local queues are per node or per domain by then. Without feature `stats` (as in
/// the `domains` module before): with its counters' extra accesses, on the `epyc9654-2s` the
/// three CCX threads never took 4 turns ahead of an arrival, and the check that the run is not
/// vacuous failed.
#[cfg(not(feature = "stats"))]
#[test]
fn hq_serves_another_domain_within_its_bound() {
    let _tunables = tunables();
    numa_locks::tunables::set_stealing(false).unwrap();
    numa_locks::tunables::set_hq_local_handoffs(BYPASS_LIMIT).unwrap();
    for (name, seed) in [("epyc-2s", 1), ("epyc9654-2s", 2)] {
        let machine = Machine::by_name(name).unwrap();
        let in_domain =
            |d: usize| (0..machine.hw_threads()).filter(move |&hw| machine.domain_of(hw) == d);
        let domain0: Vec<usize> = in_domain(0).step_by(2).take(BYPASS_N0).collect();
        let other = in_domain(1).next().unwrap();
        assert_eq!(machine.node_of(other), machine.node_of(domain0[0]));
        check_bypasses(machine, seed, domain0, other, "domain 0", "domain-1");
    }
}

/// The local-handoff limit of the bypass tests.
const BYPASS_LIMIT: u64 = 4;
/// Hammering threads in the bypass tests.
const BYPASS_N0: usize = 3;

/// The bypass tests' run: the threads on `hammers` keep taking an HqMutex (stealing off, limit
/// [`BYPASS_LIMIT`]) while a thread on `arrival` arrives 120 times at varying phases; asserts
/// that the hammers acquire it at most `(N0 + 1) * LIMIT + N0` times after each arrival, and at
/// least `LIMIT` times after some (the test is not vacuous).
fn check_bypasses(
    machine: &'static Machine,
    seed: u64,
    hammers: Vec<usize>,
    arrival: usize,
    hammered: &str,
    arriving: &str,
) {
    const ROUNDS: u64 = 120;
    const BOUND: u64 = (BYPASS_N0 as u64 + 1) * BYPASS_LIMIT + BYPASS_N0 as u64;
    struct Bypass {
        lock: CachePadded<lock_api::Mutex<RawHq, u64>>,
        // Simulated atomics: a load is a point in virtual time (a std atomic would be read at
        // whatever point of the host's execution the thread runs, ahead of the others).
        mirror: CachePadded<numa_sim::atomic::AtomicU64>,
        stop: CachePadded<numa_sim::atomic::AtomicBool>,
    }
    let name = machine.name;
    let out = Arc::new(std::sync::Mutex::new(Vec::new()));
    let result = out.clone();
    Simulation::new(machine).seed(seed).run(move || {
        let shared = Arc::new(Bypass {
            lock: CachePadded::new(lock_api::Mutex::new(0)),
            mirror: CachePadded::new(numa_sim::atomic::AtomicU64::new(0)),
            stop: CachePadded::new(numa_sim::atomic::AtomicBool::new(false)),
        });
        let hammers: Vec<_> = hammers
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
            thread::spawn_on(arrival, move || {
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
    println!("HQ bypasses on {name} (seed {seed}), bound {BOUND}: {bypasses:?}");
    assert_eq!(bypasses.len(), ROUNDS as usize);
    assert!(
        bypasses.iter().all(|&b| b <= BOUND),
        "{name}: {hammered} overtook an arrived {arriving} waiter more than {BOUND} times: {bypasses:?}"
    );
    // Not vacuous: the hammers kept the lock busy, so arrivals did wait behind their turns.
    assert!(bypasses.iter().any(|&b| b >= BYPASS_LIMIT), "{bypasses:?}");
}

/// HQ gives every node a turn within its handoff bound: with a limit of 16 local handoffs, 4
/// nodes x 3 threads, nobody waits longer than the 4 nodes' turns, and every thread progresses.
/// With stealing off, every handoff goes through the queues: the longest wait is 4 turns of 16
/// handoffs of at most a wake-up (6 µs on this preset) plus a critical section each (500 µs
/// allowed), and a turn ends with one remote handoff after 16 local ones, or sooner when its
/// node's queue runs dry (20% remote allowed; a rotation at every handoff would be 75%). With
/// stealing on (the default), steals are blind to nodes, and the holder's node keeps the lock
/// while its threads steal it, until the head forbids stealing after the steal bound (1 ms): the
/// wait bound adds that, and the remote bound is wider: the fast path's re-takes are blind to
/// nodes too (13.0% measured while the release loaded the lock word before its RMW, 21.6% with
/// the one-RMW release, which frees the lock sooner, 17.8% since a flat HqMutex hands off as
/// McsMutex does; MCS 79-83%). Since the engine fix of 2026-12-05 (a line's accesses reserved
/// in issue order): 11.6% (MCS 83.8%), and 29.1% with feature `stats`, whose bookkeeping in the
/// critical path changes the timing (MCS 73.0%): the bound is 35%.
#[test]
fn hq_every_node_gets_a_turn() {
    let _tunables = tunables();
    let machine = Machine::by_name("kunpeng920").unwrap();
    numa_locks::tunables::set_hq_local_handoffs(16).unwrap();
    let hw: Vec<usize> = (0..machine.node_count())
        .flat_map(|node| {
            (0..machine.hw_threads())
                .filter(move |&hw| machine.node_of(hw) == node)
                .take(3)
        })
        .collect();
    for stealing in [false, true] {
        numa_locks::tunables::set_stealing(stealing).unwrap();
        let m = measure::<RawHq>(machine, hw.clone(), 2_000_000);
        let mcs = measure::<RawMcs>(machine, hw.clone(), 2_000_000);
        println!(
            "HQ turns, stealing {stealing}: longest wait {} ns, per thread {:?}, remote handoffs \
             {:.1}% of {} (MCS {:.1}%)",
            m.max_wait_ns,
            m.per_thread,
            m.remote_pct(),
            m.handoffs,
            mcs.remote_pct()
        );
        assert!(m.per_thread.iter().all(|&n| n > 0), "{:?}", m.per_thread);
        let wait_bound = if stealing { 1_000_000 } else { 0 } + 500_000;
        assert!(m.max_wait_ns <= wait_bound, "waited {} ns", m.max_wait_ns);
        let remote_bound = if stealing { 35.0 } else { 20.0 };
        assert!(m.remote_pct() <= remote_bound, "{:.1}%", m.remote_pct());
    }
}

/// HqMutex goes flat when its per-node queues keep nothing local (one thread per node), and
/// tries them again once the flat window (10 ms) has passed, looking at it only once in
/// thousands of handoffs: 4 threads, one per node of the Kunpeng 920, run alone for 5 ms (the
/// lock goes flat within the first 0.1 ms), then 8 more join (3 per node). Over the last 5 ms of
/// 20, the lock must be hierarchical again: at most 30% of its handoffs cross nodes, and under a
/// quarter of what a lock stuck flat crosses, as MCS does here (32.6% measured; 92.8% before
/// the lone head's re-take window let its releasing threads take the lock back). Measured: 1.7%
/// (20.9% before the window; 2.7% before a flat HqMutex handed off as McsMutex does, open and
/// premarked, which made its queued handoffs, which count the streak and the looks at the flat
/// window, fewer: docs/DESIGN.md, "Decision record: heads premark").
#[cfg(not(feature = "stats"))]
#[test]
fn hq_tries_the_node_queues_again_after_going_flat() {
    let _defaults = tunables();
    let machine = Machine::by_name("kunpeng920").unwrap();
    let per_node: Vec<Vec<usize>> = (0..machine.node_count())
        .map(|node| {
            (0..machine.hw_threads())
                .filter(|&hw| machine.node_of(hw) == node)
                .take(3)
                .collect()
        })
        .collect();
    let hw: Vec<usize> = (0..3)
        .flat_map(|i| per_node.iter().map(move |cpus| cpus[i]))
        .collect();
    let starts: Vec<u64> = (0..hw.len())
        .map(|t| if t < per_node.len() { 0 } else { 5_000_000 })
        .collect();
    let hq = measure_phased::<RawHq>(machine, hw.clone(), &starts, 15_000_000, 20_000_000);
    let mcs = measure_phased::<RawMcs>(machine, hw, &starts, 15_000_000, 20_000_000);
    println!(
        "after 15 ms: HQ {:.1}% remote of {} handoffs, MCS {:.1}% of {}",
        hq.remote_pct(),
        hq.handoffs,
        mcs.remote_pct(),
        mcs.handoffs
    );
    assert!(hq.handoffs > 0 && mcs.handoffs > 0);
    assert!(hq.remote_pct() <= 30.0, "{:.1}% remote", hq.remote_pct());
    assert!(
        hq.remote_pct() * 4.0 <= mcs.remote_pct(),
        "HQ {:.1}% remote against MCS {:.1}%",
        hq.remote_pct(),
        mcs.remote_pct()
    );
}

/// One `numasim` run of the reference `counter` workload (10 ms, seed 1, default tunables), as
/// `numasim --machine M --threads N --locks L` prints it.
#[cfg(not(feature = "stats"))]
fn reference(machine: &str, lock: cli::LockKind, threads: usize) -> report::Row {
    reference_run(
        machine,
        lock,
        cli::WorkloadKind::Counter,
        threads,
        cli::Placement::Spread,
    )
}

/// `numasim`'s defaults for one run: seed 1, 10 ms, store buffers on, no trace.
#[cfg(not(feature = "stats"))]
pub(crate) fn run_config(
    machine: &str,
    threads: usize,
    placement: cli::Placement,
) -> harness::RunConfig {
    harness::RunConfig {
        placement,
        ..harness::RunConfig::new(Machine::by_name(machine).unwrap(), threads)
    }
}

/// [`reference`] with any workload and placement (`numasim --workload W --placement P`).
#[cfg(not(feature = "stats"))]
pub(crate) fn reference_run(
    machine: &str,
    lock: cli::LockKind,
    workload: cli::WorkloadKind,
    threads: usize,
    placement: cli::Placement,
) -> report::Row {
    let config = run_config(machine, threads, placement);
    let run = harness::run_once(lock, workload, &config).unwrap();
    let key = report::RowKey {
        machine: config.machine.name,
        lock: "",
        workload: workload.name(),
        threads,
    };
    report::summarize(key, &run)
}

/// The handoff issue's pins (#25), against the kernel's own locks modelled in the same run:
/// `numasim` at seed 1, default tunables, 10 ms each. Measured values in brackets (2026-11-25).
/// - X5-4 `counter`: CnaMutex at least `cna-kernel` at 32 and 72 threads (1.26x, 1.17x). At 8
///   threads it is not (0.82x),
///   nor on `kv` (0.73-0.88x), so those are not pinned.
/// - X5-4, 4 threads (one per socket, where HqMutex is flat): HqMutex at least 0.97x
///   `cna-kernel` on `kv` (1.01x on the faithful instrument, 2026-11-28). On `counter` it was
///   0.99-1.00x before the instrument charged instructions and made `counter` read what it
///   writes; there it is 0.65x (0.93 against 1.42 M/s): a miss the handoff issue (#38) takes
///   on, pinned here as a floor at 0.6 so that it cannot get worse unnoticed.
/// - Kunpeng 920 `counter`, 64 threads: HqMutex at least 1.25x `cna-kernel`, the HQ RFC's
///   claim (1.97x).
/// - X5-4, 32 threads, `counter`, `kv` and `freelist`: CnaMutex and HqMutex keep the order and
///   the waits bounded: fairness factor at most 0.6 (0.50-0.53), `wait_p99_us` at most 200
///   (78-110), remote handoffs at most 2% on `counter` and 5% on `kv` and `freelist`
///   (1.4-1.7%). McsMutex too keeps fairness at most 0.6 (0.51-0.56): with 10 ns between
///   acquisitions (`freelist`) one thread used to keep the lock for the whole run (fairness
///   factor 1.0), because a queue head that always saw the lock free lost every CAS to the
///   re-taking holder and never reached its steal bound or its reservation.
#[cfg(not(feature = "stats"))]
#[test]
fn handoffs_beat_the_kernels_cna() {
    use cli::LockKind::{Cna, CnaKernel, Hq, Mcs};
    use cli::WorkloadKind::{Counter, FreeList, Kv};
    let _defaults = tunables();
    let run = |machine: &str, lock, workload, threads| {
        let row = reference_run(machine, lock, workload, threads, cli::Placement::Spread);
        println!(
            "{machine} {lock:?} {workload:?} {threads} threads: {:.2} M/s, fairness {:.3}, \
             p99 {:.1} us, remote {:.2}%",
            row.ops_per_sec / 1e6,
            row.fairness_factor,
            row.wait_p99_us.unwrap_or(f64::NAN),
            row.remote_handoff_pct
        );
        row
    };
    for (machine, lock, workload, threads, bound) in [
        ("x5-4", Cna, Counter, 32, 1.0),
        ("x5-4", Cna, Counter, 72, 1.0),
        ("x5-4", Hq, Counter, 4, 0.6),
        ("x5-4", Hq, Kv, 4, 0.97),
        ("kunpeng920", Hq, Counter, 64, 1.25),
    ] {
        let (ours, kernel) = (
            run(machine, lock, workload, threads),
            run(machine, CnaKernel, workload, threads),
        );
        let ratio = ours.ops_per_sec / kernel.ops_per_sec;
        assert!(
            ratio >= bound,
            "{machine} {lock:?} {workload:?} {threads} threads: {ratio:.3}x cna-kernel, below \
             {bound}"
        );
    }
    for workload in [Counter, Kv, FreeList] {
        let remote_bound = if workload == Counter { 2.0 } else { 5.0 };
        for lock in [Mcs, Cna, Hq] {
            let row = run("x5-4", lock, workload, 32);
            let what = format!("{lock:?} {workload:?}");
            assert!(
                row.fairness_factor <= 0.6,
                "{what}: fairness {:.3}",
                row.fairness_factor
            );
            if lock != Mcs {
                let p99 = row.wait_p99_us.expect("every run waits");
                assert!(p99 <= 200.0, "{what}: p99 {p99:.1} us");
                assert!(
                    row.remote_handoff_pct <= remote_bound,
                    "{what}: {:.2}% remote",
                    row.remote_handoff_pct
                );
            }
        }
    }
}

/// The handoff targets of #38 that are met on the faithful instrument, pinned: `numasim` at
/// seed 1, default tunables, 10 ms, 32 threads, both placements (`spread` and the published
/// runs' `linux`), CnaMutex and HqMutex against the better of `cna-kernel` and
/// `cna-kernel-wo-sro` in the same process. Each bound is about 0.9 of the lowest ratio measured
/// over seeds 1-3 and both placements (2026-12-05, with the kernel's `prefetchw` of the
/// successor's node in the models; in brackets: CnaMutex, HqMutex):
/// - `x5-4`: `counter` (1.67, 1.53), `freelist` (3.50, 2.13), `lockbench` (1.20, 1.63);
/// - `kunpeng920`: `freelist` (3.24, 1.97), `lockbench` (1.30, 1.96).
///
/// On these rows the order and the waits stay bounded: fairness factor at most 0.6
/// (0.50-0.54) and `wait_p99_us` at most 200 (78-111). The missed rows (`kv` at 0.77-0.80x,
/// `x5-4` `locktorture` at 0.71-0.89x, `kunpeng920` `counter` at 0.88-2.21x, where a v15
/// model's heads order the queue on some seeds and placements, `kunpeng920` `locktorture` at
/// 0.97-1.49x, 4 threads on `counter`) are in BENCHMARKS, "Our locks against the kernel's CNA",
/// with what the `kv` gap was traced to.
#[cfg(not(feature = "stats"))]
#[test]
fn handoffs_ahead_of_the_kernels_cna_where_met() {
    use cli::LockKind::{Cna, CnaKernel, CnaKernelWoSro, Hq};
    use cli::WorkloadKind::{Counter, FreeList, LockBench};
    let _defaults = tunables();
    const THREADS: usize = 32;
    for (machine, workload, cna_bound, hq_bound) in [
        ("x5-4", Counter, 1.5, 1.35),
        ("x5-4", FreeList, 3.1, 1.9),
        ("x5-4", LockBench, 1.08, 1.45),
        ("kunpeng920", FreeList, 2.9, 1.75),
        ("kunpeng920", LockBench, 1.17, 1.75),
    ] {
        for placement in [cli::Placement::Spread, cli::Placement::Linux] {
            let run = |lock| reference_run(machine, lock, workload, THREADS, placement);
            let kernel = run(CnaKernel)
                .ops_per_sec
                .max(run(CnaKernelWoSro).ops_per_sec);
            for (lock, bound) in [(Cna, cna_bound), (Hq, hq_bound)] {
                let row = run(lock);
                let ratio = row.ops_per_sec / kernel;
                let p99 = row.wait_p99_us.expect("every run waits");
                let what = format!("{machine} {placement:?} {lock:?} {workload:?}");
                println!(
                    "{what}: {ratio:.2}x the better kernel CNA, fairness {:.3}, p99 {p99:.1} us",
                    row.fairness_factor
                );
                assert!(ratio >= bound, "{what}: {ratio:.3}x, below {bound}");
                assert!(
                    row.fairness_factor <= 0.6,
                    "{what}: fairness {:.3}",
                    row.fairness_factor
                );
                assert!(p99 <= 200.0, "{what}: p99 {p99:.1} us");
            }
        }
    }
}

/// The targets of #38 met where the pins above do not look, pinned: `numasim` at seed 1,
/// default tunables, 10 ms, both placements (`spread` and the published runs' `linux-5.12`).
/// Each bound is the target, or about 0.9 of the lowest ratio measured over seeds 1-3 and both
/// placements where that is higher (2026-12-06, `.ci/handoff-targets`; in brackets):
/// - 2 threads on every preset: McsMutex, CnaMutex and HqMutex against the better of `std` and
///   `ttas`, at least 0.97x on every workload (the lowest: 0.98 on `epyc-2s` `locktorture`
///   with `spread`; `counter` 1.00 where the two threads share a node), and on `2s-generic`
///   1.27x on `kv` (1.45-1.79) and 1.03x on `freelist` (1.27-5.63), with `wait_p99_us` at most
///   200 (at most 12.3): the lone head's re-take window and its spaced looks (docs/DESIGN.md,
///   decision record; on the Kunpeng, whose two NUMA levels v5.12's rule does not cover, with
///   v5.10's placement);
/// - 64 threads, HqMutex against the better of `cna-kernel` and `cna-kernel-wo-sro`: on
///   `epyc-2s` at least 2.4x on `counter` (2.68-3.08), 1.55x on `kv` (1.72-1.94) and 5.1x on
///   `lockbench` (5.68-6.52); on `epyc9654-2s` 1.5x (1.56-2.04), 1.32x (1.47-1.50) and 4.2x
///   (4.67-5.27);
/// - 32 threads on `x5-4`: McsMutex against `qspinlock`, at least 0.97x on `counter`
///   (1.06-1.27), `kv` (1.06-1.13), `locktorture` (1.07-1.17) and `lockbench` (1.06-1.15), and
///   1.33x on `freelist` (1.48-2.10).
#[cfg(not(feature = "stats"))]
#[test]
fn handoff_targets_met_on_the_other_presets() {
    use cli::LockKind::{CnaKernel, CnaKernelWoSro, Hq, Mcs, QSpinLock, Std, Ttas};
    use cli::WorkloadKind::{Counter, FreeList, Kv, LockBench, LockTorture};
    let _defaults = tunables();
    let placements = [cli::Placement::Spread, cli::Placement::Linux512];
    for placement in placements {
        for machine in ["x5-4", "2s-generic", "kunpeng920", "epyc-2s", "epyc9654-2s"] {
            // v5.12's rule covers one NUMA level; on the Kunpeng the published runs' is v5.10's.
            let placement = match (machine, placement) {
                ("kunpeng920", cli::Placement::Linux512) => cli::Placement::Linux,
                _ => placement,
            };
            let run = |lock, workload| reference_run(machine, lock, workload, 2, placement);
            for workload in [Counter, Kv, FreeList, LockTorture, LockBench] {
                let bound = match (machine, workload) {
                    ("2s-generic", Kv) => 1.27,
                    ("2s-generic", FreeList) => 1.03,
                    _ => 0.97,
                };
                let best = run(Std, workload)
                    .ops_per_sec
                    .max(run(Ttas, workload).ops_per_sec);
                for lock in [Mcs, cli::LockKind::Cna, Hq] {
                    let row = run(lock, workload);
                    let ratio = row.ops_per_sec / best;
                    let p99 = row.wait_p99_us.expect("two threads wait");
                    let what = format!("{machine} {placement:?} 2 threads {lock:?} {workload:?}");
                    println!("{what}: {ratio:.2}x the better of std and ttas, p99 {p99:.1} us");
                    assert!(ratio >= bound, "{what}: {ratio:.3}x, below {bound}");
                    assert!(p99 <= 200.0, "{what}: p99 {p99:.1} us");
                }
            }
        }
        for (machine, bounds) in [
            ("epyc-2s", [(Counter, 2.4), (Kv, 1.55), (LockBench, 5.1)]),
            (
                "epyc9654-2s",
                [(Counter, 1.5), (Kv, 1.32), (LockBench, 4.2)],
            ),
        ] {
            for (workload, bound) in bounds {
                let run = |lock| reference_run(machine, lock, workload, 64, placement);
                let kernel = run(CnaKernel)
                    .ops_per_sec
                    .max(run(CnaKernelWoSro).ops_per_sec);
                let ratio = run(Hq).ops_per_sec / kernel;
                let what = format!("{machine} {placement:?} 64 threads HqMutex {workload:?}");
                println!("{what}: {ratio:.2}x the better kernel CNA");
                assert!(ratio >= bound, "{what}: {ratio:.3}x, below {bound}");
            }
        }
        for (workload, bound) in [
            (Counter, 0.97),
            (Kv, 0.97),
            (FreeList, 1.33),
            (LockTorture, 0.97),
            (LockBench, 0.97),
        ] {
            let run = |lock| reference_run("x5-4", lock, workload, 32, placement);
            let ratio = run(Mcs).ops_per_sec / run(QSpinLock).ops_per_sec;
            let what = format!("x5-4 {placement:?} 32 threads McsMutex {workload:?}");
            println!("{what}: {ratio:.2}x qspinlock");
            assert!(ratio >= bound, "{what}: {ratio:.3}x, below {bound}");
        }
    }
}

/// The re-take window (`tunables::set_retake_window`, #38) does what it says: on `kv` on
/// `x5-4` (16 and 32 threads, `--placement linux`, seed 1, 10 ms), a 0.5 us window lets the
/// releasing thread take the lock back before the marking head reserves it, and CnaMutex and
/// HqMutex make at least 1.1x their throughput without one (1.27x and 1.17x on seeds 1-3,
/// 2026-11-29), with the order and the waits still bounded there (fairness factor 0.51-0.52,
/// `wait_p99_us` 100-140). What it costs elsewhere (the tail at 96-192 threads) is why it is
/// off by default: docs/DESIGN.md, "Decision record: the re-take window".
#[cfg(not(feature = "stats"))]
#[test]
fn retake_window_lets_the_releasing_thread_back_in() {
    use cli::LockKind::{Cna, Hq};
    let _defaults = tunables();
    for threads in [16, 32] {
        for lock in [Cna, Hq] {
            let run = || {
                reference_run(
                    "x5-4",
                    lock,
                    cli::WorkloadKind::Kv,
                    threads,
                    cli::Placement::Linux,
                )
            };
            numa_locks::tunables::reset_defaults();
            let closed = run();
            numa_locks::tunables::set_retake_window(std::time::Duration::from_nanos(500)).unwrap();
            let open = run();
            numa_locks::tunables::reset_defaults();
            let gain = open.ops_per_sec / closed.ops_per_sec;
            let p99 = open.wait_p99_us.expect("every run waits");
            let what = format!("{lock:?} kv {threads} threads, 0.5 us window");
            println!(
                "{what}: {gain:.2}x without, fairness {:.3}, p99 {p99:.1} us",
                open.fairness_factor
            );
            assert!(gain >= 1.1, "{what}: {gain:.3}x without one, below 1.1");
            assert!(
                open.fairness_factor <= 0.6,
                "{what}: fairness {:.3}",
                open.fairness_factor
            );
            assert!(p99 <= 200.0, "{what}: p99 {p99:.1} us");
        }
    }
}

/// The cache-domain issue's pins (#26): `numasim` at seed 1, default tunables, 10 ms each, against
/// `cna-kernel` in the same run. Measured values in brackets (2026-11-25, seeds 1-3; since the
/// engine fix of 2026-12-05 and the kernel's `prefetchw` in the models, seed 1: 3.07x and 2.03x
/// on `counter` at 64 threads, 2.31x on `kv`, 1.60x at 32 threads, where the fairness factor is
/// 0.634, over #38's 0.6: a miss, pinned at 0.65).
/// - HqMutex at least 1.5x `cna-kernel` on `counter` with 64 threads on both AMD presets (2.53x
///   `epyc-2s`, 1.51-1.52x `epyc9654-2s`: per-CCX queues keep handoffs at 23 ns where a
///   per-node lock pays 97-108 ns; with domain turns of 16 handoffs since
///   `tunables::DEFAULT_HQ_DOMAIN_HANDOFFS`), and at least 1.3x on `kv` with 64 threads on
///   `epyc-2s` (1.59-1.63x).
/// - At 32 threads on `epyc-2s` (two or three threads per CCX), HqMutex at least 1.2x on
///   `counter` (1.31-1.33x); the issue's 1.5x is not met there, nor at 16 threads, where one
///   thread per CCX leaves per-domain queues nothing to keep and the lock runs per node (0.61-0.67x:
///   the handoff cost of #25). CnaMutex stays per node (0.62-0.93x; see `same_node` in cna.rs).
/// - Fairness factor at most 0.6 (0.53-0.57), and on `counter` at 64 threads remote handoffs at
///   most 2% on `epyc-2s` (0.87-0.88%) and 2.5% on `epyc9654-2s` (2.10-2.12%: the handoff
///   issue's 2% is missed there by 0.1 points since a marked head takes the lock with a store,
///   `HANDED`, which ends local turns a little sooner; it was 1.85-1.87%, and the store is worth
///   1-6% elsewhere: docs/DESIGN.md, "Handoffs: marking, premarking and stealing").
#[cfg(not(feature = "stats"))]
#[test]
fn hq_keeps_handoffs_within_a_ccx_on_amd() {
    use cli::LockKind::{CnaKernel, Hq};
    use cli::WorkloadKind::{Counter, Kv};
    let _defaults = tunables();
    let ratio = |machine: &str, workload, threads| {
        let hq = reference_run(machine, Hq, workload, threads, cli::Placement::Spread);
        let kernel = reference_run(
            machine,
            CnaKernel,
            workload,
            threads,
            cli::Placement::Spread,
        );
        let ratio = hq.ops_per_sec / kernel.ops_per_sec;
        println!(
            "{machine} {workload:?} {threads} threads: HQ {:.2} M/s, cna-kernel {:.2} M/s \
             ({ratio:.2}x), HQ fairness {:.3}, remote {:.2}%",
            hq.ops_per_sec / 1e6,
            kernel.ops_per_sec / 1e6,
            hq.fairness_factor,
            hq.remote_handoff_pct
        );
        (ratio, hq)
    };
    for (machine, workload, threads, bound, remote_bound, fairness_bound) in [
        ("epyc-2s", Counter, 64, 1.5, 2.0, 0.6),
        ("epyc9654-2s", Counter, 64, 1.5, 2.5, 0.6),
        ("epyc-2s", Kv, 64, 1.3, 2.0, 0.6),
        ("epyc-2s", Counter, 32, 1.2, 2.0, 0.65),
    ] {
        let (r, hq) = ratio(machine, workload, threads);
        let what = format!("{machine} {workload:?} {threads} threads");
        assert!(r >= bound, "{what}: HQ/cna-kernel {r:.3}, below {bound}");
        assert!(
            hq.fairness_factor <= fairness_bound,
            "{what}: fairness {:.3}",
            hq.fairness_factor
        );
        if workload == Counter {
            assert!(
                threads < 64 || hq.remote_handoff_pct <= remote_bound,
                "{what}: {:.2}% remote",
                hq.remote_handoff_pct
            );
        }
    }
}

/// Every thread on one node of an AMD preset (`numasim --placement packed`): HqMutex refines its
/// per-node queue into per-domain ones when a node's turn runs to its limit with waiters of the
/// node left, also when nobody of another node waits. `numasim` at seed 1, 10 ms, 32 threads,
/// `counter`, against `cna-kernel` in the same run; measured in brackets (2026-11-27, seeds
/// 1-3; with the kernel's `prefetchw` in the models, seed 1: 2.46x and 1.40x): at least 1.5x on
/// `epyc-2s` (2.16-2.17x) and 1.2x on `epyc9654-2s` (1.32-1.33x), with fairness factor at most
/// 0.6 (0.53-0.58). Before, such a lock refined only by chance and ran
/// per node: 0.98-1.00x and 0.79-0.81x.
#[cfg(not(feature = "stats"))]
#[test]
fn hq_refines_to_cache_domains_on_one_node() {
    use cli::LockKind::{CnaKernel, Hq};
    use cli::WorkloadKind::Counter;
    let _defaults = tunables();
    for (machine, bound) in [("epyc-2s", 1.5), ("epyc9654-2s", 1.2)] {
        let hq = reference_run(machine, Hq, Counter, 32, cli::Placement::Packed);
        let kernel = reference_run(machine, CnaKernel, Counter, 32, cli::Placement::Packed);
        let ratio = hq.ops_per_sec / kernel.ops_per_sec;
        println!(
            "{machine}, one node, 32 threads: HQ {:.2} M/s ({ratio:.2}x cna-kernel), fairness {:.3}",
            hq.ops_per_sec / 1e6,
            hq.fairness_factor
        );
        assert!(
            ratio >= bound,
            "{machine}: HQ/cna-kernel {ratio:.3} on one node, below {bound}"
        );
        assert!(
            hq.fairness_factor <= 0.6,
            "{machine}: fairness {:.3}",
            hq.fairness_factor
        );
    }
}

/// The cache-domain issue's latency pins (#26), with the per-domain turn limit
/// (`tunables::DEFAULT_HQ_DOMAIN_HANDOFFS`, 16): `numasim` at seed 1, default tunables, 10 ms,
/// 96 threads (four per CCX on the `epyc9654-2s`, eight on the `epyc-2s`), against
/// `cna-kernel` in the same run. Measured values in brackets (2026-11-25, seeds 1-3; one shared
/// limit of 64 before gave p99 212-569 us).
/// - `wait_p99_us` at most 200: `epyc-2s` `counter` 89-91, `kv` 107-108; `epyc9654-2s`
///   `counter` 141, `kv` 174-175.
/// - Fairness factor at most 0.6 (0.51-0.52).
/// - HqMutex at least 1.5x `cna-kernel` on `counter` (2.31-2.57x; with the kernel's
///   `prefetchw` in the models, seed 1: 3.13x and 3.16x) and 1.3x on `kv` (1.38-1.51x; 2.10x
///   and 1.88x): the shorter domain turns keep most of the per-domain gain.
#[cfg(not(feature = "stats"))]
#[test]
fn hq_bounds_the_wait_behind_cache_domain_turns_on_amd() {
    use cli::LockKind::{CnaKernel, Hq};
    use cli::WorkloadKind::{Counter, Kv};
    let _defaults = tunables();
    for (machine, workload, bound) in [
        ("epyc-2s", Counter, 1.5),
        ("epyc-2s", Kv, 1.3),
        ("epyc9654-2s", Counter, 1.5),
        ("epyc9654-2s", Kv, 1.3),
    ] {
        let hq = reference_run(machine, Hq, workload, 96, cli::Placement::Spread);
        let kernel = reference_run(machine, CnaKernel, workload, 96, cli::Placement::Spread);
        let ratio = hq.ops_per_sec / kernel.ops_per_sec;
        let p99 = hq.wait_p99_us.expect("every run waits");
        let what = format!("{machine} {workload:?} 96 threads");
        println!(
            "{what}: HQ {:.2} M/s ({ratio:.2}x cna-kernel), fairness {:.3}, p99 {p99:.0} us",
            hq.ops_per_sec / 1e6,
            hq.fairness_factor
        );
        assert!(p99 <= 200.0, "{what}: p99 {p99:.1} us");
        assert!(
            hq.fairness_factor <= 0.6,
            "{what}: fairness {:.3}",
            hq.fairness_factor
        );
        assert!(
            ratio >= bound,
            "{what}: HQ/cna-kernel {ratio:.3}, below {bound}"
        );
    }
}

/// The alternation columns of `numasim --paths`, from (acquisitions, handoffs) per 20 µs
/// window: a window alternates with under 2 acquisitions per handoff; one with no handoff is a
/// single thread's.
#[test]
fn alternation_counts_the_windows_with_few_acquisitions_per_handoff() {
    let windows = [[100, 90], [75, 3], [0, 0], [10, 5], [9, 5]];
    let a = report::Alternation::from_windows(&windows).unwrap();
    assert_eq!(a.time_pct, 40.0);
    // 109 critical sections in 40 µs.
    assert_eq!(a.ops_per_sec, Some(109.0 / 40e-6));
    let none = report::Alternation::from_windows(&[[75, 0], [10, 5]]).unwrap();
    assert_eq!((none.time_pct, none.ops_per_sec), (0.0, None));
    assert_eq!(report::Alternation::from_windows(&[]), None);
}

/// A lock contended by one node's threads gains nothing from per-node queues: HqMutex stays
/// flat (the plain queue lock) until a handoff crosses nodes. With every thread on one node of
/// the Kunpeng 920 (`--placement packed`, 24 threads, seed 1) it stays at 0.95x the kernel's
/// `qspinlock` or above (1.02x: 5.12 against 5.00 M/s); when it turned hierarchical regardless,
/// it ran at 0.88x its flat rate, which would be 0.90x. On the faithful instrument (instruction
/// costs, `counter` reading what it writes; 2026-11-28) it makes 0.69x (3.20 against 4.63 M/s)
/// with no handoff crossing nodes: the flat handoff itself is slower than the kernel's there,
/// a miss the handoff issue (#38) takes on; the floor is 0.65x until then.
///
/// (Until the heads premarked, this compared HqMutex with McsMutex, at 0.9x. Issue 25 sets the
/// targets against the kernel's locks. While HqMutex reserved its marked handoffs, it made
/// 3.89 M/s here, 0.78x, and the bound was 0.75x; a flat HqMutex now hands off as McsMutex
/// does: docs/DESIGN.md, "Decision record: heads premark".)
#[cfg(not(feature = "stats"))]
#[test]
fn hq_stays_flat_on_one_node() {
    use cli::LockKind::{Hq, QSpinLock};
    use cli::Placement::Packed;
    let _defaults = tunables();
    let kernel = reference_run(
        "kunpeng920",
        QSpinLock,
        cli::WorkloadKind::Counter,
        24,
        Packed,
    );
    let hq = reference_run("kunpeng920", Hq, cli::WorkloadKind::Counter, 24, Packed);
    let ratio = hq.ops_per_sec / kernel.ops_per_sec;
    println!(
        "one node, 24 threads: HQ {:.2} M/s, qspinlock {:.2} M/s ({ratio:.3})",
        hq.ops_per_sec / 1e6,
        kernel.ops_per_sec / 1e6
    );
    assert_eq!(hq.remote_handoff_pct, 0.0);
    assert!(ratio >= 0.65, "HQ/qspinlock {ratio:.3} on one node");
}

/// Low contention on the Kunpeng 920, pinned on seed 1: HqMutex at least 0.78x the kernel's CNA
/// (`cna-kernel`) at 1-8 threads, the reference `counter` workload as `numasim` runs it.
/// Measured in brackets: 0.98, 0.86, 1.14, 0.94, 1.02, 0.85, 0.81, 0.88 (0.89 at 4 threads and
/// 0.91 at 5 while a flat HqMutex reserved its marked handoffs). (Issue 11 pinned 0.95x McsMutex
/// here, and issue 25's first handoff redesign 0.78x McsMutex; since the heads premark, McsMutex
/// makes its marked handoffs open (docs/DESIGN.md, "Decision record: heads premark") and runs 14-33% faster
/// at 4-8 threads, so the pin now follows issue 25's targets, set against the kernel's
/// locks.) At 2-3 threads every
/// acquisition is a steal. At 5 and 6 threads the nodes have one or two threads each: the
/// per-node queues keep little local, and the lock must go flat. At 8 threads, two per node, it
/// must stay hierarchical: it then crosses nodes in far fewer handoffs than McsMutex.
/// On the faithful instrument (2026-11-28): 0.98, 0.99, 1.06, 0.70, 1.08, 1.23, 0.81, 1.11; at
/// 4 threads, one per node, HqMutex and McsMutex make 1.08 M/s against `cna-kernel`'s 1.54
/// (#38 takes it on), so the floor there is 0.65x; at 8 threads HqMutex crosses nodes in 40% of
/// its handoffs against McsMutex's 68% (it was under half of McsMutex's before). Since the
/// engine fix of 2026-12-05 and the kernel's `prefetchw` in the models: 0.98, 0.99, 0.97, 1.27,
/// 1.31, 1.63, 1.10, 1.20, and at 8 threads
/// 42% against McsMutex's 52% (0.81x: McsMutex now crosses less; pinned at 0.85x).
#[cfg(not(feature = "stats"))]
#[test]
fn hq_keeps_up_with_the_kernels_cna_at_low_contention_on_kunpeng920() {
    use cli::LockKind::{CnaKernel, Hq, Mcs};
    let _defaults = tunables();
    for threads in 1..=8 {
        let (kernel, hq) = (
            reference("kunpeng920", CnaKernel, threads),
            reference("kunpeng920", Hq, threads),
        );
        let ratio = hq.ops_per_sec / kernel.ops_per_sec;
        println!(
            "{threads} threads: HQ/cna-kernel {ratio:.3}, remote HQ {:.1}%",
            hq.remote_handoff_pct
        );
        let floor = if threads == 4 { 0.65 } else { 0.78 };
        assert!(
            ratio >= floor,
            "{threads} threads: HQ/cna-kernel {ratio:.3}"
        );
        if threads == 8 {
            let mcs = reference("kunpeng920", Mcs, threads);
            // 42% against 52% (0.81x; 0.59x before the engine fix of 2026-12-05, when McsMutex
            // crossed on 68%): a miss for the handoff issue (#38).
            assert!(
                hq.remote_handoff_pct <= 0.85 * mcs.remote_handoff_pct,
                "8 threads: HQ {:.1}% remote, MCS {:.1}%",
                hq.remote_handoff_pct,
                mcs.remote_handoff_pct
            );
        }
    }
}

/// The arrivals' pause phase, which only a machine with one NUMA node gets (`STEAL_TRIES` in
/// `src/raw/word.rs`): thread A holds the lock for 4 µs; thread B, on another core of the same
/// X5-4 socket, arrives 0.2 µs in. B's 14 `pause`s and 7 yields take 2.2 µs, so on the
/// four-socket preset B queues. With that socket alone, as a one-node machine, B keeps pausing
/// for half the spin time (2.5 µs) after its first yield and steals the lock when A unlocks,
/// without queueing; with the spin time at 0 it queues there too. The latencies are the same in
/// all three runs: the node count and the tunable decide.
#[test]
fn one_node_arrivals_pause_before_queueing() {
    let _defaults = tunables();
    let x5_4 = Machine::by_name("x5-4").unwrap();
    let one_socket: &'static Machine = Box::leak(Box::new(Machine {
        name: "x5-4, one socket",
        sockets: 1,
        ..x5_4.clone()
    }));
    assert_eq!(one_socket.node_count(), 1);
    // (stolen, queued) acquisitions of B.
    let b_path = |machine: &'static Machine| {
        let report = Simulation::new(machine).seed(1).run(move || {
            let lock = Arc::new(RawMcs::INIT);
            let (a_lock, b_lock) = (lock.clone(), lock);
            let a = thread::spawn_on(0, move || {
                a_lock.lock();
                numa_sim::work(4_000);
                // SAFETY: A took the lock above.
                unsafe { a_lock.unlock() };
            });
            let b = thread::spawn_on(2, move || {
                numa_sim::work(200);
                b_lock.lock();
                // SAFETY: B holds the lock it just took.
                unsafe { b_lock.unlock() };
            });
            a.join();
            b.join();
        });
        let tallies = report.tallies;
        (
            tallies[numa_locks::PathEvent::Steal as usize],
            tallies[numa_locks::PathEvent::Queued as usize],
        )
    };
    assert_eq!(b_path(x5_4), (0, 1), "four sockets: B queues");
    assert_eq!(b_path(one_socket), (1, 0), "one node: B steals");
    numa_locks::tunables::set_spin_time(std::time::Duration::ZERO).unwrap();
    assert_eq!(
        b_path(one_socket),
        (0, 1),
        "one node, no spinning: B queues"
    );
}

// ---- Randomized schedules: the conformance scenarios beyond loom's reach ----------------------

/// 12 threads on 4 sockets mix `lock`, `try_lock`, `try_lock_for` with tiny timeouts (so that
/// waiters abandon their nodes and timed heads give up) and `unlock_fair`, under random and PCT
/// schedules: never two inside, exact counts, and the lock ends free.
fn randomized_mix<R>(seed: u64, schedules: usize)
where
    R: lock_api::RawMutexTimed<Duration = std::time::Duration>
        + lock_api::RawMutexFair
        + Send
        + Sync
        + 'static,
{
    let _defaults = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let shared = Arc::new(Shared::<R>::new());
        let taken = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = numa_sim::placement(machine, 12)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(t, hw)| {
                let (shared, taken) = (shared.clone(), taken.clone());
                thread::spawn_on(hw, move || {
                    for i in 0..3u64 {
                        let guard = match (t as u64 + i) % 4 {
                            0 => Some(shared.lock.lock()),
                            1 => shared.lock.try_lock(),
                            2 => shared
                                .lock
                                .try_lock_for(std::time::Duration::from_nanos(300)),
                            _ => shared
                                .lock
                                .try_lock_for(std::time::Duration::from_micros(20)),
                        };
                        let Some(guard) = guard else { continue };
                        let data = shared.data.get();
                        // SAFETY: we hold the lock; `inside` catches anyone else inside.
                        unsafe {
                            assert!(!(*data).inside, "two threads inside the critical section");
                            (*data).inside = true;
                            numa_sim::yield_now();
                            (*data).count += 1;
                            (*data).inside = false;
                        }
                        taken.fetch_add(1, Relaxed);
                        if t % 3 == 0 {
                            lock_api::MutexGuard::unlock_fair(guard);
                        } else {
                            drop(guard);
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(shared.count(), taken.load(Relaxed));
        assert!(
            shared.lock.try_lock().is_some(),
            "the lock ends held or reserved"
        );
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 2, 3, body);
    println!(
        "timed mix: {schedules} random + {} PCT schedules, host {:.1} s",
        schedules / 2,
        (random.host_time + pct.host_time).as_secs_f64()
    );
}

#[test]
fn mcs_random_schedules_timed_mix() {
    randomized_mix::<RawMcs>(11, 1_000);
}

#[test]
fn cna_random_schedules_timed_mix() {
    randomized_mix::<RawCna>(12, 1_000);
}

#[test]
fn hq_random_schedules_timed_mix() {
    randomized_mix::<RawHq>(13, 1_000);
}

/// A condition variable under random schedules: 4 producers, 4 consumers (8 threads), waits
/// racing notifies. Every item is consumed exactly once, and the notifies' return values add up
/// to exactly the waits that were notified (there are no spurious wake-ups). Under the random
/// scheduler the consumers wait with timeouts (timeouts racing notifies); under PCT they wait
/// without (PCT never preempts its highest-priority thread between change points, so a consumer
/// polling with timed waits would starve the producers forever: a livelock of the test, not of
/// the lock).
fn randomized_condvar<R>(seed: u64, schedules: usize)
where
    R: numa_locks::raw::QueueLock
        + lock_api::RawMutexTimed<Duration = std::time::Duration, Instant = std::time::Instant>
        + Send
        + Sync
        + 'static,
{
    let _defaults = tunables();
    let machine = Machine::by_name("kunpeng920").unwrap();
    let body = move |timed: bool| {
        struct Channel<R: lock_api::RawMutex> {
            items: lock_api::Mutex<R, (Vec<u64>, u64)>,
            ready: lock_api::Condvar<numa_locks::raw::RawCondvar<R>>,
        }
        let channel = Arc::new(Channel::<R> {
            items: lock_api::Mutex::new((Vec::new(), 0)),
            ready: lock_api::Condvar::new(),
        });
        let notified = Arc::new(AtomicU64::new(0));
        let notified_waits = Arc::new(AtomicU64::new(0));
        const PER_PRODUCER: u64 = 2;
        let hw = numa_sim::placement(machine, 8).unwrap();
        let mut handles = Vec::new();
        for (p, &hw) in hw[..4].iter().enumerate() {
            let (channel, notified) = (channel.clone(), notified.clone());
            handles.push(thread::spawn_on(hw, move || {
                for i in 0..PER_PRODUCER {
                    channel.items.lock().0.push(p as u64 * 10 + i);
                    let n = if i % 2 == 0 {
                        u64::from(channel.ready.notify_one())
                    } else {
                        channel.ready.notify_all() as u64
                    };
                    notified.fetch_add(n, Relaxed);
                }
                0
            }));
        }
        for &hw in &hw[4..] {
            let (channel, notified_waits) = (channel.clone(), notified_waits.clone());
            handles.push(thread::spawn_on(hw, move || {
                let mut got = 0;
                loop {
                    let mut items = channel.items.lock();
                    if items.1 == 4 * PER_PRODUCER {
                        return got;
                    }
                    match items.0.pop() {
                        Some(_) => {
                            items.1 += 1;
                            got += 1;
                        }
                        None if timed => {
                            let result = channel
                                .ready
                                .wait_for(&mut items, std::time::Duration::from_micros(5));
                            if !result.timed_out() {
                                notified_waits.fetch_add(1, Relaxed);
                            }
                        }
                        None => {
                            channel.ready.wait(&mut items);
                            notified_waits.fetch_add(1, Relaxed);
                        }
                    }
                }
            }));
        }
        let consumed: u64 = handles.into_iter().map(|h| h.join()).sum();
        assert_eq!(consumed, 4 * PER_PRODUCER);
        // Nobody waits any more, so every notification has been counted by exactly one wait.
        assert_eq!(channel.ready.notify_all(), 0);
        assert_eq!(notified.load(Relaxed), notified_waits.load(Relaxed));
    };
    numa_sim::check_random(machine, seed, schedules, move || body(true));
    numa_sim::check_pct(machine, seed, schedules / 2, 3, move || body(false));
}

#[test]
fn mcs_random_schedules_condvar() {
    randomized_condvar::<RawMcs>(21, 500);
}

#[test]
fn cna_random_schedules_condvar() {
    randomized_condvar::<RawCna>(22, 500);
}

#[test]
fn hq_random_schedules_condvar() {
    randomized_condvar::<RawHq>(23, 500);
}

// ---- Lockup reports and hold-time distributions, exactly (issue 13; --features lockup) -------

/// A long fair queue whose waiters each wait longer than the threshold while the lock keeps
/// moving reports nothing; a forgotten guard reports exactly once. Virtual time makes both
/// exact: 32 threads holding a CnaMutex 40 µs each make a round of 1.28 ms against a 1 ms
/// threshold, with an acquisition every 40 µs.
#[cfg(feature = "lockup")]
#[test]
fn lockup_reports_only_a_stuck_lock() {
    use std::sync::Mutex as StdMutex;
    let _tunables = tunables();
    let reports = Arc::new(StdMutex::new(Vec::new()));
    let sink = reports.clone();
    numa_locks::lockup::set_hook(Box::new(move |report| {
        sink.lock().unwrap().push(report.to_string())
    }));
    numa_locks::tunables::set_lockup_threshold(std::time::Duration::from_millis(1)).unwrap();
    let machine = Machine::by_name("x5-4").unwrap();

    // A long fair queue: nothing to report, although waits exceed the threshold.
    let longest = Arc::new(AtomicU64::new(0));
    let out = longest.clone();
    Simulation::new(machine).seed(1).run(move || {
        let lock = Arc::new(CachePadded::new(numa_locks::CnaMutex::new(0u64)));
        let workers: Vec<_> = numa_sim::placement(machine, 32)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let (lock, longest) = (lock.clone(), out.clone());
                thread::spawn_on(hw, move || {
                    for _ in 0..4 {
                        let asked = numa_sim::now_ns();
                        let mut g = lock.lock();
                        longest.fetch_max(numa_sim::now_ns() - asked, Relaxed);
                        *g += 1;
                        numa_sim::work(40_000);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(*lock.lock(), 128);
    });
    let longest = longest.load(Relaxed);
    println!(
        "fair queue: longest wait {longest} ns, reports {:?}",
        reports.lock().unwrap()
    );
    assert!(
        longest > 1_000_000,
        "the test must make waiters wait past the threshold"
    );
    assert!(reports.lock().unwrap().is_empty());

    // A forgotten guard: one report, however many waiters and check periods.
    Simulation::new(machine).seed(1).run(move || {
        let lock = Arc::new(CachePadded::new(numa_locks::McsMutex::new(0u64)));
        let hw = numa_sim::placement(machine, 5).unwrap();
        let holder = {
            let lock = lock.clone();
            thread::spawn_on(hw[0], move || {
                std::mem::forget(lock.lock());
                numa_sim::work(5_000_000);
                // SAFETY: releases the acquisition whose guard was forgotten above.
                unsafe { lock.force_unlock(lock_api::GuardSend::new()) };
            })
        };
        let waiters: Vec<_> = hw[1..]
            .iter()
            .map(|&hw| {
                let lock = lock.clone();
                thread::spawn_on(hw, move || *lock.lock() += 1)
            })
            .collect();
        holder.join();
        waiters.into_iter().for_each(|w| w.join());
        assert_eq!(*lock.lock(), 4);
    });
    let reports = reports.lock().unwrap();
    println!("forgotten guard: {reports:?}");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].contains("4 queued"), "{}", reports[0]);
    drop(numa_locks::lockup::take_hook());
}

/// Hold times of a known distribution: critical sections of 1 µs and 10 µs of work,
/// alternately, give percentiles in the buckets of those values (plus the lock's own few
/// hundred ns), and an exact count of holds and waits. Holds after uncontended acquisitions are
/// sampled one in `stats::HOLD_SAMPLE_EVERY`, so the run is long enough for a few hundred
/// samples.
#[cfg(feature = "stats")]
#[test]
fn hold_percentiles_of_injected_work() {
    const ROUNDS: u64 = 1_000;
    let _tunables = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    let snapshot = Arc::new(std::sync::Mutex::new(None));
    let out = snapshot.clone();
    Simulation::new(machine).seed(1).run(move || {
        let lock = Arc::new(CachePadded::new(numa_locks::HqMutex::new(())));
        let workers: Vec<_> = numa_sim::placement(machine, 4)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let lock = lock.clone();
                thread::spawn_on(hw, move || {
                    for i in 0..ROUNDS {
                        let _g = lock.lock();
                        numa_sim::work(if i % 2 == 0 { 1_000 } else { 10_000 });
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        *out.lock().unwrap() = Some(numa_locks::stats::snapshot(&**lock));
    });
    let s = snapshot.lock().unwrap().take().unwrap();
    let ns = |d: std::time::Duration| d.as_nanos() as u64;
    println!(
        "holds: p25 {:?} p75 {:?} max {:?}; waits p50 {:?} max {:?}",
        s.hold.percentile(25.0),
        s.hold.percentile(75.0),
        s.hold.max(),
        s.wait.percentile(50.0),
        s.wait.max()
    );
    assert_eq!(
        (s.acquisitions, s.hold.count(), s.wait.count()),
        (4 * ROUNDS, 4 * ROUNDS, 4 * ROUNDS)
    );
    assert!((1_000..=1_600).contains(&ns(s.hold.percentile(25.0))));
    assert!((10_000..=16_000).contains(&ns(s.hold.percentile(75.0))));
    assert!(ns(s.hold.min()) >= 1_000 && ns(s.hold.max()) >= 10_000);
    // Four threads holding 5.5 µs on average: somebody waited a whole hold or more.
    assert!(ns(s.wait.max()) >= 10_000);
}

/// A model of numasim (baselines.rs, kernel.rs) with two locks, each beside its data, for the
/// models' own tests.
struct ModelLocks<L: harness::SimLock> {
    locks: Vec<(CachePadded<L>, CachePadded<UnsafeCell<Protected>>)>,
}

// SAFETY: each lock's data is only accessed by a thread holding that lock, which is what the
// tests check (with the non-atomic `inside` flag).
unsafe impl<L: harness::SimLock> Sync for ModelLocks<L> {}

impl<L: harness::SimLock> ModelLocks<L> {
    fn new(config: &harness::RunConfig) -> Self {
        let shared = Arc::new(L::shared(config.threads, config));
        ModelLocks {
            locks: (0..config.lockbench_locks)
                .map(|index| {
                    (
                        CachePadded::new(L::new(&shared, index, config)),
                        CachePadded::new(UnsafeCell::new(Protected {
                            lines: [[0; 64]; 2],
                            inside: false,
                            count: 0,
                        })),
                    )
                })
                .collect(),
        }
    }

    /// Thread `me` takes lock `index` and runs the counter critical section with `yields`
    /// scheduling points inside.
    fn critical_section(&self, me: usize, index: usize, yields: u32) {
        let (lock, data) = &self.locks[index];
        lock.with_lock(me, || {
            let data = data.get();
            // SAFETY: we hold the lock; `inside` catches anyone else who thinks so too.
            unsafe {
                assert!(!(*data).inside, "two threads inside the critical section");
                (*data).inside = true;
                numa_sim::touch(&[(*data).lines[0].as_ptr(), (*data).lines[1].as_ptr()]);
                for _ in 0..yields {
                    numa_sim::yield_now();
                }
                (*data).count += 1;
                (*data).inside = false;
            }
        });
    }

    fn count(&self) -> u64 {
        // SAFETY: called after every thread was joined.
        self.locks
            .iter()
            .map(|(_, data)| unsafe { (*data.get()).count })
            .sum()
    }
}

/// The run configuration the models' tests build them with: `threads` threads, 2 locks.
fn model_config(
    machine: &'static Machine,
    threads: usize,
    ttas_fairness: bool,
) -> harness::RunConfig {
    harness::RunConfig {
        duration_ns: 0,
        ttas_fairness,
        ..harness::RunConfig::new(machine, threads)
    }
}

/// A model keeps mutual exclusion under random and PCT schedules: 8 threads over the four
/// sockets of the X5-4 take two locks in turn, 3 times each, with scheduling points inside the
/// critical section so that the spinning, queueing and (for the parking models) sleeping paths
/// all run.
fn model_randomized<L: harness::SimLock>(seed: u64, schedules: usize, ttas_fairness: bool) {
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let config = model_config(machine, 8, ttas_fairness);
        let shared = Arc::new(ModelLocks::<L>::new(&config));
        let workers: Vec<_> = numa_sim::placement(machine, 8)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(me, hw)| {
                let shared = shared.clone();
                thread::spawn_on(hw, move || {
                    for round in 0..3 {
                        shared.critical_section(me, (me + round) % 2, 4);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(shared.count(), 24);
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 3, 3, body);
    assert_eq!(random.executions, schedules);
    assert_eq!(pct.executions, schedules / 3);
}

#[test]
fn models_keep_mutual_exclusion_under_random_schedules() {
    model_randomized::<kernel::QSpinLock>(21, 150, true);
    model_randomized::<kernel::CnaKernel>(22, 150, true);
    model_randomized::<baselines::StdMutex>(23, 150, true);
    model_randomized::<baselines::Pthread>(24, 150, true);
    model_randomized::<baselines::Ttas>(25, 150, true);
    model_randomized::<baselines::Ttas>(26, 150, false);
    model_randomized::<baselines::SpinMcs>(27, 150, true);
}

/// How long a handoff takes, ns: thread A (socket 0) holds lock 0 for 10 µs while B and C
/// (sockets 1 and 2) arrive and wait (their brief spin-steal over, they have queued long before
/// A's release); from A's release to the start of the next critical section.
fn handoff_ns<L: harness::SimLock>() -> u64 {
    let machine = Machine::by_name("x5-4").unwrap();
    let hw: Vec<usize> = numa_sim::placement(machine, 3).unwrap();
    let times = Arc::new(std::sync::Mutex::new((0u64, u64::MAX)));
    let t = times.clone();
    Simulation::new(machine).jitter(0.0).run(move || {
        let config = model_config(machine, 3, true);
        let shared = Arc::new(ModelLocks::<L>::new(&config));
        let workers: Vec<_> = hw
            .iter()
            .enumerate()
            .map(|(me, &hw)| {
                let (shared, t) = (shared.clone(), t.clone());
                thread::spawn_on(hw, move || {
                    // B and C arrive while A holds the lock.
                    numa_sim::work(if me == 0 { 0 } else { 500 });
                    shared.locks[0].0.with_lock(me, || {
                        let now = numa_sim::clock_ns();
                        let mut times = t.lock().unwrap();
                        if me == 0 {
                            drop(times);
                            numa_sim::work(10_000);
                            t.lock().unwrap().0 = numa_sim::clock_ns();
                        } else {
                            times.1 = times.1.min(now);
                        }
                    });
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
    });
    let (released, next) = *times.lock().unwrap();
    next - released
}

/// The kernel's handoff, with store buffers: the holder's release is a plain store (the
/// holder goes on at once; it commits once it has invalidated the waiter's copy, one transfer
/// across sockets) and the waiter's next look misses (a second transfer); the waiter then
/// takes the lock with another plain store and is in its critical section. Two serial remote
/// transfers for the stock qspinlock, whose pending waiter spins on the lock word. The
/// idealised spinning MCS lock takes three: its holder reads its own node's `next` when it
/// releases, a line its successor wrote when it linked itself (qspinlock's MCS head reads it
/// while it waits, off the critical path).
#[test]
fn kernel_handoffs_take_two_serial_transfers() {
    let c = Machine::by_name("x5-4").unwrap().costs;
    let transfer = c.other_socket / 1000;
    let qspinlock = handoff_ns::<kernel::QSpinLock>();
    let spin_mcs = handoff_ns::<baselines::SpinMcs>();
    let mcs = handoff_ns::<harness::CrateLock<RawMcs>>();
    println!(
        "handoff across sockets, x5-4: qspinlock {qspinlock} ns, spin-mcs {spin_mcs} ns, \
         McsMutex {mcs} ns (a transfer: {transfer} ns)"
    );
    for (lock, ns, transfers) in [("qspinlock", qspinlock, 2), ("spin-mcs", spin_mcs, 3)] {
        let expected = transfers * transfer;
        assert!(
            (expected..expected + 10).contains(&ns),
            "{lock}: {ns} ns from release to the next critical section, expected {transfers} \
             transfers ({expected} ns) and a few hits"
        );
    }
}

// ---- the rwlocks' models and numasim's rw workload (#23) ----------------------------------

/// A reader-writer model keeps readers and writers apart under random and PCT schedules: 8
/// threads over the X5-4's sockets each read, read, write, 3 times, with scheduling points
/// inside, so that readers overlap, writers wait for readers and readers for writers, through
/// the spinning and the parking paths.
fn rw_model_randomized<L: harness::SimLock>(seed: u64, schedules: usize) {
    use std::sync::atomic::AtomicI64;
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let config = model_config(machine, 8, false);
        let shared = Arc::new(L::shared(8, &config));
        // (the lock, readers inside (or -1: a writer inside), writes done)
        let state = Arc::new((
            L::new(&shared, 0, &config),
            AtomicI64::new(0),
            AtomicU64::new(0),
        ));
        let workers: Vec<_> = numa_sim::placement(machine, 8)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(me, hw)| {
                let state = state.clone();
                thread::spawn_on(hw, move || {
                    let (lock, inside, writes) = &*state;
                    for _ in 0..3 {
                        for _ in 0..2 {
                            lock.with_read_lock(me, || {
                                assert!(
                                    inside.fetch_add(1, Relaxed) >= 0,
                                    "a reader beside a writer"
                                );
                                numa_sim::yield_now();
                                assert!(inside.fetch_sub(1, Relaxed) > 0, "a writer came in");
                            });
                        }
                        lock.with_lock(me, || {
                            assert_eq!(inside.swap(-1, Relaxed), 0, "a writer beside anyone");
                            numa_sim::yield_now();
                            writes.fetch_add(1, Relaxed);
                            assert_eq!(inside.swap(0, Relaxed), -1, "someone came in");
                        });
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(state.2.load(Relaxed), 24);
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 3, 3, body);
    assert_eq!(random.executions, schedules);
    assert_eq!(pct.executions, schedules / 3);
}

#[test]
fn rw_models_keep_readers_and_writers_apart_under_random_schedules() {
    rw_model_randomized::<rwlocks::PlRwLock>(31, 150);
    rw_model_randomized::<rwlocks::StdRwLock>(32, 150);
}

/// One run of numasim's `rw` workload (`numasim --machine x5-4 --workload rw --read-pct P
/// --locks LOCK --threads T --seed 1 --duration-us D`), summarised.
fn rw_run(lock: cli::LockKind, threads: usize, read_pct: u32, duration_us: u64) -> report::Row {
    let mut config = model_config(Machine::by_name("x5-4").unwrap(), threads, false);
    config.read_pct = read_pct;
    config.duration_ns = duration_us * 1000;
    let run = harness::run_once(lock, cli::WorkloadKind::Rw, &config).unwrap();
    let key = report::RowKey {
        machine: "x5-4",
        lock: lock.name(),
        workload: "rw",
        threads,
    };
    report::summarize(key, &run)
}

/// The issue's numasim targets that the RwLocks meet, pinned on BENCHMARKS.md's runs (seed 1,
/// 10 ms; about 1.5 s of host time): at 95 % reads on the X5-4 with 72 threads, CnaRwLock and
/// HqRwLock run at least 5x the better of the parking_lot and std RwLock models (measured 13.9x
/// and 18.7x), and their writers' p99 wait stays under 1 ms (measured 484 and 836 µs;
/// HqRwLock's is the closer to the bound, 836–915 µs over seeds 1–3). A 2 ms run's p99 rests on
/// too few writes: HqRwLock's moved from 939 to 1159 µs when the writers stopped reading the
/// clock before their first look at the slots, while the 10 ms figures stayed within 7%.
/// The targets they miss (100 % and 0 % reads; see BENCHMARKS.md) are printed and pinned where
/// they stand.
#[test]
fn rwlock_targets_on_the_x5_4_rw_workload() {
    use cli::LockKind::{Cna, CnaRw, HqRw, PlRwLock, StdRwLock};
    let rate = |row: &report::Row| row.ops_per_sec;
    let at95 = |lock| rw_run(lock, 72, 95, 10_000);
    let (cna_rw, hq_rw) = (at95(CnaRw), at95(HqRw));
    let best_model = rate(&at95(PlRwLock)).max(rate(&at95(StdRwLock)));
    let write_p99 = |row: &report::Row| row.write_wait_p99_us.unwrap();
    println!(
        "95 % reads, 72 threads: cna-rw {:.0} ({:.1}x, writers' p99 {:.0} us), hq-rw {:.0} \
         ({:.1}x, {:.0} us), best model {best_model:.0} ops/s",
        rate(&cna_rw),
        rate(&cna_rw) / best_model,
        write_p99(&cna_rw),
        rate(&hq_rw),
        rate(&hq_rw) / best_model,
        write_p99(&hq_rw),
    );
    for row in [&cna_rw, &hq_rw] {
        assert!(
            rate(row) >= 5.0 * best_model,
            "{}: {:.0} ops/s, under 5x the best model's {best_model:.0}",
            row.key.lock,
            rate(row)
        );
        assert!(
            write_p99(row) <= 1000.0,
            "{}: the writers' p99 wait is {:.0} us",
            row.key.lock,
            write_p99(row)
        );
    }
    // Readers alone, and writers alone: the targets missed (see BENCHMARKS.md), pinned where
    // they stand so that a regression shows. One thread alone for 10 ms (a shorter run is
    // dominated by its first misses on the table), 72 for 1 ms (measured: 13.3x; 14.2x over
    // BENCHMARKS.md's 10 ms); at 0 % reads 0.62x CnaMutex (0.63x over 10 ms).
    let alone = rate(&rw_run(CnaRw, 1, 100, 10_000));
    let readers = rate(&rw_run(CnaRw, 72, 100, 1_000));
    let writers = rate(&rw_run(CnaRw, 72, 0, 2_000));
    let mutex = rate(&rw_run(Cna, 72, 0, 2_000));
    println!(
        "100 % reads: cna-rw 72 threads {:.1}x its 1-thread rate (target 57.6x); 0 % reads: \
         cna-rw {:.2}x CnaMutex (target 0.95x)",
        readers / alone,
        writers / mutex
    );
    assert!(readers > 10.0 * alone, "readers alone scale at least 10x");
    assert!(
        writers > 0.5 * mutex,
        "writers alone at least half CnaMutex's rate"
    );
}

/// The faithful instrument's check that the kernel's CNA orders its queue (#34), traced: on the
/// X5-4 with 32 locktorture writers placed as the kernel's scheduler placed them
/// (`--placement linux`), a window of 200 µs. CNA v13 (the code of the series' v13 table) moves
/// waiters of other nodes to the secondary queue and passes the lock within the node on every
/// traced handoff (seed 1: 100%, against 31% for the stock qspinlock's FIFO). v15 orders only
/// while the lock word is busy: in this window its heads find it busy and move waiters, and
/// its traced handoffs stay local too (seed 1, with the kernel's `prefetchw`: 100% and, without
/// shuffle reduction, 84%), but over a whole run a head handed the lock across sockets mostly
/// finds it free, and shuffle reduction leaves stretches in arrival order (BENCHMARKS.md,
/// "Validation against the kernel's published runs").
#[cfg(not(feature = "stats"))]
#[test]
fn cna_kernel_orders_its_queue_at_32_threads() {
    use cli::LockKind::{CnaKernel, CnaKernelV13, CnaKernelV13WoSro, CnaKernelWoSro, QSpinLock};
    let machine = Machine::by_name("x5-4").unwrap();
    let run = |lock| {
        let config = harness::RunConfig {
            duration_ns: 4_000_000,
            trace: Some((2_000_000, 2_200_000)),
            ..run_config("x5-4", 32, cli::Placement::Linux)
        };
        harness::run_once(lock, cli::WorkloadKind::LockTorture, &config).unwrap()
    };
    // The holders' plain stores to the lock word (taking it, releasing it), one entry per run of
    // stores by one thread: a handoff is a change of thread, local if both are on one node.
    let local_share = |result: &harness::RunResult| {
        let trace = result.trace.as_ref().expect("a traced run");
        let (lock, _) = trace.lock;
        let mut holders: Vec<(usize, usize)> = trace
            .accesses
            .iter()
            .filter(|a| a.address == lock && a.kind == numa_sim::AccessKind::Store)
            .map(|a| (a.task, machine.node_of(a.hw)))
            .collect();
        holders.dedup_by_key(|h| h.0);
        let handoffs = holders.len().saturating_sub(1);
        let local = holders.windows(2).filter(|w| w[0].1 == w[1].1).count();
        (handoffs, local as f64 / handoffs.max(1) as f64)
    };
    let stock = run(QSpinLock);
    let (stock_handoffs, stock_local) = local_share(&stock);
    println!("qspinlock: {stock_handoffs} handoffs traced, {stock_local:.2} local");
    assert_eq!(stock.tallies[kernel::TALLY_CNA_SPLICE], 0);
    for lock in [CnaKernel, CnaKernelWoSro, CnaKernelV13, CnaKernelV13WoSro] {
        let cna = run(lock);
        let splices = cna.tallies[kernel::TALLY_CNA_SPLICE];
        let busy = cna.tallies[kernel::TALLY_CNA_BUSY_AT_FIRST_LOOK];
        let (handoffs, local) = local_share(&cna);
        println!(
            "{lock:?}: {splices} waiters moved, {busy} heads saw the lock busy; {handoffs} \
             handoffs traced, {local:.2} local"
        );
        assert!(splices >= 20, "{lock:?}: {splices} waiters moved");
        assert!(
            handoffs >= 100,
            "{lock:?}: {handoffs} handoffs in the window"
        );
        if matches!(lock, CnaKernelV13 | CnaKernelV13WoSro) {
            assert!(
                local >= 0.9 && local >= 2.0 * stock_local,
                "{lock:?}: {local:.2} of the traced handoffs local, qspinlock {stock_local:.2}"
            );
        } else {
            assert!(busy >= 1000, "{lock:?}: {busy} heads saw the lock busy");
            assert!(
                local >= stock_local,
                "{lock:?}: {local:.2} of the traced handoffs local, qspinlock {stock_local:.2}"
            );
        }
    }
}

/// The instrument's setup rows (#34), deterministic at seed 1: `counter` reads the lines it
/// updates before it writes them (`count += 1`: a load, then a store); locktorture's writer
/// pays for its holds at one writer (`udelay(2)` at 1/4 and the scaled `mdelay(100)`: about
/// 1000 ns a critical section on average, so at most 1 M/s); and lock-bench's shape reproduces
/// parking_lot issue #201 (the pthread mutex of rustc 1.40 against parking_lot, 2.9x, on the
/// E5-2690 v3; 2.35x) within 30%. #418's row (Rust's futex mutex against parking_lot, 3.6x, on
/// the closest preset) reads 6.74x: a miss (BENCHMARKS.md, "Other anchors"), printed here, not
/// asserted.
#[cfg(not(feature = "stats"))]
#[test]
fn workloads_and_the_lockbench_validation_rows() {
    use cli::LockKind::{Pthread, QSpinLock, Std, Ttas};
    use cli::WorkloadKind::{Counter, LockBench, LockTorture};
    let config = |machine: &str, threads, lockbench_ops, trace| harness::RunConfig {
        duration_ns: 2_000_000,
        lockbench_ops,
        trace,
        ..run_config(machine, threads, cli::Placement::Linux)
    };
    // counter: every line of the protected data is loaded before it is stored.
    let traced = harness::run_once(
        QSpinLock,
        Counter,
        &config("x5-4", 2, None, Some((1_000_000, 1_005_000))),
    )
    .unwrap();
    let trace = traced.trace.unwrap();
    let (data, len) = trace.data;
    let data_accesses: Vec<_> = trace
        .accesses
        .iter()
        .filter(|a| (data..data + len).contains(&a.address))
        .collect();
    let stores = data_accesses
        .iter()
        .filter(|a| a.kind == numa_sim::AccessKind::Store)
        .count();
    assert!(stores >= 10, "{stores} stores traced");
    for (i, store) in data_accesses.iter().enumerate() {
        if store.kind == numa_sim::AccessKind::Store {
            let line = store.address >> 6;
            assert!(
                data_accesses[..i]
                    .iter()
                    .any(|a| a.kind == numa_sim::AccessKind::Load
                        && a.address >> 6 == line
                        && a.task == store.task),
                "a store to {} without a load before it",
                trace.label(store.address)
            );
        }
    }
    // locktorture at one writer: its holds dominate.
    let one = harness::run_once(QSpinLock, LockTorture, &config("x5-4", 1, None, None)).unwrap();
    let ops: u64 = one.per_thread.iter().map(|t| t.ops).sum();
    let per_sec = ops as f64 * 1e9 / one.elapsed_ns as f64;
    println!("locktorture, one writer: {per_sec:.0} ops/s");
    assert!((0.6e6..=1.0e6).contains(&per_sec), "{per_sec}");
    // lock-bench, 32 threads, 2 locks, 10,000 operations each: time until the last is done.
    let time = |machine, lock| {
        harness::run_once(lock, LockBench, &config(machine, 32, Some(10_000), None))
            .unwrap()
            .elapsed_ns as f64
    };
    let issue_201 = time("e5-2690v3-2s", Ttas) / time("e5-2690v3-2s", Pthread);
    let issue_418 = time("2s-generic", Ttas) / time("2s-generic", Std);
    println!(
        "lock-bench: pthread {issue_201:.2}x ttas (#201: 2.9x), std {issue_418:.2}x (#418: 3.6x)"
    );
    assert!((0.7 * 2.9..=1.3 * 2.9).contains(&issue_201), "{issue_201}");
    assert!(issue_418 > 1.0, "{issue_418}");
}

/// A `--cfg numa_sim` build on real threads, outside any simulation: waiters that run out of
/// spinning park on the platform's futex (the simulator emulates none), and are woken. More
/// threads than cores and a holder that sleeps inside its critical section make waiters park;
/// the count proves mutual exclusion, and a timed attempt on a held lock times out.
fn parks_outside_a_simulation<R: RawMutex + Send + Sync + 'static>() {
    const THREADS: u64 = 6;
    const ROUNDS: u64 = 40;
    assert!(!numa_sim::in_simulation());
    let lock = Arc::new(lock_api::Mutex::<R, u64>::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    let mut count = lock.lock();
                    *count += 1;
                    if round % 8 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(*lock.lock(), THREADS * ROUNDS);
}

#[test]
fn mcs_parks_outside_a_simulation() {
    parks_outside_a_simulation::<RawMcs>();
}

#[test]
fn cna_parks_outside_a_simulation() {
    parks_outside_a_simulation::<RawCna>();
}

#[test]
fn hq_parks_outside_a_simulation() {
    parks_outside_a_simulation::<RawHq>();
}

/// A timed lock on a held mutex, outside a simulation: the waiter's deadline ends its platform
/// futex sleep and it gives up; the holder's count is untouched.
#[test]
fn timed_lock_times_out_outside_a_simulation() {
    let lock = Arc::new(numa_locks::CnaMutex::new(0u64));
    let held = lock.lock();
    let waiter = {
        let lock = Arc::clone(&lock);
        std::thread::spawn(move || {
            lock.try_lock_for(std::time::Duration::from_millis(20))
                .is_none()
        })
    };
    assert!(
        waiter.join().unwrap(),
        "a timed lock on a held mutex must time out"
    );
    drop(held);
    assert_eq!(*lock.lock(), 0);
}
