//! The user-facing aliases: for each lock, the mutex, its guards, a condition variable and a
//! reentrant mutex, named after parking_lot's so that a swap changes only the type names.

use core::num::NonZeroUsize;

use crate::raw::RawCondvar;
use crate::raw::{RawCna, RawHq, RawMcs};

/// A fair FIFO queue lock (MCS) with spin-then-park waiting.
pub type McsMutex<T> = lock_api::Mutex<RawMcs, T>;
/// The guard of a [`McsMutex`].
pub type McsMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMcs, T>;
/// A [`McsMutexGuard`] narrowed to part of the data (`MutexGuard::map`).
pub type McsMappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMcs, T>;
/// A condition variable for [`McsMutex`] (the drop-in for `parking_lot::Condvar`).
pub type McsCondvar = lock_api::Condvar<RawCondvar<RawMcs>>;
/// A reentrant [`McsMutex`]: the thread that holds it may lock it again.
pub type McsReentrantMutex<T> = lock_api::ReentrantMutex<RawMcs, RawThreadId, T>;
/// The guard of a [`McsReentrantMutex`].
pub type McsReentrantMutexGuard<'a, T> = lock_api::ReentrantMutexGuard<'a, RawMcs, RawThreadId, T>;
/// A [`McsReentrantMutexGuard`] narrowed to part of the data.
pub type McsMappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawMcs, RawThreadId, T>;

/// The compact NUMA-aware lock (CNA).
pub type CnaMutex<T> = lock_api::Mutex<RawCna, T>;
/// The guard of a [`CnaMutex`].
pub type CnaMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawCna, T>;
/// A [`CnaMutexGuard`] narrowed to part of the data (`MutexGuard::map`).
pub type CnaMappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawCna, T>;
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
/// A reentrant [`CnaMutex`]: the thread that holds it may lock it again.
///
/// ```
/// use std::cell::RefCell;
/// use numa_locks::CnaReentrantMutex;
///
/// let lock = CnaReentrantMutex::new(RefCell::new(0));
/// let outer = lock.lock();
/// let inner = lock.lock(); // the same thread: no deadlock
/// *inner.borrow_mut() += 1;
/// drop(inner);
/// assert_eq!(*outer.borrow(), 1);
/// ```
pub type CnaReentrantMutex<T> = lock_api::ReentrantMutex<RawCna, RawThreadId, T>;
/// The guard of a [`CnaReentrantMutex`].
pub type CnaReentrantMutexGuard<'a, T> = lock_api::ReentrantMutexGuard<'a, RawCna, RawThreadId, T>;
/// A [`CnaReentrantMutexGuard`] narrowed to part of the data.
pub type CnaMappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawCna, RawThreadId, T>;

/// The hierarchical queued NUMA-aware lock (HQ): one waiter queue per NUMA node and a FIFO of
/// nodes, used once contention is sustained and spans nodes. While its waiters all come from one
/// node (on a one-node machine, always) it is the plain queue lock ([`McsMutex`]'s algorithm)
/// and allocates nothing; it goes back to that algorithm while its per-node queues keep little
/// local. See [`RawHq`].
pub type HqMutex<T> = lock_api::Mutex<RawHq, T>;
/// The guard of a [`HqMutex`].
pub type HqMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawHq, T>;
/// A [`HqMutexGuard`] narrowed to part of the data (`MutexGuard::map`).
pub type HqMappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawHq, T>;
/// A condition variable for [`HqMutex`] (the drop-in for `parking_lot::Condvar`).
pub type HqCondvar = lock_api::Condvar<RawCondvar<RawHq>>;
/// A reentrant [`HqMutex`]: the thread that holds it may lock it again.
pub type HqReentrantMutex<T> = lock_api::ReentrantMutex<RawHq, RawThreadId, T>;
/// The guard of a [`HqReentrantMutex`].
pub type HqReentrantMutexGuard<'a, T> = lock_api::ReentrantMutexGuard<'a, RawHq, RawThreadId, T>;
/// A [`HqReentrantMutexGuard`] narrowed to part of the data.
pub type HqMappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawHq, RawThreadId, T>;

/// The thread identity the reentrant mutexes use (`lock_api::GetThreadId`): the address of a
/// thread-local byte, unique among live threads and never zero (parking_lot's `RawThreadId`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawThreadId;

// SAFETY: the address of a live thread-local is unique among the live threads and non-zero, and
// it stays the same for the thread's whole life, which is what `GetThreadId` requires.
unsafe impl lock_api::GetThreadId for RawThreadId {
    const INIT: RawThreadId = RawThreadId;

    fn nonzero_thread_id(&self) -> NonZeroUsize {
        // A non-zero-sized value, so that every thread's has an address of its own.
        crate::sync::thread_local! {
            static KEY: u8 = const { 0 };
        }
        KEY.with(|key| NonZeroUsize::new(core::ptr::from_ref(key).addr()))
            .expect("a thread-local's address is never null")
    }
}
