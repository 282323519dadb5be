//! Delegation: [`Delegate::delegate`] runs a closure under the lock, on whichever thread holds
//! it. The mechanism is in `raw::delegate`; docs/DESIGN.md, "Delegation", says why it is built
//! this way.

/// Runs a closure on the value a lock protects, under the lock, possibly on another thread that
/// holds the lock: **delegation**. Implemented for [`McsMutex`](crate::McsMutex),
/// [`CnaMutex`](crate::CnaMutex) and [`HqMutex`](crate::HqMutex).
///
/// Uncontended, `delegate(f)` takes the lock, runs `f` on the calling thread and releases it,
/// at the cost of `lock()` and `unlock()`. Contended, the caller publishes `f` in its place in
/// the queue; a `delegate` caller that holds the lock runs the published closures of the
/// waiters queued behind it (of its own NUMA node for CnaMutex, of its own cache domain for
/// HqMutex, up to a bound in count and time) before it hands the lock on, and those waiters
/// return with their results without ever holding the lock. The protected data stays in the
/// holder's cache instead of moving to every waiter in turn. Waiters that called `lock()` are
/// handed the lock as always, and combining stops at them.
///
/// Differences from `lock()` that a closure must respect:
///
/// - `f` may run on another thread: thread-locals it reads are that thread's, and it must not
///   block on anything its caller holds (a lock the caller took before `delegate`, a channel
///   only the caller drains), since the thread running it waits for nothing of the caller's.
/// - `f` may call `delegate` or `lock` on **another** lock: it then queues and waits like any
///   caller (and may itself combine for that lock). Calling `delegate` on the **same** lock from
///   inside `f` panics with a clear message (with `lock()` it would wait forever, as
///   `lock()` inside `lock()` does).
/// - A panic in `f` is caught where it ran and resumed on the caller's thread, after the lock
///   is released; the lock stays usable, and the combiner goes on with the next closure.
/// - The caller never returns before `f` has finished or unwound, so `f` may borrow from the
///   caller's stack.
///
/// ```
/// use numa_locks::{CnaMutex, Delegate};
///
/// let counts = CnaMutex::new(vec![0u64; 4]);
/// let bucket = 2;
/// // The closure borrows `bucket` from this stack frame and returns a value.
/// let after = counts.delegate(|c| {
///     c[bucket] += 1;
///     c[bucket]
/// });
/// assert_eq!(after, 1);
/// assert_eq!(counts.lock()[bucket], 1);
/// ```
pub trait Delegate<T: ?Sized> {
    /// Runs `f` on the protected value under the lock, possibly on another thread that holds
    /// the lock, and returns its result. A panic in `f` is resumed on this thread.
    fn delegate<R: Send, F: FnOnce(&mut T) -> R + Send>(&self, f: F) -> R;
}

/// The protected value's address, sent with the closure to the thread that runs it. Sound to
/// send because `delegate` requires `T: Send` (the value moves between threads exactly as it
/// does when they take the lock in turn) and the closure runs only under the lock.
#[cfg(not(loom))]
struct Data<T: ?Sized>(*mut T);

// SAFETY: see the type's docs; `T: Send` is required by every `Delegate` impl.
#[cfg(not(loom))]
unsafe impl<T: ?Sized + Send> Send for Data<T> {}

#[cfg(not(loom))]
impl<T: ?Sized> Data<T> {
    /// # Safety
    /// The caller holds the lock that protects the value, for as long as the borrow lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut T {
        // SAFETY: passed on from the caller.
        unsafe { &mut *self.0 }
    }
}

#[cfg(not(loom))]
macro_rules! impl_delegate {
    ($raw:ty) => {
        impl<T: ?Sized + Send> Delegate<T> for lock_api::Mutex<$raw, T> {
            #[inline]
            fn delegate<R: Send, F: FnOnce(&mut T) -> R + Send>(&self, f: F) -> R {
                let data = Data(self.data_ptr());
                // SAFETY: `raw()` is only used to run `f` under the lock: `run` calls the
                // closure only while this thread, or the holder running it, holds the lock,
                // which is what makes the `&mut T` exclusive.
                let raw = unsafe { self.raw() };
                crate::raw::delegate::run(raw, move || {
                    // Bind the whole wrapper (not its pointer field): the closure must capture
                    // the `Send` wrapper, not the raw pointer.
                    let data = data;
                    // SAFETY: we run under the lock (see above).
                    f(unsafe { data.get() })
                })
            }
        }
    };
}
#[cfg(not(loom))]
impl_delegate!(crate::raw::RawMcs);
#[cfg(not(loom))]
impl_delegate!(crate::raw::RawCna);
#[cfg(not(loom))]
impl_delegate!(crate::raw::RawHq);
