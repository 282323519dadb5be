//! Reading the topology with hwloc (feature `hwloc`, crate `hwlocality`).
//!
//! Each hwloc `NUMANode` object becomes a [`NodeInfo`] with the node's OS index and the PUs of its
//! `cpuset`. hwloc's cpuset holds the online PUs this process is allowed to run on (offline ones
//! are only in `complete_cpuset`), so a node whose PUs are all outside our cgroup cpuset is skipped
//! as well.
//!
//! hwloc gives a NUMA node the cpuset of its *locality*, so a node that is memory-only in the
//! kernel's view (KNL MCDRAM, CXL or NVDIMM memory) shares PUs with the node that owns them. To
//! read like sysfs, each PU goes to the covering node with the smallest cpuset (the most local),
//! ties to the lowest OS index (DRAM nodes come first); nodes left without a PU are skipped as
//! memory-only.
//!
//! Cache domains are hwloc's `L3Cache` objects: each PU's domain is the cpuset of the L3 that
//! covers it, cut per node. A topology without L3 objects (hwloc found no cache information, or a
//! synthetic description that names none), or with a PU that no L3 covers, keeps one domain per
//! node.

use hwlocality::object::types::ObjectType;

use super::{MAX_CPUS, NodeInfo, Topology, TopologyError};

impl Topology {
    /// Reads this machine's topology with hwloc.
    ///
    /// # Errors
    ///
    /// [`TopologyError::Hwloc`] if hwloc cannot load the topology, reports no NUMA node with a PU,
    /// or a node with an infinite cpuset; [`TopologyError::CpuOutOfRange`] for a PU number
    /// `>= MAX_CPUS`.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// let topology = Topology::from_hwloc().unwrap();
    /// assert!(topology.node_count() >= 1);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "hwloc")))]
    pub fn from_hwloc() -> Result<Topology, TopologyError> {
        let topology = hwlocality::Topology::new().map_err(|err| TopologyError::Hwloc {
            what: format!("cannot load this machine's topology: {err}"),
        })?;
        from_hwloc_topology(&topology, "this machine")
    }

    /// Builds a topology from an hwloc [synthetic description][synthetic] such as
    /// `"pack:2 [numa] core:2 pu:2"` (two packages, each with a NUMA node and two cores of two PUs:
    /// node 0 holds PUs 0-3, node 1 holds PUs 4-7). Nothing is read from the machine.
    ///
    /// [synthetic]: https://hwloc.readthedocs.io/en/stable/synthetic.html
    ///
    /// # Errors
    ///
    /// [`TopologyError::Hwloc`], naming `description`, if hwloc rejects it or it has no NUMA node
    /// with a PU.
    ///
    /// # Examples
    ///
    /// ```
    /// use numa_locks::topology::Topology;
    ///
    /// let topology = Topology::from_hwloc_synthetic("pack:2 [numa] core:2 pu:2").unwrap();
    /// assert_eq!(topology.node_count(), 2);
    /// assert_eq!(topology.node_of_cpu(5), Some(1));
    /// assert!(Topology::from_hwloc_synthetic("pack:banana").is_err());
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "hwloc")))]
    pub fn from_hwloc_synthetic(description: &str) -> Result<Topology, TopologyError> {
        let invalid = |err: &dyn std::fmt::Display| TopologyError::Hwloc {
            what: format!(
                "invalid synthetic topology {description:?} ({err}): expected a description such as \
                 \"pack:2 [numa] core:2 pu:2\""
            ),
        };
        let topology = hwlocality::Topology::builder()
            .from_synthetic(description)
            .map_err(|err| invalid(&err))?
            .build()
            .map_err(|err| invalid(&err))?;
        from_hwloc_topology(&topology, &format!("synthetic topology {description:?}"))
    }
}

/// The NUMA nodes of a loaded hwloc topology; `source` names it in error messages.
fn from_hwloc_topology(
    topology: &hwlocality::Topology,
    source: &str,
) -> Result<Topology, TopologyError> {
    let mut nodes = Vec::new();
    for (logical_index, numa) in topology.objects_with_type(ObjectType::NUMANode).enumerate() {
        let os_index = numa.os_index().unwrap_or(logical_index);
        let Some(cpuset) = numa.cpuset() else {
            continue;
        };
        if cpuset.is_empty() {
            continue; // memory-only node
        }
        // An infinite set has no last index; a huge one would make us allocate a huge table.
        let Some(last) = cpuset.last_set().map(usize::from) else {
            return Err(TopologyError::Hwloc {
                what: format!(
                    "NUMA node {os_index} of {source} has an infinite cpuset, expected a finite one"
                ),
            });
        };
        if last >= MAX_CPUS {
            return Err(TopologyError::CpuOutOfRange {
                path: Default::default(),
                cpu: last,
                limit: MAX_CPUS,
            });
        }
        let cpus: Vec<usize> = cpuset.iter_set().map(usize::from).collect();
        nodes.push(NodeInfo { os_index, cpus });
    }

    // Each PU to its most local node (see the module docs). All PUs are below MAX_CPUS (checked
    // above).
    nodes.sort_unstable_by_key(|node| (node.cpus.len(), node.os_index));
    let table_len = nodes
        .iter()
        .filter_map(|node| node.cpus.last())
        .max()
        .map_or(0, |&last| last + 1);
    let mut taken = vec![false; table_len];
    for node in &mut nodes {
        node.cpus.retain(|&cpu| match taken.get_mut(cpu) {
            Some(slot) => !std::mem::replace(slot, true),
            None => false,
        });
    }

    let table = Topology::from_nodes(nodes)?;
    if table.nodes().is_empty() {
        return Err(TopologyError::Hwloc {
            what: format!("{source} has no NUMA node with a PU, expected at least one"),
        });
    }

    // The PUs of every L3, and for each PU the position of its L3 in `l3_sets`. An infinite or
    // out-of-range set is left out, so its PUs have no L3 and the nodes stay one domain each.
    let mut l3_sets: Vec<Vec<usize>> = Vec::new();
    for l3 in topology.objects_with_type(ObjectType::L3Cache) {
        let Some(cpuset) = l3.cpuset() else {
            continue;
        };
        if cpuset
            .last_set()
            .is_none_or(|last| usize::from(last) >= MAX_CPUS)
        {
            continue;
        }
        l3_sets.push(cpuset.iter_set().map(usize::from).collect());
    }
    let mut l3_of_pu = std::collections::HashMap::new();
    for (position, set) in l3_sets.iter().enumerate() {
        for &pu in set {
            l3_of_pu.entry(pu).or_insert(position);
        }
    }
    Ok(table.with_cache_domains(|cpu| {
        let &position = l3_of_pu.get(&cpu)?;
        l3_sets.get(position).cloned()
    }))
}
