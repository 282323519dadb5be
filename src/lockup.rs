//! Lockup reports (feature `lockup`): "this lock has not moved for a long time", with who waits,
//! who holds it and where it was taken.
//!
//! Set a threshold with [`crate::tunables::set_lockup_threshold`]
//! (off by default). While it is set, the **queue head** of every contended lock (the one waiter
//! that waits on the lock word; the others wait behind it) wakes at least every quarter of the
//! threshold to check, and reports when both
//! - it has waited as head for at least the threshold, and
//! - the lock has not been acquired by anyone for at least the threshold.
//!
//! The second condition is what keeps fairness from causing false alarms: a waiter far back in
//! a long queue, or bypassed by CNA's or HQ's locality, waits long while the lock keeps moving,
//! and that is not a lockup. A report is made once per lock per **episode**: until the lock is
//! acquired again, no other waiter (a new head, say) reports it a second time.
//!
//! Reports go to a hook ([`set_hook`], [`take_hook`]; as `std::panic`'s); the default prints one
//! line to stderr. The hook runs on the waiting thread, which is the lock's queue head at that
//! moment: it must not take the lock it reports.
//!
//! With the feature, every acquisition also records the holder's thread and call site (through
//! `#[track_caller]`, so `CnaMutex::lock()` records the caller's file and line): a thread-local
//! read and two stores on the lock's fast path. Without the feature nothing of this exists.
//!
//! ```no_run
//! use std::time::Duration;
//! use numa_locks::{lockup, tunables};
//!
//! tunables::set_lockup_threshold(Duration::from_secs(1)).unwrap();
//! lockup::set_hook(Box::new(|report| eprintln!("{report}")));
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::sync::now_ns;
use crate::tunables;

/// A thread, as a lockup report names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The crate's number for the thread ([`thread_id`]): 1, 2, 3… in the order threads first
    /// took a lock of this crate.
    pub id: u64,
    /// The thread's name, if it has one.
    pub name: Option<String>,
    /// Whether the thread has exited (a lock can outlive the thread that took it: a forgotten
    /// guard, or one moved elsewhere).
    pub exited: bool,
}

impl fmt::Display for ThreadInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let exited = if self.exited { ", exited" } else { "" };
        match &self.name {
            Some(name) => write!(f, "'{name}' (thread {}{exited})", self.id),
            None => write!(f, "thread {}{exited}", self.id),
        }
    }
}

/// One suspected lockup.
#[derive(Clone, Debug)]
pub struct LockupReport {
    /// The address of the raw lock (the `RawCna` inside a `CnaMutex`, and so on).
    pub lock: usize,
    /// How long the reporting waiter has waited as the lock's queue head.
    pub waited: Duration,
    /// How long the lock has gone without an acquisition.
    pub stalled: Duration,
    /// The reporting waiter.
    pub waiter: ThreadInfo,
    /// The thread that took the lock last, if it is known.
    pub holder: Option<ThreadInfo>,
    /// Where the holder took the lock (the caller of `lock()`), if known.
    pub holder_site: Option<&'static Location<'static>>,
    /// Waiters in the lock's queues, the reporter included, as a walk of the queues found them.
    pub queue_len: usize,
    /// The waiters per NUMA node: `(node, waiters)`, by node (for CNA, the main and the
    /// secondary queue; for HQ, every local queue and the node FIFO).
    pub waiters_per_node: Vec<(usize, usize)>,
}

impl fmt::Display for LockupReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "numa_locks: lockup suspected: lock {:#x} not acquired for {:?}; {} has waited {:?} as queue head",
            self.lock, self.stalled, self.waiter, self.waited
        )?;
        match (&self.holder, self.holder_site) {
            (Some(holder), Some(site)) => write!(f, "; held by {holder}, locked at {site}")?,
            (Some(holder), None) => write!(f, "; held by {holder}")?,
            (None, _) => write!(f, "; holder unknown")?,
        }
        write!(f, "; {} queued", self.queue_len)?;
        if !self.waiters_per_node.is_empty() {
            let nodes: Vec<String> = self
                .waiters_per_node
                .iter()
                .map(|(node, n)| format!("node {node}: {n}"))
                .collect();
            write!(f, " ({})", nodes.join(", "))?;
        }
        Ok(())
    }
}

/// A lockup hook.
pub type Hook = Box<dyn Fn(&LockupReport) + Send + Sync + 'static>;

/// A hook as the registry keeps it (shared with the threads calling it).
type SharedHook = Arc<dyn Fn(&LockupReport) + Send + Sync + 'static>;

static HOOK: RwLock<Option<SharedHook>> = RwLock::new(None);

/// Installs `hook` to receive lockup reports instead of the current one.
pub fn set_hook(hook: Hook) {
    *HOOK.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::from(hook));
}

/// Removes the current hook, restoring the default (one line on stderr), and returns it, so that
/// it can be put back with [`set_hook`]. The default hook is returned as a hook that prints.
pub fn take_hook() -> Hook {
    match HOOK.write().unwrap_or_else(|e| e.into_inner()).take() {
        Some(hook) => Box::new(move |report| hook(report)),
        None => Box::new(default_hook),
    }
}

fn default_hook(report: &LockupReport) {
    eprintln!("{report}");
}

fn call_hook(report: &LockupReport) {
    let hook = HOOK.read().unwrap_or_else(|e| e.into_inner()).clone();
    match hook {
        Some(hook) => hook(report),
        None => default_hook(report),
    }
}

// ---- Thread identities ---------------------------------------------------------------------

/// The threads that hold a number: the live ones, and the last [`EXITED_KEPT`] to exit.
static THREADS: Mutex<Registry> = Mutex::new(Registry {
    names: BTreeMap::new(),
    exited: VecDeque::new(),
});
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// How many exited threads the registry remembers (a report may name one as a lock's holder).
const EXITED_KEPT: usize = 1024;

struct Registry {
    /// Name and "has exited", by number.
    names: BTreeMap<u64, (Option<String>, bool)>,
    /// Exited threads, oldest first.
    exited: VecDeque<u64>,
}

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    THREADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A thread's number; gives it back when the thread ends.
struct ThreadTag(u64);

impl ThreadTag {
    fn register() -> Self {
        // Relaxed: only uniqueness matters.
        let id = NEXT_ID.fetch_add(1, Relaxed);
        let name = std::thread::current().name().map(String::from);
        registry().names.insert(id, (name, false));
        ThreadTag(id)
    }
}

impl Drop for ThreadTag {
    fn drop(&mut self) {
        let mut registry = registry();
        if let Some(entry) = registry.names.get_mut(&self.0) {
            entry.1 = true;
        }
        registry.exited.push_back(self.0);
        if registry.exited.len() > EXITED_KEPT
            && let Some(oldest) = registry.exited.pop_front()
        {
            registry.names.remove(&oldest);
        }
    }
}

crate::sync::thread_local! {
    static TAG: ThreadTag = ThreadTag::register();
}

/// The calling thread's number in lockup reports (0 in its thread-local destructors).
pub fn thread_id() -> u64 {
    TAG.try_with(|tag| tag.0).unwrap_or(0)
}

fn thread_info(id: u64) -> Option<ThreadInfo> {
    let (name, exited) = registry().names.get(&id).cloned()?;
    Some(ThreadInfo { id, name, exited })
}

// ---- The per-lock part ----------------------------------------------------------------------

/// What a lock carries with the feature: who took it last, where, and the last episode reported.
pub(crate) struct Tracker {
    /// The holder's thread number (0: unknown).
    holder: AtomicU64,
    /// The holder's call site (null: unknown).
    site: AtomicPtr<Location<'static>>,
    /// `acquisitions + 1` when the last report was made (0: never).
    reported: AtomicU64,
}

impl Tracker {
    pub(crate) const fn new() -> Self {
        Tracker {
            holder: AtomicU64::new(0),
            site: AtomicPtr::new(std::ptr::null_mut()),
            reported: AtomicU64::new(0),
        }
    }

    /// Records the new holder. Called by it, while it holds the lock. Relaxed: a report reads
    /// these only as a hint about who held the lock last.
    #[inline]
    pub(crate) fn on_acquire(&self, site: &'static Location<'static>) {
        self.holder.store(thread_id(), Relaxed);
        self.site.store(
            site as *const Location<'static> as *mut Location<'static>,
            Relaxed,
        );
    }
}

/// Visits the NUMA node of every waiter in a lock's queues, for the report: the lock passes a
/// closure that walks its own queues (each lock knows its queues; this module knows none).
///
/// Named here rather than taken from the queue-lock core (`raw::QueueWalk`, the same type), so
/// that this module, which the core calls, does not depend on the core.
pub(crate) type WaiterWalk<'a> = &'a dyn Fn(&mut dyn FnMut(u64));

/// A queue head's lockup check: created when it starts waiting for the lock word, run after
/// every wake-up.
pub(crate) struct HeadCheck<'a> {
    tracker: &'a Tracker,
    counters: &'a crate::stats::Counters,
    /// The raw lock's address.
    lock: usize,
    /// Visits the NUMA node of every queued waiter.
    walk: WaiterWalk<'a>,
    threshold_ns: u64,
    since: u64,
    last_acquisitions: u64,
    progress_at: u64,
}

/// How often a head checks, as a fraction of the threshold.
const CHECKS_PER_THRESHOLD: u64 = 4;

impl<'a> HeadCheck<'a> {
    /// A check for a head that starts waiting now, or `None` while no threshold is set.
    pub(crate) fn new(
        tracker: &'a Tracker,
        counters: &'a crate::stats::Counters,
        lock: usize,
        walk: WaiterWalk<'a>,
    ) -> Option<Self> {
        let threshold_ns = tunables::lockup_threshold_ns();
        if threshold_ns == 0 {
            return None;
        }
        let now = now_ns();
        Some(HeadCheck {
            tracker,
            counters,
            lock,
            walk,
            threshold_ns,
            since: now,
            last_acquisitions: counters.acquisitions(),
            progress_at: now,
        })
    }

    /// The latest time the head may sleep until: the next check.
    pub(crate) fn wake_by(&self, now: u64) -> u64 {
        now.saturating_add(self.threshold_ns / CHECKS_PER_THRESHOLD)
    }

    /// Checks, and reports once per episode.
    pub(crate) fn check(&mut self) {
        let now = now_ns();
        let acquisitions = self.counters.acquisitions();
        if acquisitions != self.last_acquisitions {
            self.last_acquisitions = acquisitions;
            self.progress_at = now;
        }
        let stalled = now.saturating_sub(self.progress_at);
        let waited = now.saturating_sub(self.since);
        if stalled < self.threshold_ns || waited < self.threshold_ns {
            return;
        }
        let episode = acquisitions.wrapping_add(1);
        let reported = self.tracker.reported.load(Relaxed);
        // Relaxed: the CAS only decides which waiter reports this episode.
        if reported == episode
            || self
                .tracker
                .reported
                .compare_exchange(reported, episode, Relaxed, Relaxed)
                .is_err()
        {
            return;
        }
        let mut per_node = BTreeMap::<usize, usize>::new();
        let mut queue_len = 0;
        (self.walk)(&mut |numa| {
            queue_len += 1;
            *per_node.entry(numa as usize).or_default() += 1;
        });
        let site = self.tracker.site.load(Relaxed);
        let holder = match self.tracker.holder.load(Relaxed) {
            0 => None,
            // A holder forgotten by the registry is still named by its number.
            id => Some(thread_info(id).unwrap_or(ThreadInfo {
                id,
                name: None,
                exited: true,
            })),
        };
        let report = LockupReport {
            lock: self.lock,
            waited: Duration::from_nanos(waited),
            stalled: Duration::from_nanos(stalled),
            waiter: thread_info(thread_id()).unwrap_or(ThreadInfo {
                id: thread_id(),
                name: None,
                exited: false,
            }),
            holder,
            // SAFETY: only ever set from a `&'static Location<'static>`.
            holder_site: unsafe { site.cast_const().as_ref() },
            queue_len,
            waiters_per_node: per_node.into_iter().collect(),
        };
        call_hook(&report);
    }
}
