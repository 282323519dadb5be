//! The user-facing aliases.

use crate::raw::{RawCna, RawHq, RawMcs};

/// A fair FIFO queue lock (MCS) with spin-then-park waiting.
pub type McsMutex<T> = lock_api::Mutex<RawMcs, T>;
/// The guard of a [`McsMutex`].
pub type McsMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMcs, T>;
/// The compact NUMA-aware lock (CNA).
pub type CnaMutex<T> = lock_api::Mutex<RawCna, T>;
/// The guard of a [`CnaMutex`].
pub type CnaMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawCna, T>;
/// The hierarchical queued NUMA-aware lock (HQ).
pub type HqMutex<T> = lock_api::Mutex<RawHq, T>;
/// The guard of a [`HqMutex`].
pub type HqMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawHq, T>;
