//! Criterion benchmarks of the rwlocks beside `parking_lot::RwLock`, `std::sync::RwLock` and
//! crossbeam-utils' `ShardedLock` (`sharded`).
//!
//! - `rwlock_uncontended/<lock>/{read,write}`: `read()` or `write()` and the guard's drop on one
//!   thread (the compact one-word lock for ours); time per pair.
//! - `rwlock_read_mostly/<lock>/<threads>`: threads that take the read lock 95 times and the
//!   write lock 5 times in 100 operations, a few ns of work inside; throughput in operations
//!   per second, at 2, 4, 8, 16 and 32 threads (the issue's 2–32; oversubscribed on a small
//!   machine, which is the point: readers and writers must park, not spin).
//!
//! ```text
//! cargo bench --bench rwlock
//! ```

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// A reader-writer lock protecting a `u64`.
trait BenchRw: Sync + Sized {
    fn new() -> Self;
    fn read(&self) -> u64;
    fn write(&self);
}

macro_rules! lock_api_rw {
    ($ty:ty) => {
        impl BenchRw for $ty {
            fn new() -> Self {
                <$ty>::new(0)
            }
            #[inline]
            fn read(&self) -> u64 {
                *<$ty>::read(self)
            }
            #[inline]
            fn write(&self) {
                *<$ty>::write(self) += 1;
            }
        }
    };
}
lock_api_rw!(parking_lot::RwLock<u64>);
lock_api_rw!(numa_locks::McsRwLock<u64>);
lock_api_rw!(numa_locks::CnaRwLock<u64>);
lock_api_rw!(numa_locks::HqRwLock<u64>);

impl BenchRw for std::sync::RwLock<u64> {
    fn new() -> Self {
        std::sync::RwLock::new(0)
    }
    #[inline]
    fn read(&self) -> u64 {
        *std::sync::RwLock::read(self).unwrap()
    }
    #[inline]
    fn write(&self) {
        *std::sync::RwLock::write(self).unwrap() += 1;
    }
}

impl BenchRw for crossbeam_utils::sync::ShardedLock<u64> {
    fn new() -> Self {
        crossbeam_utils::sync::ShardedLock::new(0)
    }
    #[inline]
    fn read(&self) -> u64 {
        *crossbeam_utils::sync::ShardedLock::read(self).unwrap()
    }
    #[inline]
    fn write(&self) {
        *crossbeam_utils::sync::ShardedLock::write(self).unwrap() += 1;
    }
}

macro_rules! for_each_rw {
    ($f:ident($($arg:expr),*)) => {
        $f::<parking_lot::RwLock<u64>>("parking_lot", $($arg),*);
        $f::<std::sync::RwLock<u64>>("std", $($arg),*);
        $f::<numa_locks::McsRwLock<u64>>("mcs-rw", $($arg),*);
        $f::<numa_locks::CnaRwLock<u64>>("cna-rw", $($arg),*);
        $f::<numa_locks::HqRwLock<u64>>("hq-rw", $($arg),*);
        $f::<crossbeam_utils::sync::ShardedLock<u64>>("sharded", $($arg),*);
    };
}

fn uncontended_one<L: BenchRw>(
    name: &str,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
) {
    let lock = L::new();
    group.bench_function(BenchmarkId::new(name, "read"), |b| {
        b.iter(|| black_box(lock.read()))
    });
    group.bench_function(BenchmarkId::new(name, "write"), |b| b.iter(|| lock.write()));
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("rwlock_uncontended");
    group.sample_size(50);
    for_each_rw!(uncontended_one(&mut group));
    group.finish();
}

fn read_mostly_one<L: BenchRw + 'static>(
    name: &str,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    threads: usize,
) {
    group.bench_function(BenchmarkId::new(name, threads), |b| {
        b.iter_custom(|iters| {
            let lock = L::new();
            let barrier = Barrier::new(threads);
            let per_thread = iters.div_ceil(threads as u64);
            let start = Instant::now();
            thread::scope(|s| {
                for t in 0..threads {
                    let (lock, barrier) = (&lock, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        for i in 0..per_thread {
                            if (i + t as u64).is_multiple_of(20) {
                                lock.write();
                            } else {
                                black_box(lock.read());
                            }
                        }
                    });
                }
            });
            start.elapsed()
        })
    });
}

fn read_mostly(c: &mut Criterion) {
    let mut group = c.benchmark_group("rwlock_read_mostly");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    for threads in [2, 4, 8, 16, 32] {
        for_each_rw!(read_mostly_one(&mut group, threads));
    }
    group.finish();
}

criterion_group!(benches, uncontended, read_mostly);
criterion_main!(benches);
