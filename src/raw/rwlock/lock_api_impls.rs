//! Implements the `lock_api` rwlock traits for `RawNumaRwLock<M, RECURSIVE>` with stateless
//! guards. Not under loom, whose atomics cannot be made in the `const INIT`.

use super::{RawNumaRwLock, WriterLock};
use lock_api::GuardSend;
use std::time::{Duration, Instant};

/// The time left until `instant` (the lock's clock is `now_ns`).
fn left(instant: Instant) -> Duration {
    instant.saturating_duration_since(Instant::now())
}

// SAFETY: a shared lock excludes exclusive holders (readers enter only while no writer
// has revoked, and a writer holds only once the slots drained); an exclusive lock excludes
// everyone (a writer holds `M` and has drained the readers). The acquisitions are Acquire
// and the releases Release (see the module docs); guards are stateless because unlocking
// needs no per-acquisition data (the reader count is a sum over node slots).
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLock
    for RawNumaRwLock<M, RECURSIVE>
{
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = GuardSend;
    type ExclusiveGuard = GuardSend;

    #[inline]
    fn lock_shared(&self) -> GuardSend {
        RawNumaRwLock::lock_shared(self);
        GuardSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_shared(self).then(GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract: a shared lock is held.
        unsafe { RawNumaRwLock::unlock_shared(self) }
    }

    #[inline]
    fn lock_exclusive(&self) -> GuardSend {
        RawNumaRwLock::lock_exclusive(self);
        GuardSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_exclusive(self).then(GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract: an exclusive lock is held.
        unsafe { RawNumaRwLock::unlock_exclusive(self) }
    }

    fn is_locked(&self) -> bool {
        RawNumaRwLock::is_locked(self)
    }

    fn is_locked_exclusive(&self) -> bool {
        RawNumaRwLock::is_locked_exclusive(self)
    }
}

// SAFETY: as for `RawRwLock`; the fair unlocks release like the plain ones.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockFair
    for RawNumaRwLock<M, RECURSIVE>
{
    unsafe fn unlock_shared_fair(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract. A reader hands nothing over: leaving is fair.
        unsafe { RawNumaRwLock::unlock_shared(self) }
    }

    unsafe fn unlock_exclusive_fair(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract: an exclusive lock is held.
        unsafe { RawNumaRwLock::unlock_exclusive_fair(self) }
    }
}

// SAFETY: a downgrade counts the holder as a reader before it lets writers in.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockDowngrade
    for RawNumaRwLock<M, RECURSIVE>
{
    unsafe fn downgrade(&self, _guard: GuardSend) -> GuardSend {
        // SAFETY: lock_api's contract: an exclusive lock is held.
        unsafe { RawNumaRwLock::downgrade(self) };
        GuardSend::new()
    }
}

// SAFETY: as for `RawRwLock`; a timed-out wait gives back everything it took.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockTimed
    for RawNumaRwLock<M, RECURSIVE>
{
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_shared_for(&self, timeout: Duration) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_shared_for(self, timeout).then(GuardSend::new)
    }

    fn try_lock_shared_until(&self, timeout: Instant) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_shared_for(self, left(timeout)).then(GuardSend::new)
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_exclusive_for(self, timeout).then(GuardSend::new)
    }

    fn try_lock_exclusive_until(&self, timeout: Instant) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_exclusive_for(self, left(timeout)).then(GuardSend::new)
    }
}

// SAFETY: an upgradable lock holds `M` (or the compact upgradable state), which excludes
// writers and other upgradable readers but not readers; an upgrade drains the readers
// (Acquire on their Release decrements) before it returns.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgrade
    for RawNumaRwLock<M, RECURSIVE>
{
    type UpgradableGuard = GuardSend;

    fn lock_upgradable(&self) -> GuardSend {
        RawNumaRwLock::lock_upgradable(self);
        GuardSend::new()
    }

    fn try_lock_upgradable(&self) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_upgradable(self).then(GuardSend::new)
    }

    unsafe fn unlock_upgradable(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        unsafe { RawNumaRwLock::unlock_upgradable(self) }
    }

    unsafe fn upgrade(&self, _guard: GuardSend) -> GuardSend {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        unsafe { RawNumaRwLock::upgrade(self) };
        GuardSend::new()
    }

    unsafe fn try_upgrade(&self, guard: GuardSend) -> Result<GuardSend, GuardSend> {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        if unsafe { RawNumaRwLock::try_upgrade(self) } {
            Ok(GuardSend::new())
        } else {
            Err(guard)
        }
    }
}

// SAFETY: as for `RawRwLockUpgrade`.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeFair
    for RawNumaRwLock<M, RECURSIVE>
{
    unsafe fn unlock_upgradable_fair(&self, _guard: GuardSend) {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        unsafe { RawNumaRwLock::unlock_upgradable_fair(self) }
    }
}

// SAFETY: as for `RawRwLockDowngrade`.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeDowngrade
    for RawNumaRwLock<M, RECURSIVE>
{
    unsafe fn downgrade_upgradable(&self, _guard: GuardSend) -> GuardSend {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        unsafe { RawNumaRwLock::downgrade_upgradable(self) };
        GuardSend::new()
    }

    unsafe fn downgrade_to_upgradable(&self, _guard: GuardSend) -> GuardSend {
        // SAFETY: lock_api's contract: an exclusive lock is held.
        unsafe { RawNumaRwLock::downgrade_to_upgradable(self) };
        GuardSend::new()
    }
}

// SAFETY: as for `RawRwLockUpgrade` and `RawRwLockTimed`.
unsafe impl<M: WriterLock, const RECURSIVE: bool> lock_api::RawRwLockUpgradeTimed
    for RawNumaRwLock<M, RECURSIVE>
{
    fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_upgradable_for(self, timeout).then(GuardSend::new)
    }

    fn try_lock_upgradable_until(&self, timeout: Instant) -> Option<GuardSend> {
        RawNumaRwLock::try_lock_upgradable_for(self, left(timeout)).then(GuardSend::new)
    }

    unsafe fn try_upgrade_for(
        &self,
        guard: GuardSend,
        timeout: Duration,
    ) -> Result<GuardSend, GuardSend> {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        if unsafe { RawNumaRwLock::try_upgrade_for(self, timeout) } {
            Ok(GuardSend::new())
        } else {
            Err(guard)
        }
    }

    unsafe fn try_upgrade_until(
        &self,
        guard: GuardSend,
        timeout: Instant,
    ) -> Result<GuardSend, GuardSend> {
        // SAFETY: lock_api's contract: an upgradable lock is held.
        if unsafe { RawNumaRwLock::try_upgrade_for(self, left(timeout)) } {
            Ok(GuardSend::new())
        } else {
            Err(guard)
        }
    }
}
