//! [`Topology`]: the nodes, their CPUs, and the cpu→node table built from them.

use std::fmt;
use std::num::NonZeroUsize;

use super::{MAX_CPUS, TopologyError};

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
    /// The node's number as the system gives it (`N` in sysfs `node<N>`, hwloc's OS index). Node numbers
    /// may be sparse; the node's dense index is its position in [`Topology::nodes`].
    pub os_index: usize,
    /// The node's online CPUs, sorted, without duplicates, never empty.
    pub cpus: Vec<usize>,
}

/// The NUMA nodes of a machine (or of a test fixture) and which node each CPU belongs to.
///
/// Nodes are numbered densely (`0..node_count()`) in the order of their OS index; only nodes with at
/// least one online CPU are kept. Build one with [`Topology::detect`], [`Topology::from_sysfs`],
/// [`Topology::single_node`] or (feature `hwloc`) `Topology::from_hwloc` / `from_hwloc_synthetic`;
/// the process-wide one that [`current_node`](super::current_node) uses is [`detected`](super::detected).
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
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Topology {
    /// Sorted by `os_index`; the dense index of a node is its position here.
    nodes: Vec<NodeInfo>,
    /// `node_of_cpu[cpu]` is the dense index of the CPU's node, or [`NO_NODE`]. Length: highest CPU + 1
    /// (at most [`MAX_CPUS`]). `u32` is enough: there are no more nodes than CPUs.
    node_of_cpu: Box<[u32]>,
}

/// Marks an offline or unknown CPU in `Topology::node_of_cpu`.
const NO_NODE: u32 = u32::MAX;

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
            node_of_cpu: vec![0; cpus].into_boxed_slice(),
        }
    }

    /// The machine's topology; never fails.
    ///
    /// In order, the first that works:
    /// 1. with feature `hwloc`: `Topology::from_hwloc`;
    /// 2. [`Topology::from_sysfs`]`("/sys")` (Linux);
    /// 3. one node holding CPUs `0..n`, `n` = [`std::thread::available_parallelism`] (1 if unknown). This is
    ///    what containers without `/sys/devices/system/node` and non-Linux systems get, and also what a
    ///    malformed sysfs gets (the error is dropped here; call `from_sysfs` to see it).
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
        let mut node_of_cpu = vec![NO_NODE; table_len].into_boxed_slice();
        for (dense, node) in nodes.iter().enumerate() {
            // At most one node per CPU, and CPUs < MAX_CPUS = 2^20, so the dense index fits in a u32.
            let dense_u32 = u32::try_from(dense).unwrap_or(NO_NODE);
            for &cpu in &node.cpus {
                // In bounds: `table_len` is one past the highest CPU of any node.
                let Some(slot) = node_of_cpu.get_mut(cpu) else {
                    continue;
                };
                if *slot != NO_NODE {
                    let first = usize::try_from(*slot)
                        .ok()
                        .and_then(|index| nodes.get(index));
                    return Err(TopologyError::CpuInTwoNodes {
                        cpu,
                        first: first.map_or(node.os_index, |first| first.os_index),
                        second: node.os_index,
                    });
                }
                *slot = dense_u32;
            }
        }
        Ok(Topology { nodes, node_of_cpu })
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
        let dense = *self.node_of_cpu.get(cpu)?;
        if dense == NO_NODE {
            None
        } else {
            usize::try_from(dense).ok()
        }
    }
}

/// Lists the nodes; the cpu→node table is derived from them and left out.
impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topology")
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}
