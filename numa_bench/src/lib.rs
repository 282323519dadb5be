//! The code of numa_locks' tools: the `numasim` example is a thin main over this crate, the
//! `locktorture` example takes the pieces it shares with numasim from it, and the tests
//! measure with the same code that the tools print.
//!
//! - [`common`]: what both tools share: command-line pieces, workload helpers, report columns,
//!   SVG plots.
//! - [`cli_checks`]: what the tests of the tools' command lines share (assertions on a
//!   rejected command line, CSV rows, SVG charts).
//! - `numasim` (only with `--cfg numa_sim`): the simulated machine's harness, workloads, the
//!   kernel and user-lock models, its report and its command line.
//!
//! Not published: a workspace member for the repository's examples and tests.

pub mod cli_checks;
pub mod common;
#[cfg(numa_sim)]
pub mod numasim;
