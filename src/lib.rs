//! NUMA-aware queue locks for [`lock_api`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod mutex;
pub mod raw;
mod sync;
pub mod topology;

pub use mutex::{CnaMutex, CnaMutexGuard, HqMutex, HqMutexGuard, McsMutex, McsMutexGuard};
