//! What the simulator's operations do outside a simulation: the plain platform behaviour, so
//! that code built with `--cfg numa_sim` also runs on real threads.

use std::sync::OnceLock;
use std::time::Instant;

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
