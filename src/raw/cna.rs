//! `RawCna`: the compact NUMA-aware lock (Dice & Kogan, EuroSys 2019; the Linux CNA qspinlock
//! series), on the crate's queue-lock core.
//!
//! ```text
//! lock word  bits 0-4:   LOCKED | PARKED | NO_STEAL | FAIR | HANDED      (LockWord, 4 bytes)
//!            bit 5:      LOCAL, with the holder's node in bits 6-10 (a local handoff)
//!            bits 11-31: the proxy's index while a handoff is deferred (0: none)
//! tail       index of the last waiter in the main queue  (4 bytes)  -> 8 bytes in all
//!
//! main queue:       head(node A) -> A -> A -> B ... -> tail
//! secondary queue:  B -> C -> B        (waiters of other nodes, moved out of the main queue)
//! ```
//!
//! The lock is MCS (see `mcs.rs`) with one addition: the **queue head**, while it waits for the
//! lock word, moves waiters of other NUMA nodes from just behind it to the tail of a
//! **secondary queue**, so that the main queue starts with a waiter of the head's own node. The
//! secondary queue is not stored in the lock: it travels with headship, as the payload of the
//! `HEAD` status handed to the next head (the index of the secondary queue's first node; that
//! node keeps the secondary tail and the time the secondary queue was started). A payload of 0
//! means no secondary queue; a status with `HEAD` set can never be mistaken for `WAITING` (0)
//! or `PARKED` (1).
//!
//! The head's moves (`order_queue`), as changes to the links it alone may write:
//! - find `first` = our successor; if it is on our node, nothing to do;
//! - otherwise walk `first -> ... -> last_remote -> local` to the first waiter on our node;
//!   the walk follows only links already written, so `last_remote` is never the tail
//!   (the node the tail word names is never detached: it has no successor yet);
//! - detach `first ..= last_remote` (`me.next = local`, `last_remote.next = 0`) and append it to
//!   the secondary queue.
//!
//! Handoff after the head takes the lock (`pass_headship`), unless a flush is due (the secondary
//! queue is older than the flush threshold, or `unlock_fair` asked):
//! - no successor, we are the tail, and a secondary queue exists: **defer** (below), leaving the
//!   proxy as the tail: `(me, LOCKED) → (proxy, LOCKED)`;
//! - a remote successor while we hold a secondary queue: **defer**, the proxy standing before it
//!   (without a secondary queue no waiter of our node has been seen lately, and deferring would
//!   only move the remote transfer into the critical path);
//! - otherwise, as when a flush is due:
//!   - no successor and we are the tail: `(me, LOCKED) → (0, LOCKED)`, or, with a secondary
//!     queue, **splice** it back: `(me, LOCKED) → (secondary_tail, LOCKED)` and make its first
//!     node head. A failed CAS means someone arrived: wait for the link and go on;
//!   - a secondary queue exists and (a flush is due, or our successor is not on our node):
//!     **flush**: link `secondary_tail.next = successor` and make the secondary queue's first
//!     node head, with no payload (the preferred node changes);
//!   - otherwise make the successor head, handing it the secondary queue.
//!
//! Deferred handoff (ours; `RawHq` does the same; why: docs/DESIGN.md, "Deferred handoffs"):
//! instead of handing the lock to another node when it takes the lock, the head leaves a **proxy**
//! node in its place at the head of the queue (its thread's second node, `qnode::take_proxy`),
//! carrying our node id and the secondary queue in the proxy's `HEAD` status, and records the
//! proxy's index in the lock word's upper bits. `unlock` (by whichever thread releases the lock;
//! its `fetch_sub` returns the index, and the recorded bits keep the lock held until it is done)
//! reorders from the proxy and chooses the next head by the rules above (never deferring again),
//! then gives the proxy back and frees the lock. While the proxy is the tail, arrivals link behind
//! it like behind any waiter; nobody waits on its status. The holder still owns no node, so nested
//! locking and guards moved to other threads work as for every lock; a second CNA lock held while
//! the proxy is busy simply does not defer. On a one-node machine no successor is ever remote and
//! no secondary queue exists: CNA never defers and behaves as MCS.
//!
//! Shuffle reduction: with no secondary queue, the head reorders only with probability 1/128,
//! which keeps light contention as cheap as MCS; once a secondary queue exists, or two or more
//! waiters are queued behind the head (sustained contention), it always does. The second
//! condition is ours, not the kernel's: after each flush, a 1/128 restart would leave the queue
//! in FIFO order for ~128 handoffs. It is dropped for a thread whose last walks found nothing
//! local (one thread per node: `BARREN_WALKS_LIMIT`), until a walk finds a waiter of its node.
//!
//! Links moved by the head are written with Relaxed stores: only the current head writes them,
//! and the next head (and, later, each moved waiter when it becomes head) reads them after the
//! Acquire load of its `HEAD` status, which pairs with the Release swap in `make_head`.
//!
//! Timed acquisition (`try_lock_for`): a waiter whose deadline passes behind others marks its
//! node `ABANDONED` and leaves it wherever it is (main queue, secondary queue, behind a proxy);
//! a head whose deadline passes **leaves headship** (`leave_headship`): it hands its secondary
//! queue on to its successor, or splices it back when it is the tail, or empties the queue, all
//! without the lock. Every handoff goes through `hand_headship`, which treats a node found
//! abandoned as a head that leaves at once: it leaves headship on the node's behalf, with the
//! payload the node would have carried, and recycles it. So abandoned nodes are skipped in the
//! main queue, on a flush or a splice of the secondary queue, and from a proxy alike, and the
//! secondary queue is never lost on the way.

use crate::qnode::{self, Queued, node, status};
use crate::raw::{
    LockCore, QueueLock, Token, impl_raw_mutex, premark, wait_for_head, wait_for_next, walk_links,
};
use crate::sync::{AtomicU32, EXHAUSTIVE, Ordering, const_fn, now_ns};
use crate::tunables;
use core::cell::Cell;

/// The raw compact NUMA-aware lock behind [`CnaMutex`](crate::CnaMutex): 8 bytes, keeps the
/// lock on one NUMA node while it has waiters there, flushes waiters of other nodes back after
/// [`tunables::cna_flush_threshold`].
///
/// ```
/// use lock_api::RawMutex;
/// use numa_locks::raw::RawCna;
///
/// assert!(std::mem::size_of::<RawCna>() <= 8 || cfg!(feature = "stats"));
/// let raw = RawCna::new();
/// let guard = RawMutex::lock(&raw);
/// assert!(!RawMutex::try_lock(&raw).is_some());
/// unsafe { RawMutex::unlock(&raw, guard) };
/// ```
pub struct RawCna {
    core: LockCore,
    /// Index of the last waiter of the main queue; 0 when the main queue is empty.
    tail: AtomicU32,
}

/// With no secondary queue, the head reorders the queue once in this many acquisitions.
const SHUFFLE_ONE_IN: u32 = 128;

/// After this many reordering walks in a row that found no waiter of its node, a thread stops
/// reordering on queue length alone (see `lock_as_head`) until a walk finds one again.
///
/// Why: with one or two threads per node most walks are barren, and reading the waiters' lines
/// just before one of them is handed the lock only costs; smaller limits also cut walks that
/// pay (docs/DESIGN.md, "Decision record: CNA barren walks").
const BARREN_WALKS_LIMIT: u32 = 8;

/// Where the head's reordering walk stands (it resumes there while the lock stays busy).
struct Walk {
    /// The index of the last node examined (0: start at our successor).
    cursor: u32,
}

impl RawCna {
    const_fn! {
        /// An unlocked lock.
        pub const fn new() -> Self {
            RawCna {
                core: LockCore::new(),
                tail: AtomicU32::new(0),
            }
        }
    }

    /// Releases the lock so that no arriving thread can steal it, and makes the queue head's
    /// next handoff flush the secondary queue: waiters bypassed because of their node go next,
    /// in the order they arrived, regardless of node.
    ///
    /// # Safety
    /// The lock must be held.
    pub unsafe fn unlock_fair(&self) {
        self.core.on_release();
        self.core.word.unlock_fair(
            || self.tail.load(Ordering::Relaxed) != 0,
            |proxy| self.hand_from_proxy(proxy, true),
        );
    }

    /// Whether the lock is held (a snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.core.word.is_locked()
    }

    /// Whether the queue holds a node: a waiter yet to take the lock, or one a timed waiter
    /// left when it gave up (a snapshot). Acquire: pairs with the arrivals' AcqRel swaps of
    /// the tail (every write of it is a read-modify-write), so the caller sees what a waiter
    /// wrote before it queued.
    #[inline]
    pub(crate) fn has_queued(&self) -> bool {
        self.tail.load(Ordering::Acquire) != 0
    }

    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        let my = node(me);
        let numa = crate::qnode::current_place();
        my.reset(numa);
        // (prev, *) → (me, *). AcqRel: Release publishes `my.reset` (our node id included);
        // Acquire makes `prev`'s node visible before we write its link.
        let prev = self.tail.swap(me, Ordering::AcqRel);
        let mut secondary = 0;
        if prev != 0 {
            // Release: pairs with the Acquire loads of the link (`wait_for_next`, the walk).
            node(prev).next.store(me, Ordering::Release);
            match wait_for_head(my, deadline) {
                Some(status::DONE) => return Queued::Served,
                Some(head) => secondary = status::payload(head),
                None => return Queued::Abandoned,
            }
        }
        self.lock_as_head(me, numa, secondary, deadline)
    }

    /// `me` (of NUMA node `numa`) is now the head of the main queue, holding the secondary queue
    /// `secondary`: reorder while waiting for the lock (or give up at `deadline`), then choose
    /// the next head.
    fn lock_as_head(&self, me: u32, numa: u64, secondary: u32, deadline: Option<u64>) -> Queued {
        let my = node(me);
        // A cell: the reordering changes it while the lockup walk may read it.
        let secondary = Cell::new(secondary);
        // Mark our successor at once (or wake it early if it sleeps): see `premark`.
        let premarked = premark(my.next.load(Ordering::Acquire));
        // Shuffle reduction: with no secondary queue, reorder once in SHUFFLE_ONE_IN handoffs,
        // unless the queue shows sustained contention (two or more waiters behind us), where
        // reordering pays for itself.
        // A thread whose walks keep finding no waiter of its node (one thread per node) stops
        // reordering on queue length alone: `BARREN_WALKS_LIMIT`. (Only this thread changes
        // that, after the wait.)
        let mut reorder = secondary.get() != 0 || shuffle_now();
        let long_queue_reorders = !walks_barren();
        let mut walk = Walk { cursor: 0 };
        let mut undecided = false;
        let mut walked = false;
        let lockup_walk = |visit: &mut dyn FnMut(u64)| {
            walk_links(me, |n| &n.next, visit);
            walk_links(secondary.get(), |n| &n.next, visit);
        };
        let watch = self
            .core
            .head_watch(self as *const Self as *const (), &lockup_walk);
        // The successor to mark: our main-queue successor as the reordering leaves it (the one
        // `pass_headship` makes head unless it flushes or defers).
        let successor = || my.next.load(Ordering::Acquire);
        let acquired = self.core.word.acquire_as_head(
            || {
                if !reorder {
                    // Barren walks first: `queue_is_long` reads our successor's node, a remote
                    // line on the handoff's path when there is nothing local to find.
                    reorder = long_queue_reorders && queue_is_long(my);
                    if !reorder {
                        return true;
                    }
                }
                let mut s = secondary.get();
                walked = true;
                undecided = self.order_queue(me, numa, &mut s, &mut walk);
                secondary.set(s);
                undecided
            },
            successor,
            // Nobody queued behind us, nor set aside for another node. Relaxed: only steers
            // when we reserve.
            || secondary.get() == 0 && self.tail.load(Ordering::Relaxed) == me,
            premarked,
            deadline,
            watch,
        );
        let mut secondary = secondary.get();
        let Some(crate::raw::HeadAcquired { fair, marked }) = acquired else {
            // Time is up while we were head: leave headship, secondary queue and all.
            if let Some((next, payload)) = self.leave_headship(me, secondary, false) {
                self.hand_headship(next, payload);
            }
            return Queued::GaveUp;
        };
        if !reorder && long_queue_reorders && queue_is_long(my) {
            // We took the lock at once (the wait never ran the reordering), but the queue shows
            // sustained contention: reorder now.
            undecided = true;
        }
        if undecided {
            // No waiter of our node was linked while we waited: the previous holder, often the
            // one local waiter, re-queues just as we take the lock. Look once more (resuming the
            // walk, so this costs only the newly linked nodes) before choosing the next head.
            walked = true;
            undecided = self.order_queue(me, numa, &mut secondary, &mut walk);
        }
        if walked {
            // `undecided`: no waiter of our node behind us, or nobody at all.
            note_walk(!undecided);
        }
        #[cfg(feature = "stats")]
        let flushed = self.pass_headship(me, numa, secondary, fair, true, marked);
        #[cfg(not(feature = "stats"))]
        self.pass_headship(me, numa, secondary, fair, true, marked);
        #[cfg(feature = "stats")]
        if flushed {
            self.core.stats.on_flush();
        }
        Queued::Acquired
    }

    /// `unlock`'s part of a deferred handoff: the holder left a proxy node in the queue (see
    /// the module docs); reorder from it now that the critical section is over, choose the next
    /// head as the holder would have, and give the proxy back. Runs before the lock word is
    /// released, by whichever thread unlocks.
    #[cold]
    fn hand_from_proxy(&self, proxy: u32, fair: bool) {
        let p = node(proxy);
        // Relaxed: written by the holder before `record_proxy`; we hold the lock it held.
        let numa = p.numa.load(Ordering::Relaxed);
        let mut secondary = status::payload(p.status.load(Ordering::Relaxed));
        self.order_queue(proxy, numa, &mut secondary, &mut Walk { cursor: 0 });
        let flushed = self.pass_headship(proxy, numa, secondary, fair, false, 0);
        qnode::release_proxy(proxy);
        #[cfg(feature = "stats")]
        if flushed {
            self.core.stats.on_flush();
        }
        #[cfg(not(feature = "stats"))]
        let _ = flushed;
    }

    /// One step of the head's reordering. Returns `true` to be called again (nothing conclusive
    /// yet: no successor, or no waiter of our node linked yet), `false` when done.
    fn order_queue(&self, me: u32, numa: u64, secondary: &mut u32, walk: &mut Walk) -> bool {
        let my = node(me);
        // Acquire on every link: pairs with the linking Release store; the linked node's
        // fields (its NUMA node) are visible.
        let first = my.next.load(Ordering::Acquire);
        if first == 0 {
            return true;
        }
        if same_node(node(first).numa.load(Ordering::Relaxed), numa) {
            return false;
        }
        let mut last_remote = if walk.cursor == 0 { first } else { walk.cursor };
        let local = loop {
            let next = node(last_remote).next.load(Ordering::Acquire);
            if next == 0 {
                // The end of what is linked so far: resume here when more waiters arrive.
                walk.cursor = last_remote;
                return true;
            }
            if same_node(node(next).numa.load(Ordering::Relaxed), numa) {
                break next;
            }
            last_remote = next;
        };
        // Detach first ..= last_remote (none of them is the tail: `local` follows them).
        node(last_remote).next.store(0, Ordering::Relaxed);
        if *secondary == 0 {
            *secondary = first;
            let head = node(first);
            head.secondary_tail.store(last_remote, Ordering::Relaxed);
            head.secondary_since.store(now_ns(), Ordering::Relaxed);
        } else {
            let head = node(*secondary);
            let old_tail = head.secondary_tail.load(Ordering::Relaxed);
            node(old_tail).next.store(first, Ordering::Relaxed);
            head.secondary_tail.store(last_remote, Ordering::Relaxed);
        }
        my.next.store(local, Ordering::Relaxed);
        false
    }

    /// Chooses the next head after we took the lock (see the module docs). Returns whether the
    /// secondary queue was flushed or spliced back. `marked`: the successor we marked `NEXT`
    /// while we waited (0: none); made head with plain stores if it is the one chosen, its mark
    /// taken back otherwise.
    fn pass_headship(
        &self,
        me: u32,
        numa: u64,
        secondary: u32,
        fair: bool,
        may_defer: bool,
        marked: u32,
    ) -> bool {
        let my = node(me);
        // Every head chosen other than the marked successor: take the mark back first.
        let unmark_unless = |chosen: u32| {
            if marked != 0 && marked != chosen {
                crate::raw::unmark_next(node(marked));
            }
        };
        let flush_due = secondary != 0
            && (fair
                || now_ns()
                    .saturating_sub(node(secondary).secondary_since.load(Ordering::Relaxed))
                    >= tunables::cna_flush_ns());
        let may_defer = may_defer && !fair && !flush_due;
        let mut next = my.next.load(Ordering::Acquire);
        if next == 0 {
            if self.tail.load(Ordering::Relaxed) == me {
                // Nobody behind us in the main queue. With a secondary queue, splicing it back
                // now would hand the lock to another node while the previous holder of ours is
                // likely about to queue again: defer instead, leaving the proxy as the tail.
                if secondary != 0
                    && may_defer
                    && let Some(proxy) = qnode::take_proxy()
                {
                    unmark_unless(0);
                    let p = node(proxy);
                    self.prepare_proxy(p, 0, numa, secondary);
                    // (me, LOCKED) → (proxy, LOCKED). AcqRel: Release publishes the proxy's
                    // fields to the arrivals that will link behind it.
                    if self
                        .tail
                        .compare_exchange(me, proxy, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        self.core.word.record_proxy(proxy);
                        return false;
                    }
                    // Someone arrived after all: go on without the proxy.
                    qnode::release_proxy(proxy);
                }
                let target = if secondary == 0 {
                    0
                } else {
                    node(secondary).secondary_tail.load(Ordering::Relaxed)
                };
                // (me, LOCKED) → (target, LOCKED): leave an empty queue, or splice the
                // secondary queue back. AcqRel: Release publishes the secondary queue's links to
                // the arrivals that will link behind `target`.
                if self
                    .tail
                    .compare_exchange(me, target, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    unmark_unless(0);
                    if secondary != 0 {
                        self.hand_headship(secondary, 0);
                        return true;
                    }
                    return false;
                }
            }
            next = wait_for_next(&my.next);
        }
        // Our successor's node matters only with a secondary queue (to defer or flush); without
        // one, reading it would add a remote miss to the handoff for nothing.
        let next_is_remote =
            secondary != 0 && !same_node(node(next).numa.load(Ordering::Relaxed), numa);
        // Defer only while we hold a secondary queue: it shows that waiters of our node were
        // queued behind remote ones lately, so one may well re-queue during our critical
        // section. Without one (say, one thread per node), deferring only moves the handoff's
        // remote transfer into the critical path (docs/DESIGN.md, "Decision record: CNA
        // deferred handoff").
        if next_is_remote
            && may_defer
            && let Some(proxy) = qnode::take_proxy()
        {
            // Defer: the proxy takes our place at the head of the queue, holding the secondary
            // queue, and `unlock` chooses the next head.
            unmark_unless(0);
            self.prepare_proxy(node(proxy), next, numa, secondary);
            self.core.word.record_proxy(proxy);
            return false;
        }
        if secondary != 0 && (flush_due || next_is_remote) {
            // Flush: the secondary queue goes first, then the rest of the main queue.
            unmark_unless(0);
            let head = node(secondary);
            let secondary_tail = head.secondary_tail.load(Ordering::Relaxed);
            node(secondary_tail).next.store(next, Ordering::Relaxed);
            self.hand_headship(secondary, 0);
            return true;
        }
        if next == marked {
            self.core.word.hand_to_marked(
                node(next),
                secondary,
                crate::raw::local_home(node(next), numa),
            );
        } else {
            unmark_unless(next);
            self.hand_headship(next, secondary);
        }
        false
    }

    /// Makes `next` head, carrying the secondary queue `secondary` (0: none). A node whose
    /// timed waiter abandoned it is treated as a head that leaves at once: we leave headship on
    /// its behalf (recycling it) and try the next candidate, until a live waiter is head or the
    /// queue is empty.
    fn hand_headship(&self, mut next: u32, mut secondary: u32) {
        while !self.core.word.hand_to(node(next), secondary) {
            match self.leave_headship(next, secondary, true) {
                Some((candidate, payload)) => (next, secondary) = (candidate, payload),
                None => return,
            }
        }
    }

    /// Headship leaves `me` without the lock: a head whose time ran out, or (`owned`) an
    /// abandoned node that was just made head, which we recycle once done with it. Returns the
    /// next head and the secondary queue it carries, or `None` when the queue emptied.
    ///
    /// - a successor exists (or links soon, since we are not the tail): it carries
    ///   `secondary` on;
    /// - we are the tail and there is a secondary queue: splice it back,
    ///   `(me, *) → (secondary_tail, *)`, and its first node is next, with no payload;
    /// - we are the tail and there is none: `(me, *) → (0, *)`, and the reservation a head
    ///   would have consumed is cleared.
    fn leave_headship(&self, me: u32, mut secondary: u32, owned: bool) -> Option<(u32, u32)> {
        let my = node(me);
        if owned && my.request() != 0 {
            // A `delegate` waiter whose closure the holder ran (on this node): reorder from it
            // as a head of this node would, so that the next waiter made head or served is
            // this node's too, not the first remote arrival.
            let numa = my.numa.load(Ordering::Relaxed);
            self.order_queue(me, numa, &mut secondary, &mut Walk { cursor: 0 });
        }
        let mut next = my.next.load(Ordering::Acquire);
        if next == 0 {
            if self.tail.load(Ordering::Relaxed) == me {
                let target = if secondary == 0 {
                    0
                } else {
                    node(secondary).secondary_tail.load(Ordering::Relaxed)
                };
                // AcqRel: as for the holder's splice in `pass_headship`.
                if self
                    .tail
                    .compare_exchange(me, target, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    if owned {
                        qnode::recycle(me);
                    }
                    if secondary == 0 {
                        self.core.word.clear_reservation();
                        return None;
                    }
                    return Some((secondary, 0));
                }
            }
            next = wait_for_next(&my.next);
        }
        if owned {
            qnode::recycle(me);
        }
        Some((next, secondary))
    }

    /// Fills a proxy that is about to stand in for the head (`numa`, carrying `secondary`)
    /// with `next` as its successor. Relaxed: the proxy is published by the tail CAS (to
    /// arrivals, which only write its `next`) or by the lock word (to the unlocking thread,
    /// see `LockWord::record_proxy`).
    fn prepare_proxy(&self, p: &crate::qnode::QNode, next: u32, numa: u64, secondary: u32) {
        p.next.store(next, Ordering::Relaxed);
        p.numa.store(numa, Ordering::Relaxed);
        p.status
            .store(status::head_with(secondary), Ordering::Relaxed);
    }
}

/// Whether two waiters' places (`QNode::numa`) are on one NUMA node. CnaMutex keeps handoffs
/// within a node, not within a cache domain: preferring the holder's domain leaves one or two
/// threads per domain trading the lock while the rest wait out the flush threshold
/// (docs/DESIGN.md, "Decision record: HQ cache domains").
#[inline]
fn same_node(a: u64, b: u64) -> bool {
    qnode::place_node(a) == qnode::place_node(b)
}

/// Whether at least two waiters are linked behind the head `my`: sustained contention.
#[inline]
fn queue_is_long(my: &crate::qnode::QNode) -> bool {
    // Acquire: pairs with the linking Release store, as in `order_queue`.
    let next = my.next.load(Ordering::Acquire);
    next != 0 && node(next).next.load(Ordering::Acquire) != 0
}

crate::sync::thread_local! {
    /// Reordering walks in a row by this thread that found no waiter of its node.
    static BARREN_WALKS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread's last [`BARREN_WALKS_LIMIT`] walks found no waiter of its node. Never
/// under loom, so the models explore the reordering.
#[inline]
fn walks_barren() -> bool {
    !EXHAUSTIVE
        && BARREN_WALKS
            .try_with(|walks| walks.get() >= BARREN_WALKS_LIMIT)
            .unwrap_or(false)
}

/// Records a reordering walk that found a waiter of our node (`fruitful`) or none.
#[inline]
fn note_walk(fruitful: bool) {
    if !EXHAUSTIVE {
        let _ = BARREN_WALKS.try_with(|walks| {
            walks.set(if fruitful {
                0
            } else {
                walks.get().saturating_add(1)
            })
        });
    }
}

/// Shuffle reduction: `true` once in [`SHUFFLE_ONE_IN`] calls, from a per-thread xorshift.
/// Always `true` under loom, so the models explore the reordering.
#[inline]
fn shuffle_now() -> bool {
    if EXHAUSTIVE {
        return true;
    }
    crate::sync::thread_local! {
        static SEED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    SEED.try_with(|seed| crate::sync::xorshift_next(seed).is_multiple_of(SHUFFLE_ONE_IN))
        .unwrap_or(false)
}

impl QueueLock for RawCna {
    fn lock_queue_lock(&self, _: Token) {
        self.lock();
    }

    unsafe fn unlock_queue_lock(&self, _: Token) {
        // SAFETY: the caller holds the lock (the trait method's contract).
        unsafe { self.unlock() }
    }
}

impl crate::raw::QueuePolicy for RawCna {
    // Docs: `crate::raw::delegate::Locality`.
    const DELEGATE_LOCALITY: crate::raw::delegate::Locality = crate::raw::delegate::Locality::Node;

    #[inline]
    fn nobody_queued(&self) -> bool {
        // Relaxed: only a hint for stealing; the queue orders those who queue.
        self.tail.load(Ordering::Relaxed) == 0
    }

    #[inline]
    fn lock_queued(&self, me: u32, deadline: Option<u64>) -> Queued {
        RawCna::lock_queued(self, me, deadline)
    }

    #[inline]
    fn hand_on_deferred(&self, proxy: u32) {
        // `unlock` found a proxy recorded (only the holder records one). The release's one
        // `fetch_sub` told it, so the common release reads nothing first (see
        // `LockWord::unlock`); the lock stays held until the handoff from the proxy is made.
        self.hand_from_proxy(proxy, false);
    }
}

impl_raw_mutex!(RawCna);
