//! `numa_locks::topology` with feature `hwloc`: synthetic hwloc topologies read the same as the sysfs
//! fixtures of the same layout, and the real machine loads.
#![cfg(feature = "hwloc")]

use std::path::Path;

use numa_locks::topology::{self, Topology, TopologyError};

fn sysfs_fixture(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name);
    Topology::from_sysfs(root).unwrap_or_else(|err| panic!("fixture {name}: {err}"))
}

fn synthetic(description: &str) -> Topology {
    Topology::from_hwloc_synthetic(description)
        .unwrap_or_else(|err| panic!("synthetic {description:?}: {err}"))
}

/// Same nodes, and the same answer for every CPU number up to a little past the last one.
fn assert_same_table(hwloc: &Topology, sysfs: &Topology) {
    assert_eq!(hwloc.nodes(), sysfs.nodes());
    assert_eq!(hwloc.cpu_count(), sysfs.cpu_count());
    for cpu in 0..sysfs.cpu_count() + 8 {
        assert_eq!(hwloc.node_of_cpu(cpu), sysfs.node_of_cpu(cpu), "cpu {cpu}");
    }
    assert_eq!(hwloc, sysfs);
}

#[test]
fn two_packages_match_sysfs() {
    let hwloc = synthetic("pack:2 [numa] core:2 pu:2");
    assert_eq!(hwloc.node_count(), 2);
    assert_same_table(&hwloc, &sysfs_fixture("two_packages"));
}

#[test]
fn four_packages_match_sysfs() {
    let hwloc = synthetic("pack:4 [numa] core:2 pu:2");
    assert_eq!(hwloc.node_count(), 4);
    assert_same_table(&hwloc, &sysfs_fixture("four_packages"));
}

#[test]
fn memory_only_nodes_are_skipped_like_sysfs() {
    // Each package has a NUMA node with its PUs plus a memory-only one; hwloc numbers the NUMA nodes
    // 0..4 in order, so the PU-less nodes are 1 and 3.
    let hwloc = synthetic("pack:2 [numa] [numa] core:2 pu:2");
    assert_eq!(hwloc.node_count(), 2, "{hwloc:?}");
    assert_eq!(hwloc.cpu_count(), 8);
    assert!((0..8).all(|cpu| hwloc.node_of_cpu(cpu) == Some(cpu / 4)));
    let os_indices: Vec<usize> = hwloc.nodes().iter().map(|node| node.os_index).collect();
    assert_eq!(os_indices, [0, 2]);
}

#[test]
fn one_node_without_numa_level() {
    let hwloc = synthetic("core:4 pu:1");
    assert_eq!(hwloc, Topology::single_node(4));
}

#[test]
fn bad_synthetic_string_is_refused_by_name() {
    for description in ["pack:banana", "", "pack:2 [numa core:2", "pu:2\0"] {
        let err = Topology::from_hwloc_synthetic(description).unwrap_err();
        let TopologyError::Hwloc { what } = &err else {
            panic!("{description:?}: expected an hwloc error, got {err:?}");
        };
        assert!(
            what.contains(&format!("{description:?}")),
            "{description:?}: {what}"
        );
    }
}

#[test]
fn this_machine_loads() {
    let hwloc = Topology::from_hwloc().unwrap();
    assert!(hwloc.node_count() >= 1);
    assert!(hwloc.cpu_count() >= 1);
    // With the feature on, detection goes through hwloc.
    assert_eq!(topology::detected(), &hwloc);
    assert_eq!(topology::node_count(), hwloc.node_count());
    assert!(topology::current_node() < topology::node_count());
    #[cfg(target_os = "linux")]
    if let Ok(sysfs) = Topology::from_sysfs("/sys") {
        // hwloc hides PUs outside our allowed cpuset (cgroup), so it may see fewer nodes, but each PU it
        // sees is on the same node as in sysfs.
        assert!(hwloc.node_count() <= sysfs.node_count());
        for node in hwloc.nodes() {
            for &cpu in &node.cpus {
                let in_sysfs = sysfs
                    .node_of_cpu(cpu)
                    .map(|dense| sysfs.nodes()[dense].os_index);
                assert_eq!(in_sysfs, Some(node.os_index), "cpu {cpu}");
            }
        }
    }
}

#[test]
fn machine_level_memory_node_does_not_steal_cpus() {
    // A memory node with the whole machine's locality (like CXL memory) beside per-package nodes.
    let description = "[numa] pack:2 [numa] core:2 pu:2";
    let hwloc = synthetic(description);
    assert_eq!(hwloc, synthetic("pack:2 [numa] core:2 pu:2"), "{hwloc:?}");
}

// ---------------------------------------------------------------------------------------------------------
// Cache (L3) domains from hwloc's L3Cache objects

/// `(node, cpus)` of every cache domain, in dense order.
fn domain_layout(topology: &Topology) -> Vec<(usize, Vec<usize>)> {
    topology
        .domains()
        .iter()
        .map(|domain| (domain.node, domain.cpus.clone()))
        .collect()
}

/// A 2-socket EPYC in NPS1 mode, in miniature: 2 packages, each one NUMA node of 4 L3s (CCXs) of 2
/// cores of 2 PUs. hwloc numbers synthetic PUs in topology order, so each CCX is 4 consecutive PUs.
#[test]
fn epyc_like_l3s_become_domains() {
    let hwloc = synthetic("pack:2 [numa] l3:4 core:2 pu:2");
    assert_eq!(hwloc.node_count(), 2);
    assert_eq!(hwloc.domain_count(), 8);
    let expected: Vec<(usize, Vec<usize>)> = (0..8)
        .map(|ccx| (ccx / 4, (4 * ccx..4 * ccx + 4).collect()))
        .collect();
    assert_eq!(domain_layout(&hwloc), expected);
    for cpu in 0..32 {
        assert_eq!(
            hwloc.locality_of_cpu(cpu),
            Some(topology::Locality {
                node: cpu / 16,
                domain: cpu / 4
            })
        );
    }
    assert_eq!(hwloc.locality_of_cpu(32), None);
    for domain in 0..8 {
        assert_eq!(hwloc.domain_node(domain), Some(domain / 4));
    }
}

/// One L3 per node (an Intel socket): the two familiar levels, the same as without L3 objects.
#[test]
fn one_l3_per_node_is_one_domain_per_node() {
    let with_l3 = synthetic("pack:2 [numa] l3:1 core:2 pu:2");
    assert_eq!(with_l3.domain_count(), 2);
    assert_eq!(with_l3, synthetic("pack:2 [numa] core:2 pu:2"));
    assert_eq!(with_l3, sysfs_fixture("two_packages"));
}

/// An L3 shared by two NUMA nodes (sub-NUMA clustering: 2 nodes per package, one L3 per package) is
/// split per node.
#[test]
fn l3_spanning_nodes_is_split_per_node() {
    let hwloc = synthetic("pack:2 l3:1 group:2 [numa] core:2 pu:1");
    assert_eq!(hwloc.node_count(), 4, "{hwloc:?}");
    assert_eq!(
        domain_layout(&hwloc),
        [
            (0, vec![0, 1]),
            (1, vec![2, 3]),
            (2, vec![4, 5]),
            (3, vec![6, 7])
        ]
    );
}

/// Two L3s inside one node (a one-socket EPYC): one node, two domains.
#[test]
fn one_node_with_two_l3s() {
    let hwloc = synthetic("l3:2 core:2 pu:2");
    assert_eq!(hwloc.node_count(), 1);
    assert_eq!(
        domain_layout(&hwloc),
        [(0, vec![0, 1, 2, 3]), (0, vec![4, 5, 6, 7])]
    );
}

#[test]
fn this_machine_has_domains_inside_nodes() {
    let hwloc = Topology::from_hwloc().unwrap();
    assert!(hwloc.domain_count() >= hwloc.node_count());
    for (index, domain) in hwloc.domains().iter().enumerate() {
        for &cpu in &domain.cpus {
            assert_eq!(hwloc.domain_of_cpu(cpu), Some(index));
            assert_eq!(hwloc.node_of_cpu(cpu), Some(domain.node));
        }
    }
    assert_eq!(topology::domain_count(), hwloc.domain_count());
    let here = topology::current_locality();
    assert_eq!(hwloc.domain_node(here.domain), Some(here.node));
}
