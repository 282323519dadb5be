//! Native-size atomics whose every access is simulated.
//!
//! Each type is `#[repr(transparent)]` over the `std` atomic, so it has the `std` size and
//! alignment and cache-line layouts stay what they are on real hardware (shuttle's own atomics
//! are 72 bytes). Inside a simulation each operation is costed by the machine model and ordered
//! in virtual time (a scheduling point), then performed as the `std` operation: one task runs
//! at a time, so the operations are sequentially consistent whatever `Ordering` they name
//! (weak-memory behaviour is loom's business, not the simulator's). Outside a simulation every
//! method is the plain `std` operation, after one thread-local check.
//!
//! Costs: loads are loads; `store` is a store; `swap`, `compare_exchange` (successful or not:
//! a locked instruction takes the line exclusive whatever it returns), `compare_exchange_weak`
//! and every `fetch_*` are read-modify-writes. `fetch_update` is a load followed by weak CASes,
//! as it is in `std`.
//!
//! ```
//! use std::sync::atomic::Ordering::SeqCst;
//! use numa_sim::atomic::AtomicU32;
//!
//! static WORD: AtomicU32 = AtomicU32::new(1);
//! assert_eq!(std::mem::size_of::<AtomicU32>(), 4);
//! assert_eq!(WORD.fetch_add(1, SeqCst), 1); // outside a simulation: plain std
//! assert_eq!(WORD.load(SeqCst), 2);
//! ```

use std::fmt;
use std::sync::atomic::{self, Ordering};

use crate::cache::{Word, Write};
use crate::engine::{Kind, access};

macro_rules! atomic_int {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name(atomic::$name);

        impl $name {
            /// A new atomic holding `v`.
            pub const fn new(v: $t) -> Self {
                $name(atomic::$name::new(v))
            }

            #[inline(always)]
            fn word(&self) -> Word {
                Word {
                    addr: self as *const Self as usize,
                    width: std::mem::size_of::<$t>() as u8,
                    ptr: false,
                }
            }

            /// Loads the value (a simulated load).
            #[inline]
            pub fn load(&self, order: Ordering) -> $t {
                access(self.word(), Kind::Load, None, || self.0.load(order))
            }

            /// Stores `v` (a simulated store).
            #[inline]
            pub fn store(&self, v: $t, order: Ordering) {
                let write = Write::Full(v as u64);
                access(self.word(), Kind::Store, Some(write), || self.0.store(v, order))
            }

            /// Swaps in `v` (a simulated read-modify-write).
            #[inline]
            pub fn swap(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.swap(v, order))
            }

            /// A plain store to the bits of `mask` only (they become `v & mask`; the others
            /// keep their value): what a narrower store to part of this word does, such as the
            /// kernel qspinlock's byte store to its `locked` field. Costed as one store (a
            /// simulated store), performed as one update of the word: inside a simulation one
            /// thread runs at a time, so nothing can come between the read and the write.
            /// Outside a simulation it is a `fetch_update`, atomic but a read-modify-write.
            #[inline]
            pub fn store_masked(&self, v: $t, mask: $t, order: Ordering) {
                let update = |old: $t| (old & !mask) | (v & mask);
                if crate::engine::context().is_some() {
                    let write = Write::Masked {
                        bits: v as u64,
                        mask: mask as u64,
                    };
                    access(self.word(), Kind::Store, Some(write), || {
                        self.0.store(update(self.0.load(Ordering::Relaxed)), order)
                    })
                } else {
                    let _ = self
                        .0
                        .fetch_update(order, Ordering::Relaxed, |old| Some(update(old)));
                }
            }

            /// Swaps `v & mask` into the bits of `mask` only, returning the previous value of the
            /// whole word: what an exchange on part of this word does, such as the kernel
            /// qspinlock's 16-bit `xchg` of its tail. A simulated read-modify-write.
            #[inline]
            pub fn swap_masked(&self, v: $t, mask: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || {
                    match self.0.fetch_update(order, Ordering::Relaxed, |old| {
                        Some((old & !mask) | (v & mask))
                    }) {
                        Ok(old) | Err(old) => old,
                    }
                })
            }

            /// Compare-and-swap (a simulated read-modify-write, even when it fails).
            #[inline]
            pub fn compare_exchange(
                &self,
                current: $t,
                new: $t,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$t, $t> {
                access(self.word(), Kind::Rmw, None, || {
                    self.0.compare_exchange(current, new, success, failure)
                })
            }

            /// Weak compare-and-swap: never fails spuriously in a simulation (a simulated
            /// read-modify-write, even when it fails).
            #[inline]
            pub fn compare_exchange_weak(
                &self,
                current: $t,
                new: $t,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$t, $t> {
                access(self.word(), Kind::Rmw, None, || {
                    self.0.compare_exchange(current, new, success, failure)
                })
            }

            /// Adds `v`, returning the previous value (a simulated read-modify-write).
            #[inline]
            pub fn fetch_add(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_add(v, order))
            }

            /// Subtracts `v`, returning the previous value (a simulated read-modify-write).
            #[inline]
            pub fn fetch_sub(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_sub(v, order))
            }

            /// Bitwise or with `v`, returning the previous value (a simulated read-modify-write).
            #[inline]
            pub fn fetch_or(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_or(v, order))
            }

            /// Bitwise and with `v`, returning the previous value (a simulated
            /// read-modify-write).
            #[inline]
            pub fn fetch_and(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_and(v, order))
            }

            /// Bitwise xor with `v`, returning the previous value (a simulated
            /// read-modify-write).
            #[inline]
            pub fn fetch_xor(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_xor(v, order))
            }

            /// Maximum with `v`, returning the previous value (a simulated read-modify-write).
            #[inline]
            pub fn fetch_max(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_max(v, order))
            }

            /// Minimum with `v`, returning the previous value (a simulated read-modify-write).
            #[inline]
            pub fn fetch_min(&self, v: $t, order: Ordering) -> $t {
                access(self.word(), Kind::Rmw, None, || self.0.fetch_min(v, order))
            }

            /// `std`'s `fetch_update`: a load, then weak CASes until `f` returns `None` or a CAS
            /// succeeds.
            ///
            /// # Errors
            ///
            /// `Err(previous)` if `f` returned `None`.
            pub fn fetch_update<F>(
                &self,
                set_order: Ordering,
                fetch_order: Ordering,
                mut f: F,
            ) -> Result<$t, $t>
            where
                F: FnMut($t) -> Option<$t>,
            {
                let mut prev = self.load(fetch_order);
                while let Some(next) = f(prev) {
                    match self.compare_exchange_weak(prev, next, set_order, fetch_order) {
                        Ok(x) => return Ok(x),
                        Err(x) => prev = x,
                    }
                }
                Err(prev)
            }

            /// The inner value's address (not a simulated access: what is done through it is
            /// invisible to the simulator).
            #[inline]
            pub const fn as_ptr(&self) -> *mut $t {
                self.0.as_ptr()
            }

            /// The value, by exclusive access (not a simulated access).
            #[inline]
            pub fn get_mut(&mut self) -> &mut $t {
                self.0.get_mut()
            }

            /// Consumes the atomic (not a simulated access).
            #[inline]
            pub fn into_inner(self) -> $t {
                self.0.into_inner()
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new(Default::default())
            }
        }

        impl From<$t> for $name {
            fn from(v: $t) -> Self {
                Self::new(v)
            }
        }

        /// Shows the value without a simulated access.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

atomic_int!(
    /// `std::sync::atomic::AtomicU32`, simulated.
    AtomicU32, u32
);
atomic_int!(
    /// `std::sync::atomic::AtomicU64`, simulated.
    AtomicU64, u64
);
atomic_int!(
    /// `std::sync::atomic::AtomicUsize`, simulated.
    AtomicUsize, usize
);

/// `std::sync::atomic::AtomicBool`, simulated.
#[repr(transparent)]
#[derive(Default)]
pub struct AtomicBool(atomic::AtomicBool);

impl AtomicBool {
    /// A new atomic holding `v`.
    pub const fn new(v: bool) -> Self {
        AtomicBool(atomic::AtomicBool::new(v))
    }

    #[inline(always)]
    fn word(&self) -> Word {
        Word {
            addr: self as *const Self as usize,
            width: 1,
            ptr: false,
        }
    }

    /// Loads the value (a simulated load).
    #[inline]
    pub fn load(&self, order: Ordering) -> bool {
        access(self.word(), Kind::Load, None, || self.0.load(order))
    }

    /// Stores `v` (a simulated store).
    #[inline]
    pub fn store(&self, v: bool, order: Ordering) {
        access(
            self.word(),
            Kind::Store,
            Some(Write::Full(u64::from(v))),
            || self.0.store(v, order),
        )
    }

    /// Swaps in `v` (a simulated read-modify-write).
    #[inline]
    pub fn swap(&self, v: bool, order: Ordering) -> bool {
        access(self.word(), Kind::Rmw, None, || self.0.swap(v, order))
    }

    /// Compare-and-swap (a simulated read-modify-write, even when it fails).
    #[inline]
    pub fn compare_exchange(
        &self,
        current: bool,
        new: bool,
        success: Ordering,
        failure: Ordering,
    ) -> Result<bool, bool> {
        access(self.word(), Kind::Rmw, None, || {
            self.0.compare_exchange(current, new, success, failure)
        })
    }

    /// Weak compare-and-swap: never fails spuriously in a simulation.
    #[inline]
    pub fn compare_exchange_weak(
        &self,
        current: bool,
        new: bool,
        success: Ordering,
        failure: Ordering,
    ) -> Result<bool, bool> {
        self.compare_exchange(current, new, success, failure)
    }

    /// Logical or (a simulated read-modify-write).
    #[inline]
    pub fn fetch_or(&self, v: bool, order: Ordering) -> bool {
        access(self.word(), Kind::Rmw, None, || self.0.fetch_or(v, order))
    }

    /// Logical and (a simulated read-modify-write).
    #[inline]
    pub fn fetch_and(&self, v: bool, order: Ordering) -> bool {
        access(self.word(), Kind::Rmw, None, || self.0.fetch_and(v, order))
    }

    /// Logical xor (a simulated read-modify-write).
    #[inline]
    pub fn fetch_xor(&self, v: bool, order: Ordering) -> bool {
        access(self.word(), Kind::Rmw, None, || self.0.fetch_xor(v, order))
    }

    /// The value, by exclusive access (not a simulated access).
    #[inline]
    pub fn get_mut(&mut self) -> &mut bool {
        self.0.get_mut()
    }

    /// Consumes the atomic (not a simulated access).
    #[inline]
    pub fn into_inner(self) -> bool {
        self.0.into_inner()
    }
}

/// Shows the value without a simulated access.
impl fmt::Debug for AtomicBool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// `std::sync::atomic::AtomicPtr`, simulated.
#[repr(transparent)]
pub struct AtomicPtr<T>(atomic::AtomicPtr<T>);

impl<T> AtomicPtr<T> {
    /// A new atomic holding `p`.
    pub const fn new(p: *mut T) -> Self {
        AtomicPtr(atomic::AtomicPtr::new(p))
    }

    #[inline(always)]
    fn word(&self) -> Word {
        Word {
            addr: self as *const Self as usize,
            width: std::mem::size_of::<*mut T>() as u8,
            ptr: true,
        }
    }

    /// Loads the pointer (a simulated load).
    #[inline]
    pub fn load(&self, order: Ordering) -> *mut T {
        access(self.word(), Kind::Load, None, || self.0.load(order))
    }

    /// Stores `p` (a simulated store).
    #[inline]
    pub fn store(&self, p: *mut T, order: Ordering) {
        let write = Write::Full(p.expose_provenance() as u64);
        access(self.word(), Kind::Store, Some(write), || {
            self.0.store(p, order)
        })
    }

    /// Swaps in `p` (a simulated read-modify-write).
    #[inline]
    pub fn swap(&self, p: *mut T, order: Ordering) -> *mut T {
        access(self.word(), Kind::Rmw, None, || self.0.swap(p, order))
    }

    /// Compare-and-swap (a simulated read-modify-write, even when it fails).
    #[inline]
    pub fn compare_exchange(
        &self,
        current: *mut T,
        new: *mut T,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut T, *mut T> {
        access(self.word(), Kind::Rmw, None, || {
            self.0.compare_exchange(current, new, success, failure)
        })
    }

    /// Weak compare-and-swap: never fails spuriously in a simulation.
    #[inline]
    pub fn compare_exchange_weak(
        &self,
        current: *mut T,
        new: *mut T,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut T, *mut T> {
        self.compare_exchange(current, new, success, failure)
    }

    /// The pointer, by exclusive access (not a simulated access).
    #[inline]
    pub fn get_mut(&mut self) -> &mut *mut T {
        self.0.get_mut()
    }

    /// Consumes the atomic (not a simulated access).
    #[inline]
    pub fn into_inner(self) -> *mut T {
        self.0.into_inner()
    }
}

impl<T> Default for AtomicPtr<T> {
    fn default() -> Self {
        Self::new(std::ptr::null_mut())
    }
}

/// Shows the pointer without a simulated access.
impl<T> fmt::Debug for AtomicPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// `std::sync::atomic::fence`, simulated: an `SeqCst` fence (x86 `mfence`) waits until the
/// calling thread's buffered stores have committed; weaker fences compile to nothing on x86 and
/// cost nothing. Then the `std` fence.
///
/// ```
/// use std::sync::atomic::Ordering::SeqCst;
/// numa_sim::atomic::fence(SeqCst); // outside a simulation: std's fence
/// ```
pub fn fence(order: Ordering) {
    if order == Ordering::SeqCst
        && let Some(cell) = crate::engine::active()
    {
        cell.borrow_mut().drain_store_buffer();
    }
    atomic::fence(order);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_sizes() {
        use std::mem::{align_of, size_of};
        assert_eq!(size_of::<AtomicU32>(), 4);
        assert_eq!(size_of::<AtomicU64>(), 8);
        assert_eq!(align_of::<AtomicU64>(), align_of::<atomic::AtomicU64>());
        assert_eq!(size_of::<AtomicUsize>(), size_of::<usize>());
        assert_eq!(size_of::<AtomicBool>(), 1);
        assert_eq!(size_of::<AtomicPtr<u8>>(), size_of::<usize>());
    }

    #[test]
    fn plain_std_outside_a_simulation() {
        let a = AtomicU64::new(5);
        assert_eq!(a.swap(6, Ordering::SeqCst), 5);
        assert_eq!(
            a.compare_exchange(6, 7, Ordering::SeqCst, Ordering::SeqCst),
            Ok(6)
        );
        assert_eq!(
            a.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |x| Some(x * 2)),
            Ok(7)
        );
        assert_eq!(a.fetch_max(20, Ordering::SeqCst), 14);
        assert_eq!(a.into_inner(), 20);
        let b = AtomicBool::default();
        assert!(!b.fetch_or(true, Ordering::SeqCst));
        assert_eq!(format!("{b:?}"), "true");
        let mut x = 3u8;
        let p = AtomicPtr::new(&mut x as *mut u8);
        assert_eq!(p.load(Ordering::SeqCst), &mut x as *mut u8);
    }
}
