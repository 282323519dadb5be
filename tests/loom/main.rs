//! loom models of the locks' protocols, one test binary with a module per protocol. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --features stats --test loom -- --test-threads=1`
//! (one at a time: the tunables are process-wide; feature `stats` lets the CNA models check
//! that they reach the paths they are named after).
//!
//! - [`delegate`]: delegation, a holder running the closures its waiters published;
//! - [`handoff`]: every handoff protocol of McsMutex and CnaMutex;
//! - [`hq`]: HqMutex's per-node and per-domain queues;
//! - [`timed`]: waiters that give up while queued, and the condition variables;
//! - [`rwlock`]: the rwlock's reader/writer handshake and its visible-readers table.
//!
//! Under loom, spinning is skipped, so every wait goes through the park/unpark path (the futex
//! emulation built on loom's mutex and condvar): each model therefore also checks for lost
//! wake-ups.
#![cfg(loom)]

mod delegate;
mod handoff;
mod hq;
mod rwlock;
mod timed;

/// Bounds the preemptions loom explores, keeping each model within CI time.
fn model(max_preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(max_preemptions);
    builder.check(f);
}
