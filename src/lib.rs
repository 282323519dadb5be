//! NUMA-aware queue locks for [`lock_api`].
//!
//! Three `lock_api::Mutex` types that replace `parking_lot::Mutex` line for line:
//!
//! - [`McsMutex`]: the MCS queue lock, fair FIFO among queued waiters;
//! - [`CnaMutex`]: the compact NUMA-aware lock: one 8-byte lock that keeps handoffs on the
//!   holder's NUMA node, with waiters of other nodes in a secondary queue flushed back after a
//!   time threshold;
//! - [`HqMutex`]: the hierarchical queued lock: one waiter queue per NUMA node and a FIFO of nodes.
//!
//! All of them wait by spinning briefly and then parking on a futex, so they stay usable when
//! threads outnumber cores, and all take the uncontended lock with one compare-and-swap.
//!
//! ```
//! // before: static COUNTER: parking_lot::Mutex<u64> = parking_lot::Mutex::new(0);
//! static COUNTER: numa_locks::CnaMutex<u64> = numa_locks::CnaMutex::new(0);
//!
//! let threads: Vec<_> = (0..4)
//!     .map(|_| std::thread::spawn(|| *COUNTER.lock() += 1))
//!     .collect();
//! for t in threads {
//!     t.join().unwrap();
//! }
//! assert_eq!(*COUNTER.lock(), 4);
//! ```
//!
//! [`Delegate::delegate`] runs a closure under the lock, possibly on the thread that holds it,
//! so that under contention the protected data stays in one cache and the work moves instead.
//!
//! NUMA placement comes from [`topology`]; on a one-node machine, [`topology::set_thread_node`]
//! assigns virtual nodes for tests and emulation. Waiting and fairness are tuned with
//! [`tunables`]; feature `stats` adds per-lock counters.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly): every feature-gated item shows the feature it needs. The
// loom and numa_sim backends are test instruments, not what a user builds: their cfgs are not
// shown.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(loom, numa_sim))))]

mod delegate;
#[cfg(feature = "lockup")]
#[cfg_attr(docsrs, doc(cfg(feature = "lockup")))]
pub mod lockup;
#[cfg(not(loom))]
mod mutex;
mod qnode;
pub mod raw;
#[cfg(not(loom))]
mod rwlock;
#[cfg(feature = "stats")]
#[cfg_attr(docsrs, doc(cfg(feature = "stats")))]
pub mod stats;
mod sync;
pub mod topology;
pub mod tunables;
mod wait;

pub use delegate::Delegate;
/// `lock_api`, re-exported as parking_lot does, and its condvar timeout result.
pub use lock_api::{self, WaitTimeoutResult};
#[cfg(not(loom))]
pub use mutex::{
    CnaCondvar, CnaMappedMutexGuard, CnaMappedReentrantMutexGuard, CnaMutex, CnaMutexGuard,
    CnaReentrantMutex, CnaReentrantMutexGuard, HqCondvar, HqMappedMutexGuard,
    HqMappedReentrantMutexGuard, HqMutex, HqMutexGuard, HqReentrantMutex, HqReentrantMutexGuard,
    McsCondvar, McsMappedMutexGuard, McsMappedReentrantMutexGuard, McsMutex, McsMutexGuard,
    McsReentrantMutex, McsReentrantMutexGuard, RawThreadId,
};
#[cfg(not(loom))]
pub use rwlock::{
    CnaMappedRecursiveRwLockReadGuard, CnaMappedRecursiveRwLockWriteGuard,
    CnaMappedRwLockReadGuard, CnaMappedRwLockWriteGuard, CnaRecursiveRwLock,
    CnaRecursiveRwLockReadGuard, CnaRecursiveRwLockUpgradableReadGuard,
    CnaRecursiveRwLockWriteGuard, CnaRwLock, CnaRwLockReadGuard, CnaRwLockUpgradableReadGuard,
    CnaRwLockWriteGuard, HqMappedRecursiveRwLockReadGuard, HqMappedRecursiveRwLockWriteGuard,
    HqMappedRwLockReadGuard, HqMappedRwLockWriteGuard, HqRecursiveRwLock,
    HqRecursiveRwLockReadGuard, HqRecursiveRwLockUpgradableReadGuard, HqRecursiveRwLockWriteGuard,
    HqRwLock, HqRwLockReadGuard, HqRwLockUpgradableReadGuard, HqRwLockWriteGuard,
    McsMappedRecursiveRwLockReadGuard, McsMappedRecursiveRwLockWriteGuard,
    McsMappedRwLockReadGuard, McsMappedRwLockWriteGuard, McsRecursiveRwLock,
    McsRecursiveRwLockReadGuard, McsRecursiveRwLockUpgradableReadGuard,
    McsRecursiveRwLockWriteGuard, McsRwLock, McsRwLockReadGuard, McsRwLockUpgradableReadGuard,
    McsRwLockWriteGuard,
};
/// What `numasim --paths` counts (the simulator only).
#[doc(hidden)]
pub use sync::PathEvent;

/// The rwlock's biased read path's loom probes.
#[cfg(loom)]
#[doc(hidden)]
pub use raw::rwlock::table::probe as loom_rwlock_probe;
#[cfg(loom)]
#[doc(hidden)]
pub use sync::loom_clock;
#[cfg(loom)]
#[doc(hidden)]
pub use sync::loom_probe;

/// README.md's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
