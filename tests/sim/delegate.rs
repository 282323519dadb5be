//! Delegation (`Delegate::delegate`) on the simulated machine: the real code under random and
//! PCT schedules, mixed with `lock()` callers; and the figures of BENCHMARKS.md's "Delegation"
//! table that meet issue #39's targets, pinned with margins that hold on seeds 1-3 (the pins
//! run seed 1; the sweep behind the table ran 1-3).
#![cfg(not(feature = "stats"))]

use std::cell::UnsafeCell;
use std::sync::Arc;

use lock_api::RawMutex;
use numa_bench::numasim::cli::{LockKind, Placement, WorkloadKind};
use numa_locks::Delegate;
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_sim::{Machine, thread};

use crate::locks::reference_run;
use crate::tunables;

/// A counter only the lock guards: `delegate` callers and `lock()` callers add to it.
struct Shared<R: RawMutex> {
    lock: lock_api::Mutex<R, ()>,
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is only accessed under `lock`, which the test checks by the exact total.
unsafe impl<R: RawMutex + Send + Sync> Sync for Shared<R> {}

/// 8 threads over 4 sockets, 3 operations each, every other thread delegating, under random
/// and PCT schedules; scheduling points inside the sections make the arrivals queue, so that
/// holders serve and waiters are served.
fn randomized<R>(seed: u64, schedules: usize)
where
    R: RawMutex + Send + Sync + 'static,
    lock_api::Mutex<R, ()>: Delegate<()>,
{
    let _defaults = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let shared = Arc::new(Shared::<R> {
            lock: lock_api::Mutex::new(()),
            count: UnsafeCell::new(0),
        });
        let workers: Vec<_> = numa_sim::placement(machine, 8)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(t, hw)| {
                let shared = shared.clone();
                thread::spawn_on(hw, move || {
                    let add = || {
                        for _ in 0..8 {
                            numa_sim::yield_now();
                        }
                        // SAFETY: under the lock (by `delegate` or by the guard below).
                        unsafe { *shared.count.get() += 1 };
                    };
                    for _ in 0..3 {
                        if t % 2 == 0 {
                            shared.lock.delegate(|_| add());
                        } else {
                            let _guard = shared.lock.lock();
                            add();
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        // SAFETY: every worker has joined.
        assert_eq!(unsafe { *shared.count.get() }, 24);
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 3, 3, body);
    assert_eq!(random.executions, schedules);
    assert_eq!(pct.executions, schedules / 3);
}

#[test]
fn mcs_delegate_random_schedules() {
    randomized::<RawMcs>(21, 150);
}

#[test]
fn cna_delegate_random_schedules() {
    randomized::<RawCna>(22, 150);
}

#[test]
fn hq_delegate_random_schedules() {
    randomized::<RawHq>(23, 150);
}

/// `numasim --machine x5-4 --workload W --threads N` for `lock`, seed 1: ops/s and p99 wait.
fn run(lock: LockKind, workload: WorkloadKind, threads: usize) -> (f64, f64) {
    let row = reference_run("x5-4", lock, workload, threads, Placement::Spread);
    (row.ops_per_sec, row.wait_p99_us.unwrap())
}

/// #39's figures on `x5-4` (BENCHMARKS.md, "Delegation in numa_sim"; seeds 1-3, pinned at
/// seed 1 a few percent under the lowest; 2026-12-06, with stores forwarding by address):
/// `hq-delegate` against HqMutex (1.08-1.12x on `counter`, 0.98-0.99x on `kv`) and the better
/// v15 kernel CNA model (2.12-2.14x, 0.76-0.77x) at 32 and 72 threads, its p99 wait at 32-72
/// (the target, 200 us; 79-121), and against HqMutex at 2-4 threads (0.99-1.40x; 4 with the
/// linux placement too, seed 1: 0.99x and 0.98x). Since the lone head's re-take window
/// (docs/DESIGN.md, decision record), which HqMutex's lone heads use at every count and a
/// combining head only until a closure queues behind it, `hq-delegate` makes 0.95-1.47x
/// HqMutex at 2-4 threads (seed 1: `counter` 1.00x and 0.96x, `kv` 0.95x and 1.47x; with the
/// linux placement 0.99x and 0.98x): the floor there is 0.94x.
#[test]
fn hq_delegate_on_x5_4() {
    let _defaults = tunables();
    use LockKind::{CnaKernel, CnaKernelWoSro, Hq, HqDelegate};
    use WorkloadKind::{Counter, Kv};
    for (workload, over_hq, over_cna) in [(Counter, 1.05, 2.0), (Kv, 0.95, 0.73)] {
        for threads in [32, 72] {
            let (delegated, p99) = run(HqDelegate, workload, threads);
            let (hq, _) = run(Hq, workload, threads);
            let cna = run(CnaKernel, workload, threads)
                .0
                .max(run(CnaKernelWoSro, workload, threads).0);
            let what = format!("{} {threads} threads", workload.name());
            assert!(delegated > over_hq * hq, "{what}: {delegated} vs hq {hq}");
            assert!(
                delegated > over_cna * cna,
                "{what}: {delegated} vs cna {cna}"
            );
            assert!(p99 <= 200.0, "{what}: p99 {p99} us");
        }
    }
    for workload in [Counter, Kv] {
        for threads in [2, 4] {
            let (delegated, _) = run(HqDelegate, workload, threads);
            let (hq, _) = run(Hq, workload, threads);
            assert!(delegated >= 0.94 * hq, "{} {threads}", workload.name());
        }
        // Two threads per socket, where the kernel's balancer puts them: a combiner that serves
        // the other thread of its socket must not keep HqMutex flat (DESIGN.md, decision
        // record, "a served flat waiter passes its payload on"; it ran at 0.88-0.95x and
        // 0.89-1.00x before, 1.00-1.07x and 0.99-1.00x after, seeds 1-3).
        let linux = |lock| reference_run("x5-4", lock, workload, 4, Placement::Linux).ops_per_sec;
        let (delegated, hq) = (linux(HqDelegate), linux(Hq));
        assert!(
            delegated >= 0.96 * hq,
            "{} 4 threads, linux placement: {delegated} vs hq {hq}",
            workload.name()
        );
    }
}
