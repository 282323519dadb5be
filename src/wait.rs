//! Waiting on a 32-bit status word: bounded spinning, then parking (futex on Linux).
//!
//! Every wait in the crate has the same shape: spin on a word for a short, tunable time
//! ([`SpinBudget`]), then announce the sleep in the word itself and sleep with
//! [`park`]`(word, announced_value)`. The waker changes the word with release ordering and calls
//! [`unpark`] only if it saw the announcement. Because `park` sleeps only while the word still holds
//! the announced value (checked atomically with the sleep), a wake-up cannot be lost: either the
//! waker's change lands first and `park` returns at once, or the waiter is asleep when the waker
//! calls `unpark`.
//!
//! Spurious returns from `park` are allowed, so every caller re-checks its condition in a loop.
//!
//! Backends: the Linux `futex` system call; elsewhere (and under loom) an emulation with a small
//! table of mutex/condvar buckets keyed by address, which keeps the same contract.

use crate::sync::{AtomicU32, Ordering, now_ns, spin_hint, yield_now};
use crate::tunables;

/// Bounded spinning before a wait parks: a deadline in nanoseconds from the spin-time tunable,
/// optionally with exponential backoff between two looks at the awaited word.
///
/// Backoff is for the queue head, which spins on the lock word ([`SpinBudget::with_backoff`]):
/// a head that reads the word in a tight loop pulls its cache line away from the holder at every
/// write, and with two threads on two cores that ping-pong halves the lock's throughput. Each
/// call then spins `2^step` times (`step` capped at [`MAX_STEP`]), so the look rate drops while
/// the first looks stay prompt. A head that is owed the lock (`NO_STEAL`) gains nothing from
/// backing off, since nobody else can take the lock, and loses handoff latency: it calls
/// [`SpinBudget::spin_eager`] instead.
/// A waiter that spins on its own node's status ([`SpinBudget::new`]) bothers nobody and spins
/// without backoff, to see its turn at once. The clock is read once when the budget is made and
/// then every [`CHECK_EVERY`] spins.
pub(crate) struct SpinBudget {
    deadline: u64,
    step: u32,
    /// The largest step this budget reaches: 0 without backoff.
    max_step: u32,
    spins: u32,
}

/// The largest backoff step: batches of `2^MAX_STEP` spins (64 `pause`s, 0.3 to 3 µs depending
/// on the CPU; a cap of 8, parking_lot's, cost a third of the 2-thread throughput here).
const MAX_STEP: u32 = 6;
/// Spins between two clock reads.
const CHECK_EVERY: u32 = 64;

impl SpinBudget {
    /// A fresh budget of the configured spin time, without backoff.
    #[inline]
    pub(crate) fn new() -> Self {
        Self::with_max_step(0)
    }

    /// A fresh budget of the configured spin time, with exponential backoff.
    #[inline]
    pub(crate) fn with_backoff() -> Self {
        Self::with_max_step(MAX_STEP)
    }

    #[inline]
    fn with_max_step(max_step: u32) -> Self {
        let spin = tunables::spin_ns();
        SpinBudget {
            deadline: if spin == 0 {
                0
            } else {
                now_ns().saturating_add(spin)
            },
            step: 0,
            max_step,
            spins: 0,
        }
    }

    /// Spins one backoff batch and returns `true` while the budget lasts; `false` means
    /// "park now".
    ///
    /// Under loom spinning is skipped entirely: the model explores the parking path, and a spin
    /// would only multiply the interleavings.
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        self.spin_batch(true)
    }

    /// Like [`spin`](Self::spin), but one spin per call whatever the backoff step.
    #[inline]
    pub(crate) fn spin_eager(&mut self) -> bool {
        self.spin_batch(false)
    }

    #[inline]
    fn spin_batch(&mut self, backoff: bool) -> bool {
        if cfg!(loom) || self.deadline == 0 {
            return false;
        }
        if !backoff {
            self.step = 0;
        }
        let batch = 1u32 << self.step;
        self.spins = self.spins.wrapping_add(batch);
        if self.spins >= CHECK_EVERY {
            self.spins = 0;
            if now_ns() >= self.deadline {
                self.deadline = 0;
                return false;
            }
        }
        for _ in 0..batch {
            spin_hint();
        }
        if self.step < self.max_step {
            self.step += 1;
        }
        true
    }
}

/// Waits, without parking, for another thread that is a few instructions away from a store (a
/// successor linking itself into a queue). Spins first, then yields the CPU: the other thread may
/// have been preempted in that window, and on an oversubscribed machine it needs our core.
#[inline]
pub(crate) fn wait_until<T>(mut ready: impl FnMut() -> Option<T>) -> T {
    let mut spins = 0u32;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        if !cfg!(loom) && spins < 128 {
            spins += 1;
            spin_hint();
        } else {
            yield_now();
        }
    }
}

/// Sleeps while `*word == expected`. May return spuriously.
#[inline]
pub(crate) fn park(word: &AtomicU32, expected: u32) {
    backend::park(word, expected)
}

/// Wakes every thread sleeping in [`park`] on `word`.
///
/// Takes the address only: the word may already belong to memory that was reused (the sleeping
/// thread returns as soon as it sees the new value), and the address is never dereferenced.
#[inline]
pub(crate) fn unpark(word: *const AtomicU32) {
    backend::unpark(word)
}

/// Announces a sleep in `word` by setting `flag`, then sleeps while the word is unchanged.
///
/// `seen` is the value the caller last read. Returns when the word changed (or spuriously);
/// the caller re-reads the word. The CAS is `Relaxed`: it only publishes "I may sleep", and
/// every waker's change that matters is ordered by the caller's own acquire load after waking.
#[inline]
pub(crate) fn announce_and_park(word: &AtomicU32, seen: u32, flag: u32) {
    let parked = seen | flag;
    if seen & flag == 0
        && word
            .compare_exchange(seen, parked, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    #[cfg(feature = "stats")]
    crate::stats::note_park();
    park(word, parked);
}

#[cfg(all(target_os = "linux", not(loom)))]
mod backend {
    use super::AtomicU32;

    pub(super) fn park(word: &AtomicU32, expected: u32) {
        // SAFETY: FUTEX_WAIT reads the 32-bit word at a valid, aligned address (we hold a
        // reference to it) and compares it with `expected` atomically with going to sleep.
        // A null timeout means no timeout. Errors (EAGAIN: value changed, EINTR) are spurious
        // returns, which every caller handles by re-checking its condition.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    pub(super) fn unpark(word: *const AtomicU32) {
        // SAFETY: FUTEX_WAKE on a private futex only hashes the address; it never reads the
        // memory, so an address whose owner has moved on is harmless (at worst a spurious wake
        // of a thread that re-checks its condition).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word,
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

#[cfg(any(not(target_os = "linux"), loom))]
mod backend {
    //! Futex emulation: buckets of (mutex, condvar) keyed by the word's address.
    //!
    //! `park` checks the word under the bucket's mutex and waits on the condvar; `unpark` takes
    //! the same mutex before notifying. A waker changes the word before it calls `unpark`, so
    //! either the parker's check (under the mutex) sees the change, or the parker is already
    //! waiting when the notification comes.
    use super::{AtomicU32, Ordering};

    #[cfg(loom)]
    use loom::sync::{Condvar, Mutex};
    #[cfg(not(loom))]
    use std::sync::{Condvar, Mutex};

    struct Bucket {
        lock: Mutex<()>,
        cond: Condvar,
    }

    #[cfg(not(loom))]
    const BUCKETS: usize = 64;

    #[cfg(not(loom))]
    fn bucket(addr: usize) -> &'static Bucket {
        use std::sync::OnceLock;
        static TABLE: OnceLock<Box<[Bucket]>> = OnceLock::new();
        let table = TABLE.get_or_init(|| {
            (0..BUCKETS)
                .map(|_| Bucket {
                    lock: Mutex::new(()),
                    cond: Condvar::new(),
                })
                .collect()
        });
        &table[(addr >> 7) % BUCKETS]
    }

    #[cfg(loom)]
    fn bucket(_addr: usize) -> &'static Bucket {
        loom::lazy_static! {
            static ref TABLE: Bucket = Bucket { lock: Mutex::new(()), cond: Condvar::new() };
        }
        &TABLE
    }

    pub(super) fn park(word: &AtomicU32, expected: u32) {
        let bucket = bucket(word as *const AtomicU32 as usize);
        let guard = bucket.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: the bucket mutex orders this load after any waker's change-then-unpark.
        if word.load(Ordering::Relaxed) == expected {
            drop(bucket.cond.wait(guard));
        }
    }

    pub(super) fn unpark(word: *const AtomicU32) {
        let bucket = bucket(word as usize);
        let _guard = bucket.lock.lock().unwrap_or_else(|e| e.into_inner());
        bucket.cond.notify_all();
    }
}
