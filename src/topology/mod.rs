//! Which NUMA node and which cache domain am I on? How many are there?
//!
//! The machine is a hierarchy of three levels: **cache domain** (CPUs that share a last-level
//! cache, the L3: an AMD CCX, a whole socket on most Intel parts) ⊂ **NUMA node** ⊂ machine. A line
//! moves between two cores of one domain several times faster than between two domains of one node
//! (about 23 ns against 108 ns on a 2-socket EPYC 7R13), so a lock that stays inside one domain
//! keeps its lines close. Where a node has one L3, or the system does not say, each node is one
//! domain and the hierarchy has the two familiar levels.
//!
//! - [`node_count`] / [`domain_count`]: the machine's nodes with CPUs and their cache domains (at
//!   least 1 each), detected once by [`Topology::detect`].
//! - [`current_node`]: the calling thread's node as a dense index, cheap enough for lock slow paths
//!   (a thread-local read, then `sched_getcpu` — a few nanoseconds with glibc's rseq — and a table
//!   read).
//! - [`current_locality`]: the node and the cache domain together, for the same one CPU lookup.
//! - [`set_thread_node`] / [`set_virtual_nodes`], [`set_thread_domain`] / [`set_virtual_domains`]:
//!   virtual topologies, so NUMA-aware code can be tested on a one-node machine. Virtual ids are
//!   not limited to `0..node_count()` or `0..domain_count()`: locks map them themselves.
//!
//! A node id is only a hint: a thread may migrate right after asking. A stale or even garbage node
//! id may cost performance, never correctness.
//!
//! Detection (see [`Topology::detect`] and [`Topology::from_sysfs`]): feature `hwloc` uses hwloc;
//! otherwise Linux sysfs (`/sys/devices/system/node/node*/cpulist`, sparse node numbers allowed,
//! offline CPUs dropped, memory-only nodes skipped; cache domains from
//! `cpu/cpu*/cache/index*/shared_cpu_list` of the level-3 cache); without sysfs (containers, other
//! systems) or with a malformed one, a single node. Missing or inconsistent cache data never fails:
//! the topology keeps one domain per node. Outside Linux and Android there is no cheap "current
//! CPU", so [`current_node`] answers 0 unless overridden, even with feature `hwloc` (where
//! [`node_count`] is still right).
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
//!
//! let here = topology::current_locality();
//! assert!(here.domain < topology::domain_count());
//! assert_eq!(topology::detected().domain_node(here.domain), Some(here.node));
//! ```

use std::cell::Cell;
use std::sync::OnceLock;
// Global settings, not part of any handoff protocol: std atomics even under loom (loom atomics
// cannot be statics).
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

mod error;
#[cfg(feature = "hwloc")]
mod hwloc;
mod sysfs;
mod table;

pub use error::TopologyError;
pub use sysfs::parse_cpulist;
pub use table::{DomainInfo, NodeInfo, Topology};

/// Every CPU number must be below this (2^20; Linux's own limit, `NR_CPUS`, is at most 8192 today).
///
/// It bounds the cpu→(node, domain) table at 8 MiB, so a garbage CPU list cannot make us allocate
/// gigabytes. It is also the most virtual domains per node [`set_virtual_domains`] accepts: a
/// domain holds at least one CPU.
pub const MAX_CPUS: usize = 1 << 20;

/// Where a thread runs: its NUMA node and its cache (L3) domain, both dense indices (or virtual
/// ids, see [`set_thread_node`] and [`set_thread_domain`]).
///
/// Domains are numbered machine-wide, node by node (node 0's domains first), so on real hardware
/// `domain` lies in `0..domain_count()` and belongs to `node`
/// ([`Topology::domain_node`]`(domain) == Some(node)`). Without cache information each node is one
/// domain and `domain == node`.
///
/// # Examples
///
/// ```
/// use numa_locks::topology::{self, Locality};
///
/// topology::set_thread_node(Some(1));
/// topology::set_thread_domain(Some(5));
/// assert_eq!(topology::current_locality(), Locality { node: 1, domain: 5 });
/// topology::set_thread_domain(None);
/// topology::set_thread_node(None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Locality {
    /// The NUMA node.
    pub node: usize,
    /// The cache (L3) domain.
    pub domain: usize,
}

impl Locality {
    /// Node 0, domain 0: the answer on a one-node, one-domain machine.
    const ZERO: Locality = Locality { node: 0, domain: 0 };
}

/// The machine's topology, detected on first use.
static DETECTED: OnceLock<Topology> = OnceLock::new();

/// Round-robin virtual node count; 0 = off.
static VIRTUAL_NODE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Round-robin virtual domains per node; 0 = off.
static VIRTUAL_DOMAIN_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The next round-robin ordinal to hand out.
static NEXT_ORDINAL: AtomicUsize = AtomicUsize::new(0);

/// Whether [`current_node`] may answer 0 at once, without its thread-local and the topology
/// table: `ALWAYS_ZERO_YES` once a thread found the machine to have one node with no virtual
/// nodes set, `ALWAYS_ZERO_NO` for good once any virtual node was set (the answer then depends
/// on the thread). Saves most of a call's cost (the thread-local and the table), which matters
/// because feature `stats` calls it on every acquisition.
static ALWAYS_ZERO: AtomicU8 = AtomicU8::new(ALWAYS_ZERO_UNKNOWN);
const ALWAYS_ZERO_UNKNOWN: u8 = 0;
const ALWAYS_ZERO_YES: u8 = 1;
const ALWAYS_ZERO_NO: u8 = 2;

/// [`ALWAYS_ZERO`] for [`current_locality`]: `ALWAYS_ZERO_YES` once a thread found the machine to
/// have one domain (so one node) with no virtual node or domain set, `ALWAYS_ZERO_NO` for good once
/// any was set. Separate from `ALWAYS_ZERO`, so that a one-node machine with several L3 domains
/// (one EPYC socket) keeps `current_node`'s shortcut.
static LOCALITY_ALWAYS_ZERO: AtomicU8 = AtomicU8::new(ALWAYS_ZERO_UNKNOWN);

/// What the calling thread was told about its node.
struct ThreadNode {
    /// Set by [`set_thread_node`]; wins over everything.
    explicit: Cell<Option<usize>>,
    /// Set by [`set_thread_domain`]; wins over everything for the domain.
    explicit_domain: Cell<Option<usize>>,
    /// The thread's round-robin ordinal, taken on its first [`current_node`] call with virtual
    /// nodes on.
    ordinal: Cell<Option<usize>>,
}

impl ThreadNode {
    const fn new() -> Self {
        ThreadNode {
            explicit: Cell::new(None),
            explicit_domain: Cell::new(None),
            ordinal: Cell::new(None),
        }
    }

    #[inline]
    fn node(&self) -> usize {
        if let Some(node) = self.explicit.get() {
            return node;
        }
        // Relaxed: the count is a hint published alone; a thread that sees an old value for a
        // moment only gets a stale node id.
        let virtual_count = VIRTUAL_NODE_COUNT.load(Ordering::Relaxed);
        if virtual_count != 0 {
            return self.virtual_ordinal() % virtual_count;
        }
        hardware_node()
    }

    /// The node as [`ThreadNode::node`] finds it, and the domain: the explicit one; else with
    /// virtual domains on (`k` per node), domain `node * k + sub`, `sub` the thread's ordinal
    /// spread over the `k`; else the hardware domain where the node is the hardware's; else the
    /// node's own id (a virtual node is one domain).
    #[inline]
    fn locality(&self) -> Locality {
        // Relaxed: hints published alone, as in `node`.
        let virtual_nodes = VIRTUAL_NODE_COUNT.load(Ordering::Relaxed);
        let virtual_domains = VIRTUAL_DOMAIN_COUNT.load(Ordering::Relaxed);
        let explicit_node = self.explicit.get();
        let (node, hardware_domain) = match explicit_node {
            Some(node) => (node, None),
            None if virtual_nodes != 0 => (self.virtual_ordinal() % virtual_nodes, None),
            None => {
                let hardware = hardware_locality();
                (hardware.node, Some(hardware.domain))
            }
        };
        let domain = if let Some(domain) = self.explicit_domain.get() {
            domain
        } else if virtual_domains != 0 {
            // Threads spread over the nodes first (ordinals 0..n go to domain 0 of each of n
            // virtual nodes), then over the domains of a node, as a spreading scheduler does.
            let spread = if explicit_node.is_none() && virtual_nodes != 0 {
                self.virtual_ordinal() / virtual_nodes
            } else {
                self.virtual_ordinal()
            };
            // Wrapping: virtual ids may be anything (`set_thread_node(Some(usize::MAX))`); they are
            // hints that locks map themselves.
            node.wrapping_mul(virtual_domains)
                .wrapping_add(spread % virtual_domains)
        } else {
            hardware_domain.unwrap_or(node)
        };
        Locality { node, domain }
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

/// Number of cache (L3) domains on this machine: at least [`node_count`] (so at least 1), equal to
/// it where each node has one L3 or the L3 layout is unknown. Under `cfg(numa_sim)`, the simulated
/// machine's; under `cfg(loom)`, 1.
///
/// Virtual domains ([`set_thread_domain`], [`set_virtual_domains`]) do not change it.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// assert!(topology::domain_count() >= topology::node_count());
/// assert_eq!(topology::domain_count(), topology::detected().domain_count());
/// ```
#[inline]
pub fn domain_count() -> usize {
    match crate::sync::modelled_domain() {
        Some((_, count)) => count,
        None => detected().domain_count(),
    }
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
/// In order: the thread's [`set_thread_node`] override (any value); else, if [`set_virtual_nodes`]
/// is on with `n` nodes, `ordinal % n`; else the node of the CPU the thread runs on (`sched_getcpu`
/// and the [`detected`] table), in `0..node_count()`. An unknown or offline CPU, a failing
/// `sched_getcpu`, a system other than Linux or Android, and a thread in its thread-local
/// destructors give 0.
///
/// Under `cfg(loom)` the hardware answer is always 0, so models stay deterministic; use
/// [`set_thread_node`] there (round-robin ordinals are process-wide, so they differ between model
/// runs). Under `cfg(numa_sim)` it is the node of the simulated core the thread is pinned to.
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

/// The calling thread's node and cache domain, for one CPU lookup (one `sched_getcpu` and one table
/// read): `current_locality().node == current_node()`.
///
/// The node as [`current_node`] finds it. The domain, in order: the thread's [`set_thread_domain`]
/// override (any value); else, if [`set_virtual_domains`] is on with `k` domains per node, domain
/// `node * k + i` with `i` in `0..k` from the thread's round-robin ordinal (with virtual nodes on
/// too, threads fill domain 0 of every virtual node before domain 1); else, where the node came
/// from the hardware, the domain of the CPU the thread runs on (in `0..domain_count()`, inside that
/// node); else (a virtual node) the node's id. A machine with one domain per node answers `domain`
/// = the node's dense index; an unknown CPU gives node 0 and domain 0.
///
/// Under `cfg(loom)` the hardware answer is node 0, domain 0; under `cfg(numa_sim)` the simulated
/// core's node and L3 domain.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// let here = topology::current_locality();
/// assert_eq!(here.node, topology::current_node());
/// assert!(here.domain < topology::domain_count());
///
/// // Two virtual nodes of three domains each: domains 0..3 belong to node 0, 3..6 to node 1.
/// topology::set_thread_node(Some(1));
/// topology::set_virtual_domains(Some(3))?;
/// assert!((3..6).contains(&topology::current_locality().domain));
/// topology::set_virtual_domains(None)?;
/// topology::set_thread_node(None);
/// # Ok::<(), topology::TopologyError>(())
/// ```
#[inline]
pub fn current_locality() -> Locality {
    // Relaxed: as in `current_node`; every setter stores `ALWAYS_ZERO_NO` first.
    if !crate::sync::MODELLED && LOCALITY_ALWAYS_ZERO.load(Ordering::Relaxed) == ALWAYS_ZERO_YES {
        return Locality::ZERO;
    }
    current_locality_slow()
}

#[cold]
fn current_locality_slow() -> Locality {
    let locality = THREAD_NODE
        .try_with(ThreadNode::locality)
        .unwrap_or_else(|_| hardware_locality());
    if !crate::sync::MODELLED
        && LOCALITY_ALWAYS_ZERO.load(Ordering::Relaxed) == ALWAYS_ZERO_UNKNOWN
        && detected().domain_count() <= 1
        && VIRTUAL_NODE_COUNT.load(Ordering::Relaxed) == 0
        && VIRTUAL_DOMAIN_COUNT.load(Ordering::Relaxed) == 0
        && THREAD_NODE
            .try_with(|thread| {
                thread.explicit.get().is_none() && thread.explicit_domain.get().is_none()
            })
            .unwrap_or(false)
    {
        // Fails if a virtual node or domain was set meanwhile (`ALWAYS_ZERO_NO` is for good).
        let _ = LOCALITY_ALWAYS_ZERO.compare_exchange(
            ALWAYS_ZERO_UNKNOWN,
            ALWAYS_ZERO_YES,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    locality
}

/// Overrides the calling thread's node (tests, NUMA emulation); `None` returns to detection.
///
/// Any value is accepted and returned as-is by [`current_node`], even beyond [`node_count`]
/// (virtual nodes): code that sizes per-node state must map node ids into its own range. The
/// override wins over [`set_virtual_nodes`]. It affects only the calling thread, and has no effect
/// during its thread-local destructors.
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
        LOCALITY_ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
    }
    // Ignoring the error: a thread already destroying its thread-locals has no more locks to take.
    let _ = THREAD_NODE.try_with(|thread| thread.explicit.set(node));
}

/// Overrides the calling thread's cache domain (tests, emulation); `None` returns to detection.
///
/// Any value is accepted and returned as-is as [`current_locality`]'s `domain`, even beyond
/// [`domain_count`], and whatever the thread's node: code that sizes per-domain state must map
/// domain ids into its own range. The override wins over [`set_virtual_domains`]; it does not
/// change the node ([`set_thread_node`]). It affects only the calling thread, and has no effect
/// during its thread-local destructors.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// topology::set_thread_domain(Some(usize::MAX));
/// assert_eq!(topology::current_locality().domain, usize::MAX);
/// assert_eq!(topology::current_locality().node, topology::current_node());
/// topology::set_thread_domain(None);
/// assert!(topology::current_locality().domain < topology::domain_count());
/// ```
pub fn set_thread_domain(domain: Option<usize>) {
    if domain.is_some() {
        // Relaxed: see `current_locality`.
        LOCALITY_ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
    }
    // Ignoring the error: as in `set_thread_node`.
    let _ = THREAD_NODE.try_with(|thread| thread.explicit_domain.set(domain));
}

/// Splits every node into `count` virtual cache domains, threads assigned round-robin; `None` turns
/// it off.
///
/// While on, a thread without a [`set_thread_domain`] override on node `n` (virtual or not) gets
/// domain `n * count + i`, `i` in `0..count` from its round-robin ordinal (the one
/// [`set_virtual_nodes`] uses; with virtual nodes on, the first threads go to domain 0 of every
/// node, the next ones to domain 1, and so on). So domains stay contiguous per node, as on
/// hardware. The setting is process-wide, takes effect at once, and does not change
/// [`domain_count`].
///
/// # Errors
///
/// [`TopologyError::InvalidVirtualDomainCount`] for `Some(0)` or a count above [`MAX_CPUS`] (a
/// domain holds at least one CPU); the setting is then unchanged.
///
/// # Examples
///
/// ```
/// use numa_locks::topology;
///
/// topology::set_virtual_nodes(Some(2))?;
/// topology::set_virtual_domains(Some(4))?;
/// let places: Vec<topology::Locality> = (0..8)
///     .map(|_| std::thread::spawn(topology::current_locality).join().unwrap())
///     .collect();
/// assert!(places.iter().all(|p| p.node < 2 && p.domain / 4 == p.node));
/// topology::set_virtual_domains(None)?;
/// topology::set_virtual_nodes(None)?;
/// assert!(topology::set_virtual_domains(Some(0)).is_err());
/// # Ok::<(), topology::TopologyError>(())
/// ```
pub fn set_virtual_domains(count: Option<usize>) -> Result<(), TopologyError> {
    let stored = match count {
        None => 0,
        Some(count @ 1..=MAX_CPUS) => count,
        Some(value) => {
            return Err(TopologyError::InvalidVirtualDomainCount {
                value,
                max: MAX_CPUS,
            });
        }
    };
    if stored != 0 {
        // Relaxed: see `current_locality`.
        LOCALITY_ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
    }
    // Relaxed: see the load in `ThreadNode::locality`.
    VIRTUAL_DOMAIN_COUNT.store(stored, Ordering::Relaxed);
    Ok(())
}

/// The virtual domains per node set by [`set_virtual_domains`], if on.
///
/// # Examples
///
/// ```
/// assert_eq!(numa_locks::topology::virtual_domains(), None);
/// ```
pub fn virtual_domains() -> Option<usize> {
    // Relaxed: see the load in `ThreadNode::locality`.
    match VIRTUAL_DOMAIN_COUNT.load(Ordering::Relaxed) {
        0 => None,
        count => Some(count),
    }
}

/// Assigns threads round-robin to `count` virtual nodes; `None` turns it off.
///
/// While on, every thread without a [`set_thread_node`] override gets node `ordinal % count`, where
/// `ordinal` is a process-wide sequence number the thread takes on its first [`current_node`] call
/// while virtual nodes are on (and keeps). The setting is process-wide and takes effect at once.
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
        LOCALITY_ALWAYS_ZERO.store(ALWAYS_ZERO_NO, Ordering::Relaxed);
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

/// The node and domain of the CPU the calling thread runs on, from one CPU lookup; node 0, domain 0
/// when unknown.
#[inline]
fn hardware_locality() -> Locality {
    if let (Some((node, _)), Some((domain, _))) =
        (crate::sync::modelled_node(), crate::sync::modelled_domain())
    {
        return Locality { node, domain };
    }
    let topology = detected();
    if topology.domain_count() <= 1 {
        return Locality::ZERO; // no need to ask for the CPU
    }
    current_cpu()
        .and_then(|cpu| topology.locality_of_cpu(cpu))
        .unwrap_or(Locality::ZERO)
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
