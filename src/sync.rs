//! The only module that chooses between `std` and `loom`.
//!
//! Everything that takes part in a handoff protocol (atomics, cells, thread-locals, the spin hint, the
//! clock) comes from here, so the loom models check exactly the code that ships. Nothing else in the
//! crate mentions `cfg(loom)` unless it must (constructors cannot be `const` under loom).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::thread_local;
#[cfg(not(loom))]
pub(crate) use std::thread_local;

/// One iteration of a busy-wait loop.
///
/// Under loom a spin must yield, or the model checker would explore an unbounded loop.
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// Gives the CPU to another thread (used when a wait cannot park, e.g. for a successor to link).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Monotonic nanoseconds since an arbitrary process-wide origin.
///
/// Only slow paths read it (deadlines for spinning, stealing and the CNA flush). Under loom it is a
/// counter that advances by a step the model chooses ([`loom_clock`]), reset by every model run:
/// step 0 means time stands still (nothing expires), a huge step means every deadline expires at
/// the next reading. Either way the model stays deterministic.
#[inline]
pub(crate) fn now_ns() -> u64 {
    #[cfg(loom)]
    {
        loom_clock::read()
    }
    #[cfg(not(loom))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(Instant::now);
        // Saturates after 584 years of uptime.
        u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(loom)]
#[doc(hidden)]
pub mod loom_clock {
    //! The clock seen by loom models (see [`super::now_ns`]).
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    static NOW: AtomicU64 = AtomicU64::new(0);
    static STEP: AtomicU64 = AtomicU64::new(0);

    /// Restarts the clock at 0; each later reading advances it by `step` nanoseconds.
    pub fn reset(step: u64) {
        NOW.store(0, Relaxed);
        STEP.store(step, Relaxed);
    }

    pub(crate) fn read() -> u64 {
        NOW.fetch_add(STEP.load(Relaxed), Relaxed)
    }
}
