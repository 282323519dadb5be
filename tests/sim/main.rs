//! The locks on a simulated multi-socket machine (`numa_sim`): the real lock code, unchanged, in
//! virtual time and under randomized schedules. One test binary, a module per subject:
//!
//! - `locks`: the mutexes (locality, bypass bounds, the handoff issue's pins, the validation
//!   against the kernel's published runs, random and PCT schedules);
//! - `rwlock`: the rwlocks (random and PCT schedules, unfairness bounds, a read-mostly table);
//! - `delegate`: delegation under random and PCT schedules, and the met targets of #39;
//! - `domains`: HqMutex's per-lock memory with per-node and per-domain queues;
//! - `stutter`: locktorture's halts and restarts of its writers, and the validation rows of #34;
//! - `cna_paths`: how the kernel's CNA models (v15 and v13) pass the lock on, why they cross
//!   nodes, and the cross-check that v15 behaves like stock on the EPYC 9654.
//!
//! Run with `RUSTFLAGS="--cfg numa_sim" cargo test --release --test sim --target-dir target/sim`.
#![cfg(numa_sim)]

#[cfg(not(feature = "stats"))]
mod cna_paths;
mod delegate;
mod domains;
mod locks;
mod rwlock;
#[cfg(not(feature = "stats"))]
mod stutter;

/// The tunables are process-wide and cargo runs tests on several threads: every test whose
/// figures depend on them holds this, with the defaults restored on both ends.
static TUNABLES: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Tunables(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

fn tunables() -> Tunables {
    let guard = TUNABLES.lock().unwrap_or_else(|e| e.into_inner());
    numa_locks::tunables::reset_defaults();
    Tunables(guard)
}

impl Drop for Tunables {
    fn drop(&mut self) {
        numa_locks::tunables::reset_defaults();
    }
}
