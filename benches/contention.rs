//! Criterion benchmarks: every lock of this crate beside `parking_lot::Mutex` and `std::sync::Mutex`.
//!
//! Groups (each benchmark id is `<group>/<lock>/<parameter>`, so the reports line the locks up):
//!
//! - `uncontended`: lock + unlock on one thread; time per pair.
//! - `uncontended_timed/<lock>/{lock,try_lock_for}`: the same through `lock()` and through
//!   `try_lock_for(1 s)`, side by side, for the locks with timed locking (ours and parking_lot).
//! - `contended/<lock>/<threads>`: threads that do nothing but lock, increment a shared counter and
//!   unlock, at 1, 2, 4, 8 and 2 x cores threads; throughput in acquisitions per second.
//! - `cs_length/<lock>/<units>`: the same at min(4, cores) (at least 2) threads, with a critical
//!   section lengthened by 0, 10, 100 or 1000 units of work (under 1 ns each); throughput in
//!   acquisitions per second.
//! - `pingpong/cache_line`: the physical reference, two threads bouncing one cache line (each waits
//!   for the other's write, then writes); time per round trip (two one-way transfers).
//! - `pingpong/<lock>`: two threads that take turns strictly through the lock (a turn counter under
//!   the lock; a thread whose turn it is not unlocks and retries); time per round trip, i.e. two
//!   handoffs. Compare with `cache_line` to see what each handoff costs beyond the data transfer.
//!
//! - `handoff_no_steal/<lock>`: this crate's locks only, 2 threads, stealing off
//!   (`tunables::set_stealing(false)`): every acquisition waits its turn in the queue, so the
//!   lock alternates between the threads and nearly every acquisition is a handoff; time per
//!   acquisition, i.e. per handoff. Half of `pingpong/cache_line` (one one-way transfer) is the
//!   physical reference.
//!
//! - `condvar_pingpong/<lock>`: two threads take turns through a condition variable (a turn
//!   counter under the mutex, `wait_while` then `notify_one`); time per round trip. parking_lot's
//!   `Condvar` with its own mutex is the baseline.
//! - `condvar_notify_all/<lock>`: 64 threads wait on a condition variable; time from one
//!   `notify_all` until every one of them has had the mutex once (what a stampede would cost).
//!
//! ```text
//! cargo bench --bench contention                 # everything, about 6 minutes on 2 cores
//! cargo bench --bench contention -- contended/   # one group
//! ```

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use crossbeam_utils::CachePadded;
use numa_locks::{CnaMutex, HqMutex, McsMutex};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// A mutex protecting a `u64`: every `lock_api` mutex and `std::sync::Mutex`.
trait BenchLock: Sync + Sized {
    fn new() -> Self;
    fn with_lock<R>(&self, critical_section: impl FnOnce(&mut u64) -> R) -> R;
}

impl<R: lock_api::RawMutex + Send + Sync> BenchLock for lock_api::Mutex<R, u64> {
    fn new() -> Self {
        lock_api::Mutex::new(0)
    }

    #[inline]
    fn with_lock<U>(&self, critical_section: impl FnOnce(&mut u64) -> U) -> U {
        critical_section(&mut self.lock())
    }
}

impl BenchLock for std::sync::Mutex<u64> {
    fn new() -> Self {
        std::sync::Mutex::new(0)
    }

    #[inline]
    fn with_lock<U>(&self, critical_section: impl FnOnce(&mut u64) -> U) -> U {
        critical_section(&mut self.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Calls `$bench::<LockType>(name, $group)` for every lock, ours first, then the baselines, so
/// that every group holds every lock under the same names.
macro_rules! for_each_lock {
    ($bench:ident($group:expr)) => {
        $bench::<McsMutex<u64>>("mcs", $group);
        $bench::<CnaMutex<u64>>("cna", $group);
        $bench::<HqMutex<u64>>("hq", $group);
        $bench::<parking_lot::Mutex<u64>>("parking_lot", $group);
        $bench::<std::sync::Mutex<u64>>("std", $group);
    };
}

fn cores() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// 1, 2, 4, 8 and 2 x cores threads (sorted, without duplicates).
fn contended_thread_counts() -> Vec<usize> {
    let mut counts = vec![1, 2, 4, 8, 2 * cores()];
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Threads for the critical-section sweep: contended, but not oversubscribed where avoidable.
fn cs_length_threads() -> usize {
    cores().clamp(2, 4)
}

/// `threads` threads together perform `iters` acquisitions, each incrementing the shared counter
/// and then doing `cs_work` units of [`critical_work`] inside the lock. Returns the time from the
/// common start until the last thread finished (spawning is not timed; criterion's flat sampling
/// makes every sample long enough that the barrier's wake-up skew is noise).
fn contended_run<L: BenchLock>(threads: usize, iters: u64, cs_work: u32) -> Duration {
    let lock = L::new();
    let start = Barrier::new(threads + 1);
    let per_thread = iters / threads as u64;
    let remainder = iters % threads as u64;
    let started = thread::scope(|scope| {
        for id in 0..threads as u64 {
            let (lock, start) = (&lock, &start);
            let share = per_thread + u64::from(id < remainder);
            scope.spawn(move || {
                start.wait();
                for _ in 0..share {
                    lock.with_lock(|counter| {
                        *counter += 1;
                        critical_work(cs_work);
                    });
                }
            });
        }
        start.wait();
        Instant::now()
    });
    // The scope returned only after joining every worker.
    started.elapsed()
}

/// `units` iterations of a loop the optimiser cannot remove (one `black_box` each: about 0.4 ns on
/// the 2.6 GHz Xeon of BENCHMARKS.md, so 1000 units are some 400 ns).
///
/// Not `spin_loop()`: the PAUSE instruction takes anywhere from about 10 to 140 cycles depending
/// on the x86 generation, which would make the sweep incomparable across machines.
#[inline]
fn critical_work(units: u32) {
    for unit in 0..units {
        black_box(unit);
    }
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

fn uncontended_lock<L: BenchLock>(name: &str, group: &mut Group<'_>) {
    let lock = L::new();
    group.bench_function(name, |b| {
        b.iter(|| {
            lock.with_lock(|value| {
                black_box(value);
            })
        })
    });
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended");
    group.sample_size(50);
    for_each_lock!(uncontended_lock(&mut group));
    group.finish();
}

fn uncontended_timed_lock<R>(name: &str, group: &mut Group<'_>)
where
    R: lock_api::RawMutexTimed<Duration = Duration> + Send + Sync,
{
    let lock = lock_api::Mutex::<R, u64>::new(0);
    group.bench_function(BenchmarkId::new(name, "lock"), |b| {
        b.iter(|| {
            let mut guard = lock.lock();
            black_box(&mut guard);
        })
    });
    group.bench_function(BenchmarkId::new(name, "try_lock_for"), |b| {
        b.iter(|| {
            let mut guard = lock.try_lock_for(Duration::from_secs(1));
            black_box(&mut guard);
        })
    });
}

fn uncontended_timed(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended_timed");
    group.sample_size(50);
    uncontended_timed_lock::<numa_locks::raw::RawMcs>("mcs", &mut group);
    uncontended_timed_lock::<numa_locks::raw::RawCna>("cna", &mut group);
    uncontended_timed_lock::<numa_locks::raw::RawHq>("hq", &mut group);
    uncontended_timed_lock::<parking_lot::RawMutex>("parking_lot", &mut group);
    group.finish();
}

/// `delegate` against `lock()` + `unlock()` on the same uncontended lock (issue #39's bound:
/// at most 1.05x).
fn uncontended_delegate_lock<R>(name: &str, group: &mut Group<'_>)
where
    R: lock_api::RawMutex + Send + Sync,
    lock_api::Mutex<R, u64>: numa_locks::Delegate<u64>,
{
    use numa_locks::Delegate;
    let lock = lock_api::Mutex::<R, u64>::new(0);
    group.bench_function(BenchmarkId::new(name, "lock"), |b| {
        b.iter(|| *lock.lock() += 1)
    });
    group.bench_function(BenchmarkId::new(name, "delegate"), |b| {
        b.iter(|| lock.delegate(|v| *v += 1))
    });
    black_box(lock.into_inner());
}

fn uncontended_delegate(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended_delegate");
    group.sample_size(50);
    uncontended_delegate_lock::<numa_locks::raw::RawMcs>("mcs", &mut group);
    uncontended_delegate_lock::<numa_locks::raw::RawCna>("cna", &mut group);
    uncontended_delegate_lock::<numa_locks::raw::RawHq>("hq", &mut group);
    group.finish();
}

fn contended_lock<L: BenchLock>(name: &str, group: &mut Group<'_>) {
    for threads in contended_thread_counts() {
        group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
            b.iter_custom(|iters| contended_run::<L>(threads, iters, 0))
        });
    }
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    for_each_lock!(contended_lock(&mut group));
    group.finish();
}

fn cs_length_lock<L: BenchLock>(name: &str, group: &mut Group<'_>) {
    let threads = cs_length_threads();
    for units in [0u32, 10, 100, 1000] {
        group.bench_with_input(BenchmarkId::new(name, units), &units, |b, &units| {
            b.iter_custom(|iters| contended_run::<L>(threads, iters, units))
        });
    }
}

fn cs_length(c: &mut Criterion) {
    let mut group = c.benchmark_group("cs_length");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    for_each_lock!(cs_length_lock(&mut group));
    group.finish();
}

/// Spins until `cell` holds `value`; yields now and then so that a descheduled partner on a busy
/// machine can run.
fn wait_for(cell: &AtomicU64, value: u64) {
    let mut spins = 0u32;
    // Acquire: pairs with the partner's release store; the round trip must order the transfers.
    while cell.load(Ordering::Acquire) != value {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1 << 14) {
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Both sides of a two-thread benchmark call this; it returns once both are running.
///
/// A `Barrier` would return while the partner is still being woken from its futex (tens of
/// microseconds in a VM), which dominates a sample of a few round trips. Spinning on a line keeps
/// both threads on a CPU when the clock starts.
struct Rendezvous(CachePadded<AtomicU64>);

impl Rendezvous {
    fn new() -> Self {
        Self(CachePadded::new(AtomicU64::new(0)))
    }

    /// The partner: announce arrival, wait for the timer's answer.
    fn partner_arrive(&self) {
        // Release/Acquire: orders nothing but the handshake itself.
        self.0.store(1, Ordering::Release);
        wait_for(&self.0, 2);
    }

    /// The timing thread: wait for the partner, answer, and return the start time.
    fn timer_arrive(&self) -> Instant {
        wait_for(&self.0, 1);
        self.0.store(2, Ordering::Release);
        Instant::now()
    }
}

/// `iters` round trips of one cache line between this thread and a partner.
fn cache_line_round_trips(iters: u64) -> Duration {
    let cell = CachePadded::new(AtomicU64::new(0));
    let start = Rendezvous::new();
    thread::scope(|scope| {
        scope.spawn(|| {
            start.partner_arrive();
            for round in 0..iters {
                wait_for(&cell, 2 * round + 1);
                // Release: pairs with the acquire in `wait_for`.
                cell.store(2 * round + 2, Ordering::Release);
            }
        });
        let started = start.timer_arrive();
        for round in 0..iters {
            cell.store(2 * round + 1, Ordering::Release);
            wait_for(&cell, 2 * round + 2);
        }
        started.elapsed()
    })
}

/// `iters` round trips of strict alternation through the lock: the protected turn counter goes
/// from 0 to `2 * iters`; the thread with parity `turn % 2` advances it.
fn lock_round_trips<L: BenchLock>(iters: u64) -> Duration {
    let lock = L::new();
    let end = 2 * iters;
    let take_turns = |parity: u64| {
        loop {
            let turn = lock.with_lock(|turn| {
                if *turn < end && *turn % 2 == parity {
                    *turn += 1;
                }
                *turn
            });
            if turn >= end {
                break;
            }
            std::hint::spin_loop();
        }
    };
    let start = Rendezvous::new();
    thread::scope(|scope| {
        scope.spawn(|| {
            start.partner_arrive();
            take_turns(1);
        });
        let started = start.timer_arrive();
        take_turns(0);
        started.elapsed()
    })
}

fn pingpong_lock<L: BenchLock>(name: &str, group: &mut Group<'_>) {
    group.bench_function(name, |b| b.iter_custom(lock_round_trips::<L>));
}

fn handoff_no_steal_lock<L: BenchLock>(name: &str, group: &mut Group<'_>) {
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            numa_locks::tunables::set_stealing(false).expect("always valid");
            let elapsed = contended_run::<L>(2, iters, 0);
            numa_locks::tunables::reset_defaults();
            elapsed
        })
    });
}

fn handoff_no_steal(c: &mut Criterion) {
    let mut group = c.benchmark_group("handoff_no_steal");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    handoff_no_steal_lock::<McsMutex<u64>>("mcs", &mut group);
    handoff_no_steal_lock::<CnaMutex<u64>>("cna", &mut group);
    handoff_no_steal_lock::<HqMutex<u64>>("hq", &mut group);
    group.finish();
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("pingpong");
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    group.bench_function("cache_line", |b| b.iter_custom(cache_line_round_trips));
    for_each_lock!(pingpong_lock(&mut group));
    group.finish();
}

/// A mutex and a condition variable that work together: ours, and parking_lot's pair.
trait CondvarPair: Send + Sync + Sized + 'static {
    fn new() -> Self;
    /// Waits until `ready(value)`, then applies `then` and notifies one waiter.
    fn turn(&self, ready: impl FnMut(&mut u64) -> bool, then: impl FnOnce(&mut u64));
    /// Counts this thread in, then waits until the go flag (value's top bit) is set, then counts
    /// its acquisition.
    fn wait_for_go(&self);
    /// The number of threads counted in / acquisitions counted (low bits, high bits).
    fn read(&self) -> u64;
    /// Sets the go flag and notifies every waiter.
    fn go(&self);
}

const GO: u64 = 1 << 63;

macro_rules! condvar_pair {
    ($mutex:ty, $condvar:ty) => {
        impl CondvarPair for ($mutex, $condvar) {
            fn new() -> Self {
                (<$mutex>::new(0), <$condvar>::new())
            }
            fn turn(&self, mut ready: impl FnMut(&mut u64) -> bool, then: impl FnOnce(&mut u64)) {
                let mut value = self.0.lock();
                self.1.wait_while(&mut value, |v| !ready(v));
                then(&mut value);
                drop(value);
                self.1.notify_one();
            }
            fn wait_for_go(&self) {
                let mut value = self.0.lock();
                *value += 1;
                self.1.wait_while(&mut value, |v| *v & GO == 0);
                *value += 1 << 32;
            }
            fn read(&self) -> u64 {
                *self.0.lock()
            }
            fn go(&self) {
                *self.0.lock() |= GO;
                self.1.notify_all();
            }
        }
    };
}
condvar_pair!(McsMutex<u64>, numa_locks::McsCondvar);
condvar_pair!(CnaMutex<u64>, numa_locks::CnaCondvar);
condvar_pair!(HqMutex<u64>, numa_locks::HqCondvar);
condvar_pair!(parking_lot::Mutex<u64>, parking_lot::Condvar);

/// `iters` round trips between two threads taking turns through the condition variable.
fn condvar_pingpong_run<P: CondvarPair>(iters: u64) -> Duration {
    let pair = P::new();
    let start = Barrier::new(2);
    thread::scope(|scope| {
        scope.spawn(|| {
            start.wait();
            for i in 0..iters {
                pair.turn(|v| *v == 2 * i + 1, |v| *v += 1);
            }
        });
        start.wait();
        let began = Instant::now();
        for i in 0..iters {
            pair.turn(|v| *v == 2 * i, |v| *v += 1);
        }
        began.elapsed()
    })
}

fn condvar_pingpong_lock<P: CondvarPair>(name: &str, group: &mut Group<'_>) {
    group.bench_function(name, |b| b.iter_custom(condvar_pingpong_run::<P>));
}

fn condvar_pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("condvar_pingpong");
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    condvar_pingpong_lock::<(McsMutex<u64>, numa_locks::McsCondvar)>("mcs", &mut group);
    condvar_pingpong_lock::<(CnaMutex<u64>, numa_locks::CnaCondvar)>("cna", &mut group);
    condvar_pingpong_lock::<(HqMutex<u64>, numa_locks::HqCondvar)>("hq", &mut group);
    condvar_pingpong_lock::<(parking_lot::Mutex<u64>, parking_lot::Condvar)>(
        "parking_lot",
        &mut group,
    );
    group.finish();
}

/// Waiters of [`condvar_notify_all`].
const NOTIFY_ALL_WAITERS: u64 = 64;

/// `iters` rounds of: 64 threads wait, one `notify_all`, all of them take the mutex once. Times
/// from the notify until the last has had the mutex.
fn condvar_notify_all_run<P: CondvarPair>(iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let pair = P::new();
        total += thread::scope(|scope| {
            for _ in 0..NOTIFY_ALL_WAITERS {
                scope.spawn(|| pair.wait_for_go());
            }
            while pair.read() & 0xFFFF_FFFF < NOTIFY_ALL_WAITERS {
                thread::yield_now();
            }
            let began = Instant::now();
            pair.go();
            while (pair.read() & !GO) >> 32 < NOTIFY_ALL_WAITERS {
                thread::yield_now();
            }
            began.elapsed()
        });
    }
    total
}

fn condvar_notify_all_lock<P: CondvarPair>(name: &str, group: &mut Group<'_>) {
    group.bench_function(name, |b| b.iter_custom(condvar_notify_all_run::<P>));
}

fn condvar_notify_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("condvar_notify_all");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    condvar_notify_all_lock::<(McsMutex<u64>, numa_locks::McsCondvar)>("mcs", &mut group);
    condvar_notify_all_lock::<(CnaMutex<u64>, numa_locks::CnaCondvar)>("cna", &mut group);
    condvar_notify_all_lock::<(HqMutex<u64>, numa_locks::HqCondvar)>("hq", &mut group);
    condvar_notify_all_lock::<(parking_lot::Mutex<u64>, parking_lot::Condvar)>(
        "parking_lot",
        &mut group,
    );
    group.finish();
}

/// Short warm-up and measurement: 51 benchmarks finish in about 5 minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = uncontended, uncontended_timed, uncontended_delegate, contended, cs_length, pingpong, handoff_no_steal,
        condvar_pingpong, condvar_notify_all
}
criterion_main!(benches);
