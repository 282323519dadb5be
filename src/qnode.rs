//! The per-thread queue node, its registry and its thread-local slot.
//!
//! A thread needs a queue node only while it waits inside `lock()` (see docs/DESIGN.md, "The
//! queue node"), so one node per thread serves every lock it takes, however deeply nested.
//!
//! Nodes are named by a 32-bit **index** rather than a pointer, so that a lock word can hold a
//! queue tail in 32 bits next to a 32-bit futex word (`RawMcs` and `RawCna` are 8 bytes). Index 0
//! means "no node". The registry hands out indices, owns the nodes and never frees them: an index
//! released by an exiting thread is reused by the next thread. A node's memory is therefore valid
//! for the whole life of the process, which makes late accesses (a waker's `unpark` on a node
//! whose owner has already left) harmless by construction.
//!
//! When the thread-local slot is unavailable (a lock taken in a thread-local destructor), the
//! thread borrows a spare index for the duration of the one `lock()` call.
//!
//! Because nodes are never freed, an index can also change hands. A timed waiter whose deadline
//! passes while it is queued marks its node `ABANDONED` and leaves it in the queue: the node now
//! belongs to the queue, and the thread takes a fresh index for its slot. Whoever later passes
//! headship over the abandoned node (see `raw`) returns its index to the registry
//! ([`recycle`]).

use std::cell::Cell;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU32, AtomicU64, Ordering, thread_local};

/// A waiter's queue node. Which fields a lock uses depends on the lock; all are reset by the
/// owner before it enqueues, and every field other than `status` is only written while the
/// writer is the queue head (or the owner before publishing the node).
pub(crate) struct QNode {
    /// The futex word this waiter sleeps on; see [`status`] for the state table.
    pub(crate) status: AtomicU32,
    /// The next waiter in the (main, local or secondary) queue, 0 if none yet.
    pub(crate) next: AtomicU32,
    /// The waiter's place (a locality hint, see [`place`]): its NUMA node and its cache (L3)
    /// domain.
    pub(crate) numa: AtomicU64,
    /// CNA, valid in the head of a secondary queue: the tail of that secondary queue.
    pub(crate) secondary_tail: AtomicU32,
    /// CNA, valid in the head of a secondary queue: when the secondary queue was started (ns).
    pub(crate) secondary_since: AtomicU64,
    /// HQ: the next representative in the lock's FIFO of NUMA nodes, 0 if none yet.
    pub(crate) fifo_next: AtomicU32,
    /// CNA proxies only (see [`take_proxy`]): 1 while the proxy stands in a lock's queue.
    pub(crate) proxy_busy: AtomicU32,
    /// HQ: where the waiter queued: 0 = directly in the node FIFO, `s + 1` = in the local queue
    /// of slot `s`. Lets whoever passes headship over an abandoned node leave its queues for it.
    pub(crate) hq_slot: AtomicU32,
    /// While the node waits in a condition variable's list: 1, or 2 once notified; 0 otherwise
    /// (guarded by that condition variable's list lock; see `raw/condvar.rs`).
    pub(crate) cv_queued: AtomicU32,
    /// The address of the closure a `delegate` caller published for the holder to run (a
    /// `delegate::Request` on its stack), 0 for a `lock()` caller. Written by the owner before
    /// the tail swap that publishes the node; cleared by whoever runs it, before the `DONE`
    /// status that releases the node (see `raw::delegate`).
    pub(crate) request: AtomicU64,
}

/// A waiter's place as [`QNode::numa`] holds it: its NUMA node in the low 32 bits and its cache
/// (L3) domain, a machine-wide index, above. Two waiters with equal places share an L3; with
/// equal [`place_node`]s, a NUMA node. Only a hint: ids beyond 32 bits are truncated, which may
/// cost locality, never correctness.
#[inline]
pub(crate) const fn place(node: usize, domain: usize) -> u64 {
    (node as u32 as u64) | (domain as u32 as u64) << 32
}

/// The NUMA node of a [`place`].
#[inline]
pub(crate) const fn place_node(place: u64) -> usize {
    place as u32 as usize
}

/// The cache (L3) domain of a [`place`].
#[inline]
pub(crate) const fn place_domain(place: u64) -> usize {
    (place >> 32) as usize
}

/// The calling thread's [`place`]: one topology lookup.
#[inline]
pub(crate) fn current_place() -> u64 {
    let here = crate::topology::current_locality();
    place(here.node, here.domain)
}

/// The node status word (`QNode::status`), the only word a non-head waiter sleeps on.
///
/// - `WAITING` (0): queued behind another waiter, spinning;
/// - `PARKED` (1): queued, asleep (or about to sleep) on this word: a change must `unpark`;
/// - `ABANDONED` (2): a timed waiter gave up: the node belongs to the queue, which skips it;
/// - `NEXT` (3): queued, marked by the queue head as the next head: spinning, and it neither
///   parks nor abandons until the head takes the mark back or makes it head;
/// - `HEAD | payload << 3`: this waiter is now the queue head; `payload` is lock-specific;
/// - `DONE` (`HEAD | 1`): a `delegate` waiter whose closure the holder ran: it leaves the queue
///   without the lock (its node is out of every queue) and takes its result.
///
/// Transitions: the owner writes `WAITING` before it publishes the node; the owner sets
/// `WAITING → PARKED` (CAS) before sleeping; the predecessor (or, for CNA and HQ, the head that
/// passes headship) swaps in `HEAD | payload` with release ordering and unparks if it saw `PARKED`;
/// the current head may pre-wake its successor with `PARKED → WAITING` plus an unpark, or mark
/// it with `WAITING | PARKED → NEXT` (CAS, plus an unpark from `PARKED`) and later take the mark
/// back with `NEXT → WAITING` (CAS). While a node is `NEXT` only the head that marked it writes
/// its status, so that head may make it head with a plain release store of `HEAD | payload`: no
/// read-modify-write on the handoff's path (`raw::mark_next`). A timed waiter whose deadline
/// passed sets `WAITING | PARKED → ABANDONED` (CAS, so exactly one of the swap and the
/// abandonment wins; never from `NEXT`) and never touches the node again; the thread that then
/// swaps `HEAD` in sees `ABANDONED`, owns the node, passes headship on from it and recycles it.
/// `HEAD` is never taken back. A holder that runs a waiter's published closure instead of making
/// it head (`raw::delegate::try_serve`) owns the node's place in the queue as it would own an
/// abandoned node's, passes headship on from it, and ends with one swap of `DONE` (Release; an
/// unpark if it saw `PARKED`), its last access to the node. The payload (29 bits) carries a
/// queue index or a counter: `HEAD` is a bit of its own, so "go with payload 0" differs from
/// every other state.
pub(crate) mod status {
    /// Queued, not head.
    pub(crate) const WAITING: u32 = 0;
    /// Queued and sleeping (or about to) on the status word.
    pub(crate) const PARKED: u32 = 1;
    /// Given up by a timed waiter; the queue skips and recycles it.
    pub(crate) const ABANDONED: u32 = 2;
    /// Marked by the queue head as the next head: spinning, committed not to park or abandon.
    pub(crate) const NEXT: u32 = 3;
    /// Head of the queue: may contend for the lock word.
    pub(crate) const HEAD: u32 = 4;
    /// A `delegate` waiter's closure ran: it leaves without the lock. `HEAD` with low bits that
    /// no `head_with` status has, so a waiter's wait for headship ends on it too.
    pub(crate) const DONE: u32 = HEAD | 1;
    /// Shift of the lock-specific payload that travels with `HEAD`.
    pub(crate) const PAYLOAD_SHIFT: u32 = 3;
    /// The largest payload.
    pub(crate) const PAYLOAD_MAX: u32 = u32::MAX >> PAYLOAD_SHIFT;

    /// The status that makes a waiter head, carrying `payload`.
    #[inline]
    pub(crate) const fn head_with(payload: u32) -> u32 {
        HEAD | (payload << PAYLOAD_SHIFT)
    }

    /// The payload of a `HEAD` status.
    #[inline]
    pub(crate) const fn payload(status: u32) -> u32 {
        status >> PAYLOAD_SHIFT
    }
}

impl QNode {
    fn new() -> Self {
        QNode {
            status: AtomicU32::new(status::WAITING),
            next: AtomicU32::new(0),
            numa: AtomicU64::new(0),
            secondary_tail: AtomicU32::new(0),
            secondary_since: AtomicU64::new(0),
            fifo_next: AtomicU32::new(0),
            proxy_busy: AtomicU32::new(0),
            hq_slot: AtomicU32::new(0),
            cv_queued: AtomicU32::new(0),
            request: AtomicU64::new(0),
        }
    }

    /// Resets the fields every lock relies on before the node is published by a tail swap.
    /// Relaxed: the publishing RMW on the tail (AcqRel) orders these stores before any other
    /// thread can learn the node's index.
    #[inline]
    pub(crate) fn reset(&self, numa: u64) {
        self.status.store(status::WAITING, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.fifo_next.store(0, Ordering::Relaxed);
        self.hq_slot.store(0, Ordering::Relaxed);
        self.numa.store(numa, Ordering::Relaxed);
        // The calling thread's published `delegate` closure, if this queueing is a delegation.
        self.request.store(pending(), Ordering::Relaxed);
    }

    /// The closure this node's waiter published (`delegate`), 0 for a `lock()` caller. Read by
    /// a thread that reached the node through the queue (and, for one it owns, still
    /// `recycle`s it). Relaxed: written by the owner before the tail swap that published the
    /// node, which the reader's Acquire loads of the queue's links order before this.
    #[inline]
    pub(crate) fn request(&self) -> u64 {
        self.request.load(Ordering::Relaxed)
    }
}

/// The node named by `index` (which must be non-zero and come from the registry).
///
/// Every index a thread dereferences was obtained through an acquire load or RMW of a word that
/// was written after the node's registration, so the registry's own publication is visible.
#[inline]
pub(crate) fn node(index: u32) -> &'static QNode {
    registry::node(index)
}

/// How a wait in a lock's queue ended, and what became of the waiter's node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Queued {
    /// The thread holds the lock; its node is out of every queue.
    Acquired,
    /// The deadline passed while the thread was queue head: it passed headship on and left,
    /// without the lock. Its node is out of every queue.
    GaveUp,
    /// The deadline passed while the thread waited behind others: it left its node in the queue
    /// marked `ABANDONED`. The node belongs to the queue now.
    Abandoned,
    /// A `delegate` waiter whose closure the holder ran (status `DONE`): it leaves without the
    /// lock. Its node is out of every queue.
    Served,
}

impl Queued {
    /// Whether the thread holds the lock.
    #[inline]
    pub(crate) fn acquired(self) -> bool {
        self == Queued::Acquired
    }
}

/// Runs `queued` with the calling thread's node index (its own, or a borrowed spare) and returns
/// how the wait ended; or runs `unqueued` in the one case where no node can be had (a million
/// threads alive at once), so that `lock()` never panics: the caller then waits without a queue
/// position (`Acquired` if it took the lock, `GaveUp` if its deadline passed).
///
/// If the wait abandoned the node, the thread's slot takes a fresh index (the old one now
/// belongs to the queue, which recycles it). A `delegate` holder may run other threads'
/// closures, which may take other locks, inside its own `lock()`; it does so only from
/// `make_head`, when its own node is already out of every queue, so they may reuse it.
#[inline]
pub(crate) fn with_node(
    queued: impl FnOnce(u32) -> Queued,
    unqueued: impl FnOnce() -> bool,
) -> Queued {
    thread_local! {
        static SLOT: Slot = Slot(Cell::new(registry::acquire()));
    }
    let unqueued = || {
        if unqueued() {
            Queued::Acquired
        } else {
            Queued::GaveUp
        }
    };
    match SLOT.try_with(|slot| slot.0.get()) {
        Ok(Some(index)) => {
            let outcome = queued(index);
            if outcome == Queued::Abandoned {
                // The destructor cannot have run: we are inside the thread's own code.
                let _ = SLOT.try_with(|slot| slot.0.set(registry::acquire()));
            }
            outcome
        }
        Ok(None) => unqueued(),
        Err(_) => {
            // The thread-local is being destroyed: borrow a spare for this one call. Unless the
            // wait abandons it, the node is unreachable by others when `queued` returns (the
            // protocols guarantee it before `lock()` returns), so it can go straight back.
            let spare = Slot(Cell::new(registry::acquire()));
            match spare.0.get() {
                Some(index) => {
                    let outcome = queued(index);
                    if outcome == Queued::Abandoned {
                        spare.0.set(None);
                    }
                    outcome
                }
                None => unqueued(),
            }
        }
    }
}

/// Lets go of a node whose place in a queue the caller owned and has passed headship on from
/// (after its last access to it): an abandoned node goes back to the registry (the `ABANDONED`
/// CAS, Release, and the caller's swap of `HEAD`, Acquire, order the abandoning thread's
/// accesses before any reuse); a served `delegate` waiter's node goes back to its waiter, with
/// `DONE` ([`release_served`]). A waiter that gave up never has a request: only `delegate`
/// publishes one, and it waits without a deadline.
pub(crate) fn recycle(index: u32) {
    let n = node(index);
    if n.request() != 0 {
        release_served(n);
    } else {
        registry::release(index);
    }
}

thread_local! {
    /// The request (`QNode::request`) the calling thread publishes in the next queue node it
    /// enqueues: set by `delegate` around its slow path, 0 otherwise.
    static PENDING: Cell<u64> = const { Cell::new(0) };
}

/// The request the calling thread publishes in the queue node it is about to enqueue
/// (`QNode::reset`): 0 outside `delegate`'s slow path.
#[inline]
fn pending() -> u64 {
    PENDING.try_with(Cell::get).unwrap_or(0)
}

/// Sets the request the calling thread publishes in its next queue node; returns the one it
/// replaces.
pub(crate) fn replace_pending(request: u64) -> u64 {
    PENDING.try_with(|p| p.replace(request)).unwrap_or(0)
}

/// Releases a served `delegate` waiter (`recycle` of a node with a request): its outcome is
/// stored, and the holder that ran its closure is done with the node's links. `request` is
/// cleared first (so the node reads as unpublished until its owner resets it); the swap of
/// `DONE` is the last access to the node.
fn release_served(n: &QNode) {
    // Relaxed: ordered before the owner's next use by the Release swap below.
    n.request.store(0, Ordering::Relaxed);
    // Release: pairs with the waiter's Acquire load of its status (`wait_for_head`): the
    // closure's outcome and effects happen before it returns. The waiter never waits with a
    // deadline, and only the holder writes its status while its place is the holder's, so it is
    // `WAITING` or `PARKED`.
    let old = n.status.swap(status::DONE, Ordering::Release);
    debug_assert!(old == status::WAITING || old == status::PARKED, "{old}");
    if old == status::PARKED {
        crate::wait::unpark(&n.status);
    }
}

/// Takes the calling thread's **proxy** node, if it is free: a second node per thread that a
/// CNA lock holder leaves standing in the queue in its place when it defers its handoff to
/// `unlock` (see `raw/cna.rs`). The holder itself then owns no node, as every lock requires.
///
/// The proxy is busy from this call until [`release_proxy`], which the unlocking thread (not
/// necessarily this one) calls when the proxy has left the queue. Returns `None` while it is
/// busy (a second deferred CNA lock held at the same time), in a thread-local destructor, or when
/// no node can be had.
pub(crate) fn take_proxy() -> Option<u32> {
    thread_local! {
        static PROXY: ProxySlot = ProxySlot(registry::acquire());
    }
    let index = PROXY.try_with(|slot| slot.0).ok().flatten()?;
    let proxy = node(index);
    // Acquire: pairs with the Release in `release_proxy`; the last user is done with it.
    if proxy.proxy_busy.load(Ordering::Acquire) != 0 {
        return None;
    }
    // Relaxed: only this thread sets the flag; the lock word publishes the proxy to its user.
    proxy.proxy_busy.store(1, Ordering::Relaxed);
    Some(index)
}

/// Returns a proxy taken by [`take_proxy`] to its owner thread.
pub(crate) fn release_proxy(index: u32) {
    // Release: our last accesses to the proxy happen before its owner reuses it.
    node(index).proxy_busy.store(0, Ordering::Release);
}

/// A thread's proxy index. On thread exit it goes back to the registry only if no lock still
/// uses it (a deferred CNA lock whose guard was moved to another thread, or forgotten); a proxy
/// still in use is left to that lock, which is at worst a leaked 128-byte node.
struct ProxySlot(Option<u32>);

impl Drop for ProxySlot {
    fn drop(&mut self) {
        // Under loom indices are never reused, and the main thread's slot is dropped after the
        // execution's registry is gone (see the loom registry).
        if cfg!(loom) {
            return;
        }
        if let Some(index) = self.0 {
            // Acquire: pairs with the Release in `release_proxy`.
            if node(index).proxy_busy.load(Ordering::Acquire) == 0 {
                registry::release(index);
            }
        }
    }
}

/// Owns one registry index (if one could be had); returns it on drop (thread exit).
struct Slot(Cell<Option<u32>>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(index) = self.0.get() {
            registry::release(index);
        }
    }
}

#[cfg(not(loom))]
mod registry {
    //! Nodes live in chunks of [`CHUNK`] that are allocated on demand and never freed. Index
    //! `i` (1-based) lives in chunk `(i - 1) / CHUNK`. Free indices are kept in a list behind a
    //! mutex: it is touched once per thread start and exit, never on a lock path.
    use super::{CachePadded, QNode};
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

    const CHUNK: usize = 256;
    /// 4096 chunks of 256 nodes: a million threads alive at once.
    const CHUNKS: usize = 4096;

    type Chunk = [CachePadded<QNode>; CHUNK];

    static TABLE: [AtomicPtr<Chunk>; CHUNKS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

    struct FreeList {
        free: Vec<u32>,
        /// The next index never handed out.
        fresh: u32,
    }

    /// The free list, behind a small test-and-set lock of our own rather than `std::sync::Mutex`:
    /// it is taken once per thread start and exit, never on a lock path, and being made of
    /// atomics compiled with the crate it is visible to ThreadSanitizer (std is not rebuilt with
    /// the sanitizer, so TSan cannot see std's mutex synchronize).
    struct FreeListLock {
        busy: AtomicBool,
        list: UnsafeCell<FreeList>,
    }

    // SAFETY: `list` is only accessed through `with_list`, under `busy`.
    unsafe impl Sync for FreeListLock {}

    static FREE: FreeListLock = FreeListLock {
        busy: AtomicBool::new(false),
        list: UnsafeCell::new(FreeList {
            free: Vec::new(),
            fresh: 1,
        }),
    };

    fn with_list<R>(f: impl FnOnce(&mut FreeList) -> R) -> R {
        // Acquire/Release: the list's contents pass from one holder to the next.
        while FREE
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        struct Release;
        impl Drop for Release {
            fn drop(&mut self) {
                FREE.busy.store(false, Ordering::Release);
            }
        }
        let _release = Release;
        // SAFETY: `busy` is held, so this is the only reference to the list.
        f(unsafe { &mut *FREE.list.get() })
    }

    /// A free index, or `None` when all `CHUNK * CHUNKS` are in use.
    pub(super) fn acquire() -> Option<u32> {
        #[cfg(numa_sim)]
        if let Some(index) = simulation::acquire() {
            return Some(index);
        }
        with_list(acquire_locked)
    }

    fn acquire_locked(list: &mut FreeList) -> Option<u32> {
        if let Some(index) = list.free.pop() {
            return Some(index);
        }
        let index = list.fresh;
        let slot = (index as usize - 1) / CHUNK;
        if slot >= CHUNKS {
            return None;
        }
        if (index as usize - 1).is_multiple_of(CHUNK) {
            let chunk: Box<Chunk> =
                Box::new(std::array::from_fn(|_| CachePadded::new(QNode::new())));
            // Release: pairs with the Acquire in `node`; the chunk's contents are initialized
            // before any thread can see the pointer.
            TABLE[slot].store(Box::into_raw(chunk), Ordering::Release);
        }
        list.fresh += 1;
        Some(index)
    }

    pub(super) fn release(index: u32) {
        #[cfg(numa_sim)]
        if simulation::release(index) {
            return;
        }
        with_list(|list| list.free.push(index));
    }

    /// Under `numa_sim`, indices released inside a simulation go to a free list of the OS
    /// thread that runs it (a simulation runs entirely on one OS thread), and acquisitions
    /// inside a simulation take from it first.
    ///
    /// Which node a thread gets matters to the simulated machine: a node that another simulated
    /// thread used earlier in the same simulation has its lines in that thread's cache, a node
    /// new to the simulation is in memory. With the process-wide list alone, simulations running
    /// at the same time on other OS threads (cargo runs tests in parallel) would take each
    /// other's released indices, and the same seed would not give the same figures. With this
    /// list, whether an acquisition reuses a node of the same simulation depends only on that
    /// simulation. The list goes back to the process-wide one when its OS thread exits.
    #[cfg(numa_sim)]
    mod simulation {
        use std::cell::RefCell;

        struct Local(Vec<u32>);

        impl Drop for Local {
            fn drop(&mut self) {
                for index in self.0.drain(..) {
                    super::with_list(|list| list.free.push(index));
                }
            }
        }

        std::thread_local! {
            static FREE: RefCell<Local> = const { RefCell::new(Local(Vec::new())) };
        }

        pub(super) fn acquire() -> Option<u32> {
            if !numa_sim::in_simulation() {
                return None;
            }
            FREE.try_with(|free| free.borrow_mut().0.pop())
                .ok()
                .flatten()
        }

        /// Returns `false` if the index must go to the process-wide list.
        pub(super) fn release(index: u32) -> bool {
            numa_sim::in_simulation()
                && FREE
                    .try_with(|free| free.borrow_mut().0.push(index))
                    .is_ok()
        }
    }

    #[inline]
    pub(super) fn node(index: u32) -> &'static QNode {
        let i = index as usize - 1;
        // Acquire: pairs with the Release in `acquire`.
        let chunk = TABLE[i / CHUNK].load(Ordering::Acquire);
        debug_assert!(!chunk.is_null());
        // SAFETY: `index` came from `acquire`, which published the chunk before handing the index
        // out; chunks are never freed, so the reference is valid for 'static.
        unsafe { &(*chunk)[i % CHUNK] }
    }
}

#[cfg(loom)]
mod registry {
    //! Under loom, nodes hold loom atomics, which belong to one model execution; the registry is
    //! therefore a per-execution `lazy_static`. Nodes are leaked (a few per execution).
    use super::{CachePadded, QNode};
    use std::sync::Mutex;

    struct Registry {
        nodes: Mutex<Vec<&'static CachePadded<QNode>>>,
    }

    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry { nodes: Mutex::new(Vec::new()) };
    }

    pub(super) fn acquire() -> Option<u32> {
        let mut nodes = REGISTRY.nodes.lock().unwrap();
        nodes.push(Box::leak(Box::new(CachePadded::new(QNode::new()))));
        Some(nodes.len() as u32)
    }

    /// Indices are not reused under loom: the main thread's slot is dropped after the
    /// execution's lazy statics are gone, and each execution starts a fresh registry anyway.
    pub(super) fn release(_index: u32) {}

    pub(super) fn node(index: u32) -> &'static QNode {
        REGISTRY.nodes.lock().unwrap()[index as usize - 1]
    }
}
