//! The code of numa_locks' tools: the `locktorture` and `numasim` examples are thin mains over
//! this crate, and the tests measure with the same code that the tools print.
//!
//! - [`common`]: what both tools share: command-line pieces, workload helpers, report columns,
//!   SVG plots.
//! - [`cli_checks`]: what the tests of the tools' command lines share (assertions on a
//!   rejected command line, CSV rows, SVG charts).
//! - [`locktorture`]: real threads on this machine: the harness, workloads, report and command
//!   line; the example supplies the reader of numa_locks' statistics for `--stats`. Not under
//!   `--cfg loom`, where numa_locks has no `lock_api` locks (the loom models build this crate
//!   as a dev-dependency).
//! - `numasim` (only with `--cfg numa_sim`): the simulated machine's harness, workloads, the
//!   kernel and user-lock models, its report and its command line.
//!
//! Not published: a workspace member for the repository's examples and tests.

pub mod cli_checks;
pub mod common;
#[cfg(not(loom))]
pub mod locktorture;
#[cfg(numa_sim)]
pub mod numasim;
