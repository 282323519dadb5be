//! What `locktorture` (real threads, this machine) and `numasim` (the same measurements on
//! simulated machines) share; a tool's own modules hold only what differs: its locks, its
//! harness, its columns and its command line.

pub mod cli;
pub mod plot;
pub mod report;
pub mod workload;
