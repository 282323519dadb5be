//! The code of numa_locks' tools, shared by the `locktorture` and `numasim` examples (thin
//! mains over this crate) and by the tests that measure exactly what the tools print.
//!
//! - [`common`]: what both tools share: command-line pieces, workload helpers, report columns,
//!   SVG plots.
//! - `numasim` (only with `--cfg numa_sim`): the simulated machine's harness, workloads, the
//!   kernel and user-lock models, its report and its command line.
//!
//! Not published: a workspace member for the repository's examples and tests.

pub mod common;
#[cfg(numa_sim)]
pub mod numasim;
