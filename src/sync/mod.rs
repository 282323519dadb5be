//! The only module that chooses between `std`, the `loom` model checker and the `numa_sim`
//! simulator.
//!
//! Everything that takes part in a handoff protocol (atomics, thread-locals, the spin hint, the
//! clock, parking) comes from here, so the loom models and the simulation run exactly the code
//! that ships. Three backends:
//!
//! - real threads (the default): `std`'s atomics, time from `Instant`, parking on the futex
//!   (Linux) or an emulation of it elsewhere;
//! - loom model checking (`--cfg loom`): loom's atomics, time from [`loom_clock`], parking
//!   emulated on loom's condvar;
//! - a simulated machine (`--cfg numa_sim`): `numa_sim`'s atomics (native size, each access
//!   costed), virtual time, `numa_sim`'s futex model; outside a simulation (real threads running
//!   such a build) the real-thread futex above, since the simulator emulates none.
//!
//! The rest of the crate names `cfg(loom)` or `cfg(numa_sim)` only where this module cannot
//! decide for it, for one of these reasons:
//! - the `lock_api` impls, the aliases built on them and the size checks beside them (`lib.rs`,
//!   `raw/`): `cfg(not(loom))`, since a `RawMutex` needs a `const` `INIT`, which loom's atomics
//!   cannot give;
//! - the loom probes (`#[cfg(loom)] crate::sync::loom_probe::...`, in `raw/`): each marks a
//!   handoff path, so that a loom model can show the path is reached; `lib.rs` exports them and
//!   the model clock to the models in `tests/`;
//! - the queue-node registry (`qnode.rs`): loom's atomics belong to one model execution, and a
//!   simulation keeps the indices it releases to itself;
//! - the visible-readers table (`raw/rwlock/table.rs`): under loom a table of a few entries made
//!   per execution, to keep the model small; under numa_sim a thread's row is its hardware
//!   thread;
//! - `RawHq`'s model-only constructors and the mode-switch thresholds they set (`raw/hq.rs`), so
//!   that a model reaches the switches within a few acquisitions;
//! - documentation: `lib.rs` hides both cfgs from docs.rs's feature badges, and `topology`'s docs
//!   say what a model and the simulated machine answer.

#[cfg(all(loom, numa_sim))]
compile_error!("`--cfg loom` and `--cfg numa_sim` select different backends; use one at a time");

mod futex;

pub(crate) use futex::{futex_wait, futex_wake};
pub(crate) use std::sync::atomic::Ordering;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
// The simulator runs one thread at a time, sequentially consistent; its fence costs what an
// `SeqCst` fence costs (it drains the thread's simulated store buffer).
#[cfg(numa_sim)]
pub(crate) use numa_sim::atomic::fence;
#[cfg(not(any(loom, numa_sim)))]
pub(crate) use std::sync::atomic::fence;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};
#[cfg(numa_sim)]
pub(crate) use numa_sim::atomic::{AtomicPtr, AtomicU32, AtomicU64};
#[cfg(not(any(loom, numa_sim)))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};

/// A write of plain memory that another thread will read (a `delegate` request on its caller's
/// stack): under numa_sim, a store to each line of `addrs`, costed as the simulator's atomics
/// are (the line moves to this core); nothing elsewhere, where the memory access itself is the
/// cost.
#[inline]
pub(crate) fn plain_write(addrs: &[*const u8]) {
    #[cfg(numa_sim)]
    numa_sim::touch(addrs);
    #[cfg(not(numa_sim))]
    let _ = addrs;
}

/// [`plain_write`] for a read.
#[inline]
pub(crate) fn plain_read(addrs: &[*const u8]) {
    #[cfg(numa_sim)]
    numa_sim::touch_read(addrs);
    #[cfg(not(numa_sim))]
    let _ = addrs;
}

/// `true` under loom, which explores every interleaving: spinning would only multiply them, so
/// every wait goes straight to parking, and randomized choices (CNA's shuffle reduction) are
/// always taken.
pub(crate) const EXHAUSTIVE: bool = cfg!(loom);

/// Declares a constructor that is a `const fn` wherever the atomics allow it (`std` and
/// `numa_sim`) and a plain `fn` under loom, whose atomics cannot be made in a const context. One
/// body serves both.
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        $vis const fn $name($($arg: $ty),*) -> $ret $body

        #[cfg(loom)]
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use const_fn;

/// `std::thread_local!`, loom's, or the simulator's (one slot per simulated thread), with the
/// same syntax, `const { … }` initializers included (loom's macro takes none: the block is
/// unwrapped there).
macro_rules! thread_local_impl {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr } $(;)?) => {
        #[cfg(not(any(loom, numa_sim)))]
        std::thread_local!($(#[$attr])* $vis static $name: $t = const { $init });
        #[cfg(loom)]
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init);
        #[cfg(numa_sim)]
        numa_sim::thread_local!($(#[$attr])* $vis static $name: $t = const { $init });
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr $(;)?) => {
        #[cfg(not(any(loom, numa_sim)))]
        std::thread_local!($(#[$attr])* $vis static $name: $t = $init);
        #[cfg(loom)]
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init);
        #[cfg(numa_sim)]
        numa_sim::thread_local!($(#[$attr])* $vis static $name: $t = $init);
    };
}
pub(crate) use thread_local_impl as thread_local;

/// One iteration of a busy-wait loop: `pause` (x86) / `yield` (Arm).
///
/// Under loom a spin must yield, or the model checker would explore an unbounded loop. The
/// simulator charges the preset's `pause` cost, and may let a thread that keeps re-reading
/// unchanged cache lines sleep until one of them is written (see [`spin_deadline`]).
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(numa_sim)]
    numa_sim::pause();
    #[cfg(not(any(loom, numa_sim)))]
    core::hint::spin_loop();
}

/// Tells the platform that the calling thread's current spin loop gives up at `deadline_ns`
/// (on the [`now_ns`] clock), unless what it watches changes first.
///
/// Free on real hardware and under loom. The simulator needs it because it compresses a spin
/// loop that keeps re-reading unchanged lines into one sleep: without the deadline it could not
/// tell when the spinner would have stopped spinning and parked.
#[inline(always)]
pub(crate) fn spin_deadline(deadline_ns: u64) {
    #[cfg(numa_sim)]
    numa_sim::spin_deadline(deadline_ns);
    #[cfg(not(numa_sim))]
    let _ = deadline_ns;
}

/// Gives the CPU to another thread (used when a wait cannot park, e.g. for a successor to link).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(numa_sim)]
    numa_sim::yield_now();
    #[cfg(not(any(loom, numa_sim)))]
    std::thread::yield_now();
}

/// Monotonic nanoseconds since an arbitrary process-wide origin.
///
/// Only slow paths read it (deadlines for spinning, stealing and the CNA flush). Under loom it is a
/// counter that advances by a step the model chooses ([`loom_clock`]), reset by every model run:
/// step 0 means time stands still (nothing expires), a huge step means every deadline expires at
/// the next reading. Either way the model stays deterministic. Under the simulator it is the
/// calling thread's virtual clock.
#[inline]
pub(crate) fn now_ns() -> u64 {
    #[cfg(loom)]
    {
        loom_clock::read()
    }
    #[cfg(numa_sim)]
    {
        numa_sim::now_ns()
    }
    #[cfg(not(any(loom, numa_sim)))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(Instant::now);
        // Saturates after 584 years of uptime.
        u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A cheap timestamp for statistics, in clock ticks: the TSC on x86-64 (a few ns, no system call;
/// constant-rate and synchronized across cores on the CPUs of the last decade), else [`now_ns`]
/// (one tick per nanosecond). Only differences of two readings mean anything; convert them with
/// [`ns_per_tick`].
#[cfg(feature = "stats")]
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(any(loom, numa_sim, miri))))]
    {
        // SAFETY: RDTSC has no preconditions; it is available on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    // Under loom, reading `now_ns` would advance the model's clock and change which deadline
    // paths the models explore: statistics see no time pass there.
    #[cfg(loom)]
    {
        0
    }
    #[cfg(all(not(loom), not(all(target_arch = "x86_64", not(any(numa_sim, miri))))))]
    {
        now_ns()
    }
}

/// Nanoseconds per [`ticks`] tick. On x86-64 the TSC rate is measured once, against the
/// monotonic clock over 2 ms, the first time it is asked for (by a statistics snapshot, never on
/// a lock path).
#[cfg(feature = "stats")]
pub(crate) fn ns_per_tick() -> f64 {
    #[cfg(all(target_arch = "x86_64", not(any(loom, numa_sim, miri))))]
    {
        use std::sync::OnceLock;
        use std::time::{Duration, Instant};
        static RATE: OnceLock<f64> = OnceLock::new();
        *RATE.get_or_init(|| {
            let (start, ticks0) = (Instant::now(), ticks());
            while start.elapsed() < Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            let (elapsed, ticks1) = (start.elapsed(), ticks());
            elapsed.as_nanos() as f64 / ticks1.saturating_sub(ticks0).max(1) as f64
        })
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(loom, numa_sim, miri)))))]
    {
        1.0
    }
}

/// `true` where [`modelled_node`] answers (loom, the simulator): the node is the model's, and
/// nothing may cache a hardware answer.
pub(crate) const MODELLED: bool = cfg!(any(loom, numa_sim));

/// Where a modelled platform says the calling thread runs: `Some((node, node_count))` under loom
/// (node 0 of 1, so models stay deterministic) and under the simulator (the simulated core's
/// node); `None` on real hardware, where `topology` asks the operating system.
#[inline(always)]
pub(crate) fn modelled_node() -> Option<(usize, usize)> {
    #[cfg(loom)]
    {
        Some((0, 1))
    }
    #[cfg(numa_sim)]
    {
        Some((numa_sim::current_node(), numa_sim::node_count()))
    }
    #[cfg(not(any(loom, numa_sim)))]
    {
        None
    }
}

/// The cache (L3) domain where a modelled platform says the calling thread runs:
/// `Some((domain, domain_count))` under loom (domain 0 of 1) and under the simulator (the simulated
/// core's L3 domain, numbered machine-wide node by node); `None` on real hardware.
#[inline(always)]
pub(crate) fn modelled_domain() -> Option<(usize, usize)> {
    #[cfg(loom)]
    {
        Some((0, 1))
    }
    #[cfg(numa_sim)]
    {
        Some((numa_sim::current_domain(), numa_sim::domain_count()))
    }
    #[cfg(not(any(loom, numa_sim)))]
    {
        None
    }
}

/// How many CPUs a modelled platform has: `Some(2)` under loom, the simulated machine's hardware
/// threads under the simulator (inside a simulation); `None` on real hardware.
#[inline(always)]
pub(crate) fn modelled_cpus() -> Option<usize> {
    #[cfg(loom)]
    {
        Some(2)
    }
    #[cfg(numa_sim)]
    {
        numa_sim::cpu_count()
    }
    #[cfg(not(any(loom, numa_sim)))]
    {
        None
    }
}

/// A seed for the calling thread's cheap pseudo-random choices (CNA's shuffle reduction): any
/// non-zero value that differs between threads. On real threads, the address of a thread-local;
/// under the simulator, a value derived from the simulation's seed and the simulated thread, so
/// that runs repeat exactly.
#[inline]
pub(crate) fn thread_seed(thread_local_address: usize) -> u32 {
    #[cfg(numa_sim)]
    let seed = {
        let _ = thread_local_address;
        numa_sim::thread_seed() as u32
    };
    #[cfg(not(numa_sim))]
    let seed = thread_local_address as u32;
    seed | 1
}

/// The next draw of a per-thread xorshift generator whose state is `state` (a thread-local
/// cell holding 0 until first use, when [`thread_seed`] seeds it from the cell's address).
#[inline]
pub(crate) fn xorshift_next(state: &core::cell::Cell<u32>) -> u32 {
    let mut x = state.get();
    if x == 0 {
        // First use on this thread.
        x = thread_seed(core::ptr::from_ref(state).addr());
    }
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    state.set(x);
    x
}

/// Where an acquisition went, and who slept: what `numasim --paths` reports per run. Counted by
/// the simulator only (free there: no virtual time, no scheduling point); nothing on real
/// threads or under loom.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathEvent {
    /// Taken by the one-CAS fast path: an uncontended lock, or one found free before the queue
    /// head took it (the last holder again, or another awake thread taking its turn).
    Fast = 0,
    /// Taken by an arriving thread's stealing spin, without queueing.
    Steal = 1,
    /// Taken after waiting in the lock's queue.
    Queued = 2,
    /// The queue head's spin ran out and it went to sleep on the lock word (it returns at once
    /// if the word changed just before).
    HeadPark = 3,
    /// A waiter behind the head went to sleep on its queue node, likewise.
    WaiterPark = 4,
}

impl PathEvent {
    /// Every event, in slot order.
    pub const ALL: [PathEvent; 5] = [
        PathEvent::Fast,
        PathEvent::Steal,
        PathEvent::Queued,
        PathEvent::HeadPark,
        PathEvent::WaiterPark,
    ];
}

/// Counts `event` (see [`PathEvent`]).
#[inline(always)]
pub(crate) fn note(event: PathEvent) {
    #[cfg(numa_sim)]
    numa_sim::tally(event as usize);
    #[cfg(not(numa_sim))]
    let _ = event;
}

#[cfg(loom)]
#[doc(hidden)]
pub mod loom_probe {
    //! Counts of protocol paths taken across the executions of loom models, so that a model
    //! can check it reaches the path it is written for (not on real threads or in numa_sim).

    /// A probe: `$note()` counts one pass (crate-internal), `$take()` returns the passes since
    /// the last call and restarts the count (for the models). Also used by the rwlock's table
    /// (`raw::rwlock::table::probe`).
    macro_rules! probe {
        ($(#[$doc:meta])* $count:ident, $note:ident, $take:ident) => {
            static $count: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

            $(#[$doc])*
            pub(crate) fn $note() {
                $count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }

            /// The passes counted since the last call; restarts the count.
            pub fn $take() -> u64 {
                $count.swap(0, std::sync::atomic::Ordering::Relaxed)
            }
        };
    }
    pub(crate) use probe;

    probe!(
        /// A queue head took a lock handed to it (`HANDED`) with a plain store.
        HANDED_STORES,
        handed_store,
        take_handed_stores
    );
    probe!(
        /// An unlock found a deferred handoff (proxy bits) in its `fetch_sub`'s result and made
        /// it before freeing the lock.
        DEFERRED_RELEASES,
        deferred_release,
        take_deferred_releases
    );
    probe!(
        /// A new queue head marked its successor before its first look at the lock (`premark`).
        PREMARKS,
        premarked,
        take_premarks
    );
    probe!(
        /// A holder made its marked successor head with stealing on, without reserving the lock
        /// for it (open, or `LOCAL` to its node).
        UNRESERVED_HANDOFFS,
        unreserved_handoff,
        take_unreserved_handoffs
    );
    probe!(
        /// A marking queue head found the lock busy and left it open to stealers, its re-take
        /// window (`tunables::retake_window`) not over yet.
        LEFT_OPEN_IN_WINDOW,
        left_open_in_window,
        take_left_open_in_window
    );
    probe!(
        /// A marking queue head with nobody queued behind it found the lock busy and left it
        /// open to stealers, its lone re-take window (`tunables::lone_retake_window`) not over
        /// yet.
        LEFT_OPEN_ALONE,
        left_open_alone,
        take_left_open_alone
    );
    probe!(
        /// A queue head within its lone re-take window left the busy lock open and spaced its
        /// next look (`wait::LONE_LOOK_GAP_NS`).
        LONE_LOOKS_SPACED,
        lone_looks_spaced,
        take_lone_looks_spaced
    );
    probe!(
        /// A queue head within its lone re-take window found the lock free and left it, for
        /// one look, to the thread that released it.
        FREE_LOCKS_HELD_OFF,
        free_lock_held_off,
        take_free_locks_held_off
    );
    probe!(
        /// A queue head's lone re-take window closed (with loom's clock standing still: a
        /// thread queued behind it).
        LONE_WINDOW_CLOSED,
        lone_window_closed,
        take_lone_window_closed
    );
    probe!(
        /// An arrival of the node a `LOCAL` reservation names took the free lock.
        LOCAL_STEALS,
        local_steal,
        take_local_steals
    );
    probe!(
        /// An arrival found the lock free with waiters queued and left it to the queue's head.
        FREE_LOCKS_LEFT,
        free_lock_left,
        take_free_locks_left
    );
    probe!(
        /// A condition variable's notify woke a waiter that slept in its list.
        CV_WAKES,
        cv_wake,
        take_cv_wakes
    );
    probe!(
        /// `notify_all` woke a sleeper under the list lock (its batch was full).
        CV_WAKES_UNDER_LOCK,
        cv_wake_under_lock,
        take_cv_wakes_under_lock
    );
    probe!(
        /// A timed waiter's deadline passed, and a notify had already taken it off the list.
        CV_NOTIFIED_AT_DEADLINE,
        cv_notified_at_deadline,
        take_cv_notified_at_deadline
    );
    probe!(
        /// A `delegate` holder ran a waiter's published closure instead of making it head.
        SERVED,
        served,
        take_served
    );
    probe!(
        /// A closure a `delegate` holder ran for a waiter panicked (caught, for its caller).
        SERVED_PANICS,
        served_panic,
        take_served_panics
    );
    probe!(
        /// A `delegate` holder stopped serving at its bound (count or time).
        BATCH_BOUNDS,
        batch_bound,
        take_batch_bounds
    );
    probe!(
        /// A `delegate` holder made its node's last waiter head instead of serving it, since
        /// another node waited (HqMutex keeps the node's turn).
        KEPT_TURNS,
        kept_turn,
        take_kept_turns
    );
    probe!(
        /// A `delegate` holder served a waiter of HqMutex's flat FIFO and handed the payload it
        /// carried to the next head behind it.
        FLAT_PAYLOADS_PASSED,
        flat_payload_passed,
        take_flat_payloads_passed
    );
}

#[cfg(loom)]
#[doc(hidden)]
pub mod loom_clock {
    //! The clock seen by loom models (see [`super::now_ns`]).
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    static NOW: AtomicU64 = AtomicU64::new(0);
    static STEP: AtomicU64 = AtomicU64::new(0);

    /// Restarts the clock at 0; each later reading advances it by `step` nanoseconds.
    pub fn reset(step: u64) {
        NOW.store(0, Relaxed);
        STEP.store(step, Relaxed);
    }

    pub(crate) fn read() -> u64 {
        NOW.fetch_add(STEP.load(Relaxed), Relaxed)
    }
}
