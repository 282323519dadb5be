//! Which NUMA node am I on? How many nodes are there?
//!
//! - [`node_count`]: the machine's nodes with CPUs (at least 1), detected once by [`Topology::detect`].
//! - [`current_node`]: the calling thread's node as a dense index, cheap enough for lock slow paths
//!   (a thread-local read, then `sched_getcpu` — a few nanoseconds with glibc's rseq — and a table read).
//! - [`set_thread_node`] / [`set_virtual_nodes`]: virtual topologies, so NUMA-aware code can be tested on a
//!   one-node machine. Virtual node ids are not limited to `0..node_count()`: locks map them themselves.
//!
//! A node id is only a hint: a thread may migrate right after asking. A stale or even garbage node id may
//! cost performance, never correctness.
//!
//! Detection (see [`Topology::detect`] and [`Topology::from_sysfs`]): feature `hwloc` uses hwloc; otherwise
//! Linux sysfs (`/sys/devices/system/node/node*/cpulist`, sparse node numbers allowed, offline CPUs
//! dropped, memory-only nodes skipped); without sysfs (containers, other systems) or with a malformed one,
//! a single node. Outside Linux and Android there is no cheap "current CPU", so [`current_node`] answers 0
//! unless overridden, even with feature `hwloc` (where [`node_count`] is still right).
//!
//! # Examples
//!
//! ```
//! use numa_locks::topology;
//!
//! topology::set_thread_node(Some(3));
//! assert_eq!(topology::current_node(), 3);
//!
//! topology::set_thread_node(None);
//! assert!(topology::current_node() < topology::node_count());
//! ```

use std::cell::Cell;
use std::sync::OnceLock;
// Global settings, not part of any handoff protocol: std atomics even under loom (loom atomics cannot be
// statics).
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

mod error;
#[cfg(feature = "hwloc")]
mod hwloc;
mod sysfs;
mod table;

pub use error::TopologyError;
pub use sysfs::parse_cpulist;
pub use table::{NodeInfo, Topology};

/// Every CPU number must be below this (2^20; Linux's own limit, `NR_CPUS`, is at most 8192 today).
///
/// It bounds the cpu→node table at 4 MiB, so a garbage CPU list cannot make us allocate gigabytes.
pub const MAX_CPUS: usize = 1 << 20;

/// The machine's topology, detected on first use.
static DETECTED: OnceLock<Topology> = OnceLock::new();

/// Round-robin virtual node count; 0 = off.
static VIRTUAL_NODE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The next round-robin ordinal to hand out.
static NEXT_ORDINAL: AtomicUsize = AtomicUsize::new(0);

/// Whether [`current_node`] may answer 0 at once, without its thread-local and the topology
/// table: `ALWAYS_ZERO_YES` once a thread found the machine to have one node with no virtual
/// nodes set, `ALWAYS_ZERO_NO` for good once any virtual node was set (the answer then depends
/// on the thread). Saves 2 of the 2.5 ns a call took on the machine of BENCHMARKS.md, where
/// feature `stats` calls it on every acquisition.
static ALWAYS_ZERO: AtomicU8 = AtomicU8::new(ALWAYS_ZERO_UNKNOWN);
const ALWAYS_ZERO_UNKNOWN: u8 = 0;
const ALWAYS_ZERO_YES: u8 = 1;
const ALWAYS_ZERO_NO: u8 = 2;

/// What the calling thread was told about its node.
struct ThreadNode {
    /// Set by [`set_thread_node`]; wins over everything.
    explicit: Cell<Option<usize>>,
    /// The thread's round-robin ordinal, taken on its first [`current_node`] call with virtual nodes on.
    ordinal: Cell<Option<usize>>,
}

impl ThreadNode {
    const fn new() -> Self {
        ThreadNode {
            explicit: Cell::new(None),
            ordinal: Cell::new(None),
        }
    }

    #[inline]
    fn node(&self) -> usize {
        if let Some(node) = self.explicit.get() {
            return node;
        }
        // Relaxed: the count is a hint published alone; a thread that sees an old value for a moment only
        // gets a stale node id.
        let virtual_count = VIRTUAL_NODE_COUNT.load(Ordering::Relaxed);
        if virtual_count != 0 {
            return self.virtual_ordinal() % virtual_count;
        }
        hardware_node()
    }

    fn virtual_ordinal(&self) -> usize {
        if let Some(ordinal) = self.ordinal.get() {
            return ordinal;
        }
        // Relaxed: only uniqueness matters, and the read-modify-write gives it at any ordering.
        let ordinal = NEXT_ORDINAL.fetch_add(1, Ordering::Relaxed);
        self.ordinal.set(Some(ordinal));
        ordinal
    }
}

// No destructor, so std can use the cheap `const` form.
crate::sync::thread_local!(static THREAD_NODE: ThreadNode = const { ThreadNode::new() });

/// The machine's topology, as [`Topology::detect`] found it on the first call.
///
/// [`node_count`] and [`current_node`] answer from it.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// assert_eq!(topology::detected().node_count(), topology::node_count());
/// ```
pub fn detected() -> &'static Topology {
    DETECTED.get_or_init(Topology::detect)
}

/// Number of NUMA nodes with CPUs on this machine; at least 1.
///
/// Virtual nodes ([`set_thread_node`], [`set_virtual_nodes`]) do not change it.
///
/// # Examples
///
/// ```
/// assert!(numa_locks::topology::node_count() >= 1);
/// ```
#[inline]
pub fn node_count() -> usize {
    match crate::sync::modelled_node() {
        Some((_, count)) => count,
        None => detected().node_count(),
    }
}

/// The calling thread's node.
///
/// In order: the thread's [`set_thread_node`] override (any value); else, if [`set_virtual_nodes`] is on
/// with `n` nodes, `ordinal % n`; else the node of the CPU the thread runs on (`sched_getcpu` and the
/// [`detected`] table), in `0..node_count()`. An unknown or offline CPU, a failing `sched_getcpu`, a
/// system other than Linux or Android, and a thread in its thread-local destructors give 0.
///
/// Under `cfg(loom)` the hardware answer is always 0, so models stay deterministic; use
/// [`set_thread_node`] there (round-robin ordinals are process-wide, so they differ between model runs).
/// Under `cfg(numa_sim)` it is the node of the simulated core the thread is pinned to.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// assert!(topology::current_node() < topology::node_count());
/// ```
#[inline]
pub fn current_node() -> usize {
    // Relaxed: a thread that sets a virtual node stores `ALWAYS_ZERO_NO` first, so it reads its
    // own store; another thread may answer 0 for a moment after, as with `set_virtual_nodes`.
    if !crate::sync::MODELLED && ALWAYS_ZERO.load(Ordering::Relaxed) == ALWAYS_ZERO_YES {
        return 0;
    }
    current_node_slow()
}

#[cold]
fn current_node_slow() -> usize {
    let node = THREAD_NODE
        .try_with(ThreadNode::node)
        .unwrap_or_else(|_| hardware_node());
    if !crate::sync::MODELLED
        && ALWAYS_ZERO.load(Ordering::Relaxed) == ALWAYS_ZERO_UNKNOWN
        && detected().node_count() <= 1
        && VIRTUAL_NODE_COUNT.load(Ordering::Relaxed) == 0
        && THREAD_NODE
            .try_with(|thread| thread.explicit.get().is_none())
            .unwrap_or(false)
    {
        // Fails if a virtual node was set meanwhile (`ALWAYS_ZERO_NO` is for good).
        let _ = ALWAYS_ZERO.compare_exchange(
            ALWAYS_ZERO_UNKNOWN,
            ALWAYS_ZERO_YES,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    node
}

/// Overrides the calling thread's node (tests, NUMA emulation); `None` returns to detection.
///
/// Any value is accepted and returned as-is by [`current_node`], even beyond [`node_count`] (virtual
/// nodes): code that sizes per-node state must map node ids into its own range. The override wins over
/// [`set_virtual_nodes`]. It affects only the calling thread, and has no effect during its thread-local
/// destructors.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// topology::set_thread_node(Some(usize::MAX));
/// assert_eq!(topology::current_node(), usize::MAX);
/// std::thread::spawn(|| assert!(topology::current_node() < topology::node_count()))
///     .join()
///     .unwrap();
/// topology::set_thread_node(None);
/// ```
pub fn set_thread_node(node: Option<usize>) {
    if node.is_some() {
        // Relaxed: see `current_node`.
        ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
    }
    // Ignoring the error: a thread already destroying its thread-locals has no more locks to take.
    let _ = THREAD_NODE.try_with(|thread| thread.explicit.set(node));
}

/// Assigns threads round-robin to `count` virtual nodes; `None` turns it off.
///
/// While on, every thread without a [`set_thread_node`] override gets node `ordinal % count`, where
/// `ordinal` is a process-wide sequence number the thread takes on its first [`current_node`] call while
/// virtual nodes are on (and keeps). The setting is process-wide and takes effect at once.
///
/// # Errors
///
/// [`TopologyError::InvalidVirtualNodeCount`] for `Some(0)`; the setting is then unchanged.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// topology::set_virtual_nodes(Some(4))?;
/// let nodes: Vec<usize> = (0..4)
///     .map(|_| std::thread::spawn(topology::current_node).join().unwrap())
///     .collect();
/// assert!(nodes.iter().all(|&node| node < 4));
/// topology::set_virtual_nodes(None)?;
/// assert!(topology::set_virtual_nodes(Some(0)).is_err());
/// # Ok::<(), topology::TopologyError>(())
/// ```
pub fn set_virtual_nodes(count: Option<usize>) -> Result<(), TopologyError> {
    let stored = match count {
        None => 0,
        Some(0) => return Err(TopologyError::InvalidVirtualNodeCount { value: 0 }),
        Some(count) => count,
    };
    if stored != 0 {
        // Relaxed: see `current_node`.
        ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
    }
    // Relaxed: see the load in `ThreadNode::node`.
    VIRTUAL_NODE_COUNT.store(stored, Ordering::Relaxed);
    Ok(())
}

/// The round-robin virtual node count set by [`set_virtual_nodes`], if on.
///
/// # Examples
///
/// ```
/// assert_eq!(numa_locks::topology::virtual_nodes(), None);
/// ```
pub fn virtual_nodes() -> Option<usize> {
    // Relaxed: see the load in `ThreadNode::node`.
    match VIRTUAL_NODE_COUNT.load(Ordering::Relaxed) {
        0 => None,
        count => Some(count),
    }
}

/// The node of the CPU the calling thread runs on; 0 when unknown.
#[inline]
fn hardware_node() -> usize {
    if let Some((node, _)) = crate::sync::modelled_node() {
        return node;
    }
    let topology = detected();
    if topology.node_count() <= 1 {
        return 0; // no need to ask for the CPU
    }
    current_cpu()
        .and_then(|cpu| topology.node_of_cpu(cpu))
        .unwrap_or(0)
}

/// The CPU the calling thread runs on.
#[cfg(all(not(miri), any(target_os = "linux", target_os = "android")))]
#[inline]
fn current_cpu() -> Option<usize> {
    // SAFETY: `sched_getcpu` takes no arguments and has no preconditions; it returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// No cheap "current CPU" here; nor under Miri, which does not implement `sched_getcpu` (its
/// tests read the real `/sys`, which may list several nodes).
#[cfg(any(miri, not(any(target_os = "linux", target_os = "android"))))]
#[inline]
fn current_cpu() -> Option<usize> {
    None
}
