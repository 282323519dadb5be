//! Test-only package: runs parking_lot's and Rust std's own `Mutex` / `Condvar` / reentrant
//! mutex tests against numa_locks' locks (`McsMutex`, `CnaMutex`, `HqMutex` and their condition
//! variables), with parking_lot itself as the reference, in `tests/suites.rs`.
//!
//! The suites are generated at build time (`build.rs`) from the sources already on the
//! machine: the parking_lot 0.13 crate cargo downloads as this package's dependency, and the
//! toolchain's `rust-src` component (`rustup component add rust-src`). Nothing of them is
//! copied into this repository. Run them with `cargo test -p upstream_tests`.
//!
//! This library only gives lock_api's types the few std method names that std's tests call and
//! lock_api spells differently ([`std_names`]).

/// std's names for what lock_api's `Mutex` and `Condvar` do under other names (or as a lock
/// plus one operation), so that std's tests compile unchanged against lock_api types.
pub mod std_names {
    use std::time::Duration;

    use lock_api::{Condvar, MutexGuard, RawCondvar, RawCondvarTimed, RawMutex, WaitTimeoutResult};

    /// `std::sync::nonpoison::Mutex`'s value accessors, as a lock plus one operation.
    pub trait StdMutexNames<T> {
        /// std's `Mutex::set`: replaces the value, dropping the old one.
        fn set(&self, value: T);
        /// std's `Mutex::replace`: replaces the value and returns the old one.
        fn replace(&self, value: T) -> T;
        /// std's `Mutex::get_cloned`: a clone of the value.
        fn get_cloned(&self) -> T
        where
            T: Clone;
        /// std's `Mutex::with_mut`: runs `f` on the value under the lock.
        fn with_mut<U>(&self, f: impl FnOnce(&mut T) -> U) -> U;
    }

    impl<R: RawMutex, T> StdMutexNames<T> for lock_api::Mutex<R, T> {
        fn set(&self, value: T) {
            *self.lock() = value;
        }
        fn replace(&self, value: T) -> T {
            std::mem::replace(&mut *self.lock(), value)
        }
        fn get_cloned(&self) -> T
        where
            T: Clone,
        {
            self.lock().clone()
        }
        fn with_mut<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
            f(&mut self.lock())
        }
    }

    /// `std::sync::nonpoison::Condvar`'s timed waits: lock_api's `wait_for` and
    /// `wait_while_for` (whose arguments come in another order).
    pub trait StdCondvarNames<R: RawMutex> {
        /// std's `Condvar::wait_timeout` = lock_api's `wait_for`.
        fn wait_timeout<T: ?Sized>(
            &self,
            guard: &mut MutexGuard<'_, R, T>,
            timeout: Duration,
        ) -> WaitTimeoutResult;
        /// std's `Condvar::wait_timeout_while` = lock_api's `wait_while_for`.
        fn wait_timeout_while<T: ?Sized>(
            &self,
            guard: &mut MutexGuard<'_, R, T>,
            timeout: Duration,
            condition: impl FnMut(&mut T) -> bool,
        ) -> WaitTimeoutResult;
    }

    impl<C> StdCondvarNames<C::RawMutex> for Condvar<C>
    where
        C: RawCondvar + RawCondvarTimed,
        C::RawMutex: lock_api::RawMutexTimed<Duration = Duration>,
    {
        fn wait_timeout<T: ?Sized>(
            &self,
            guard: &mut MutexGuard<'_, C::RawMutex, T>,
            timeout: Duration,
        ) -> WaitTimeoutResult {
            self.wait_for(guard, timeout)
        }
        fn wait_timeout_while<T: ?Sized>(
            &self,
            guard: &mut MutexGuard<'_, C::RawMutex, T>,
            timeout: Duration,
            condition: impl FnMut(&mut T) -> bool,
        ) -> WaitTimeoutResult {
            self.wait_while_for(guard, condition, timeout)
        }
    }
}
