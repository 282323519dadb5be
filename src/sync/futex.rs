//! Sleeping on a 32-bit word: the Linux `futex` system call, or an emulation with the same
//! contract.
//!
//! [`futex_wait`]`(word, expected, deadline)` sleeps while `*word == expected`, checked atomically
//! with going to sleep, until a [`futex_wake`] on the word or, if given, until the clock
//! (`sync::now_ns`) passes `deadline`. It may return spuriously, so every caller re-checks its
//! condition in a loop. A waker changes the word first and wakes second, so a wake-up cannot be
//! lost: either the change lands before the sleeper's check, or the sleeper is asleep when the
//! wake comes.
//!
//! Backends:
//! - Linux: `FUTEX_WAIT` / `FUTEX_WAKE` on a private futex (a relative timeout computed from the
//!   deadline);
//! - elsewhere: a small table of mutex/condvar buckets keyed by address;
//! - loom: the same table on loom's mutex and condvar. Loom does not model time, so a wait with a
//!   deadline returns at once (a spurious return, which callers handle) and the models make
//!   time pass with `loom_clock`;
//! - numa_sim: inside a simulation, the simulator's futex model (a sleep in virtual time, with a
//!   wake-up latency); outside one (real threads running a `--cfg numa_sim` build), the
//!   platform's backend above. The simulator keeps no futex emulation of its own.

use super::AtomicU32;

#[cfg(numa_sim)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
    if numa_sim::in_simulation() {
        numa_sim::futex_wait(word, expected, deadline_ns);
    } else {
        platform::futex_wait(word, expected, deadline_ns);
    }
}

#[cfg(numa_sim)]
pub(crate) fn futex_wake(word: *const AtomicU32) {
    if numa_sim::in_simulation() {
        numa_sim::futex_wake(word, u32::MAX);
    } else {
        platform::futex_wake(word);
    }
}

#[cfg(not(numa_sim))]
pub(crate) use platform::{futex_wait, futex_wake};

#[cfg(all(target_os = "linux", not(loom)))]
use linux as platform;

#[cfg(any(not(target_os = "linux"), loom))]
use emulated as platform;

#[cfg(all(target_os = "linux", not(loom)))]
mod linux {
    //! The `futex` system call on a private futex.
    use super::AtomicU32;

    pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        let timeout = match deadline_ns {
            None => None,
            Some(deadline) => {
                let left = deadline.saturating_sub(super::super::now_ns());
                if left == 0 {
                    return;
                }
                Some(libc::timespec {
                    tv_sec: (left / 1_000_000_000) as libc::time_t,
                    tv_nsec: (left % 1_000_000_000) as libc::c_long,
                })
            }
        };
        let timeout_ptr = timeout
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT reads the 32-bit word at a valid, aligned address (we hold a
        // reference to it) and compares it with `expected` atomically with going to sleep.
        // `timeout_ptr` is null (no timeout) or points to a timespec that lives until the call
        // returns; FUTEX_WAIT takes it as a relative time. Errors (EAGAIN: value changed, EINTR,
        // ETIMEDOUT) are returns that every caller handles by re-checking its condition.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                timeout_ptr,
            );
        }
    }

    pub(crate) fn futex_wake(word: *const AtomicU32) {
        // SAFETY: FUTEX_WAKE on a private futex only hashes the address; it never reads the
        // memory, so an address whose owner has moved on is harmless (at worst a spurious wake of
        // a thread that re-checks its condition). Under `--cfg numa_sim` the atomic is
        // `repr(transparent)` over std's, so the address is the one FUTEX_WAIT slept on.
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
mod emulated {
    //! Futex emulation: buckets of (mutex, condvar) keyed by the word's address.
    //!
    //! `futex_wait` checks the word under the bucket's mutex and waits on the condvar;
    //! `futex_wake` takes the same mutex before notifying. A waker changes the word before it
    //! wakes, so either the sleeper's check (under the mutex) sees the change, or the sleeper is
    //! already waiting when the notification comes.
    use super::AtomicU32;
    use std::sync::atomic::Ordering;

    #[cfg(loom)]
    use loom::sync::{Condvar, Mutex};
    #[cfg(not(loom))]
    use std::sync::{Condvar, Mutex};

    struct Bucket {
        lock: Mutex<()>,
        cond: Condvar,
    }

    #[cfg(not(loom))]
    fn bucket(addr: usize) -> &'static Bucket {
        use std::sync::OnceLock;
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
        &table[(addr >> 7) % BUCKETS]
    }

    /// Under loom, one bucket per model execution (loom's primitives belong to one execution).
    #[cfg(loom)]
    fn bucket(_addr: usize) -> &'static Bucket {
        loom::lazy_static! {
            static ref TABLE: Bucket = Bucket { lock: Mutex::new(()), cond: Condvar::new() };
        }
        &TABLE
    }

    pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, deadline_ns: Option<u64>) {
        if deadline_ns.is_some() && cfg!(loom) {
            // Loom has no time to time out in: return at once (spuriously).
            return;
        }
        let bucket = bucket(word as *const AtomicU32 as usize);
        let guard = bucket.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: the bucket mutex orders this load after any waker's change-then-wake.
        if word.load(Ordering::Relaxed) != expected {
            return;
        }
        match deadline_ns {
            None => drop(bucket.cond.wait(guard)),
            #[cfg(not(loom))]
            Some(deadline) => {
                let left = deadline.saturating_sub(super::super::now_ns());
                if left > 0 {
                    let timeout = std::time::Duration::from_nanos(left);
                    drop(bucket.cond.wait_timeout(guard, timeout));
                }
            }
            #[cfg(loom)]
            Some(_) => unreachable!("returned above"),
        }
    }

    pub(crate) fn futex_wake(word: *const AtomicU32) {
        let bucket = bucket(word as usize);
        let _guard = bucket.lock.lock().unwrap_or_else(|e| e.into_inner());
        bucket.cond.notify_all();
    }
}
