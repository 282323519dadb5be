//! Models of the seeds' own locks, written for the simulator from the published kernel code:
//!
//! - [`QSpinLock`] (`qspinlock`): the kernel's stock queued spinlock on x86-64 with fewer than
//!   16K CPUs (Linux `kernel/locking/qspinlock.c`, `mcs_spinlock.h`,
//!   `include/asm-generic/qspinlock.h`, `arch/x86/include/asm/qspinlock.h`);
//! - [`CnaKernel`] (`cna-kernel`): the same slow path with the CNA series' hooks (v15,
//!   `kernel/locking/qspinlock_cna.h`, as the openEuler, TencentOS and deepin kernels carry it):
//!   the secondary queue, ordered by the MCS head while it waits for the lock word; the 1 ms
//!   intra-node threshold after which the secondary queue is flushed; shuffle reduction (with
//!   no secondary queue the head skips the ordering with probability 127/128); the preferred
//!   node passed on with headship.
//!
//! They follow the code's words, transitions and waiting closely enough to cost the same memory
//! traffic; they are not that code. Neither ever parks, as kernel spinlocks do not. Left out:
//! paravirt hooks, the four per-CPU nodes for nested contexts (a simulated thread takes one
//! lock at a time, so only node 0 is used, and its nesting count, a hit on the thread's own
//! line, is not simulated), CNA's priority node for interrupt and RT contexts (simulated threads
//! are ordinary tasks). The new MCS head's `prefetchw(next)` is modelled with
//! [`numa_sim::kernel_prefetchw`]: a prefetch for writing, or for reading on a CPU without one
//! (Haswell: the `x5-4` and `e5-2690v3-2s` presets).
//!
//! # The lock word
//!
//! One 32-bit word, as `qspinlock.h` lays it out for `NR_CPUS < 16K`:
//!
//! | bits   | field     | written by                                                       |
//! |--------|-----------|------------------------------------------------------------------|
//! | 0–7    | `locked`  | byte stores: `set_locked` (the new holder), `unlock` (release)    |
//! | 8      | `pending` | `fetch_or` (a pending waiter), byte store (`clear_pending`)       |
//! | 16–31  | `tail`    | 16-bit `xchg` (an arriving waiter), CAS (the MCS head, on claim)   |
//!
//! `locked_pending` (bits 0–15) is written by one 16-bit store when a pending waiter takes the
//! lock. The model keeps the word in a `numa_sim` `AtomicU32` and makes the narrow accesses with
//! `store_masked` / `swap_masked`: costed as the byte or halfword access, performed as one
//! update of the word (one simulated thread runs at a time). The tail is the simulated thread's
//! index plus one, shifted to bit 16 (the kernel encodes `cpu + 1` and a nesting index there).
//!
//! # Slow path (`queued_spin_lock_slowpath`)
//!
//! 1. If the word reads `pending` only (a pending waiter is being handed the lock), re-read it
//!    up to `_Q_PENDING_LOOPS` (512 on x86) times.
//! 2. Anything beyond `locked` (a pending waiter or a tail): queue (step 4).
//! 3. Otherwise set `pending` (`fetch_or`); if someone else set pending or a tail meanwhile,
//!    undo (clear `pending` if we set it) and queue; else spin on `locked` until it is 0, then
//!    take the lock and clear `pending` in one 16-bit store.
//! 4. Queue: reset our node, try the lock once more (`queued_spin_trylock`: only on a word of
//!    0), swap our tail in (16-bit `xchg`); with a predecessor, link behind it and spin on our
//!    node's `locked` until it hands us the MCS lock.
//! 5. As MCS head: CNA's hook orders the queue while the lock is busy; then spin until neither
//!    `locked` nor `pending` is set.
//! 6. Claim: if we are still the tail, CAS the whole word to `locked` (CNA: or splice the
//!    secondary queue back as the tail); otherwise `set_locked` by a byte store, wait for our
//!    successor to link, and hand it the MCS lock with a release store to its `locked` (CNA:
//!    choose whom, and pass the secondary queue in that value).
//!
//! Unlock is a release byte store of 0 to `locked`.

use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crossbeam_utils::CachePadded;
use numa_sim::atomic::{AtomicU32, AtomicU64};

use crate::numasim::harness::{RunConfig, SimLock};
use crate::numasim::stutter;

const LOCKED_VAL: u32 = 1;
const LOCKED_MASK: u32 = 0xff;
const PENDING_VAL: u32 = 1 << 8;
const PENDING_MASK: u32 = 0xff << 8;
const LOCKED_PENDING_MASK: u32 = LOCKED_MASK | PENDING_MASK;
const TAIL_OFFSET: u32 = 16;
const TAIL_MASK: u32 = 0xffff << TAIL_OFFSET;
/// `_Q_PENDING_LOOPS` on x86: how often step 1 re-reads a word that shows a pending handover.
const PENDING_LOOPS: u32 = 1 << 9;

/// CNA's `start_time` value that tells `cna_lock_handoff` to flush the secondary queue.
const FLUSH_SECONDARY_QUEUE: u64 = 1;
/// `numa_spinlock_threshold_ns`: how long a secondary queue may wait before it is flushed, by
/// default (the series' default since v15, 1 ms; `numasim --cna-kernel-threshold-ns` sets it, as
/// the module parameter does: the v15 cover letter also publishes runs with 10 ms).
pub const DEFAULT_CNA_THRESHOLD_NS: u64 = 1_000_000;
/// `SHUFFLE_REDUCTION_PROB_ARG`: with no secondary queue, order the queue with probability
/// 1 / 2^7.
const SHUFFLE_REDUCTION_BITS: u32 = 7;

/// CNA v13's `intra_node_handoff_threshold`: `MSECS_TO_JIFFIES(10)`, the 10 ms default of the
/// series before v15, in jiffies of [`stutter::JIFFY_NS`] (`CONFIG_HZ=1000`, as the locktorture
/// stutter takes them).
const V13_THRESHOLD_JIFFIES: u64 = 10;
/// CNA v13's `partial_order` values (`enum { LOCAL_WAITER_FOUND, LOCAL_WAITER_NOT_FOUND,
/// FLUSH_SECONDARY_QUEUE }`).
const V13_LOCAL_WAITER_FOUND: u32 = 0;
const V13_LOCAL_WAITER_NOT_FOUND: u32 = 1;
const V13_FLUSH_SECONDARY_QUEUE: u32 = 2;

/// `numa_sim::tally` slot counting the waiters a CNA head moved to the secondary queue
/// (`cna_splice_next`); this crate's locks use the slots below it.
pub const TALLY_CNA_SPLICE: usize = 5;
/// `numa_sim::tally` slot counting the CNA heads that found the lock word busy at their first
/// look, so that ordering the queue could start.
pub const TALLY_CNA_BUSY_AT_FIRST_LOOK: usize = 6;
/// `numa_sim::tally` slot counting the CNA heads that took a free lock as the queue's tail
/// while a secondary queue waited, and so spliced it back as the main queue
/// (`cna_try_clear_tail`): each ends a stretch of ordered handoffs.
pub const TALLY_CNA_TAIL_FLUSH: usize = 7;
/// The first of the `numa_sim::tally` slots in which a CNA model counts the MCS handoffs its
/// heads make, by [`CnaPath`] and side: slot `TALLY_CNA_HANDOFFS + 2 * path + remote`, where
/// `remote` is 1 when the waiter handed the MCS lock runs on another node than the head.
pub const TALLY_CNA_HANDOFFS: usize = 8;

/// How a CNA queue head came to pass the MCS lock on (`numasim --paths`' `cna_*` columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnaPath {
    /// With no secondary queue, shuffle reduction's draw skipped the ordering: the handoff
    /// goes to the next waiter in arrival order, as the stock lock's does.
    Unordered = 0,
    /// The head would order, but found the lock word free at its first look: v15 orders only
    /// `while (LOCK_IS_BUSY(lock))`, so the next waiter in the main queue gets it.
    Free = 1,
    /// The head found the lock busy and ordered the queue while it waited.
    Ordered = 2,
    /// The head flushed the secondary queue to the front (its 1 ms threshold passed, or the
    /// main queue behind it was empty: `cna_try_clear_tail`).
    Flush = 3,
}

impl CnaPath {
    /// Every path, in slot order.
    pub const ALL: [CnaPath; 4] = [
        CnaPath::Unordered,
        CnaPath::Free,
        CnaPath::Ordered,
        CnaPath::Flush,
    ];

    /// The tally slot of a handoff on this path, to a waiter of another node or not.
    pub fn slot(self, remote: bool) -> usize {
        TALLY_CNA_HANDOFFS + 2 * self as usize + usize::from(remote)
    }
}

/// The tail encoding of simulated thread `me` (never 0 or 1, which CNA's `locked` values mean
/// "wait" and "go without a secondary queue").
fn encode_tail(me: usize) -> u32 {
    let me = u32::try_from(me).expect("numa_sim machines have at most 256 hardware threads");
    (me + 1) << TAIL_OFFSET
}

/// The thread whose tail encoding is `tail` (non-zero).
fn decode_tail(tail: u32) -> usize {
    ((tail >> TAIL_OFFSET) - 1) as usize
}

/// A thread's queue node (`struct qnode` / `struct cna_node`): per CPU in the kernel, per
/// simulated thread here, shared by every lock of a run, on a line of its own.
pub struct QNode {
    /// The successor's tail encoding, 0 for none (`mcs.next`).
    next: AtomicU32,
    /// 0 while waiting; 1 once the MCS lock is ours; CNA: or the tail encoding of the secondary
    /// queue we carry (`mcs.locked`).
    locked: AtomicU32,
    /// CNA: the NUMA node this waiter counts as (the preferred node, once a head passed it on).
    numa_node: AtomicU32,
    /// CNA: when this head's secondary queue was started (0: none; `FLUSH_SECONDARY_QUEUE`:
    /// flush it at the handoff). CNA v13: in jiffies.
    start_time: AtomicU64,
    /// CNA v13: what the head's look at the queue decided (`cn->partial_order`:
    /// [`V13_LOCAL_WAITER_FOUND`], [`V13_LOCAL_WAITER_NOT_FOUND`] or
    /// [`V13_FLUSH_SECONDARY_QUEUE`]).
    partial_order: AtomicU32,
    /// The node the thread ran on when it queued, for [`TALLY_CNA_HANDOFFS`] only: a host
    /// atomic, so that counting costs no simulated access.
    home: std::sync::atomic::AtomicU32,
}

/// Every thread's node, for all the locks of one run.
pub struct Nodes(Box<[CachePadded<QNode>]>);

impl Nodes {
    fn new(threads: usize) -> Self {
        Nodes(
            (0..threads)
                .map(|_| {
                    CachePadded::new(QNode {
                        next: AtomicU32::new(0),
                        locked: AtomicU32::new(0),
                        numa_node: AtomicU32::new(0),
                        start_time: AtomicU64::new(0),
                        partial_order: AtomicU32::new(0),
                        home: std::sync::atomic::AtomicU32::new(0),
                    })
                })
                .collect(),
        )
    }

    fn of(&self, me: usize) -> &QNode {
        &self.0[me]
    }

    fn by_tail(&self, tail: u32) -> &QNode {
        &self.0[decode_tail(tail)]
    }
}

/// The qspinlock slow path's hooks: the stock lock's (`__try_clear_tail`,
/// `__mcs_lock_handoff`, no `wait_head_or_lock`) or CNA's.
pub trait Policy: Send + Sync + 'static {
    /// The hooks of one lock, with the run's parameters.
    fn new(config: &RunConfig) -> Self;

    /// `cna_init_node`, when the node is about to be queued.
    fn init_node(_node: &QNode) {}

    /// `wait_head_or_lock`: runs once we are MCS head, before we wait for the lock word.
    fn wait_head_or_lock(&self, _lock: &AtomicU32, _nodes: &Nodes, _me: usize) {}

    /// `try_clear_tail`: we are the tail and the lock word is free (`val`): take it and leave
    /// an empty queue. `false` if the word changed (someone queued).
    fn try_clear_tail(&self, lock: &AtomicU32, val: u32, _nodes: &Nodes, _me: usize) -> bool {
        // atomic_try_cmpxchg_relaxed
        lock.compare_exchange(val, LOCKED_VAL, Relaxed, Relaxed)
            .is_ok()
    }

    /// `mcs_lock_handoff`: pass the MCS lock to our successor `next`.
    fn lock_handoff(&self, _nodes: &Nodes, _me: usize, next: &QNode) {
        // arch_mcs_lock_handoff: smp_store_release(&next->locked, 1)
        next.locked.store(1, Release);
    }
}

/// The stock qspinlock's slow path: no hooks.
pub struct Stock;

impl Policy for Stock {
    fn new(_config: &RunConfig) -> Self {
        Stock
    }
}

/// CNA's hooks (v15): with shuffle reduction (`SRO`, the series' patch 5/6, as the deepin and
/// openEuler kernels carry it) or without (the series' patches 1–4 and 6, the variant of the
/// cover letter's "w/o SRO" column).
pub struct Cna<const SRO: bool> {
    /// `numa_spinlock_threshold_ns`.
    threshold_ns: u64,
}

impl<const SRO: bool> Cna<SRO> {
    /// `cna_order_queue`: if our successor is of another node and has a successor of its own,
    /// move it to the secondary queue. Returns whether the successor is of our node.
    fn order_queue(nodes: &Nodes, me: usize) -> bool {
        let node = nodes.of(me);
        let next = node.next.load(Relaxed);
        if next == 0 {
            return false;
        }
        let numa = node.numa_node.load(Relaxed);
        let succ = nodes.by_tail(next);
        if succ.numa_node.load(Relaxed) == numa {
            return true;
        }
        let nnext = succ.next.load(Relaxed);
        if nnext != 0 {
            splice_next(nodes, node, next, nnext, local_clock);
        }
        false
    }
}

/// `cna_splice_next`: `next` leaves the main queue for the tail of the secondary queue, a
/// circular list whose tail encoding our `locked` carries; a new secondary queue's start is
/// `clock()` (v15: `local_clock()`; v13: `jiffies`, never 0).
fn splice_next(nodes: &Nodes, node: &QNode, next: u32, nnext: u32, clock: fn() -> u64) {
    numa_sim::tally(TALLY_CNA_SPLICE);
    node.next.store(nnext, Relaxed);
    let succ = nodes.by_tail(next);
    let locked = node.locked.load(Relaxed);
    if locked <= 1 {
        // Create the secondary queue.
        succ.next.store(next, Relaxed);
        node.start_time.store(clock(), Relaxed);
    } else {
        let tail_2nd = nodes.by_tail(locked);
        let head_2nd = tail_2nd.next.load(Relaxed);
        tail_2nd.next.store(next, Relaxed);
        succ.next.store(head_2nd, Relaxed);
    }
    node.locked.store(next, Relaxed);
}

/// `cna_splice_head`: the secondary queue goes to the head of the main queue. With a
/// successor `next`, the secondary tail links to it; without one, the secondary tail
/// becomes the lock's tail by CAS (`val` → its encoding, locked), restored if that fails.
/// Returns the new first waiter, or `None` when the CAS failed.
fn splice_head(
    lock: Option<(&AtomicU32, u32)>,
    nodes: &Nodes,
    node: &QNode,
    next: u32,
) -> Option<u32> {
    let tail_enc = node.locked.load(Relaxed);
    let tail_2nd = nodes.by_tail(tail_enc);
    let head_2nd = tail_2nd.next.load(Relaxed);
    if next != 0 {
        tail_2nd.next.store(next, Relaxed);
    } else {
        tail_2nd.next.store(0, Relaxed);
        let (word, val) = lock.expect("without a successor the lock word is given");
        // atomic_try_cmpxchg_release
        if word
            .compare_exchange(val, tail_enc | LOCKED_VAL, Release, Relaxed)
            .is_err()
        {
            tail_2nd.next.store(head_2nd, Relaxed);
            return None;
        }
    }
    Some(head_2nd)
}

/// A flush at the handoff (v13 and v15): the secondary queue goes first, then our successor;
/// returns the waiter that gets the MCS lock.
fn flush_target<'a>(nodes: &'a Nodes, node: &QNode) -> &'a QNode {
    let first = splice_head(None, nodes, node, node.next.load(Relaxed))
        .expect("a flush with a successor always splices");
    nodes.by_tail(first)
}

/// `cna_try_clear_tail` (v13 and v15): we are the tail and the lock word is free. With a
/// secondary queue, splice it back as the main queue and hand it the MCS lock; without one,
/// do what the stock lock does.
fn cna_try_clear_tail(lock: &AtomicU32, val: u32, nodes: &Nodes, me: usize) -> bool {
    let node = nodes.of(me);
    if node.locked.load(Relaxed) > 1 {
        return match splice_head(Some((lock, val)), nodes, node, 0) {
            Some(first) => {
                numa_sim::tally(TALLY_CNA_TAIL_FLUSH);
                let first = nodes.by_tail(first);
                count_handoff(CnaPath::Flush, node, first);
                first.locked.store(1, Release);
                true
            }
            None => false,
        };
    }
    Stock.try_clear_tail(lock, val, nodes, me)
}

impl<const SRO: bool> Policy for Cna<SRO> {
    fn new(config: &RunConfig) -> Self {
        Cna {
            threshold_ns: config.cna_kernel_threshold_ns,
        }
    }

    fn init_node(node: &QNode) {
        // numa_node = real_numa_node; start_time = 0 (the model's threads are pinned).
        let home = numa_sim::current_node() as u32;
        node.numa_node.store(home, Relaxed);
        node.start_time.store(0, Relaxed);
        node.home.store(home, Relaxed);
    }

    fn wait_head_or_lock(&self, lock: &AtomicU32, nodes: &Nodes, me: usize) {
        let node = nodes.of(me);
        if SRO && node.locked.load(Relaxed) <= 1 && probably(SHUFFLE_REDUCTION_BITS) {
            set_path(CnaPath::Unordered);
            return;
        }
        let start = node.start_time.load(Relaxed);
        if start == 0 || local_clock() <= start + self.threshold_ns {
            set_path(CnaPath::Free);
            // Sort the queue while the lock is busy: `while (LOCK_IS_BUSY(lock) &&
            // !cna_order_queue(node)) cpu_relax();`
            numa_sim::spin_deadline(u64::MAX);
            let mut first = true;
            while lock.load(Relaxed) & LOCKED_PENDING_MASK != 0 {
                if std::mem::take(&mut first) {
                    numa_sim::tally(TALLY_CNA_BUSY_AT_FIRST_LOOK);
                    set_path(CnaPath::Ordered);
                }
                if Self::order_queue(nodes, me) {
                    break;
                }
                numa_sim::pause();
            }
        } else {
            set_path(CnaPath::Flush);
            node.start_time.store(FLUSH_SECONDARY_QUEUE, Relaxed);
        }
    }

    fn try_clear_tail(&self, lock: &AtomicU32, val: u32, nodes: &Nodes, me: usize) -> bool {
        cna_try_clear_tail(lock, val, nodes, me)
    }

    fn lock_handoff(&self, nodes: &Nodes, me: usize, next: &QNode) {
        let node = nodes.of(me);
        let mut val = 1;
        let mut target = next;
        if node.start_time.load(Relaxed) != FLUSH_SECONDARY_QUEUE {
            let locked = node.locked.load(Relaxed);
            if locked > 1 {
                // Keep the secondary queue, pass the preferred node and the queue's age on.
                val = locked;
                target = nodes.by_tail(node.next.load(Relaxed));
                target
                    .numa_node
                    .store(node.numa_node.load(Relaxed), Relaxed);
                target
                    .start_time
                    .store(node.start_time.load(Relaxed), Relaxed);
            }
        } else {
            target = flush_target(nodes, node);
        }
        count_handoff(path(), node, target);
        target.locked.store(val, Release);
    }
}

/// CNA's hooks as v13 of the series has them (patches 3–6 of "[PATCH v13 0/6] Add
/// NUMA-awareness to qspinlock", 2020-12-23): the code of the v13 cover letter's locktorture
/// table (v5.10-rc7, with and without shuffle reduction). v13 orders differently from v15: the
/// MCS head looks at its successor once while it waits, whether or not the lock is busy,
/// moves it to the secondary queue if it is of another node and has a successor of its own,
/// and marks whichever waiter is then next as of the head's node (the preference passes on,
/// even to a waiter of another node); a head that had no successor at its look looks again
/// when it passes the MCS lock on. The secondary queue's age is kept in jiffies and flushed
/// after 10 ms (`MSECS_TO_JIFFIES(10)`). v15 (the series' last version, [`Cna`]) replaced
/// the single look by a scan `while (LOCK_IS_BUSY(lock))` and the jiffies by `local_clock()`
/// with a 1 ms default ("Changes from v14" in its cover letter).
pub struct CnaV13<const SRO: bool>;

impl<const SRO: bool> CnaV13<SRO> {
    /// v13's `cna_order_queue`: no successor: not found; a successor of another node with a
    /// successor of its own goes to the secondary queue, and the waiter now next inherits our
    /// node; found either way.
    fn order_queue(nodes: &Nodes, me: usize) -> u32 {
        let node = nodes.of(me);
        let mut next = node.next.load(Relaxed);
        if next == 0 {
            return V13_LOCAL_WAITER_NOT_FOUND;
        }
        let numa = node.numa_node.load(Relaxed);
        let succ = nodes.by_tail(next);
        if succ.numa_node.load(Relaxed) != numa {
            let nnext = succ.next.load(Relaxed);
            if nnext != 0 {
                splice_next(nodes, node, next, nnext, jiffies_nonzero);
                next = nnext;
            }
            nodes.by_tail(next).numa_node.store(numa, Relaxed);
        }
        V13_LOCAL_WAITER_FOUND
    }
}

impl<const SRO: bool> Policy for CnaV13<SRO> {
    fn new(_config: &RunConfig) -> Self {
        CnaV13
    }

    fn init_node(node: &QNode) {
        Cna::<SRO>::init_node(node);
    }

    fn wait_head_or_lock(&self, _lock: &AtomicU32, nodes: &Nodes, me: usize) {
        let node = nodes.of(me);
        let order = if SRO && node.locked.load(Relaxed) <= 1 && probably(SHUFFLE_REDUCTION_BITS) {
            set_path(CnaPath::Unordered);
            V13_LOCAL_WAITER_FOUND
        } else {
            let start = node.start_time.load(Relaxed);
            // !intra_node_threshold_reached: jiffies - (start_time + threshold) <= 0.
            if start == 0 || jiffies() <= start + V13_THRESHOLD_JIFFIES {
                set_path(CnaPath::Ordered);
                Self::order_queue(nodes, me)
            } else {
                set_path(CnaPath::Flush);
                V13_FLUSH_SECONDARY_QUEUE
            }
        };
        node.partial_order.store(order, Relaxed);
    }

    fn try_clear_tail(&self, lock: &AtomicU32, val: u32, nodes: &Nodes, me: usize) -> bool {
        cna_try_clear_tail(lock, val, nodes, me)
    }

    fn lock_handoff(&self, nodes: &Nodes, me: usize, _next: &QNode) {
        let node = nodes.of(me);
        let mut order = node.partial_order.load(Relaxed);
        if order == V13_LOCAL_WAITER_NOT_FOUND {
            // No successor at the look; there is one now.
            order = Self::order_queue(nodes, me);
        }
        let mut val = 1;
        let target = if order == V13_LOCAL_WAITER_FOUND {
            // Reload next: the look may have changed it.
            let target = nodes.by_tail(node.next.load(Relaxed));
            let locked = node.locked.load(Relaxed);
            if locked > 1 {
                // Keep the secondary queue and pass its age on.
                val = locked;
                target
                    .start_time
                    .store(node.start_time.load(Relaxed), Relaxed);
            }
            target
        } else {
            flush_target(nodes, node)
        };
        count_handoff(path(), node, target);
        target.locked.store(val, Release);
    }
}

/// The kernel's `jiffies` at `CONFIG_HZ=1000`: a load of a global that the timer interrupt
/// updates once a jiffy (an L1 hit in between: 4 cycles, Haswell's L1 latency).
fn jiffies() -> u64 {
    numa_sim::cycles(4);
    numa_sim::clock_ns() / stutter::JIFFY_NS
}

/// `cn->start_time = (s32)jiffies; if (!cn->start_time) cn->start_time = 1;` (v13's
/// `cna_splice_next`: 0 means "no secondary queue").
fn jiffies_nonzero() -> u64 {
    jiffies().max(1)
}

numa_sim::thread_local! {
    /// The path of this thread's latest turn as a CNA head (bookkeeping for the tallies).
    static PATH: std::cell::Cell<CnaPath> = const { std::cell::Cell::new(CnaPath::Unordered) };
}

fn set_path(path: CnaPath) {
    PATH.with(|cell| cell.set(path));
}

fn path() -> CnaPath {
    PATH.with(std::cell::Cell::get)
}

/// Counts a handoff from `head` to `target` on `path` ([`TALLY_CNA_HANDOFFS`]), from the host
/// copies of their nodes.
fn count_handoff(path: CnaPath, head: &QNode, target: &QNode) {
    let remote = head.home.load(Relaxed) != target.home.load(Relaxed);
    numa_sim::tally(path.slot(remote));
}

/// The kernel's `local_clock()` (x86: `native_sched_clock`, a `rdtsc` scaled by a per-CPU
/// multiplier): about 30 cycles (**EST**: `rdtsc` takes 20–25 cycles on Haswell and Zen in Agner
/// Fog's tables, plus the scaling), not the vDSO `clock_gettime` a user thread pays
/// (`numa_sim::now_ns`).
fn local_clock() -> u64 {
    numa_sim::cycles(30);
    numa_sim::clock_ns()
}

/// `probably(bits)`: false with probability 1 / 2^bits, from a per-thread pseudo-random seed
/// (the kernel's per-CPU `next_pseudo_random32`).
fn probably(bits: u32) -> bool {
    numa_sim::thread_local! {
        static SEED: std::cell::Cell<u32> = std::cell::Cell::new(0);
    }
    SEED.with(|seed| {
        let mut s = seed.get();
        if s == 0 {
            s = (numa_sim::thread_seed() as u32) | 1;
        }
        // next_pseudo_random32: a linear congruential step.
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        seed.set(s);
        s & ((1 << bits) - 1) != 0
    })
}

/// A qspinlock with policy `P`: the lock word on a line of its own, the nodes shared.
pub struct Queued<P: Policy> {
    word: CachePadded<AtomicU32>,
    nodes: Arc<Nodes>,
    policy: P,
}

/// The kernel's stock qspinlock.
pub type QSpinLock = Queued<Stock>;
/// The kernel's qspinlock with the CNA series' slow path (v15, shuffle reduction on).
pub type CnaKernel = Queued<Cna<true>>;
/// The same without shuffle reduction.
pub type CnaKernelWoSro = Queued<Cna<false>>;
/// The kernel's qspinlock with CNA v13's slow path, shuffle reduction on.
pub type CnaKernelV13 = Queued<CnaV13<true>>;
/// The same without shuffle reduction.
pub type CnaKernelV13WoSro = Queued<CnaV13<false>>;

impl<P: Policy> SimLock for Queued<P> {
    type Shared = Nodes;

    fn shared(threads: usize, _config: &RunConfig) -> Nodes {
        Nodes::new(threads)
    }

    fn new(shared: &Arc<Nodes>, _index: usize, config: &RunConfig) -> Self {
        Queued {
            word: CachePadded::new(AtomicU32::new(0)),
            nodes: shared.clone(),
            policy: P::new(config),
        }
    }

    #[inline]
    fn with_lock<R>(&self, me: usize, critical_section: impl FnOnce() -> R) -> R {
        self.lock(me);
        let result = critical_section();
        // queued_spin_unlock: smp_store_release(&lock->locked, 0).
        self.word.store_masked(0, LOCKED_MASK, Release);
        result
    }
}

impl<P: Policy> Queued<P> {
    fn lock(&self, me: usize) {
        // queued_spin_lock: atomic_try_cmpxchg_acquire(&lock->val, 0, _Q_LOCKED_VAL).
        if let Err(val) = self.word.compare_exchange(0, LOCKED_VAL, Acquire, Relaxed) {
            self.slowpath(me, val);
        }
    }

    /// `queued_spin_lock_slowpath`.
    fn slowpath(&self, me: usize, mut val: u32) {
        let lock = &*self.word;
        // Step 1: a pending waiter is being handed the lock: wait a bounded while.
        if val == PENDING_VAL {
            // Bounded by its count: the iterations run as written.
            numa_sim::spin_deadline(0);
            let mut count = PENDING_LOOPS;
            loop {
                val = lock.load(Relaxed);
                if val != PENDING_VAL || count == 0 {
                    break;
                }
                count -= 1;
                numa_sim::pause();
            }
        }
        // Step 2: any contention: queue.
        if val & !LOCKED_MASK == 0 {
            // Step 3: trylock or pending: 0,0,* → 0,1,*.
            val = lock.fetch_or(PENDING_VAL, Acquire);
            if val & !LOCKED_MASK == 0 {
                // We are pending: wait for the owner to go away, then 0,1,0 → 0,0,1.
                if val & LOCKED_MASK != 0 {
                    numa_sim::spin_deadline(u64::MAX);
                    while lock.load(Acquire) & LOCKED_MASK != 0 {
                        numa_sim::pause();
                    }
                }
                // clear_pending_set_locked: WRITE_ONCE(lock->locked_pending, _Q_LOCKED_VAL).
                lock.store_masked(LOCKED_VAL, LOCKED_PENDING_MASK, Relaxed);
                return;
            }
            // Contention appeared: undo the pending bit if we set it.
            if val & PENDING_MASK == 0 {
                // clear_pending: WRITE_ONCE(lock->pending, 0).
                lock.store_masked(0, PENDING_MASK, Relaxed);
            }
        }
        self.queue(me);
    }

    /// Steps 4 to 6.
    fn queue(&self, me: usize) {
        let lock = &*self.word;
        let nodes = &*self.nodes;
        let node = nodes.of(me);
        let tail = encode_tail(me);
        node.locked.store(0, Relaxed);
        node.next.store(0, Relaxed);
        P::init_node(node);
        // queued_spin_trylock: only a word of 0.
        if lock.load(Relaxed) == 0
            && lock
                .compare_exchange(0, LOCKED_VAL, Acquire, Relaxed)
                .is_ok()
        {
            return;
        }
        // xchg_tail: p,*,* → n,*,* (a 16-bit xchg; xchg is a full barrier on x86).
        let old = lock.swap_masked(tail, TAIL_MASK, AcqRel);
        let mut next = 0;
        if old & TAIL_MASK != 0 {
            nodes.by_tail(old & TAIL_MASK).next.store(tail, Relaxed);
            // arch_mcs_spin_lock_contended: smp_cond_load_acquire(&node->locked, VAL).
            numa_sim::spin_deadline(u64::MAX);
            while node.locked.load(Acquire) == 0 {
                numa_sim::pause();
            }
            next = node.next.load(Relaxed);
            // `if (next) prefetchw(next);`: the successor's node, for the handoff.
            if next != 0 {
                let successor: *const QNode = nodes.by_tail(next);
                numa_sim::kernel_prefetchw(successor.cast());
            }
        }
        // Step 5: MCS head.
        self.policy.wait_head_or_lock(lock, nodes, me);
        numa_sim::spin_deadline(u64::MAX);
        let mut val = lock.load(Acquire);
        while val & LOCKED_PENDING_MASK != 0 {
            numa_sim::pause();
            val = lock.load(Acquire);
        }
        // Step 6: claim the lock.
        if val & TAIL_MASK == tail && self.policy.try_clear_tail(lock, val, nodes, me) {
            return;
        }
        // set_locked: WRITE_ONCE(lock->locked, _Q_LOCKED_VAL).
        lock.store_masked(LOCKED_VAL, LOCKED_MASK, Relaxed);
        if next == 0 {
            // smp_cond_load_relaxed(&node->next, (VAL)).
            numa_sim::spin_deadline(u64::MAX);
            loop {
                next = node.next.load(Relaxed);
                if next != 0 {
                    break;
                }
                numa_sim::pause();
            }
        }
        self.policy.lock_handoff(nodes, me, nodes.by_tail(next));
    }
}
