//! Process-wide tunables of the locks, with documented defaults and validated setters.
//!
//! The locks are one or two machine words, so the tunables are global rather than per lock.
//! They are read with relaxed loads on slow paths only; a change takes effect for waits that
//! start after it. Every setter checks its argument and returns a [`TunableError`] naming the
//! value and the allowed range; nothing is changed on error.
//!
//! ```
//! use std::time::Duration;
//! use numa_locks::tunables;
//!
//! tunables::set_spin_time(Duration::from_micros(20)).unwrap();
//! assert_eq!(tunables::spin_time(), Duration::from_micros(20));
//!
//! let err = tunables::set_hq_local_handoffs(0).unwrap_err();
//! assert!(err.to_string().contains("0"));
//! # tunables::reset_defaults();
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Default time a waiter spins before it parks: 5 µs, about the cost of a futex sleep and wake.
///
/// Trade-off: a shorter spin parks waiters sooner, and a parked waiter makes the next handoff
/// wait for a wake-up long enough for the next waiter to park too; a longer one only burns the
/// core the holder needs when threads outnumber cores (docs/DESIGN.md, "Decision record: spin
/// time").
pub const DEFAULT_SPIN_TIME: Duration = Duration::from_micros(5);
/// Default for stealing: on. An arriving thread may take a free lock before queueing.
pub const DEFAULT_STEALING: bool = true;
/// Default for the rwlocks' writer handover: off. It speeds up write-heavy rwlocks and slows
/// read-mostly ones, which are what an rwlock is for (docs/DESIGN.md, decision record, "writer
/// handover, off by default").
pub const DEFAULT_RWLOCK_WRITER_HANDOVER: bool = false;
/// Default for the rwlocks' write mode: on. A lock whose last writers found no reader keeps the
/// readers revoked between writers, so that each writer costs what a mutex's does, and the
/// first reader to come takes the writers' lock once to end it (docs/DESIGN.md, decision
/// record, "rwlock write mode").
pub const DEFAULT_RWLOCK_WRITE_MODE: bool = true;
/// Default time the queue head tolerates being overtaken by stealers before it forbids
/// stealing: 1 ms (parking_lot's eventual-fairness timeout is 0.5 ms on average).
pub const DEFAULT_STEAL_BOUND: Duration = Duration::from_millis(1);
/// Default re-take window: 0, a queue head that marks its successor reserves the lock at once.
///
/// Trade-off: a window lets the thread that released the lock take it again while the head
/// waits, so the lock and its data stay in that thread's cache for a run of critical sections,
/// and every queued thread waits through those runs: more throughput, a longer tail of waits
/// at high thread counts (docs/DESIGN.md, "Decision record: the re-take window stays off").
pub const DEFAULT_RETAKE_WINDOW: Duration = Duration::ZERO;
/// Default re-take window of a lone head: 50 µs. A queue head with nobody queued behind it
/// (the queue's tail) lets other threads take the free lock for this long before it reserves
/// it; as soon as another thread queues, it reserves at its next look.
///
/// Trade-off: where two threads take turns, every handoff would otherwise cross to the other
/// thread (across sockets, a transfer of the lock and the data each time), while `std` and
/// `parking_lot` let the releasing thread take the lock back without bound. The window bounds
/// that re-take run, and so the lone waiter's wait (docs/DESIGN.md, "Decision record: a lone
/// head's re-take window").
pub const DEFAULT_LONE_RETAKE_WINDOW: Duration = Duration::from_micros(50);
/// Default age at which the CNA secondary queue is flushed back to the main queue: 25 µs.
///
/// The kernel's CNA uses 1 ms (`numa_spinlock_threshold_ns`). A waiter of another node waits
/// for its node's turn, and every node's turn lasts up to the threshold, so the tail of the
/// waits grows with (nodes × threshold). Trade-off: a longer threshold keeps more handoffs on
/// one node; a shorter one bounds the wait of waiters on other nodes. 25 µs kept both the tail
/// of the waits and the share of remote handoffs small on four sockets (docs/DESIGN.md,
/// "Decision record: CNA flush threshold").
pub const DEFAULT_CNA_FLUSH_THRESHOLD: Duration = Duration::from_micros(25);
/// Default number of consecutive handoffs HQ keeps within one NUMA node: 64.
///
/// The HQ RFC's kernel spinlock keeps 1000, but a spinlock hands the lock on at every release;
/// with stealing (on by default) most acquisitions here are steals, which do not count, so a
/// limit of 1000 handoffs lets one node's turn last milliseconds. Trade-off: a longer turn keeps
/// more handoffs local; a shorter one is fairer to the other nodes (docs/DESIGN.md, "Decision
/// record: HQ turn limits").
pub const DEFAULT_HQ_LOCAL_HANDOFFS: u64 = 64;
/// Default number of consecutive handoffs HQ keeps within one cache domain (an L3, AMD's CCX)
/// while its local queues serve domains rather than nodes: 16.
///
/// A waiter's wait grows with the domains whose turns come before its own (up to 23 on a
/// two-socket EPYC 9654) times their length, so domain turns are shorter than node turns.
/// Trade-off: longer turns give more throughput, shorter ones a shorter worst wait; 16 is the
/// longest that kept the tail of the waits bounded (docs/DESIGN.md, "Decision record: HQ turn
/// limits").
pub const DEFAULT_HQ_DOMAIN_HANDOFFS: u64 = 16;
/// Default for the most closures a `delegate` caller that holds the lock runs for the waiters
/// queued behind it before it hands the lock on: 16.
///
/// Trade-off: a longer batch keeps the data on one node for more critical sections; a shorter
/// one bounds how long the other nodes' (or cache domains') waiters wait. 16 kept the tail of
/// a delegating HqMutex's waits at or below HqMutex's own on a two-socket EPYC, where longer
/// batches lengthened it, at a small cost in throughput on four Xeon sockets (docs/DESIGN.md,
/// "Decision record: delegation bounds").
pub const DEFAULT_DELEGATE_BATCH: u64 = 16;
/// Default for the longest a `delegate` caller that holds the lock goes on running others'
/// closures: 25 µs, the CNA flush threshold, the crate's bound on how long a waiter of another
/// node waits for a node's turn (docs/DESIGN.md, "Decision record: delegation bounds").
pub const DEFAULT_DELEGATE_BATCH_TIME: Duration = Duration::from_micros(25);

const MAX_SPIN_TIME: Duration = Duration::from_secs(1);
const MIN_BOUND: Duration = Duration::from_micros(1);
const MAX_BOUND: Duration = Duration::from_secs(10);
const MAX_RETAKE_WINDOW: Duration = Duration::from_millis(10);
const MAX_HQ_LOCAL_HANDOFFS: u64 = 1 << 24;

static SPIN_NS: AtomicU64 = AtomicU64::new(DEFAULT_SPIN_TIME.as_nanos() as u64);
static STEALING: AtomicBool = AtomicBool::new(DEFAULT_STEALING);
static RWLOCK_WRITER_HANDOVER: AtomicBool = AtomicBool::new(DEFAULT_RWLOCK_WRITER_HANDOVER);
static RWLOCK_WRITE_MODE: AtomicBool = AtomicBool::new(DEFAULT_RWLOCK_WRITE_MODE);
static STEAL_BOUND_NS: AtomicU64 = AtomicU64::new(DEFAULT_STEAL_BOUND.as_nanos() as u64);
static RETAKE_WINDOW_NS: AtomicU64 = AtomicU64::new(DEFAULT_RETAKE_WINDOW.as_nanos() as u64);
static LONE_RETAKE_WINDOW_NS: AtomicU64 =
    AtomicU64::new(DEFAULT_LONE_RETAKE_WINDOW.as_nanos() as u64);
static CNA_FLUSH_NS: AtomicU64 = AtomicU64::new(DEFAULT_CNA_FLUSH_THRESHOLD.as_nanos() as u64);
static HQ_LOCAL_HANDOFFS: AtomicU64 = AtomicU64::new(DEFAULT_HQ_LOCAL_HANDOFFS);
static HQ_DOMAIN_HANDOFFS: AtomicU64 = AtomicU64::new(DEFAULT_HQ_DOMAIN_HANDOFFS);
static DELEGATE_BATCH: AtomicU64 = AtomicU64::new(DEFAULT_DELEGATE_BATCH);
static DELEGATE_BATCH_NS: AtomicU64 = AtomicU64::new(DEFAULT_DELEGATE_BATCH_TIME.as_nanos() as u64);
const MAX_DELEGATE_BATCH: u64 = 1 << 16;
/// The lockup threshold in ns; 0 = off.
#[cfg(feature = "lockup")]
static LOCKUP_THRESHOLD_NS: AtomicU64 = AtomicU64::new(0);

/// A rejected tunable value: which tunable, the value given, and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunableError {
    /// The tunable's name, e.g. `"spin_time"`.
    pub name: &'static str,
    /// The rejected value as text.
    pub value: String,
    /// The allowed values as text.
    pub allowed: &'static str,
}

impl fmt::Display for TunableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} {}: allowed {}",
            self.name, self.value, self.allowed
        )
    }
}

impl std::error::Error for TunableError {}

fn check_duration(
    name: &'static str,
    value: Duration,
    min: Duration,
    max: Duration,
    allowed: &'static str,
) -> Result<u64, TunableError> {
    if value < min || value > max {
        return Err(TunableError {
            name,
            value: format!("{value:?}"),
            allowed,
        });
    }
    // In range, so at most 10 s: fits in u64 nanoseconds.
    Ok(value.as_nanos() as u64)
}

/// Sets how long a waiter spins before it parks (default [`DEFAULT_SPIN_TIME`]).
/// Allowed: 0 (park at once) to 1 s.
///
/// This is the whole budget where threads outnumber cores (a timed `sched_yield` shows whether
/// another thread wants this one's core). Where they do not, queued waiters and the queue head
/// spin this long plus 4 µs per CPU of the machine before they park, since a first-come queue
/// of running threads moves by one round (a handoff and the re-takes before the next head looks)
/// at a time; 0 still parks at once.
///
/// On a machine with one NUMA node it also bounds the arriving threads' spin before they queue:
/// half of it, while the thread has its core to itself (0 leaves only parking_lot's brief
/// schedule of a few `pause`s and yields).
pub fn set_spin_time(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration("spin_time", value, Duration::ZERO, MAX_SPIN_TIME, "0 to 1s")?;
    SPIN_NS.store(ns, Relaxed);
    Ok(())
}

/// How long a waiter spins before it parks.
pub fn spin_time() -> Duration {
    Duration::from_nanos(SPIN_NS.load(Relaxed))
}

/// Turns stealing on or off (default [`DEFAULT_STEALING`]).
///
/// With stealing off, a thread that finds waiters queued joins the queue instead of taking a
/// free lock, so the lock passes strictly in queue order (up to races with threads arriving at
/// the same moment). Always valid; returns `Result` like every setter.
pub fn set_stealing(enabled: bool) -> Result<(), TunableError> {
    STEALING.store(enabled, Relaxed);
    Ok(())
}

/// Whether an arriving thread may take a free lock before queueing.
#[inline]
pub fn stealing() -> bool {
    STEALING.load(Relaxed)
}

/// Turns the rwlocks' writer handover on or off (default [`DEFAULT_RWLOCK_WRITER_HANDOVER`]).
///
/// On, a writer that unlocks while another writer is queued, and no reader has asked for the
/// lock since its revocation, leaves the readers revoked for that writer, which then writes at
/// once, with no revocation or drain of its own. For write-heavy rwlocks on several sockets;
/// read-mostly ones lose their readers' windows between writers. Always valid; returns
/// `Result` like every setter; may be changed at any time (a writer that takes a handed-over
/// lock after it was turned off revokes again, harmlessly).
pub fn set_rwlock_writer_handover(enabled: bool) -> Result<(), TunableError> {
    RWLOCK_WRITER_HANDOVER.store(enabled, Relaxed);
    Ok(())
}

/// Whether the rwlocks' writers hand the revocation over to the next writer.
#[inline]
pub fn rwlock_writer_handover() -> bool {
    RWLOCK_WRITER_HANDOVER.load(Relaxed)
}

/// Turns the rwlocks' write mode on or off (default [`DEFAULT_RWLOCK_WRITE_MODE`]).
///
/// On, once several writers in a row found no reader, a writer's unlock leaves the readers
/// revoked: the next writers take the lock as a mutex's (no revocation, no scan of the reader
/// slots), and the first reader to come takes the writers' queue lock once to end it. Off,
/// every writer revokes and drains. Always valid; returns `Result` like every setter; may be
/// changed at any time (a lock left in write mode ends it at its next reader or writer).
pub fn set_rwlock_write_mode(enabled: bool) -> Result<(), TunableError> {
    RWLOCK_WRITE_MODE.store(enabled, Relaxed);
    Ok(())
}

/// Whether the rwlocks' writers may leave a reader-less lock in write mode.
#[inline]
pub fn rwlock_write_mode() -> bool {
    RWLOCK_WRITE_MODE.load(Relaxed)
}

/// Sets how long the queue head may be overtaken by stealers before stealing stops until it
/// has the lock (default [`DEFAULT_STEAL_BOUND`]). Allowed: 1 µs to 10 s.
pub fn set_steal_bound(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration("steal_bound", value, MIN_BOUND, MAX_BOUND, "1us to 10s")?;
    STEAL_BOUND_NS.store(ns, Relaxed);
    Ok(())
}

/// How long the queue head may be overtaken by stealers.
pub fn steal_bound() -> Duration {
    Duration::from_nanos(STEAL_BOUND_NS.load(Relaxed))
}

/// Sets the re-take window (default [`DEFAULT_RETAKE_WINDOW`]): how long a new queue head lets
/// other threads, above all the one that just released the lock, take the free lock ahead of
/// it before it reserves the lock for itself. Allowed: 0 (reserve at once) to 10 ms.
///
/// A head on an uncrowded core of a machine with 3 or more CPUs marks its successor (which
/// then spins instead of parking) and reserves the lock, so that nobody overtakes it; with a
/// window it reserves only once it has been head that long. Meanwhile the releasing thread,
/// whose cache holds the lock and the data, may take the lock again (and so may any arriving
/// thread, of the holder's node only where a CnaMutex handoff reserved it for that node). The
/// steal bound still ends the window early, and heads that do not mark (threads outnumber
/// cores, or 2 CPUs) already leave the lock open until the steal bound: there it changes
/// nothing. Longer windows give more throughput where critical sections come in quick
/// succession from the same thread, and longer waits to the queued threads (docs/DESIGN.md,
/// "Decision record: the re-take window stays off").
///
/// ```
/// use std::time::Duration;
/// use numa_locks::tunables;
///
/// tunables::set_retake_window(Duration::from_nanos(500)).unwrap();
/// assert_eq!(tunables::retake_window(), Duration::from_nanos(500));
/// let err = tunables::set_retake_window(Duration::from_millis(20)).unwrap_err();
/// assert_eq!(err.to_string(), "invalid retake_window 20ms: allowed 0 to 10ms");
/// # tunables::reset_defaults();
/// ```
pub fn set_retake_window(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration(
        "retake_window",
        value,
        Duration::ZERO,
        MAX_RETAKE_WINDOW,
        "0 to 10ms",
    )?;
    RETAKE_WINDOW_NS.store(ns, Relaxed);
    Ok(())
}

/// How long a new queue head lets other threads take the free lock before it reserves it.
pub fn retake_window() -> Duration {
    Duration::from_nanos(RETAKE_WINDOW_NS.load(Relaxed))
}

/// Sets the re-take window of a lone head (default [`DEFAULT_LONE_RETAKE_WINDOW`]): how long a
/// queue head with nobody queued behind it lets other threads, above all the one that just
/// released the lock, take the free lock ahead of it before it reserves the lock for itself.
/// Allowed: 0 (only [`retake_window`] applies) to 10 ms.
///
/// It applies while the head is the queue's tail (for CnaMutex, also with no waiter set aside
/// for another node) and ends at the head's first look after another thread queued, or when
/// the steal bound ends it. With two threads taking turns on a lock, the releasing thread
/// keeps the lock (and the data in its cache) for up to this long, and the other waits up to
/// this long, as a lock that lets it re-take without bound (`std`, `parking_lot`) would make
/// it wait longer. With more threads contending, heads are rarely alone and it changes nothing.
/// Within the window the head looks at a busy lock only every few microseconds (each look
/// takes the lock's cache line from the thread re-taking it), so it sees a release, or a thread
/// queueing behind it, up to that late.
///
/// ```
/// use std::time::Duration;
/// use numa_locks::tunables;
///
/// tunables::set_lone_retake_window(Duration::from_micros(20)).unwrap();
/// assert_eq!(tunables::lone_retake_window(), Duration::from_micros(20));
/// let err = tunables::set_lone_retake_window(Duration::from_millis(20)).unwrap_err();
/// assert_eq!(err.to_string(), "invalid lone_retake_window 20ms: allowed 0 to 10ms");
/// # tunables::reset_defaults();
/// ```
pub fn set_lone_retake_window(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration(
        "lone_retake_window",
        value,
        Duration::ZERO,
        MAX_RETAKE_WINDOW,
        "0 to 10ms",
    )?;
    LONE_RETAKE_WINDOW_NS.store(ns, Relaxed);
    Ok(())
}

/// How long a queue head with nobody queued behind it lets other threads take the free lock
/// before it reserves it.
pub fn lone_retake_window() -> Duration {
    Duration::from_nanos(LONE_RETAKE_WINDOW_NS.load(Relaxed))
}

/// Sets the age at which the CNA secondary queue is flushed to the front of the main queue
/// (default [`DEFAULT_CNA_FLUSH_THRESHOLD`]). Allowed: 1 µs to 10 s.
pub fn set_cna_flush_threshold(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration(
        "cna_flush_threshold",
        value,
        MIN_BOUND,
        MAX_BOUND,
        "1us to 10s",
    )?;
    CNA_FLUSH_NS.store(ns, Relaxed);
    Ok(())
}

/// The age at which the CNA secondary queue is flushed.
pub fn cna_flush_threshold() -> Duration {
    Duration::from_nanos(CNA_FLUSH_NS.load(Relaxed))
}

/// Sets how many consecutive handoffs HQ keeps within one NUMA node before it moves the lock
/// to the next node (default [`DEFAULT_HQ_LOCAL_HANDOFFS`]). Allowed: 1 to 16777216.
pub fn set_hq_local_handoffs(value: u64) -> Result<(), TunableError> {
    if value == 0 || value > MAX_HQ_LOCAL_HANDOFFS {
        return Err(TunableError {
            name: "hq_local_handoffs",
            value: value.to_string(),
            allowed: "1 to 16777216",
        });
    }
    HQ_LOCAL_HANDOFFS.store(value, Relaxed);
    Ok(())
}

/// How many consecutive handoffs HQ keeps within one NUMA node.
#[inline]
pub fn hq_local_handoffs() -> u64 {
    HQ_LOCAL_HANDOFFS.load(Relaxed)
}

/// Sets how many consecutive handoffs HQ keeps within one cache domain before it moves the lock
/// to the next domain or node (default [`DEFAULT_HQ_DOMAIN_HANDOFFS`]). Allowed: 1 to 16777216.
///
/// It applies while a lock's local queues serve cache domains (where NUMA nodes hold several
/// L3 domains, such as AMD's CCXs, and a node's turns ran to their limit with waiters of the
/// node left); [`set_hq_local_handoffs`] bounds the turns of per-node queues. On machines with
/// one cache domain per node it is never read.
///
/// ```
/// use numa_locks::tunables;
///
/// tunables::set_hq_domain_handoffs(16).unwrap();
/// assert_eq!(tunables::hq_domain_handoffs(), 16);
/// let err = tunables::set_hq_domain_handoffs(0).unwrap_err();
/// assert_eq!(err.to_string(), "invalid hq_domain_handoffs 0: allowed 1 to 16777216");
/// # tunables::reset_defaults();
/// ```
pub fn set_hq_domain_handoffs(value: u64) -> Result<(), TunableError> {
    if value == 0 || value > MAX_HQ_LOCAL_HANDOFFS {
        return Err(TunableError {
            name: "hq_domain_handoffs",
            value: value.to_string(),
            allowed: "1 to 16777216",
        });
    }
    HQ_DOMAIN_HANDOFFS.store(value, Relaxed);
    Ok(())
}

/// How many consecutive handoffs HQ keeps within one cache domain.
#[inline]
pub fn hq_domain_handoffs() -> u64 {
    HQ_DOMAIN_HANDOFFS.load(Relaxed)
}

/// Sets the most closures a [`delegate`](crate::Delegate::delegate) caller that holds the lock
/// runs for the waiters queued behind it before it hands the lock on (default
/// [`DEFAULT_DELEGATE_BATCH`]). 0 turns combining off: every waiter is made head and runs its
/// own closure, as with `lock()`. Allowed: 0 to 65536.
///
/// ```
/// use numa_locks::tunables;
///
/// tunables::set_delegate_batch(16).unwrap();
/// assert_eq!(tunables::delegate_batch(), 16);
/// let err = tunables::set_delegate_batch(100_000).unwrap_err();
/// assert_eq!(err.to_string(), "invalid delegate_batch 100000: allowed 0 to 65536");
/// # tunables::reset_defaults();
/// ```
pub fn set_delegate_batch(value: u64) -> Result<(), TunableError> {
    if value > MAX_DELEGATE_BATCH {
        return Err(TunableError {
            name: "delegate_batch",
            value: value.to_string(),
            allowed: "0 to 65536",
        });
    }
    DELEGATE_BATCH.store(value, Relaxed);
    Ok(())
}

/// The most closures a `delegate` holder runs for others before it hands the lock on.
#[inline]
pub fn delegate_batch() -> u64 {
    DELEGATE_BATCH.load(Relaxed)
}

/// Sets the longest a [`delegate`](crate::Delegate::delegate) caller that holds the lock goes
/// on running the closures of waiters queued behind it (default
/// [`DEFAULT_DELEGATE_BATCH_TIME`]), checked before each closure after the first. Allowed:
/// 1 µs to 10 s.
pub fn set_delegate_batch_time(value: Duration) -> Result<(), TunableError> {
    let ns = check_duration(
        "delegate_batch_time",
        value,
        MIN_BOUND,
        MAX_BOUND,
        "1µs to 10s",
    )?;
    DELEGATE_BATCH_NS.store(ns, Relaxed);
    Ok(())
}

/// The longest a `delegate` holder goes on running others' closures.
pub fn delegate_batch_time() -> Duration {
    Duration::from_nanos(DELEGATE_BATCH_NS.load(Relaxed))
}

/// [`delegate_batch`] and [`delegate_batch_time`] (ns), for the combiner.
#[inline]
pub(crate) fn delegate_bounds() -> (u64, u64) {
    (
        DELEGATE_BATCH.load(Relaxed),
        DELEGATE_BATCH_NS.load(Relaxed),
    )
}

/// Sets the time after which the queue head of a lock that has not been acquired meanwhile
/// reports a suspected lockup (feature `lockup`; see [`crate::lockup`]). `Duration::ZERO` turns
/// reports off (the default). Allowed: 0, or 1 ms to 1 hour.
///
/// While a threshold is set, queue heads park for at most a quarter of it at a time, to check.
#[cfg(feature = "lockup")]
pub fn set_lockup_threshold(value: Duration) -> Result<(), TunableError> {
    let ns = if value.is_zero() {
        0
    } else {
        check_duration(
            "lockup_threshold",
            value,
            Duration::from_millis(1),
            Duration::from_secs(3_600),
            "0 (off) or 1ms to 1h",
        )?
    };
    LOCKUP_THRESHOLD_NS.store(ns, Relaxed);
    Ok(())
}

/// The lockup threshold, or `None` while reports are off (feature `lockup`).
#[cfg(feature = "lockup")]
pub fn lockup_threshold() -> Option<Duration> {
    match LOCKUP_THRESHOLD_NS.load(Relaxed) {
        0 => None,
        ns => Some(Duration::from_nanos(ns)),
    }
}

/// Restores every tunable to its default.
pub fn reset_defaults() {
    SPIN_NS.store(DEFAULT_SPIN_TIME.as_nanos() as u64, Relaxed);
    STEALING.store(DEFAULT_STEALING, Relaxed);
    RWLOCK_WRITER_HANDOVER.store(DEFAULT_RWLOCK_WRITER_HANDOVER, Relaxed);
    RWLOCK_WRITE_MODE.store(DEFAULT_RWLOCK_WRITE_MODE, Relaxed);
    STEAL_BOUND_NS.store(DEFAULT_STEAL_BOUND.as_nanos() as u64, Relaxed);
    RETAKE_WINDOW_NS.store(DEFAULT_RETAKE_WINDOW.as_nanos() as u64, Relaxed);
    LONE_RETAKE_WINDOW_NS.store(DEFAULT_LONE_RETAKE_WINDOW.as_nanos() as u64, Relaxed);
    DELEGATE_BATCH.store(DEFAULT_DELEGATE_BATCH, Relaxed);
    DELEGATE_BATCH_NS.store(DEFAULT_DELEGATE_BATCH_TIME.as_nanos() as u64, Relaxed);
    CNA_FLUSH_NS.store(DEFAULT_CNA_FLUSH_THRESHOLD.as_nanos() as u64, Relaxed);
    HQ_LOCAL_HANDOFFS.store(DEFAULT_HQ_LOCAL_HANDOFFS, Relaxed);
    HQ_DOMAIN_HANDOFFS.store(DEFAULT_HQ_DOMAIN_HANDOFFS, Relaxed);
    #[cfg(feature = "lockup")]
    LOCKUP_THRESHOLD_NS.store(0, Relaxed);
}

// Crate-internal readers in the units the slow paths use.
#[inline]
pub(crate) fn spin_ns() -> u64 {
    SPIN_NS.load(Relaxed)
}
#[inline]
pub(crate) fn steal_bound_ns() -> u64 {
    STEAL_BOUND_NS.load(Relaxed)
}
#[inline]
pub(crate) fn retake_window_ns() -> u64 {
    RETAKE_WINDOW_NS.load(Relaxed)
}
#[inline]
pub(crate) fn lone_retake_window_ns() -> u64 {
    LONE_RETAKE_WINDOW_NS.load(Relaxed)
}
#[inline]
pub(crate) fn cna_flush_ns() -> u64 {
    CNA_FLUSH_NS.load(Relaxed)
}
#[cfg(feature = "lockup")]
#[inline]
pub(crate) fn lockup_threshold_ns() -> u64 {
    LOCKUP_THRESHOLD_NS.load(Relaxed)
}
