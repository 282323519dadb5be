//! A deterministic virtual-time simulator of multi-socket machines that runs real concurrent
//! code unchanged, the way loom does.
//!
//! Code under test takes its atomics, thread-locals, spin hint, clock, futex and topology from
//! this crate (usually through a `cfg` switch: `numa_locks` does it in `src/sync/` under
//! `--cfg numa_sim`). Inside a simulation:
//!
//! - every atomic access is costed by a per-line coherence model of the machine ([`Machine`]:
//!   latency classes SMT / L3 / node / socket / remote, memory, serialized transfers of a hot
//!   line) and happens at its completion time in **virtual time**;
//! - [shuttle](https://docs.rs/shuttle) runs the simulated threads one at a time, always the one
//!   with the smallest virtual clock ([`Simulation`]), or at random ([`check_random`],
//!   [`check_pct`]) to test for concurrency bugs;
//! - a spin loop that keeps re-reading lines it holds is compressed into one sleep until a line
//!   is written or its [`spin_deadline`] passes, so spinning is cheap to simulate;
//! - [`futex_wait`] / [`futex_wake`] sleep and wake in virtual time with the machine's syscall
//!   costs and wake-up latency; a state where everyone waits for ever is reported as a
//!   deadlock / lost wake-up.
//!
//! Outside a simulation every function here is the plain platform operation, so code built
//! against this crate also runs on real threads; but the futex, which this crate does not
//! emulate: outside a simulation [`futex_wait`] returns at once and [`futex_wake`] does
//! nothing. Code that sleeps on real threads checks [`in_simulation`] and calls its own
//! platform futex otherwise (numa_locks does).
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::Ordering::{Acquire, Release};
//! use numa_sim::{Machine, Simulation, atomic::AtomicU32, thread};
//!
//! // One flag handed across sockets and back: two transfers each way (read miss, then the
//! // upgrade that invalidates the other copy).
//! let machine = Machine::by_name("x5-4").unwrap();
//! let (a, b) = machine.pair_of_class(numa_sim::LatencyClass::OtherSocket).unwrap();
//! let flag = Arc::new(AtomicU32::new(0));
//! let f = flag.clone();
//! let report = Simulation::new(machine).jitter(0.0).run(move || {
//!     let f2 = f.clone();
//!     let pong = thread::spawn_on(b, move || {
//!         numa_sim::spin_deadline(u64::MAX); // a wait loop without a time bound
//!         while f2.load(Acquire) != 1 {
//!             numa_sim::pause();
//!         }
//!         f2.store(2, Release);
//!     });
//!     let ping = thread::spawn_on(a, {
//!         let f = f.clone();
//!         move || {
//!             f.store(1, Release);
//!             numa_sim::spin_deadline(u64::MAX);
//!             while f.load(Acquire) != 2 {
//!                 numa_sim::pause();
//!             }
//!         }
//!     });
//!     ping.join();
//!     pong.join();
//! });
//! assert!(report.virtual_end_ns > 4 * machine.costs.other_socket / 1000);
//! ```

#![warn(missing_docs)]

pub mod atomic;
mod cache;
mod engine;
mod harness;
mod host;
mod local;
mod machine;
mod scheduler;
pub mod thread;

pub use engine::{Access, Kind as AccessKind};
pub use harness::{
    RandomReport, RunReport, Simulation, StoreForwarding, check_pct, check_random, replay,
};
pub use local::{AccessError, LocalKey};
pub use machine::{
    Costs, LatencyClass, MAX_HW_THREADS, Machine, Place, Ps, TooManyThreads, UnknownMachine,
    linux_placement, linux_v5_12_placement, packed_placement, placement,
};

use engine::{Kind, Mode};
use shuttle_engine::runtime::thread::switch;

#[doc(hidden)]
pub mod __private {
    pub use shuttle;
}

/// One iteration of a busy-wait loop: the spin-loop hint (`pause` on x86, `yield` on Arm).
///
/// In a virtual-time simulation it costs the machine's `pause`. If every operation since the
/// previous `pause` was a load that hit the caller's cache (and at least one line was read),
/// the next iteration would read the same values and do the same thing. If the loop declared
/// its time bound with [`spin_deadline`], the thread then **sleeps** until another thread
/// writes one of those lines (it resumes at that write's completion time and re-runs its loop)
/// or until the deadline, whichever comes first: one simulated step instead of thousands.
/// Otherwise (no declaration, a deadline that has passed, or one made before the thread's last
/// write to memory) the iterations run as written, so a loop bounded by an iteration count or
/// by a clock it reads itself ends exactly where it would.
///
/// In randomized mode it is a yield hint to shuttle's scheduler; outside a simulation,
/// `std::hint::spin_loop()`.
pub fn pause() {
    let Some(cell) = engine::active() else {
        std::hint::spin_loop();
        return;
    };
    let mode = cell.borrow().mode;
    match mode {
        Mode::VirtualTime => {
            let decision = cell.borrow_mut().pause();
            match decision {
                engine::Pause::Go => {}
                engine::Pause::Sleep => {
                    switch();
                    cell.borrow_mut().end_spin_sleep();
                }
                engine::Pause::Runaway(message) => panic!("{message}"),
            }
        }
        Mode::Randomized => {
            {
                let mut e = cell.borrow_mut();
                let cost = e.machine().costs.pause;
                e.charge(cost);
            }
            shuttle::thread::yield_now();
        }
    }
}

/// `sched_yield`: costs the machine's `yield` and is a scheduling point.
pub fn yield_now() {
    let Some(cell) = engine::active() else {
        std::thread::yield_now();
        return;
    };
    let mode = {
        let mut e = cell.borrow_mut();
        // A system call: the thread's buffered stores commit first.
        e.drain_store_buffer();
        let cost = e.machine().costs.yield_;
        e.charge(cost);
        e.mode
    };
    match mode {
        Mode::VirtualTime => engine::sync(cell),
        Mode::Randomized => shuttle::thread::yield_now(),
    }
}

/// The calling simulated thread's virtual clock, ns (it costs the machine's `clock_read`).
/// Outside a simulation, monotonic nanoseconds since the first call.
pub fn now_ns() -> u64 {
    match engine::active() {
        Some(cell) => cell.borrow_mut().now_ns(),
        None => host::now_ns(),
    }
}

/// The calling simulated thread's virtual clock, ns, read for free: no cost, no scheduling
/// point, not part of any spin iteration. For harnesses that must not perturb what they
/// measure (a worker that checks whether its run is over between two acquisitions); code under
/// test reads the clock with [`now_ns`], which costs what a clock read costs. Outside a
/// simulation, the host clock of [`now_ns`].
///
/// ```
/// use numa_sim::{Machine, Simulation, thread};
///
/// Simulation::new(Machine::by_name("x5-4").unwrap()).run(|| {
///     let t = thread::spawn_on(0, || {
///         let before = numa_sim::clock_ns();
///         numa_sim::work(100);
///         numa_sim::clock_ns() - before
///     });
///     assert_eq!(t.join(), 100);
/// });
/// ```
pub fn clock_ns() -> u64 {
    match engine::active() {
        Some(cell) => {
            let e = cell.borrow();
            e.tasks[e.current].clock / 1000
        }
        None => host::now_ns(),
    }
}

/// "The spin loop I am starting waits for what it reads to change, and gives up at
/// `deadline_ns`" (on the [`now_ns`] clock; `u64::MAX`: never). Lets [`pause`] compress the
/// loop into sleeps. Free, and a no-op outside virtual-time simulations.
///
/// Call it at the start of each wait loop (numa_locks does, when it makes a spin budget). The
/// declaration covers the loop until the deadline passes, until the next declaration, or until
/// the thread writes to memory (a store or read-modify-write, a failed CAS included): a write
/// means the thread has left that loop, or changes what the loop is waiting for. A loop that
/// has no deadline but waits only for a change (a test-and-test-and-set spin, say) declares
/// `u64::MAX`.
///
/// ```
/// use std::sync::atomic::Ordering::Acquire;
///
/// fn wait_until_set(flag: &numa_sim::atomic::AtomicBool) {
///     numa_sim::spin_deadline(u64::MAX);
///     while !flag.load(Acquire) {
///         numa_sim::pause();
///     }
/// }
/// wait_until_set(&numa_sim::atomic::AtomicBool::new(true));
/// ```
pub fn spin_deadline(deadline_ns: u64) {
    if let Some(cell) = engine::active() {
        let mut e = cell.borrow_mut();
        if e.mode == Mode::VirtualTime {
            e.spin_deadline(deadline_ns);
        }
    }
}

/// Sleeps while `*word == expected` (checked atomically with going to sleep), until a
/// [`futex_wake`] on `word` or, if given, until the clock passes `deadline_ns`. May return
/// spuriously.
///
/// Simulated: it costs the machine's `syscall`, then loads `word` (a simulated access); if the
/// value is no longer `expected` it returns (as Linux does after its check); otherwise it costs
/// the rest of the machine's `futex_wait` and the thread parks (FIFO per address) until woken
/// (it then runs `wake_latency` after the wake) or until its deadline.
///
/// Outside a simulation it returns at once (a spurious return): this crate emulates no real
/// futex, see the crate doc.
pub fn futex_wait(word: &atomic::AtomicU32, expected: u32, deadline_ns: Option<u64>) {
    let Some(cell) = engine::active() else {
        // Outside a simulation: a spurious return, which the contract allows (see the crate
        // doc: the caller's own platform futex sleeps on real threads).
        return;
    };
    let addr = word as *const atomic::AtomicU32 as usize;
    let mode = {
        let mut e = cell.borrow_mut();
        // A system call: the thread's buffered stores commit first.
        e.drain_store_buffer();
        // Entry and the bucket lookup; Linux checks the word before it sleeps
        // (`futex_wait_setup`), so a failed check costs no more than this.
        let cost = e.machine().costs.syscall;
        e.charge(cost);
        e.mode
    };
    if word.load(std::sync::atomic::Ordering::SeqCst) != expected {
        return;
    }
    {
        // The check passed: the switch away.
        let mut e = cell.borrow_mut();
        let cost = e
            .machine()
            .costs
            .futex_wait
            .saturating_sub(e.machine().costs.syscall);
        e.charge(cost);
    }
    // No scheduling point since the load was performed: the check and the park are atomic.
    match mode {
        Mode::VirtualTime => {
            {
                let mut e = cell.borrow_mut();
                if e.stopped {
                    return;
                }
                e.park(addr, deadline_ns);
            }
            switch();
            cell.borrow_mut().unpark_self(addr);
        }
        Mode::Randomized => {
            cell.borrow_mut().park(addr, deadline_ns);
            if deadline_ns.is_some() {
                // A timed wait: one scheduling point, then back with the clock at the deadline
                // unless someone woke us.
                switch();
                cell.borrow_mut().unpark_self(addr);
                return;
            }
            while !cell.borrow().woken() {
                shuttle::thread::park();
            }
            cell.borrow_mut().unpark_self(addr);
        }
    }
}

/// Wakes up to `count` threads sleeping in [`futex_wait`] on `word` (oldest first). The
/// address is not dereferenced. Simulated: the waker pays the machine's `futex_wake` if it woke
/// someone, its `syscall` if nobody slept on the word; each woken thread runs `wake_latency`
/// after the wake. Outside a simulation it does nothing.
pub fn futex_wake(word: *const atomic::AtomicU32, count: u32) {
    let Some(cell) = engine::active() else {
        // Outside a simulation nobody sleeps in this crate's futex_wait.
        return;
    };
    // A system call: the waker's buffered stores commit first.
    cell.borrow_mut().drain_store_buffer();
    let mode = cell.borrow().mode;
    if mode == Mode::VirtualTime {
        // The wake is an effect at the waker's time: be the earliest task first.
        engine::sync(cell);
    }
    let woken = cell.borrow_mut().futex_wake(word as usize, count);
    if mode == Mode::Randomized {
        for thread in woken {
            thread.unpark();
        }
    }
}

/// How many events [`tally`] can tell apart.
pub const TALLY_SLOTS: usize = 16;

/// Counts one event of kind `slot` (below [`TALLY_SLOTS`]; the caller decides what each slot
/// means) for the run's [`RunReport::tallies`](crate::RunReport::tallies). Free: it costs no
/// virtual time and is no scheduling point, so counting never changes what is measured. Does
/// nothing outside a simulation.
///
/// # Panics
///
/// If `slot` is not below [`TALLY_SLOTS`].
#[inline]
pub fn tally(slot: usize) {
    assert!(
        slot < TALLY_SLOTS,
        "numa_sim::tally: slot {slot} is not below {TALLY_SLOTS}"
    );
    if let Some(cell) = engine::active() {
        cell.borrow_mut().counters.tallies[slot] += 1;
    }
}

/// Whether the caller runs inside a simulation (as a simulated thread or the harness) that has
/// not ended.
///
/// For code that keeps process-wide state which simulations running at the same time on other
/// OS threads must not share (numa_locks' queue-node free list, for example): such state can be
/// kept per OS thread while this is `true`, because a simulation runs entirely on the OS thread
/// that started it.
pub fn in_simulation() -> bool {
    engine::active().is_some()
}

/// The NUMA node of the hardware thread the calling simulated thread is pinned to (0 for the
/// harness, and outside a simulation).
pub fn current_node() -> usize {
    on_pinned_hw_thread(Machine::node_of)
}

/// `answer(machine, hw)` for the hardware thread `hw` the calling simulated thread is pinned to;
/// 0 for the harness, and outside a simulation.
fn on_pinned_hw_thread(answer: impl FnOnce(&Machine, usize) -> usize) -> usize {
    let Some(cell) = engine::context() else {
        return 0;
    };
    let e = cell.borrow();
    e.tasks[e.current]
        .hw
        .map_or(0, |hw| answer(e.machine(), hw))
}

/// The simulated machine's NUMA node count (1 outside a simulation).
pub fn node_count() -> usize {
    match engine::context() {
        Some(cell) => cell.borrow().machine().node_count(),
        None => 1,
    }
}

/// The cache (L3) domain of the hardware thread the calling simulated thread is pinned to, as
/// an operating system would report it ([`Machine::domain_of`]: numbered machine-wide, node by
/// node, so a node's domains are contiguous); 0 for the harness, and outside a simulation.
///
/// ```
/// use numa_sim::{Machine, Simulation, thread};
///
/// let m = Machine::by_name("epyc-2s").unwrap();
/// Simulation::new(m).run(|| {
///     // Hardware thread 16 is the first of socket 0's second CCX.
///     let t = thread::spawn_on(16, || (numa_sim::current_node(), numa_sim::current_domain()));
///     assert_eq!(t.join(), (0, 1));
///     assert_eq!(numa_sim::domain_count(), 12);
/// });
/// assert_eq!(numa_sim::current_domain(), 0);
/// ```
pub fn current_domain() -> usize {
    on_pinned_hw_thread(Machine::domain_of)
}

/// The simulated machine's cache (L3) domain count ([`Machine::domain_count`]; 1 outside a
/// simulation).
pub fn domain_count() -> usize {
    match engine::context() {
        Some(cell) => cell.borrow().machine().domain_count(),
        None => 1,
    }
}

/// The simulated machine's hardware threads, the CPUs an operating system would report
/// (`None` outside a simulation).
pub fn cpu_count() -> Option<usize> {
    engine::context().map(|cell| cell.borrow().machine().hw_threads())
}

/// The hardware thread the calling simulated thread is pinned to (`None` for the harness and
/// outside a simulation).
pub fn current_hw_thread() -> Option<usize> {
    let cell = engine::context()?;
    let e = cell.borrow();
    e.tasks[e.current].hw
}

/// A seed for the calling thread's pseudo-random choices: derived from the simulation's seed
/// and the simulated thread, so runs repeat exactly; never 0. Outside a simulation, a value
/// that differs between OS threads.
pub fn thread_seed() -> u64 {
    match engine::context() {
        Some(cell) => cell.borrow().thread_seed(),
        None => host::thread_seed(),
    }
}

/// Models the writes of a critical section to the lines holding `addrs` (the protected data):
/// one write per line, all issued together, so independent misses overlap as in an
/// out-of-order core; the caller's clock becomes the latest completion. The memory itself is
/// not touched. A no-op outside a simulation.
pub fn touch(addrs: &[*const u8]) {
    touch_batch(addrs, Kind::Store);
}

/// Like [`touch`], with reads.
pub fn touch_read(addrs: &[*const u8]) {
    touch_batch(addrs, Kind::Load);
}

fn touch_batch(addrs: &[*const u8], kind: Kind) {
    let Some(cell) = engine::active() else {
        return;
    };
    let mode = cell.borrow().mode;
    match mode {
        Mode::VirtualTime => {
            cell.borrow_mut().make_ready(kind, addrs.len());
            engine::sync(cell);
            cell.borrow_mut().reserve_batch(addrs, kind);
            engine::sync(cell);
        }
        Mode::Randomized => {
            cell.borrow_mut().reserve_batch(addrs, kind);
            switch();
        }
    }
}

/// `n` core cycles of computation on the machine's clock (`Costs::cycle`): straight-line code
/// between simulated accesses, counted from the instructions' documented latencies. A no-op
/// outside a simulation.
pub fn cycles(n: u64) {
    if let Some(cell) = engine::active() {
        let mut e = cell.borrow_mut();
        let cost = e.machine().costs.cycle.saturating_mul(n);
        e.charge(cost);
    }
}

/// One 64-bit integer division (`Costs::div64`): a `%` or `/` by a value known only at run
/// time. A no-op outside a simulation.
pub fn div64() {
    if let Some(cell) = engine::active() {
        let mut e = cell.borrow_mut();
        let cost = e.machine().costs.div64;
        e.charge(cost);
    }
}

/// The kernel's `prefetchw(addr)` on the simulated machine: a prefetch of `addr`'s line for
/// writing where the CPU has one ([`Machine::write_prefetch`]), for reading where it has not.
/// The request goes out at once (after the scheduling point of an access) and the thread goes
/// on after the instruction's issue; its own accesses to the line that hit wait for the fill.
/// A no-op outside a simulation and on a line the thread already holds as it needs.
pub fn kernel_prefetchw(addr: *const u8) {
    let Some(cell) = engine::active() else {
        return;
    };
    if cell.borrow().mode == Mode::Randomized {
        return;
    }
    engine::sync(cell);
    let mut e = cell.borrow_mut();
    let write = e.machine().write_prefetch;
    e.prefetch(addr as usize, write);
}

/// One indirect call in kernel code, beyond what a predicted call costs
/// (`Costs::kernel_indirect_call`: the retpoline where the kernel uses one). For models of kernel
/// code that call through function pointers; a no-op outside a simulation.
pub fn kernel_indirect_call() {
    if let Some(cell) = engine::active() {
        let mut e = cell.borrow_mut();
        let cost = e.machine().costs.kernel_indirect_call;
        e.charge(cost);
    }
}

/// Local computation: advances the caller's clock by `ns` (no memory traffic). A no-op outside
/// a simulation.
pub fn work(ns: u64) {
    if let Some(cell) = engine::active() {
        cell.borrow_mut().charge(ns.saturating_mul(1000));
    }
}
