//! The rwlocks on a simulated multi-socket machine (`numa_sim`): the real lock code under
//! shuttle's random and PCT schedules, with 8 and 16 threads over the X5-4's 4 sockets.

use crate::tunables;
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use lock_api::{RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
use numa_locks::raw::{RawCna, RawHq, RawMcs, RawNumaRwLock, WriterLock};
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
    let _tunables = tunables();
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

// ---- the read-mostly hash table on the X5-4 ------------------------------------------------

/// A lock the read-mostly measurement drives.
trait SimRw: Send + Sync + 'static {
    fn make() -> Self;
    fn read(&self, f: impl FnOnce());
    fn write(&self, f: impl FnOnce());
}

impl<M: WriterLock + 'static> SimRw for RwLock<RawNumaRwLock<M>, ()> {
    fn make() -> Self {
        RwLock::new(())
    }
    fn read(&self, f: impl FnOnce()) {
        let _r = RwLock::read(self);
        f();
    }
    fn write(&self, f: impl FnOnce()) {
        let _w = RwLock::write(self);
        f();
    }
}

/// A mutex takes its only lock for both.
impl SimRw for lock_api::Mutex<RawCna, ()> {
    fn make() -> Self {
        lock_api::Mutex::new(())
    }
    fn read(&self, f: impl FnOnce()) {
        let _g = self.lock();
        f();
    }
    fn write(&self, f: impl FnOnce()) {
        let _g = self.lock();
        f();
    }
}

/// A model of the one-word rwlock shape that parking_lot 0.13's `RawRwLock` and Rust std's
/// futex `RwLock` share: every reader adds itself to one word with a CAS and subtracts itself
/// with an RMW, so every read moves that word's line; a writer CASes a writer bit in. Waiting:
/// 100 spins with a `pause`, then a futex sleep behind a waiters bit. Not their code (no
/// upgradable state, no writer preference, no parking queue): it costs what their readers
/// share, one line written by every read, which is what limits their read scaling.
struct OneWordRw {
    state: CachePadded<numa_sim::atomic::AtomicU32>,
}

const OW_WRITER: u32 = 1;
const OW_WAITERS: u32 = 2;
const OW_READER: u32 = 4;

impl OneWordRw {
    fn acquire(&self, can_enter: impl Fn(u32) -> bool, add: u32) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        loop {
            let mut spins = 0;
            numa_sim::spin_deadline(0);
            loop {
                let s = self.state.load(Relaxed);
                if can_enter(s) {
                    if self
                        .state
                        .compare_exchange(s, s + add, Acquire, Relaxed)
                        .is_ok()
                    {
                        return;
                    }
                    continue;
                }
                if spins < 100 {
                    spins += 1;
                    numa_sim::pause();
                    continue;
                }
                if s & OW_WAITERS != 0
                    || self
                        .state
                        .compare_exchange(s, s | OW_WAITERS, Relaxed, Relaxed)
                        .is_ok()
                {
                    numa_sim::futex_wait(&self.state, s | OW_WAITERS, None);
                }
                break;
            }
        }
    }

    fn wake_if(&self, old: u32, last: bool) {
        if last && old & OW_WAITERS != 0 {
            self.state
                .fetch_and(!OW_WAITERS, std::sync::atomic::Ordering::Relaxed);
            numa_sim::futex_wake(&*self.state, u32::MAX);
        }
    }
}

impl SimRw for OneWordRw {
    fn make() -> Self {
        OneWordRw {
            state: CachePadded::new(numa_sim::atomic::AtomicU32::new(0)),
        }
    }
    fn read(&self, f: impl FnOnce()) {
        self.acquire(|s| s & OW_WRITER == 0, OW_READER);
        f();
        let old = self
            .state
            .fetch_sub(OW_READER, std::sync::atomic::Ordering::Release);
        self.wake_if(old, old & !OW_WAITERS == OW_READER);
    }
    fn write(&self, f: impl FnOnce()) {
        self.acquire(|s| s & !OW_WAITERS == 0, OW_WRITER);
        f();
        let old = self
            .state
            .fetch_and(!OW_WRITER, std::sync::atomic::Ordering::Release);
        self.wake_if(old, true);
    }
}

/// The `rw` workload: a hash table of 64 lines; a read reads one line (50 ns of work), a write
/// writes one (50 ns); 200 ns of local work between operations. `threads` threads spread over
/// the X5-4's sockets for 200 µs of virtual time. Returns (operations per µs, the writes' p99
/// wait in µs).
fn rw_table<L: SimRw>(threads: usize, read_pct: u64) -> (f64, f64) {
    rw_table_for::<L>(threads, read_pct, 200_000)
}

/// [`rw_table`] for `duration_ns` of simulated time.
fn rw_table_for<L: SimRw>(threads: usize, read_pct: u64, duration_ns: u64) -> (f64, f64) {
    let machine = Machine::by_name("x5-4").unwrap();
    let out = Arc::new(std::sync::Mutex::new((0u64, Vec::<u64>::new())));
    let result = out.clone();
    Simulation::new(machine).seed(3).run(move || {
        let lock = Arc::new(CachePadded::new(L::make()));
        let table: Arc<Vec<CachePadded<[u8; 64]>>> =
            Arc::new((0..64).map(|_| CachePadded::new([0; 64])).collect());
        let workers: Vec<_> = numa_sim::placement(machine, threads)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let (lock, table) = (lock.clone(), table.clone());
                thread::spawn_on(hw, move || {
                    let mut rng = numa_sim::thread_seed() | 1;
                    let (mut ops, mut waits) = (0u64, Vec::new());
                    while numa_sim::clock_ns() < duration_ns {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let line = table[(rng % 64) as usize].as_ptr();
                        if rng / 64 % 100 < read_pct {
                            lock.read(|| {
                                numa_sim::touch_read(&[line]);
                                numa_sim::work(50);
                            });
                        } else {
                            let called = numa_sim::clock_ns();
                            lock.write(|| {
                                waits.push(numa_sim::clock_ns() - called);
                                numa_sim::touch(&[line]);
                                numa_sim::work(50);
                            });
                        }
                        ops += 1;
                        numa_sim::work(200);
                    }
                    (ops, waits)
                })
            })
            .collect();
        let mut total = result.lock().unwrap();
        for w in workers {
            let (ops, waits) = w.join();
            total.0 += ops;
            total.1.extend(waits);
        }
    });
    let (ops, mut waits) = std::mem::take(&mut *out.lock().unwrap());
    waits.sort_unstable();
    let p99 = waits
        .get((waits.len().saturating_sub(1) as f64 * 0.99).ceil() as usize)
        .copied()
        .unwrap_or(0);
    (ops as f64 / (duration_ns as f64 / 1e3), p99 as f64 / 1e3)
}

/// The numasim targets, measured with this file's `rw` table on the X5-4 (see
/// BENCHMARKS.md, "RwLock in numa_sim"). Prints the table; asserts only what holds with a margin: readers
/// alone scale, at 95 % reads the NUMA rwlocks are 5x the one-word model, writers' p99 wait.
#[test]
fn read_mostly_table_on_x5_4() {
    let _tunables = tunables();
    type Cna = RwLock<RawNumaRwLock<RawCna>, ()>;
    type Hq = RwLock<RawNumaRwLock<RawHq>, ()>;
    type Mcs = RwLock<RawNumaRwLock<RawMcs>, ()>;
    type CnaMutex = lock_api::Mutex<RawCna, ()>;
    println!(
        "read_pct threads | cna-rw  hq-rw  mcs-rw  one-word  cna-mutex (ops/us; writers' p99 wait us)"
    );
    let mut at72 = std::collections::HashMap::new();
    for read_pct in [100, 95, 0] {
        for threads in [1, 8, 36, 72] {
            let rows = [
                ("cna-rw", rw_table::<Cna>(threads, read_pct)),
                ("hq-rw", rw_table::<Hq>(threads, read_pct)),
                ("mcs-rw", rw_table::<Mcs>(threads, read_pct)),
                ("one-word", rw_table::<OneWordRw>(threads, read_pct)),
                ("cna-mutex", rw_table::<CnaMutex>(threads, read_pct)),
            ];
            let cells: Vec<String> = rows
                .iter()
                .map(|(_, (rate, p99))| format!("{rate:7.1} ({p99:.1})"))
                .collect();
            println!("{read_pct:>8} {threads:>7} | {}", cells.join(" "));
            for (name, (rate, p99)) in rows {
                at72.insert((name, read_pct, threads), (rate, p99));
            }
        }
    }
    let rate = |name, pct, threads| at72[&(name, pct, threads)].0;
    // Readers alone: 0.8 of linear at 72 threads, the target (#37: measured 242 against
    // 3.6 ops/us, 0.93; each biased reader writes its own row of the visible-readers table.
    // Before the table, the 18 readers of a socket shared its 4 slots' lines: 146, 0.56).
    for name in ["cna-rw", "hq-rw"] {
        assert!(
            rate(name, 100, 72) > 0.8 * 72.0 * rate(name, 100, 1),
            "{name}"
        );
    }
    assert!(rate("cna-rw", 100, 72) > 20.0 * rate("one-word", 100, 72));
    // 95 % reads: measured 4.1 (cna-rw) and 2.4 (hq-rw) against the one-word model's 0.5.
    // hq-rw was 2.6 before a head handed the lock by a marking holder took it with a plain
    // store (`HANDED`, #25): writers hand `M` over sooner, so readers get in between two writers
    // less often (numasim `rw` at 95 % reads, 10 ms, seeds 1-3: hq-rw -3 to -12 %, still 6.0-16.5x
    // the better of the pl-rwlock and std-rwlock models, which the `locks` module pins; at 0 % reads
    // +7 to +16 %). The one-RMW release with its queueing rule (#25: an arrival leaves a free
    // lock to the queue's head) took it to 2.0 here (numasim `rw` at 95 %, 72 threads, 10 ms,
    // seeds 1-3: 0.91-1.00 of before, still 14-15x the better rwlock model on seeds 1-2 and
    // 5.7x on seed 3, the target being 5x; the rule is what costs it: the release alone gives
    // 5.5 here). Its bound is 3.5x.
    assert!(rate("cna-rw", 95, 72) > 5.0 * rate("one-word", 95, 72));
    assert!(rate("hq-rw", 95, 72) > 3.5 * rate("one-word", 95, 72));
    // The writers are not starved: the bound is a p99 wait of 1 ms.
    assert!(at72[&("cna-rw", 95, 72)].1 < 1000.0);
    assert!(at72[&("hq-rw", 95, 72)].1 < 1000.0);
}

/// The writers' handover (`set_rwlock_writer_handover`), on the X5-4 table above, 36 threads:
/// at 0 % reads a writer takes the readers' revocation over from the last one instead of
/// revoking and draining again (measured 1.22x for cna-rw and 1.33x for hq-rw). At 95 % reads
/// it costs the readers their windows between writers (0.82x and 0.68x), which is why it is
/// off by default (docs/DESIGN.md, decision record: "writer handover, off by default"); the
/// second bound catches a handover that would shut the readers out altogether.
#[test]
fn writer_handover_on_x5_4() {
    let _tunables = tunables();
    type Cna = RwLock<RawNumaRwLock<RawCna>, ()>;
    type Hq = RwLock<RawNumaRwLock<RawHq>, ()>;
    // The handover alone: write mode would take the writers' revocations over first.
    numa_locks::tunables::set_rwlock_write_mode(false).unwrap();
    let mut rates = Vec::new();
    for on in [false, true] {
        numa_locks::tunables::set_rwlock_writer_handover(on).unwrap();
        rates.push([
            rw_table::<Cna>(36, 0).0,
            rw_table::<Hq>(36, 0).0,
            rw_table::<Cna>(36, 95).0,
            rw_table::<Hq>(36, 95).0,
        ]);
    }
    let [off, on] = [rates[0], rates[1]];
    println!(
        "36 threads, ops/us, handover off / on: 0 % reads cna-rw {:.2} / {:.2}, hq-rw {:.2} / {:.2}; 95 % reads cna-rw {:.2} / {:.2}, hq-rw {:.2} / {:.2}",
        off[0], on[0], off[1], on[1], off[2], on[2], off[3], on[3]
    );
    for i in 0..2 {
        assert!(on[i] > 1.15 * off[i], "0 % reads: {} / {}", on[i], off[i]);
    }
    for i in 2..4 {
        assert!(on[i] > 0.6 * off[i], "95 % reads: {} / {}", on[i], off[i]);
    }
    // A reader behind 15 queueing writers still gets in within the bound of
    // `unfairness_is_bounded_both_ways`: its spin, then its registration stops the handovers
    // and the writers' streak gives it its turn (measured 18.7, 33.2 and 5.7 us).
    numa_locks::tunables::set_rwlock_writer_handover(true).unwrap();
    for (name, wait) in [
        ("cna", longest_wait::<RawCna>(false, 20)),
        ("hq", longest_wait::<RawHq>(false, 20)),
        ("mcs", longest_wait::<RawMcs>(false, 20)),
    ] {
        println!("{name}: longest reader wait behind 15 writers, handover on: {wait} ns");
        assert!(wait < 50_000, "{name}: reader waited {wait} ns");
    }
}

/// Write mode (`set_rwlock_write_mode`, on by default), on the X5-4 table above, 36 threads:
/// at 0 % reads the writers after a quiet streak take the lock as a mutex's, without a
/// revocation or a drain; at 95 % reads the readers between writers keep the lock out of it,
/// so the figure stays where it was (docs/DESIGN.md, decision record: "rwlock write mode").
#[test]
fn write_mode_on_x5_4() {
    // 1 ms rather than the table's 200 us, as the decision record's figures were measured.
    const WRITE_MODE_RUN_NS: u64 = 1_000_000;
    let _tunables = tunables();
    type Cna = RwLock<RawNumaRwLock<RawCna>, ()>;
    type Hq = RwLock<RawNumaRwLock<RawHq>, ()>;
    let mut rates = Vec::new();
    for on in [false, true] {
        numa_locks::tunables::set_rwlock_write_mode(on).unwrap();
        rates.push([
            rw_table_for::<Cna>(36, 0, WRITE_MODE_RUN_NS).0,
            rw_table_for::<Hq>(36, 0, WRITE_MODE_RUN_NS).0,
            rw_table_for::<Cna>(36, 95, WRITE_MODE_RUN_NS).0,
            rw_table_for::<Hq>(36, 95, WRITE_MODE_RUN_NS).0,
        ]);
    }
    let [off, on] = [rates[0], rates[1]];
    println!(
        "36 threads, ops/us, write mode off / on: 0 % reads cna-rw {:.2} / {:.2}, hq-rw {:.2} / {:.2}; 95 % reads cna-rw {:.2} / {:.2}, hq-rw {:.2} / {:.2}",
        off[0], on[0], off[1], on[1], off[2], on[2], off[3], on[3]
    );
    for i in 0..2 {
        assert!(on[i] > 1.05 * off[i], "0 % reads: {} / {}", on[i], off[i]);
    }
    for i in 2..4 {
        assert!(on[i] > 0.93 * off[i], "95 % reads: {} / {}", on[i], off[i]);
    }
}

/// #37's 0 % reads target on `numasim`'s own `rw` workload (`--workload rw --read-pct 0`,
/// `x5-4`, 72 threads spread, seed 1, 2 ms): in write mode the rwlocks' writers cost what the
/// mutexes' do, `cna-rw` at least 0.95x CnaMutex and `hq-rw` at least 0.95x HqMutex (measured
/// 0.974x and 1.009x, seeds 1-3 0.966-0.981x and 1.004-1.009x; BENCHMARKS.md, "RwLock in
/// numa_sim"). Before a thread's first sampled revocation was its first (2026-11-29), 72
/// threads reached write mode only some 600 writes into the run, and `cna-rw` made 0.87x.
#[cfg(not(feature = "stats"))]
#[test]
fn zero_reads_cost_what_the_mutexes_cost_on_x5_4() {
    use numa_bench::numasim::cli;
    let _tunables = tunables();
    let config = x5_4_rw(72, cli::Placement::Spread, 0, None);
    let rate = |lock| rw_row(lock, &config).ops_per_sec;
    for (rw, mutex) in [
        (cli::LockKind::CnaRw, cli::LockKind::Cna),
        (cli::LockKind::HqRw, cli::LockKind::Hq),
    ] {
        let ratio = rate(rw) / rate(mutex);
        println!("0 % reads, 72 threads: {rw:?} {ratio:.3}x {mutex:?}");
        assert!(ratio >= 0.95, "{rw:?}: {ratio:.3}x {mutex:?}");
    }
}

/// One dedicated writer beside 8 dedicated readers on one socket (`numasim --workload rw
/// --writers 1 --threads 9 --placement packed`, `x5-4`, seed 1, 2 ms): the readers get their
/// turn. A waiting reader's spin starts afresh after at most `READER_FRESH_SPINS` lost windows,
/// so it registers and the writers' streak bounds its wait: p99 wait 18.7-19.4 µs and 1.35-1.47
/// reads per write (seeds 1-3). When every lost window started the spin afresh, the readers
/// never registered behind a writer that revokes every microsecond: p99 115 µs and 0.4 reads
/// per write (BENCHMARKS.md, "RwLock in numa_sim").
#[cfg(not(feature = "stats"))]
#[test]
fn readers_get_their_turn_beside_a_dedicated_writer() {
    use numa_bench::numasim::cli;
    let _tunables = tunables();
    let config = x5_4_rw(9, cli::Placement::Packed, 95, Some(1));
    for lock in [cli::LockKind::CnaRw, cli::LockKind::HqRw] {
        let row = rw_row(lock, &config);
        let (reads, writes) = row.reads_writes_per_sec.expect("dedicated writers");
        let p99 = row.wait_p99_us.expect("waits");
        println!("{lock:?}: reads {reads:.0}/s, writes {writes:.0}/s, p99 wait {p99:.1} us");
        assert!(p99 <= 40.0, "{lock:?}: p99 wait {p99:.1} us");
        assert!(
            reads >= writes,
            "{lock:?}: reads {reads:.0}/s, writes {writes:.0}/s"
        );
    }
}

/// numasim's `rw` workload on `x5-4`, seed 1, 2 ms, with these threads, placement, reads and
/// dedicated writers.
#[cfg(not(feature = "stats"))]
fn x5_4_rw(
    threads: usize,
    placement: numa_bench::numasim::cli::Placement,
    read_pct: u32,
    writers: Option<usize>,
) -> numa_bench::numasim::harness::RunConfig {
    numa_bench::numasim::harness::RunConfig {
        placement,
        duration_ns: 2_000_000,
        read_pct,
        writers,
        ..numa_bench::numasim::harness::RunConfig::new(Machine::by_name("x5-4").unwrap(), threads)
    }
}

/// One run of `lock` on the `rw` workload, summarised as numasim's row.
#[cfg(not(feature = "stats"))]
fn rw_row(
    lock: numa_bench::numasim::cli::LockKind,
    config: &numa_bench::numasim::harness::RunConfig,
) -> numa_bench::numasim::report::Row {
    use numa_bench::numasim::{cli, harness, report};
    let run = harness::run_once(lock, cli::WorkloadKind::Rw, config).unwrap();
    let key = report::RowKey {
        machine: config.machine.name,
        lock: "",
        workload: "rw",
        threads: config.threads,
    };
    report::summarize(key, &run)
}

/// BRAVO keeps the readers' bias off for 9 times what revoking it took; where writers revoke
/// the bias soon after it came back, that inhibition doubles (up to 7 times), so that the
/// writers stop paying a count of the table for a bias that served a few reads
/// (docs/DESIGN.md, decision record: "a bias that dies young comes back later"). Here 16
/// readers on the X5-4's four sockets read without pause beside one writer that writes every
/// `gap` of simulated time: every 2 µs, the bias never lives 9 revocations long and the
/// inhibition doubles (6 times in the 2 ms, seed 1: the seventh would begin after the run);
/// every 400 µs it lives far longer, and BRAVO's inhibition stays.
#[test]
fn the_bias_comes_back_later_only_where_writers_revoke_it_young() {
    let _tunables = tunables();
    let machine = Machine::by_name("x5-4").unwrap();
    for (gap_ns, doublings) in [(2_000u64, 4..=7), (400_000, 0..=0)] {
        let seen = Arc::new(std::sync::Mutex::new((None, 0u64)));
        let out = seen.clone();
        Simulation::new(machine).seed(1).run(move || {
            let lock = Arc::new(CachePadded::new(RwLock::<RawNumaRwLock<RawCna>, ()>::new(
                (),
            )));
            let mut workers: Vec<_> = numa_sim::placement(machine, 17)
                .unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, hw)| {
                    let lock = lock.clone();
                    thread::spawn_on(hw, move || {
                        let mut writes = 0;
                        while numa_sim::clock_ns() < 2_000_000 {
                            if i == 0 {
                                drop(lock.write());
                                writes += 1;
                                numa_sim::work(gap_ns);
                            } else {
                                drop(lock.read());
                                numa_sim::work(100);
                            }
                        }
                        writes
                    })
                })
                .collect();
            let writes = workers.remove(0).join();
            workers.into_iter().for_each(|w| {
                w.join();
            });
            // SAFETY: only reads the lock's diagnostic word; nobody holds or takes the lock.
            let raw = unsafe { lock.raw() };
            *out.lock().unwrap() = (raw.bias_inhibition_doublings(), writes);
        });
        let (seen, writes) = *seen.lock().unwrap();
        println!("a write every {gap_ns} ns: {writes} writes, {seen:?} doublings");
        assert!(writes >= 2_000_000 / (gap_ns + 20_000), "{writes} writes");
        let seen = seen.expect("contended, so inflated");
        assert!(
            doublings.contains(&seen),
            "a write every {gap_ns} ns: {seen}"
        );
    }
}
