//! The `numasim` tool: this crate's locks and models of the kernel's and user-space locks on a
//! simulated multi-socket machine (`numa_sim`), deterministic. The `numasim` example is its
//! `main`; tests/sim checks the headline figures with the same harness and workloads.

pub mod baselines;
pub mod cli;
pub mod harness;
pub mod kernel;
pub mod report;
pub mod rwlocks;
pub mod stutter;
pub mod workload;
