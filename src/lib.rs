//! NUMA-aware queue locks for [`lock_api`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(not(loom))]
mod mutex;
mod qnode;
pub mod raw;
#[cfg(feature = "stats")]
pub mod stats;
mod sync;
pub mod topology;
pub mod tunables;
mod wait;

#[cfg(not(loom))]
pub use mutex::{CnaMutex, CnaMutexGuard, HqMutex, HqMutexGuard, McsMutex, McsMutexGuard};

#[cfg(loom)]
#[doc(hidden)]
pub use sync::loom_clock;
