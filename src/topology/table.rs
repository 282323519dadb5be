//! [`Topology`]: the nodes, their cache domains, their CPUs, and the cpu→(node, domain) table built
//! from them.

use std::fmt;
use std::num::NonZeroUsize;

use super::{Locality, MAX_CPUS, TopologyError};

/// One NUMA node that has CPUs.
///
/// # Examples
///
/// ```
/// use numa_locks::topology::Topology;
///
/// let topology = Topology::single_node(4);
/// let node = &topology.nodes()[0];
/// assert_eq!(node.os_index, 0);
/// assert_eq!(node.cpus, [0, 1, 2, 3]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's number as the system gives it (`N` in sysfs `node<N>`, hwloc's OS index). Node
    /// numbers may be sparse; the node's dense index is its position in [`Topology::nodes`].
    pub os_index: usize,
    /// The node's online CPUs, sorted, without duplicates, never empty.
    pub cpus: Vec<usize>,
}

/// One cache domain: CPUs of one NUMA node that share a last-level (L3) cache, such as an AMD CCX.
///
/// Domains nest in nodes: a domain never spans two nodes (an L3 that does is split per node). A
/// node whose CPUs share one L3, or for which the system reports no usable L3, is one domain.
///
/// # Examples
///
/// ```
/// use numa_locks::topology::Topology;
///
/// let topology = Topology::single_node(4);
/// let domain = &topology.domains()[0];
/// assert_eq!(domain.node, 0);
/// assert_eq!(domain.cpus, [0, 1, 2, 3]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainInfo {
    /// The dense index of the node that holds the domain (its position in [`Topology::nodes`]).
    pub node: usize,
    /// The domain's online CPUs, sorted, without duplicates, never empty.
    pub cpus: Vec<usize>,
}

/// The NUMA nodes of a machine (or of a test fixture), their cache domains, and where each CPU
/// belongs.
///
/// Nodes are numbered densely (`0..node_count()`) in the order of their OS index; only nodes with
/// at least one online CPU are kept. Cache domains (see [`DomainInfo`]) are numbered densely
/// (`0..domain_count()`) machine-wide, node by node: node 0's domains first, and within a node in
/// the order of their lowest CPU. Where the system reports no usable L3 information, every node is
/// one domain, and domain `i` is node `i`. Build one with [`Topology::detect`],
/// [`Topology::from_sysfs`], [`Topology::single_node`] or (feature `hwloc`) `Topology::from_hwloc`
/// / `from_hwloc_synthetic`; the process-wide one that [`current_node`](super::current_node) uses
/// is [`detected`](super::detected).
///
/// # Examples
///
/// ```
/// use numa_locks::topology::Topology;
///
/// let topology = Topology::single_node(2);
/// assert_eq!(topology.node_count(), 1);
/// assert_eq!(topology.cpu_count(), 2);
/// assert_eq!(topology.node_of_cpu(1), Some(0));
/// assert_eq!(topology.node_of_cpu(2), None);
/// assert_eq!(topology.domain_count(), 1);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Topology {
    /// Sorted by `os_index`; the dense index of a node is its position here.
    nodes: Vec<NodeInfo>,
    /// Sorted by (node, lowest CPU); the dense index of a domain is its position here.
    domains: Vec<DomainInfo>,
    /// `locality_of_cpu[cpu]`: the dense indices of the CPU's node and domain, or [`NO_CPU`].
    /// Length: highest CPU + 1 (at most [`MAX_CPUS`]). Both in one slot, so that
    /// [`current_locality`](super::current_locality) reads one table entry.
    locality_of_cpu: Box<[CpuSlot]>,
}

/// The dense node and domain of one CPU. `u32` is enough: there are no more nodes or domains than
/// CPUs, and CPU numbers are below [`MAX_CPUS`] = 2^20.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CpuSlot {
    node: u32,
    domain: u32,
}

/// Marks an offline or unknown CPU in `Topology::locality_of_cpu`.
const NO_CPU: CpuSlot = CpuSlot {
    node: u32::MAX,
    domain: u32::MAX,
};

impl Topology {
    /// One node (OS index 0) holding CPUs `0..cpus`; `cpus` is clamped to `1..=MAX_CPUS`.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// assert_eq!(Topology::single_node(0).cpu_count(), 1);
    /// ```
    pub fn single_node(cpus: usize) -> Topology {
        let cpus = cpus.clamp(1, MAX_CPUS);
        Topology {
            nodes: vec![NodeInfo {
                os_index: 0,
                cpus: (0..cpus).collect(),
            }],
            domains: vec![DomainInfo {
                node: 0,
                cpus: (0..cpus).collect(),
            }],
            locality_of_cpu: vec![CpuSlot { node: 0, domain: 0 }; cpus].into_boxed_slice(),
        }
    }

    /// The machine's topology; never fails.
    ///
    /// In order, the first that works:
    /// 1. with feature `hwloc`: `Topology::from_hwloc`;
    /// 2. [`Topology::from_sysfs`]`("/sys")` (Linux);
    /// 3. one node holding CPUs `0..n`, `n` = [`std::thread::available_parallelism`] (1 if
    ///    unknown). This is what containers without `/sys/devices/system/node` and non-Linux
    ///    systems get, and also what a malformed sysfs gets (the error is dropped here; call
    ///    `from_sysfs` to see it).
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// assert!(Topology::detect().node_count() >= 1);
    /// ```
    pub fn detect() -> Topology {
        #[cfg(feature = "hwloc")]
        if let Ok(topology) = Topology::from_hwloc() {
            return topology;
        }
        Topology::from_sysfs("/sys").unwrap_or_else(|_| {
            let cpus = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
            Topology::single_node(cpus)
        })
    }

    /// Builds the table from nodes in any order: sorts them by OS index, normalises and drops nodes
    /// without CPUs. The result may have no nodes; callers turn that into their own error.
    pub(super) fn from_nodes(mut nodes: Vec<NodeInfo>) -> Result<Topology, TopologyError> {
        for node in &mut nodes {
            node.cpus.sort_unstable();
            node.cpus.dedup();
        }
        nodes.retain(|node| !node.cpus.is_empty());
        nodes.sort_unstable_by_key(|node| node.os_index);
        if let Some(pair) = nodes
            .windows(2)
            .find(|pair| pair[0].os_index == pair[1].os_index)
        {
            return Err(TopologyError::DuplicateNode {
                os_index: pair[0].os_index,
            });
        }

        let highest_cpu = nodes.iter().filter_map(|node| node.cpus.last()).max();
        let table_len = match highest_cpu {
            None => 0,
            Some(&cpu) if cpu < MAX_CPUS => cpu + 1,
            Some(&cpu) => {
                return Err(TopologyError::CpuOutOfRange {
                    path: Default::default(),
                    cpu,
                    limit: MAX_CPUS,
                });
            }
        };
        let mut locality_of_cpu = vec![NO_CPU; table_len].into_boxed_slice();
        for (dense, node) in nodes.iter().enumerate() {
            // At most one node per CPU, and CPUs < MAX_CPUS = 2^20, so the dense index fits in a
            // u32.
            let dense_u32 = u32::try_from(dense).unwrap_or(u32::MAX);
            for &cpu in &node.cpus {
                // In bounds: `table_len` is one past the highest CPU of any node.
                let Some(slot) = locality_of_cpu.get_mut(cpu) else {
                    continue;
                };
                if *slot != NO_CPU {
                    let first = usize::try_from(slot.node)
                        .ok()
                        .and_then(|index| nodes.get(index));
                    return Err(TopologyError::CpuInTwoNodes {
                        cpu,
                        first: first.map_or(node.os_index, |first| first.os_index),
                        second: node.os_index,
                    });
                }
                // One domain per node until `with_cache_domains` says otherwise.
                *slot = CpuSlot {
                    node: dense_u32,
                    domain: dense_u32,
                };
            }
        }
        let domains = nodes
            .iter()
            .enumerate()
            .map(|(node, info)| DomainInfo {
                node,
                cpus: info.cpus.clone(),
            })
            .collect();
        Ok(Topology {
            nodes,
            domains,
            locality_of_cpu,
        })
    }

    /// Splits the nodes into cache domains: `shared_cache(cpu)` is the set of CPUs that share
    /// `cpu`'s L3 (sysfs `shared_cpu_list`, an hwloc L3 object's cpuset), `None` if unknown.
    ///
    /// A CPU's domain is its L3 set restricted to its node (an L3 spanning two nodes is split per
    /// node; offline CPUs in a set are ignored). If the answers do not describe a partition — an
    /// online CPU with no answer, a set that leaves out the CPU itself, two CPUs of one node whose
    /// sets overlap without being equal — the topology keeps one domain per node: odd cache data
    /// costs locality, never an error.
    pub(super) fn with_cache_domains(
        mut self,
        mut shared_cache: impl FnMut(usize) -> Option<Vec<usize>>,
    ) -> Topology {
        let mut domains: Vec<DomainInfo> = Vec::new();
        for (node_index, node) in self.nodes.iter().enumerate() {
            // The node's CPUs (sorted), each with its L3 set restricted to the node.
            let mut groups: Vec<Vec<usize>> = Vec::new();
            for &cpu in &node.cpus {
                let Some(mut shared) = shared_cache(cpu) else {
                    return self;
                };
                shared.sort_unstable();
                shared.dedup();
                shared.retain(|other| node.cpus.binary_search(other).is_ok());
                if shared.binary_search(&cpu).is_err() {
                    return self;
                }
                groups.push(shared);
            }
            // A partition: every CPU's set is the set of the first CPU (the lowest) that listed it.
            let first_domain = domains.len();
            for (position, &cpu) in node.cpus.iter().enumerate() {
                let group = &groups[position];
                let lowest = group[0];
                if lowest == cpu {
                    domains.push(DomainInfo {
                        node: node_index,
                        cpus: group.clone(),
                    });
                } else if !domains[first_domain..]
                    .iter()
                    .any(|domain| domain.cpus[0] == lowest && domain.cpus == *group)
                {
                    return self;
                }
            }
            // Every CPU is in its own set, so the sets cover the node; equal total size makes them
            // disjoint.
            let listed: usize = domains[first_domain..].iter().map(|d| d.cpus.len()).sum();
            if listed != node.cpus.len() {
                return self;
            }
        }

        let mut table = self.locality_of_cpu.clone();
        for (dense, domain) in domains.iter().enumerate() {
            // No more domains than CPUs, which are below 2^20.
            let dense_u32 = u32::try_from(dense).unwrap_or(u32::MAX);
            for &cpu in &domain.cpus {
                if let Some(slot) = table.get_mut(cpu) {
                    slot.domain = dense_u32;
                }
            }
        }
        self.domains = domains;
        self.locality_of_cpu = table;
        self
    }

    /// The nodes, in dense-index order (sorted by OS index).
    #[inline]
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Number of nodes with at least one online CPU (at least 1 for every public constructor).
    #[inline]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of online CPUs over all nodes.
    pub fn cpu_count(&self) -> usize {
        self.nodes.iter().map(|node| node.cpus.len()).sum()
    }

    /// Dense index of the node that `cpu` belongs to; `None` for an offline or unknown CPU.
    #[inline]
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.locality_of_cpu(cpu).map(|locality| locality.node)
    }

    /// The cache domains, in dense-index order: node by node, within a node by lowest CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// let topology = Topology::single_node(2);
    /// assert_eq!(topology.domains().len(), topology.domain_count());
    /// assert!(topology.domains().iter().all(|domain| domain.node < topology.node_count()));
    /// ```
    #[inline]
    pub fn domains(&self) -> &[DomainInfo] {
        &self.domains
    }

    /// Number of cache domains: at least [`node_count`](Topology::node_count) (every node has at
    /// least one), equal to it where each node is one L3 domain or the L3 layout is unknown.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// let topology = Topology::detect();
    /// assert!(topology.domain_count() >= topology.node_count());
    /// ```
    #[inline]
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Dense index of the node that holds cache domain `domain`; `None` if there is no such domain.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// let topology = Topology::single_node(8);
    /// assert_eq!(topology.domain_node(0), Some(0));
    /// assert_eq!(topology.domain_node(1), None);
    /// ```
    #[inline]
    pub fn domain_node(&self, domain: usize) -> Option<usize> {
        self.domains.get(domain).map(|info| info.node)
    }

    /// Dense index of the cache domain that `cpu` belongs to; `None` for an offline or unknown CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// assert_eq!(Topology::single_node(2).domain_of_cpu(1), Some(0));
    /// ```
    #[inline]
    pub fn domain_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.locality_of_cpu(cpu).map(|locality| locality.domain)
    }

    /// The node and cache domain of `cpu` (dense indices), from one table entry; `None` for an
    /// offline or unknown CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::{Locality, Topology};
    ///
    /// let topology = Topology::single_node(2);
    /// assert_eq!(topology.locality_of_cpu(1), Some(Locality { node: 0, domain: 0 }));
    /// assert_eq!(topology.locality_of_cpu(2), None);
    /// ```
    #[inline]
    pub fn locality_of_cpu(&self, cpu: usize) -> Option<Locality> {
        let slot = *self.locality_of_cpu.get(cpu)?;
        if slot == NO_CPU {
            return None;
        }
        Some(Locality {
            node: usize::try_from(slot.node).ok()?,
            domain: usize::try_from(slot.domain).ok()?,
        })
    }
}

/// Lists the nodes and the domains; the cpu table is derived from them and left out.
impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topology")
            .field("nodes", &self.nodes)
            .field("domains", &self.domains)
            .finish_non_exhaustive()
    }
}
