//! Thread-locals with one slot per simulated thread.
//!
//! [`thread_local!`](crate::thread_local) declares a [`LocalKey`] that is shuttle's task-local
//! inside a simulation (one slot per simulated thread, dropped when that thread ends) and
//! `std`'s thread-local outside one, so code built with `--cfg numa_sim` also runs on real
//! threads (the crate's ordinary tests, doc examples).

use std::fmt;

/// A thread-local declared with [`thread_local!`](crate::thread_local).
pub struct LocalKey<T: 'static> {
    #[doc(hidden)]
    pub __sim: shuttle::thread::LocalKey<T>,
    #[doc(hidden)]
    pub __host: &'static std::thread::LocalKey<T>,
}

/// The thread-local was accessed during or after its destruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("already destroyed")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> LocalKey<T> {
    /// Runs `f` with this thread's value.
    ///
    /// # Panics
    ///
    /// During or after the value's destruction (like `std`'s).
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.try_with(f)
            .expect("cannot access a thread-local value during or after destruction")
    }

    /// Runs `f` with this thread's value, unless it is being or has been destroyed.
    ///
    /// # Errors
    ///
    /// [`AccessError`] during or after the value's destruction.
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        if crate::engine::context().is_some() {
            self.__sim.try_with(f).map_err(|_| AccessError)
        } else {
            self.__host.try_with(f).map_err(|_| AccessError)
        }
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

/// Declares thread-locals with one slot per simulated thread, with `std::thread_local!`'s
/// syntax (`const { ... }` initializers included). Outside a simulation they are `std`
/// thread-locals.
///
/// ```
/// use std::cell::Cell;
///
/// numa_sim::thread_local! {
///     static COUNT: Cell<u32> = const { Cell::new(0) };
///     static NAME: String = String::from("x");
/// }
/// COUNT.with(|c| c.set(c.get() + 1));
/// assert_eq!(COUNT.with(Cell::get), 1);
/// assert_eq!(NAME.with(|n| n.len()), 1);
/// ```
#[macro_export]
macro_rules! thread_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }; $($rest:tt)*) => (
        $crate::__thread_local_inner!(const $(#[$attr])* $vis $name, $t, $init);
        $crate::thread_local!($($rest)*);
    );
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }) => (
        $crate::__thread_local_inner!(const $(#[$attr])* $vis $name, $t, $init);
    );
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => (
        $crate::__thread_local_inner!(lazy $(#[$attr])* $vis $name, $t, $init);
        $crate::thread_local!($($rest)*);
    );
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => (
        $crate::__thread_local_inner!(lazy $(#[$attr])* $vis $name, $t, $init);
    );
}

#[doc(hidden)]
#[macro_export]
macro_rules! __thread_local_inner {
    (const $(#[$attr:meta])* $vis:vis $name:ident, $t:ty, $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::LocalKey<$t> = {
            ::std::thread_local!(static HOST: $t = const { $init });
            $crate::LocalKey {
                __sim: $crate::__private::shuttle::thread::LocalKey {
                    init: || $init,
                    _p: ::core::marker::PhantomData,
                },
                __host: &HOST,
            }
        };
    };
    (lazy $(#[$attr:meta])* $vis:vis $name:ident, $t:ty, $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::LocalKey<$t> = {
            ::std::thread_local!(static HOST: $t = $init);
            $crate::LocalKey {
                __sim: $crate::__private::shuttle::thread::LocalKey {
                    init: || $init,
                    _p: ::core::marker::PhantomData,
                },
                __host: &HOST,
            }
        };
    };
}
