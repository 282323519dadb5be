//! The raw locks. PLACEHOLDER while the queue-lock core is written: a test-and-set lock that yields.
use lock_api::GuardSend;
use std::sync::atomic::{AtomicBool, Ordering};

macro_rules! placeholder {
    ($name:ident) => {
        /// Placeholder raw lock.
        pub struct $name(AtomicBool);
        impl $name {
            /// An unlocked lock.
            pub const fn new() -> Self {
                Self(AtomicBool::new(false))
            }
        }
        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }
        unsafe impl lock_api::RawMutex for $name {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();
            type Guard = GuardSend;
            fn lock(&self) -> GuardSend {
                while self.0.swap(true, Ordering::Acquire) {
                    std::thread::yield_now();
                }
                GuardSend::new()
            }
            fn try_lock(&self) -> Option<GuardSend> {
                (!self.0.swap(true, Ordering::Acquire)).then(GuardSend::new)
            }
            unsafe fn unlock(&self, _: GuardSend) {
                self.0.store(false, Ordering::Release)
            }
            fn is_locked(&self) -> bool {
                self.0.load(Ordering::Relaxed)
            }
        }
        unsafe impl lock_api::RawMutexFair for $name {
            unsafe fn unlock_fair(&self, g: GuardSend) {
                unsafe { lock_api::RawMutex::unlock(self, g) }
            }
        }
    };
}
placeholder!(RawMcs);
placeholder!(RawCna);
placeholder!(RawHq);
