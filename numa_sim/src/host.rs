//! What the simulator's operations do outside a simulation: the plain platform behaviour, so
//! that code built with `--cfg numa_sim` also runs on real threads.

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::atomic::AtomicU32;

/// Monotonic nanoseconds since the first call in the process.
pub(crate) fn now_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A per-OS-thread value, never 0.
pub(crate) fn thread_seed() -> u64 {
    std::thread_local!(static ANCHOR: u8 = const { 0 });
    let addr = ANCHOR.with(|a| a as *const u8 as u64);
    crate::engine::mix(addr).max(1)
}

struct Bucket {
    lock: Mutex<()>,
    cond: Condvar,
}

fn bucket(addr: usize) -> &'static Bucket {
    const BUCKETS: usize = 64;
    static TABLE: OnceLock<Box<[Bucket]>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..BUCKETS)
            .map(|_| Bucket {
                lock: Mutex::new(()),
                cond: Condvar::new(),
            })
            .collect()
    });
    &table[(addr >> 6) % BUCKETS]
}

/// A futex emulated with a condvar per address bucket: the word is checked under the bucket's
/// mutex, and a waker takes the same mutex before notifying, so no wake-up is lost.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
    let b = bucket(word as *const AtomicU32 as usize);
    let guard = b.lock.lock().unwrap_or_else(|e| e.into_inner());
    if word.load(std::sync::atomic::Ordering::SeqCst) != expected {
        return;
    }
    match deadline_ns {
        None => drop(b.cond.wait(guard)),
        Some(deadline) => {
            let left = deadline.saturating_sub(now_ns());
            if left > 0 {
                drop(b.cond.wait_timeout(guard, Duration::from_nanos(left)));
            }
        }
    }
}

/// Wakes every waiter of the address's bucket (spurious wakes are allowed).
pub(crate) fn futex_wake(word: *const AtomicU32) {
    let b = bucket(word as usize);
    let _guard = b.lock.lock().unwrap_or_else(|e| e.into_inner());
    b.cond.notify_all();
}
