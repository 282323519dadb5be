//! The examples library: what `locktorture` (real threads, this machine) and `numasim` (the same
//! measurements on simulated machines) share. Each tool includes it as its `common` module
//! (`#[path = "common/mod.rs"]`); a tool's own files hold only what differs: its locks, its
//! harness, its columns and its command line.

pub mod cli;
pub mod plot;
pub mod report;
pub mod workload;
