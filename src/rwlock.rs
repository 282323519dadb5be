//! The user-facing reader-writer lock aliases: for each queue lock, the rwlock, its guards and a
//! recursive rwlock, named after parking_lot 0.13's so that a swap changes only the type names.
//!
//! Readers of an inflated (once contended) lock write only their own NUMA node's counter;
//! writers and upgradable readers queue through [`RawMcs`](crate::raw::RawMcs),
//! [`RawCna`](crate::raw::RawCna) or [`RawHq`](crate::raw::RawHq). See
//! [`RawNumaRwLock`](crate::raw::RawNumaRwLock) for the protocol and its fairness bounds.

use crate::raw::{
    RawCnaRecursiveRwLock, RawCnaRwLock, RawHqRecursiveRwLock, RawHqRwLock, RawMcsRecursiveRwLock,
    RawMcsRwLock,
};

/// Declares one family of aliases: `$rw`, `$recursive` and their guards over `$raw` and
/// `$raw_recursive`.
macro_rules! rwlock_family {
    (
        $what:literal, $raw:ident, $raw_recursive:ident,
        $rw:ident, $read:ident, $write:ident, $upgradable:ident, $mapped_read:ident,
        $mapped_write:ident,
        $recursive:ident, $rread:ident, $rwrite:ident, $rupgradable:ident, $rmapped_read:ident,
        $rmapped_write:ident
    ) => {
        #[doc = concat!("A NUMA-aware reader-writer lock whose writers queue through ", $what, " (the drop-in for `parking_lot::RwLock`).")]
        ///
        /// ```
        #[doc = concat!("use numa_locks::", stringify!($rw), ";")]
        ///
        #[doc = concat!("static TABLE: ", stringify!($rw), "<Vec<u32>> = ", stringify!($rw), "::new(Vec::new());")]
        ///
        /// TABLE.write().push(7);
        /// let readers: Vec<_> = (0..4)
        ///     .map(|_| std::thread::spawn(|| TABLE.read().len()))
        ///     .collect();
        /// for reader in readers {
        ///     assert_eq!(reader.join().unwrap(), 1);
        /// }
        /// ```
        pub type $rw<T> = lock_api::RwLock<$raw, T>;
        #[doc = concat!("The shared guard of a [`", stringify!($rw), "`].")]
        pub type $read<'a, T> = lock_api::RwLockReadGuard<'a, $raw, T>;
        #[doc = concat!("The exclusive guard of a [`", stringify!($rw), "`].")]
        pub type $write<'a, T> = lock_api::RwLockWriteGuard<'a, $raw, T>;
        #[doc = concat!("The upgradable guard of a [`", stringify!($rw), "`]: shared with readers, exclusive of writers and other upgradable readers.")]
        pub type $upgradable<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, $raw, T>;
        #[doc = concat!("A [`", stringify!($read), "`] narrowed to part of the data.")]
        pub type $mapped_read<'a, T> = lock_api::MappedRwLockReadGuard<'a, $raw, T>;
        #[doc = concat!("A [`", stringify!($write), "`] narrowed to part of the data.")]
        pub type $mapped_write<'a, T> = lock_api::MappedRwLockWriteGuard<'a, $raw, T>;

        #[doc = concat!("A [`", stringify!($rw), "`] whose readers may read again while a writer waits (the drop-in for `parking_lot::RecursiveRwLock`); a stream of overlapping readers can starve writers.")]
        ///
        /// ```
        #[doc = concat!("use numa_locks::", stringify!($recursive), ";")]
        ///
        #[doc = concat!("let lock = ", stringify!($recursive), "::new(1);")]
        /// let first = lock.read();
        /// let second = lock.read(); // never deadlocks behind a waiting writer
        /// assert_eq!(*first + *second, 2);
        /// ```
        pub type $recursive<T> = lock_api::RwLock<$raw_recursive, T>;
        #[doc = concat!("The shared guard of a [`", stringify!($recursive), "`].")]
        pub type $rread<'a, T> = lock_api::RwLockReadGuard<'a, $raw_recursive, T>;
        #[doc = concat!("The exclusive guard of a [`", stringify!($recursive), "`].")]
        pub type $rwrite<'a, T> = lock_api::RwLockWriteGuard<'a, $raw_recursive, T>;
        #[doc = concat!("The upgradable guard of a [`", stringify!($recursive), "`].")]
        pub type $rupgradable<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, $raw_recursive, T>;
        #[doc = concat!("A [`", stringify!($rread), "`] narrowed to part of the data.")]
        pub type $rmapped_read<'a, T> = lock_api::MappedRwLockReadGuard<'a, $raw_recursive, T>;
        #[doc = concat!("A [`", stringify!($rwrite), "`] narrowed to part of the data.")]
        pub type $rmapped_write<'a, T> = lock_api::MappedRwLockWriteGuard<'a, $raw_recursive, T>;
    };
}

rwlock_family!(
    "the MCS queue lock",
    RawMcsRwLock,
    RawMcsRecursiveRwLock,
    McsRwLock,
    McsRwLockReadGuard,
    McsRwLockWriteGuard,
    McsRwLockUpgradableReadGuard,
    McsMappedRwLockReadGuard,
    McsMappedRwLockWriteGuard,
    McsRecursiveRwLock,
    McsRecursiveRwLockReadGuard,
    McsRecursiveRwLockWriteGuard,
    McsRecursiveRwLockUpgradableReadGuard,
    McsMappedRecursiveRwLockReadGuard,
    McsMappedRecursiveRwLockWriteGuard
);

rwlock_family!(
    "the compact NUMA-aware lock (CNA), so that a writer's handoff stays on its node",
    RawCnaRwLock,
    RawCnaRecursiveRwLock,
    CnaRwLock,
    CnaRwLockReadGuard,
    CnaRwLockWriteGuard,
    CnaRwLockUpgradableReadGuard,
    CnaMappedRwLockReadGuard,
    CnaMappedRwLockWriteGuard,
    CnaRecursiveRwLock,
    CnaRecursiveRwLockReadGuard,
    CnaRecursiveRwLockWriteGuard,
    CnaRecursiveRwLockUpgradableReadGuard,
    CnaMappedRecursiveRwLockReadGuard,
    CnaMappedRecursiveRwLockWriteGuard
);

rwlock_family!(
    "the hierarchical queued lock (HQ), so that writers' handoffs stay within a node for a while",
    RawHqRwLock,
    RawHqRecursiveRwLock,
    HqRwLock,
    HqRwLockReadGuard,
    HqRwLockWriteGuard,
    HqRwLockUpgradableReadGuard,
    HqMappedRwLockReadGuard,
    HqMappedRwLockWriteGuard,
    HqRecursiveRwLock,
    HqRecursiveRwLockReadGuard,
    HqRecursiveRwLockWriteGuard,
    HqRecursiveRwLockUpgradableReadGuard,
    HqMappedRecursiveRwLockReadGuard,
    HqMappedRecursiveRwLockWriteGuard
);
