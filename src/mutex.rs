//! The user-facing aliases.

use crate::condvar::RawCondvar;
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

/// A condition variable for [`McsMutex`] (the drop-in for `parking_lot::Condvar`).
pub type McsCondvar = lock_api::Condvar<RawCondvar<RawMcs>>;
/// A condition variable for [`CnaMutex`] (the drop-in for `parking_lot::Condvar`).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use numa_locks::{CnaCondvar, CnaMutex};
///
/// let queue = Arc::new((CnaMutex::new(Vec::new()), CnaCondvar::new()));
/// let producer = {
///     let queue = queue.clone();
///     std::thread::spawn(move || {
///         queue.0.lock().push(42);
///         queue.1.notify_all();
///     })
/// };
/// let mut items = queue.0.lock();
/// while items.is_empty() {
///     queue.1.wait_for(&mut items, Duration::from_secs(10));
/// }
/// assert_eq!(items.pop(), Some(42));
/// # drop(items);
/// # producer.join().unwrap();
/// ```
pub type CnaCondvar = lock_api::Condvar<RawCondvar<RawCna>>;
/// A condition variable for [`HqMutex`] (the drop-in for `parking_lot::Condvar`).
pub type HqCondvar = lock_api::Condvar<RawCondvar<RawHq>>;
