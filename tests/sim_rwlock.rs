//! The rwlocks on a simulated multi-socket machine (`numa_sim`): the real lock code under
//! shuttle's random and PCT schedules, with 8 and 16 threads over the X5-4's 4 sockets.
//!
//! Run with `RUSTFLAGS="--cfg numa_sim" cargo test --release --test sim_rwlock --target-dir
//! target/sim`.
#![cfg(numa_sim)]

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use lock_api::{RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
use numa_locks::raw::{RawCna, RawHq, RawMcs};
use numa_locks::{RawNumaRwLock, WriterLock};
use numa_sim::{Machine, Simulation, thread};

/// What the lock protects: `words` change one at a time under the write lock (with
/// scheduling points between), `writers` and `readers` count who is inside. Not atomic: the
/// simulator runs one thread at a time, and the counts catch any overlap the lock allows.
struct Protected {
    words: [u64; 4],
    writers: u32,
    readers: u32,
    writes: u64,
}

struct Shared<M: WriterLock, const R: bool> {
    lock: CachePadded<RwLock<RawNumaRwLock<M, R>, ()>>,
    data: CachePadded<UnsafeCell<Protected>>,
}

// SAFETY: `data` is accessed only under `lock` (the tests check exactly that); the reader
// count is changed by readers under a shared lock, which the simulator serializes (one
// simulated thread runs at a time and an increment has no scheduling point inside).
unsafe impl<M: WriterLock, const R: bool> Sync for Shared<M, R> {}

impl<M: WriterLock, const R: bool> Shared<M, R> {
    fn new() -> Self {
        Shared {
            lock: CachePadded::new(RwLock::new(())),
            data: CachePadded::new(UnsafeCell::new(Protected {
                words: [0; 4],
                writers: 0,
                readers: 0,
                writes: 0,
            })),
        }
    }

    /// Under a shared lock: no writer inside, all words equal, across scheduling points.
    fn read(&self, yields: u32) {
        let data = self.data.get();
        // SAFETY: a shared lock is held; writers are excluded (checked).
        unsafe {
            (*data).readers += 1;
            for _ in 0..yields {
                assert_eq!((*data).writers, 0, "a writer inside with a reader");
                let w = (*data).words;
                assert!(w.iter().all(|&x| x == w[0]), "half-done write seen: {w:?}");
                numa_sim::yield_now();
            }
            (*data).readers -= 1;
        }
    }

    /// Under an exclusive lock: nobody else inside; each word + 1 with a scheduling point
    /// between.
    fn write(&self, yields: u32) {
        let data = self.data.get();
        // SAFETY: the exclusive lock is held (checked).
        unsafe {
            assert_eq!((*data).writers, 0, "two writers inside");
            assert_eq!((*data).readers, 0, "a reader inside with a writer");
            (*data).writers = 1;
            for i in 0..4 {
                (*data).words[i] += 1;
                for _ in 0..yields.div_ceil(4) {
                    numa_sim::yield_now();
                }
            }
            (*data).writes += 1;
            (*data).writers = 0;
        }
    }

    fn totals(&self) -> (u64, u64) {
        // SAFETY: called after every thread joined.
        unsafe { ((*self.data.get()).words[0], (*self.data.get()).writes) }
    }
}

/// `threads` threads over the X5-4's sockets, each doing `rounds` of: read, read, write, and
/// every third thread an upgradable read that upgrades and downgrades. Random schedules, then
/// PCT.
fn randomized<M: WriterLock + 'static, const R: bool>(seed: u64, threads: usize, schedules: usize) {
    let machine = Machine::by_name("x5-4").unwrap();
    let body = move || {
        let shared = Arc::new(Shared::<M, R>::new());
        let workers: Vec<_> = numa_sim::placement(machine, threads)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(t, hw)| {
                let shared = shared.clone();
                thread::spawn_on(hw, move || {
                    for _ in 0..2 {
                        {
                            let _r = shared.lock.read();
                            shared.read(3);
                        }
                        if t % 3 == 0 {
                            let u = shared.lock.upgradable_read();
                            shared.read(2);
                            let w = RwLockUpgradableReadGuard::upgrade(u);
                            shared.write(4);
                            let r = RwLockWriteGuard::downgrade(w);
                            shared.read(2);
                            drop(r);
                        } else {
                            let _w = shared.lock.write();
                            shared.write(4);
                        }
                        let _r = shared.lock.read();
                        shared.read(3);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        let (words, writes) = shared.totals();
        assert_eq!(words, writes, "lost update");
        assert_eq!(writes, 2 * threads as u64);
        assert!(!shared.lock.is_locked());
    };
    let random = numa_sim::check_random(machine, seed, schedules, body);
    let pct = numa_sim::check_pct(machine, seed, schedules / 3, 3, body);
    for (what, report, n) in [("random", random, schedules), ("PCT", pct, schedules / 3)] {
        assert_eq!(report.executions, n);
        println!(
            "{threads} threads, {n} {what} schedules: {} decisions ({} per schedule), host {:.3} s",
            report.scheduling_decisions,
            report.scheduling_decisions / n as u64,
            report.host_time.as_secs_f64()
        );
    }
}

#[test]
fn mcs_rwlock_random_schedules_8_threads() {
    randomized::<RawMcs, false>(21, 8, 1000);
}

#[test]
fn cna_rwlock_random_schedules_8_threads() {
    randomized::<RawCna, false>(22, 8, 1000);
}

#[test]
fn hq_rwlock_random_schedules_8_threads() {
    randomized::<RawHq, false>(23, 8, 1000);
}

#[test]
fn cna_rwlock_random_schedules_16_threads() {
    randomized::<RawCna, false>(24, 16, 300);
}

#[test]
fn hq_rwlock_random_schedules_16_threads() {
    randomized::<RawHq, false>(25, 16, 300);
}

#[test]
fn cna_recursive_rwlock_random_schedules_16_threads() {
    randomized::<RawCna, true>(26, 16, 300);
}

/// The bounds of unfairness, measured in virtual time on the X5-4 (16 threads over its 4
/// sockets): `hogs` threads take the lock one way back to back (readers overlapping each
/// other, or writers queueing), and one thread takes it the other way `rounds` times. Returns
/// the longest wait of that thread, ns of virtual time.
fn longest_wait<M: WriterLock + 'static>(hogs_read: bool, rounds: u32) -> u64 {
    longest_wait_with::<M>(hogs_read, rounds, 16)
}

fn longest_wait_with<M: WriterLock + 'static>(hogs_read: bool, rounds: u32, threads: usize) -> u64 {
    let machine = Machine::by_name("x5-4").unwrap();
    let longest = Arc::new(AtomicU64::new(0));
    let out = longest.clone();
    Simulation::new(machine).seed(7).run(move || {
        let lock = Arc::new(CachePadded::new(RwLock::<RawNumaRwLock<M>, u64>::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let placement = numa_sim::placement(machine, threads).unwrap();
        let hogs: Vec<_> = placement[1..]
            .iter()
            .map(|&hw| {
                let (lock, stop) = (lock.clone(), stop.clone());
                thread::spawn_on(hw, move || {
                    while !stop.load(Relaxed) {
                        if hogs_read {
                            let _r = lock.read();
                            numa_sim::work(500);
                        } else {
                            *lock.write() += 1;
                            numa_sim::work(50);
                        }
                        numa_sim::work(20);
                    }
                })
            })
            .collect();
        let (lock2, longest) = (lock.clone(), longest.clone());
        let probe = thread::spawn_on(placement[0], move || {
            numa_sim::work(20_000);
            for _ in 0..rounds {
                let start = numa_sim::now_ns();
                if hogs_read {
                    *lock2.write() += 1;
                } else {
                    let _ = *lock2.read();
                }
                longest.fetch_max(numa_sim::now_ns() - start, Relaxed);
                numa_sim::work(5_000);
            }
        });
        probe.join();
        stop.store(true, Relaxed);
        hogs.into_iter().for_each(|h| h.join());
    });
    out.load(Relaxed)
}

/// A writer behind 15 readers that overlap without pause waits for the readers inside at its
/// revocation (one 0.5 µs read plus the handoff), never for the stream: bounded reader
/// preference. A reader behind 15 queueing writers waits for at most `WRITER_STREAK_LIMIT + 1`
/// writers and the one inside: bounded writer preference.
#[test]
fn unfairness_is_bounded_both_ways() {
    for (name, writer_wait, reader_wait) in [
        (
            "cna",
            longest_wait::<RawCna>(true, 20),
            longest_wait::<RawCna>(false, 20),
        ),
        (
            "hq",
            longest_wait::<RawHq>(true, 20),
            longest_wait::<RawHq>(false, 20),
        ),
        (
            "mcs",
            longest_wait::<RawMcs>(true, 20),
            longest_wait::<RawMcs>(false, 20),
        ),
    ] {
        println!(
            "{name}: longest writer wait behind 15 readers {:.1} us, longest reader wait behind 15 writers {:.1} us",
            writer_wait as f64 / 1e3,
            reader_wait as f64 / 1e3
        );
        assert!(
            writer_wait < 50_000,
            "{name}: writer waited {writer_wait} ns"
        );
        assert!(
            reader_wait < 50_000,
            "{name}: reader waited {reader_wait} ns"
        );
    }
}
