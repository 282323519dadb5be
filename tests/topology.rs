//! `numa_locks::topology`: the CPU list parser, sysfs fixtures (nodes and L3 cache domains), the
//! per-thread overrides and round-robin virtual nodes and domains.
//!
//! Fixtures live in `tests/fixtures/sysfs/<name>/` (each stands for `/sys`); a few cases that are awkward
//! to check in (huge files, unreadable entries) are built in a temporary directory.
//!
//! This binary also runs under Miri (`.ci/run`, with isolation off so that it can read the fixtures).
//! The cases that build million-entry lists or tables ([`MAX_CPUS`]) or megabyte files are left out
//! there (`cfg(miri)`): each takes Miri minutes, and that code is safe Rust without threads, which the
//! native run checks fully.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;

use numa_locks::topology::{
    self, DomainInfo, Locality, MAX_CPUS, NodeInfo, Topology, TopologyError,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn sysfs(name: &str) -> Topology {
    Topology::from_sysfs(fixture(name))
        .unwrap_or_else(|err| panic!("fixture {name} should parse: {err}"))
}

fn sysfs_err(name: &str) -> TopologyError {
    match Topology::from_sysfs(fixture(name)) {
        Ok(topology) => panic!("fixture {name} should be refused, got {topology:?}"),
        Err(err) => err,
    }
}

/// `(os_index, cpus)` of every node, in dense order.
fn layout(topology: &Topology) -> Vec<(usize, Vec<usize>)> {
    topology
        .nodes()
        .iter()
        .map(|node| (node.os_index, node.cpus.clone()))
        .collect()
}

/// `(node, cpus)` of every cache domain, in dense order.
fn domain_layout(topology: &Topology) -> Vec<(usize, Vec<usize>)> {
    topology
        .domains()
        .iter()
        .map(|domain| (domain.node, domain.cpus.clone()))
        .collect()
}

/// Asserts that `topology` has one domain per node, domain `i` being node `i`.
fn assert_one_domain_per_node(topology: &Topology) {
    assert_eq!(
        topology.domain_count(),
        topology.node_count(),
        "{topology:?}"
    );
    for (index, node) in topology.nodes().iter().enumerate() {
        assert_eq!(
            topology.domains()[index],
            DomainInfo {
                node: index,
                cpus: node.cpus.clone()
            }
        );
        for &cpu in &node.cpus {
            assert_eq!(
                topology.locality_of_cpu(cpu),
                Some(Locality {
                    node: index,
                    domain: index
                })
            );
        }
    }
}

/// The domain table agrees with the domain list, every domain nests in its node, and the domains of a
/// node are contiguous and partition its CPUs.
fn assert_consistent(topology: &Topology) {
    let mut previous_node = 0;
    for (index, domain) in topology.domains().iter().enumerate() {
        assert!(domain.node >= previous_node, "domains ordered by node");
        previous_node = domain.node;
        assert_eq!(topology.domain_node(index), Some(domain.node));
        for &cpu in &domain.cpus {
            assert_eq!(
                topology.locality_of_cpu(cpu),
                Some(Locality {
                    node: domain.node,
                    domain: index
                }),
                "cpu {cpu}"
            );
            assert_eq!(topology.domain_of_cpu(cpu), Some(index));
            assert_eq!(topology.node_of_cpu(cpu), Some(domain.node));
        }
    }
    assert_eq!(topology.domain_node(topology.domain_count()), None);
    for (index, node) in topology.nodes().iter().enumerate() {
        let mut cpus: Vec<usize> = topology
            .domains()
            .iter()
            .filter(|domain| domain.node == index)
            .flat_map(|domain| domain.cpus.iter().copied())
            .collect();
        cpus.sort_unstable();
        assert_eq!(cpus, node.cpus, "node {index}'s domains partition its CPUs");
    }
}

/// `set_virtual_nodes` and `set_virtual_domains` are process-wide: every test that turns it on, or relies on it being off, holds this.
static VIRTUAL_NODES: Mutex<()> = Mutex::new(());

/// Holds [`VIRTUAL_NODES`] and turns round-robin off again when dropped (also on a failed assertion).
struct VirtualNodesOff(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Drop for VirtualNodesOff {
    fn drop(&mut self) {
        topology::set_virtual_nodes(None).unwrap();
        topology::set_virtual_domains(None).unwrap();
    }
}

fn serialize_virtual_nodes() -> VirtualNodesOff {
    let guard = VIRTUAL_NODES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    topology::set_virtual_nodes(None).unwrap();
    topology::set_virtual_domains(None).unwrap();
    VirtualNodesOff(guard)
}

/// A fresh directory under the system temp dir, removed when dropped.
struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> TempRoot {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "numa_locks_topology_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempRoot(path)
    }

    fn write(&self, relative: &str, contents: &[u8]) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------------------
// parse_cpulist

#[test]
fn cpulist_accepts_the_kernel_format() {
    let cases: &[(&str, &[usize])] = &[
        ("", &[]),
        ("\n", &[]),
        ("0", &[0]),
        ("0\n", &[0]),
        ("7-7", &[7]),
        ("0-3,8-11\n", &[0, 1, 2, 3, 8, 9, 10, 11]),
        ("1,3,5", &[1, 3, 5]),
        // Not written by the kernel, but harmless: sorted and deduplicated.
        ("5,1-2,2", &[1, 2, 5]),
        ("0-3,2-5", &[0, 1, 2, 3, 4, 5]),
    ];
    for &(text, expected) in cases {
        assert_eq!(
            topology::parse_cpulist(text).as_deref(),
            Ok(expected),
            "{text:?}"
        );
    }
    let wide = topology::parse_cpulist("0-255").unwrap();
    assert_eq!(wide, (0..256).collect::<Vec<_>>());
}

#[test]
fn cpulist_rejects_garbage_naming_the_text() {
    for text in [
        "3-1", "a", "1,,2", "-1", "1-", "1,", ",1", "1 2", "+1", "1-+2", "0x1", "1-2-3", "1:2",
        "0-7:2/4", "١",
    ] {
        match topology::parse_cpulist(text) {
            Err(
                ref err @ TopologyError::MalformedCpuList {
                    ref path,
                    text: ref reported,
                    expected,
                },
            ) => {
                assert_eq!(reported, text);
                assert!(path.as_os_str().is_empty());
                assert!(!expected.is_empty());
                let message = err.to_string();
                assert!(message.contains(&format!("{text:?}")), "{message}");
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("{text:?} should be malformed, got {other:?}"),
        }
    }
    // Trailing newline is trimmed before reporting.
    assert!(matches!(
        topology::parse_cpulist("4-x\n"),
        Err(TopologyError::MalformedCpuList { text, .. }) if text == "4-x"
    ));
}

#[test]
fn cpulist_rejects_overflow_and_huge_cpu_numbers() {
    let overflow = "99999999999999999999999999";
    assert!(matches!(
        topology::parse_cpulist(overflow),
        Err(TopologyError::MalformedCpuList { text, .. }) if text == overflow
    ));
    for (text, cpu) in [
        ("1048576", MAX_CPUS),
        ("0-1048576", MAX_CPUS),
        ("0,4000000000", 4_000_000_000),
    ] {
        let err = topology::parse_cpulist(text).unwrap_err();
        assert_eq!(
            err,
            TopologyError::CpuOutOfRange {
                path: PathBuf::new(),
                cpu,
                limit: MAX_CPUS
            }
        );
        assert!(err.to_string().contains(&cpu.to_string()), "{err}");
    }
    assert_eq!(
        topology::parse_cpulist("1048575").unwrap(),
        vec![MAX_CPUS - 1]
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a million-entry list: minutes under Miri (see the module docs)"
)]
fn cpulist_of_repeated_huge_ranges_stays_small() {
    // Expanding before merging would need 200 x 8 MiB here.
    let text = vec!["0-1048575"; 200].join(",");
    assert_eq!(topology::parse_cpulist(&text).unwrap().len(), MAX_CPUS);
}

// ---------------------------------------------------------------------------------------------------------
// from_sysfs: layouts

#[test]
fn one_node_ignores_the_other_entries() {
    let topology = sysfs("one_node");
    assert_eq!(layout(&topology), vec![(0, (0..8).collect())]);
    assert_eq!(topology.node_count(), 1);
    assert_eq!(topology.cpu_count(), 8);
    assert!((0..8).all(|cpu| topology.node_of_cpu(cpu) == Some(0)));
    assert_eq!(topology.node_of_cpu(8), None);
    assert_eq!(topology.node_of_cpu(usize::MAX), None);
    assert_eq!(topology, Topology::single_node(8));
}

#[test]
fn sparse_node_numbers_get_dense_indices() {
    let topology = sysfs("sparse");
    assert_eq!(
        layout(&topology),
        vec![(0, vec![0, 1, 2, 3]), (2, vec![4, 5, 6, 7])]
    );
    assert_eq!(topology.node_count(), 2);
    assert_eq!(topology.node_of_cpu(3), Some(0));
    assert_eq!(topology.node_of_cpu(4), Some(1));
}

#[test]
fn interleaved_cpu_numbering() {
    let topology = sysfs("interleaved4");
    assert_eq!(topology.node_count(), 4);
    assert_eq!(topology.cpu_count(), 16);
    for cpu in 0..16 {
        assert_eq!(topology.node_of_cpu(cpu), Some(cpu % 4), "cpu {cpu}");
    }
    assert_eq!(topology.nodes()[1].cpus, vec![1, 5, 9, 13]);
    assert_eq!(topology.node_of_cpu(16), None);
}

#[test]
fn offline_cpus_are_dropped() {
    let topology = sysfs("offline");
    assert_eq!(
        layout(&topology),
        vec![(0, vec![0, 1, 2]), (1, vec![4, 5, 7])]
    );
    assert_eq!(topology.node_of_cpu(3), None);
    assert_eq!(topology.node_of_cpu(6), None);
    assert_eq!(topology.node_of_cpu(7), Some(1));
    assert_eq!(topology.cpu_count(), 6);
}

#[test]
fn node_with_only_offline_cpus_is_skipped() {
    let topology = sysfs("offline_node");
    assert_eq!(layout(&topology), vec![(0, vec![0, 1, 2, 3])]);
    assert_eq!(topology.node_of_cpu(5), None);
}

#[test]
fn more_than_64_cpus() {
    let topology = sysfs("wide256");
    assert_eq!(topology.node_count(), 2);
    assert_eq!(topology.cpu_count(), 256);
    for cpu in 0..256 {
        let expected = (cpu / 64) % 2;
        assert_eq!(topology.node_of_cpu(cpu), Some(expected), "cpu {cpu}");
    }
    assert_eq!(topology.node_of_cpu(256), None);
}

#[test]
fn memory_only_nodes_are_skipped() {
    let topology = sysfs("memory_only");
    assert_eq!(
        layout(&topology),
        vec![(0, vec![0, 1, 2, 3]), (2, vec![4, 5, 6, 7])]
    );
    assert!((0..8).all(|cpu| topology.node_of_cpu(cpu).is_some_and(|node| node < 2)));
}

// ---------------------------------------------------------------------------------------------------------
// from_sysfs: garbage

#[test]
fn malformed_cpulist_names_file_and_text() {
    let err = sysfs_err("malformed");
    let TopologyError::MalformedCpuList { path, text, .. } = &err else {
        panic!("expected MalformedCpuList, got {err:?}");
    };
    assert_eq!(text, "4-x");
    assert!(
        path.ends_with("devices/system/node/node1/cpulist"),
        "{path:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("\"4-x\"") && message.contains("node1"),
        "{message}"
    );

    assert!(matches!(
        sysfs_err("reversed_range"),
        TopologyError::MalformedCpuList { text, .. } if text == "3-1"
    ));
    let err = sysfs_err("bad_online");
    assert!(
        matches!(&err, TopologyError::MalformedCpuList { text, path, .. }
            if text == "0-3,," && path.ends_with("devices/system/cpu/online")),
        "{err:?}"
    );
}

#[test]
fn cpu_in_two_nodes_is_refused() {
    let err = sysfs_err("cpu_in_two_nodes");
    assert_eq!(
        err,
        TopologyError::CpuInTwoNodes {
            cpu: 3,
            first: 0,
            second: 1
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("CPU 3") && message.contains("node 1"),
        "{message}"
    );
}

#[test]
fn out_of_range_cpu_is_refused() {
    let err = sysfs_err("out_of_range");
    let TopologyError::CpuOutOfRange { path, cpu, limit } = &err else {
        panic!("expected CpuOutOfRange, got {err:?}");
    };
    assert_eq!((*cpu, *limit), (99_999_999, MAX_CPUS));
    assert!(path.ends_with("node1/cpulist"), "{path:?}");
    assert!(err.to_string().contains("99999999"), "{err}");
}

#[test]
fn missing_node_directory_or_nodes() {
    for name in ["no_node_dir", "no_node_entries", "all_memory_only"] {
        let err = sysfs_err(name);
        let TopologyError::NoNodes { path } = &err else {
            panic!("{name}: expected NoNodes, got {err:?}");
        };
        assert!(path.ends_with("devices/system/node"), "{path:?}");
        assert!(err.to_string().contains("devices/system/node"), "{err}");
    }
}

#[test]
fn missing_cpulist_is_an_io_error() {
    let err = sysfs_err("missing_cpulist");
    assert!(
        matches!(&err, TopologyError::Io { path, .. } if path.ends_with("node0/cpulist")),
        "{err:?}"
    );
}

#[test]
fn nonexistent_root_fails_but_detect_works() {
    let root = std::env::temp_dir().join("numa_locks_topology_does_not_exist");
    let err = Topology::from_sysfs(&root).unwrap_err();
    assert!(
        matches!(
            err,
            TopologyError::NoNodes { .. } | TopologyError::Io { .. }
        ),
        "{err:?}"
    );
    let detected = Topology::detect();
    assert!(detected.node_count() >= 1);
    assert!(detected.cpu_count() >= 1);
}

#[test]
fn generated_garbage_files() {
    // Not UTF-8.
    let root = TempRoot::new();
    root.write("devices/system/node/node0/cpulist", b"0-3\xff\n");
    assert!(matches!(
        Topology::from_sysfs(&root.0),
        Err(TopologyError::Io { path, .. }) if path.ends_with("node0/cpulist")
    ));

    // A huge file is not a CPU list, whatever it holds. (Not under Miri: see the module docs.)
    if !cfg!(miri) {
        let root = TempRoot::new();
        let huge = "0,".repeat(600_000) + "0";
        root.write("devices/system/node/node0/cpulist", huge.as_bytes());
        let err = Topology::from_sysfs(&root.0).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Io { message, .. } if message.contains("larger")),
            "{err:?}"
        );
    }

    // `node<N>` names the kernel would not write are not nodes; `node0` being a file is an I/O error.
    let root = TempRoot::new();
    root.write("devices/system/node/node01/cpulist", b"0\n");
    root.write("devices/system/node/node-1/cpulist", b"0\n");
    root.write("devices/system/node/node/cpulist", b"0\n");
    root.write("devices/system/node/node3/cpulist", b"4-5\n");
    assert_eq!(
        layout(&Topology::from_sysfs(&root.0).unwrap()),
        vec![(3, vec![4, 5])]
    );
    root.write("devices/system/node/node0", b"not a directory");
    assert!(matches!(
        Topology::from_sysfs(&root.0),
        Err(TopologyError::Io { .. })
    ));

    // Node numbers far apart, and the highest allowed CPU (a million-entry table: not under Miri).
    if !cfg!(miri) {
        let root = TempRoot::new();
        root.write("devices/system/node/node1023/cpulist", b"1048575\n");
        root.write("devices/system/node/node7/cpulist", b"0\n");
        let topology = Topology::from_sysfs(&root.0).unwrap();
        assert_eq!(
            layout(&topology),
            vec![(7, vec![0]), (1023, vec![MAX_CPUS - 1])]
        );
        assert_eq!(topology.node_of_cpu(MAX_CPUS - 1), Some(1));
    }
}

#[test]
fn single_node_constructor() {
    let topology = Topology::single_node(3);
    assert_eq!(
        topology.nodes(),
        &[NodeInfo {
            os_index: 0,
            cpus: vec![0, 1, 2]
        }]
    );
    assert_eq!(Topology::single_node(0).cpu_count(), 1);
    // A million-entry table: not under Miri (see the module docs).
    if !cfg!(miri) {
        assert_eq!(Topology::single_node(usize::MAX).cpu_count(), MAX_CPUS);
    }
}

#[test]
fn errors_are_std_errors() {
    let err: Box<dyn std::error::Error + Send + Sync> =
        Box::new(topology::set_virtual_nodes(Some(0)).unwrap_err());
    assert!(err.to_string().contains('0'));
}

// ---------------------------------------------------------------------------------------------------------
// The real machine and the per-thread node

#[test]
fn real_machine() {
    let _off = serialize_virtual_nodes();
    assert!(topology::node_count() >= 1);
    assert_eq!(topology::detected().node_count(), topology::node_count());
    for _ in 0..1000 {
        assert!(topology::current_node() < topology::node_count());
    }
    let nodes: Vec<usize> = (0..8)
        .map(|_| thread::spawn(topology::current_node))
        .map(|handle| handle.join().unwrap())
        .collect();
    assert!(
        nodes.iter().all(|&node| node < topology::node_count()),
        "{nodes:?}"
    );
    #[cfg(all(target_os = "linux", not(feature = "hwloc")))]
    if let Ok(sysfs) = Topology::from_sysfs("/sys") {
        assert_eq!(&sysfs, topology::detected());
    }
}

#[test]
fn thread_override_stays_in_its_thread() {
    let _off = serialize_virtual_nodes();
    topology::set_thread_node(Some(5));
    assert_eq!(topology::current_node(), 5);
    let other = thread::spawn(|| {
        let detected = topology::current_node();
        topology::set_thread_node(Some(9));
        (detected, topology::current_node())
    })
    .join()
    .unwrap();
    assert!(other.0 < topology::node_count());
    assert_eq!(other.1, 9);
    assert_eq!(topology::current_node(), 5);
    topology::set_thread_node(None);
    assert!(topology::current_node() < topology::node_count());
}

#[test]
fn huge_overrides_are_returned_as_is() {
    for node in [0, 1, 64, 1000, usize::MAX - 1, usize::MAX] {
        topology::set_thread_node(Some(node));
        assert_eq!(topology::current_node(), node);
    }
    topology::set_thread_node(None);
}

#[test]
fn round_robin_virtual_nodes() {
    let _off = serialize_virtual_nodes();
    assert_eq!(topology::virtual_nodes(), None);
    topology::set_virtual_nodes(Some(4)).unwrap();
    assert_eq!(topology::virtual_nodes(), Some(4));

    // Each fresh thread takes the next ordinal; nothing else takes one while we hold the mutex.
    let handles: Vec<_> = (0..8)
        .map(|_| {
            thread::spawn(|| {
                let first = topology::current_node();
                // A thread keeps its virtual node.
                assert_eq!(topology::current_node(), first);
                first
            })
        })
        .collect();
    let nodes: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(nodes.iter().all(|&node| node < 4), "{nodes:?}");
    let distinct: BTreeSet<usize> = nodes.iter().copied().collect();
    assert_eq!(distinct.len(), 4, "{nodes:?}");
    for node in 0..4 {
        assert_eq!(nodes.iter().filter(|&&n| n == node).count(), 2, "{nodes:?}");
    }

    // Explicit override wins over round-robin; `None` goes back to round-robin.
    let (explicit, virtual_again) = thread::spawn(|| {
        topology::set_thread_node(Some(77));
        let explicit = topology::current_node();
        topology::set_thread_node(None);
        (explicit, topology::current_node())
    })
    .join()
    .unwrap();
    assert_eq!(explicit, 77);
    assert!(virtual_again < 4);

    // One virtual node: everyone is on node 0.
    topology::set_virtual_nodes(Some(1)).unwrap();
    assert_eq!(thread::spawn(topology::current_node).join().unwrap(), 0);

    // Off again: back to detection.
    topology::set_virtual_nodes(None).unwrap();
    assert_eq!(topology::virtual_nodes(), None);
    assert!(thread::spawn(topology::current_node).join().unwrap() < topology::node_count());
}

#[test]
fn virtual_node_count_zero_is_refused() {
    let _off = serialize_virtual_nodes();
    topology::set_virtual_nodes(Some(3)).unwrap();
    let err = topology::set_virtual_nodes(Some(0)).unwrap_err();
    assert_eq!(err, TopologyError::InvalidVirtualNodeCount { value: 0 });
    let message = err.to_string();
    assert!(
        message.contains('0') && message.contains("at least 1"),
        "{message}"
    );
    // The refused call left the setting alone.
    assert_eq!(topology::virtual_nodes(), Some(3));
    // Huge counts are fine.
    topology::set_virtual_nodes(Some(usize::MAX)).unwrap();
    assert_eq!(topology::virtual_nodes(), Some(usize::MAX));
}

/// `current_node` answers 0 at once on a one-node machine until a virtual node is set; setting
/// one (for this thread, or round-robin for all) takes effect at once even after such answers.
#[test]
fn virtual_nodes_take_effect_after_fast_answers() {
    let _off = serialize_virtual_nodes();
    for _ in 0..3 {
        assert!(topology::current_node() < topology::node_count());
    }
    topology::set_thread_node(Some(7));
    assert_eq!(topology::current_node(), 7);
    topology::set_thread_node(None);
    assert!(topology::current_node() < topology::node_count());
    topology::set_virtual_nodes(Some(3)).unwrap();
    let nodes: Vec<usize> = (0..6)
        .map(|_| std::thread::spawn(topology::current_node).join().unwrap())
        .collect();
    assert!(nodes.iter().all(|&n| n < 3), "{nodes:?}");
    // Six threads in turn take six ordinals, consecutive unless another thread of this process
    // takes one in between: not all on one node, as a stale "always 0" would answer.
    assert!(nodes.iter().any(|&n| n != nodes[0]), "{nodes:?}");
}

// ---------------------------------------------------------------------------------------------------------
// Cache (L3) domains from sysfs

/// A 2-socket EPYC in NPS1 mode, in miniature: 2 nodes of 4 CCXs of 2 cores, SMT siblings numbered
/// `cpu` and `cpu + 16` as Linux numbers them, with the full `cache/index0..3` directories.
#[test]
fn epyc_nps1_has_one_domain_per_ccx() {
    let topology = sysfs("epyc_nps1");
    assert_eq!(topology.node_count(), 2);
    assert_eq!(topology.domain_count(), 8);
    let expected: Vec<(usize, Vec<usize>)> = (0..8)
        .map(|ccx| {
            let first = 2 * ccx;
            (ccx / 4, vec![first, first + 1, first + 16, first + 17])
        })
        .collect();
    assert_eq!(domain_layout(&topology), expected);
    assert_consistent(&topology);
    assert_eq!(
        topology.locality_of_cpu(27),
        Some(Locality { node: 1, domain: 5 })
    );
    assert_eq!(topology.locality_of_cpu(32), None);
}

/// Only `index0..2` (no L3 reported, as on some VMs and Arm servers): one domain per node.
#[test]
fn no_index3_gives_one_domain_per_node() {
    let topology = sysfs("no_index3");
    assert_eq!(topology.node_count(), 2);
    assert_one_domain_per_node(&topology);
}

/// The L3 is found by its `level` file, not by its index: here `index3` is a 2-CPU L2 and the L3 is
/// `index4`.
#[test]
fn l3_is_found_by_level() {
    let topology = sysfs("l3_at_index4");
    assert_eq!(
        domain_layout(&topology),
        [(0, vec![0, 1, 2, 3]), (0, vec![4, 5, 6, 7])]
    );
    assert_consistent(&topology);
}

/// Sparse node numbers and offline CPUs (which have no cache directory and are left out of the L3
/// lists): domains hold the online CPUs only, numbered densely.
#[test]
fn sparse_nodes_and_offline_cpus_keep_their_domains() {
    let topology = sysfs("sparse_offline_l3");
    assert_eq!(layout(&topology)[1].0, 2, "node2 is dense node 1");
    assert_eq!(topology.domain_count(), 8);
    assert_consistent(&topology);
    let layout = domain_layout(&topology);
    assert_eq!(layout[1], (0, vec![2, 18, 19]), "CPU 3 is offline");
    assert_eq!(layout[2], (0, vec![5, 20]), "CPUs 4 and 21 are offline");
    assert_eq!(layout[4], (1, vec![8, 9, 24, 25]));
    for offline in [3, 4, 21] {
        assert_eq!(topology.locality_of_cpu(offline), None);
        assert_eq!(topology.domain_of_cpu(offline), None);
    }
}

/// One L3 shared by two nodes (Intel sub-NUMA clustering): split per node, so a domain never spans
/// two nodes.
#[test]
fn l3_spanning_nodes_is_split_per_node() {
    let topology = sysfs("l3_spans_nodes");
    assert_eq!(topology.node_count(), 4);
    assert_one_domain_per_node(&topology);
}

/// Odd cache data is no error: it leaves one domain per node.
#[test]
fn odd_cache_data_falls_back_to_one_domain_per_node() {
    for name in ["cpu_without_l3", "overlapping_l3", "malformed_l3"] {
        let topology = sysfs(name);
        assert_one_domain_per_node(&topology);
    }
    // Every older fixture has no cache directories at all.
    for name in [
        "one_node",
        "sparse",
        "interleaved4",
        "offline",
        "offline_node",
        "memory_only",
        "two_packages",
        "four_packages",
        "wide256",
    ] {
        assert_one_domain_per_node(&sysfs(name));
    }
}

/// Cache data is read only for online CPUs, and unreadable cache files change nothing but the
/// domains.
#[test]
fn generated_cache_trees() {
    let root = TempRoot::new();
    root.write("devices/system/node/node0/cpulist", b"0-3\n");
    for cpu in 0..4 {
        let shared = if cpu < 2 { "0-1\n" } else { "2-3\n" };
        root.write(
            &format!("devices/system/cpu/cpu{cpu}/cache/index3/level"),
            b"3\n",
        );
        root.write(
            &format!("devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_list"),
            shared.as_bytes(),
        );
    }
    let two = Topology::from_sysfs(&root.0).unwrap();
    assert_eq!(domain_layout(&two), [(0, vec![0, 1]), (0, vec![2, 3])]);

    // CPU 3 offline: its (missing) cache data is not needed.
    root.write("devices/system/cpu/online", b"0-2\n");
    std::fs::remove_dir_all(root.0.join("devices/system/cpu/cpu3")).unwrap();
    let offline = Topology::from_sysfs(&root.0).unwrap();
    assert_eq!(domain_layout(&offline), [(0, vec![0, 1]), (0, vec![2])]);

    // An instruction-only level-3 cache is not the L3 we want.
    root.write(
        "devices/system/cpu/cpu2/cache/index3/type",
        b"Instruction\n",
    );
    let no_l3 = Topology::from_sysfs(&root.0).unwrap();
    assert_one_domain_per_node(&no_l3);

    // A huge file where a list should be. (Not under Miri: see the module docs.)
    if !cfg!(miri) {
        root.write("devices/system/cpu/cpu2/cache/index3/type", b"Unified\n");
        root.write(
            "devices/system/cpu/cpu2/cache/index3/shared_cpu_list",
            &vec![b'1'; 2 << 20],
        );
        assert_one_domain_per_node(&Topology::from_sysfs(&root.0).unwrap());
    }
}

#[test]
fn single_node_has_one_domain() {
    let topology = Topology::single_node(4);
    assert_one_domain_per_node(&topology);
    assert_eq!(topology.domain_node(0), Some(0));
    assert_eq!(topology.domain_node(1), None);
}

// ---------------------------------------------------------------------------------------------------------
// The calling thread's locality, virtual domains

#[test]
fn real_machine_locality() {
    let _off = serialize_virtual_nodes();
    let topology = topology::detected();
    assert!(topology::domain_count() >= topology::node_count());
    assert_eq!(topology::domain_count(), topology.domain_count());
    assert_consistent(topology);
    for _ in 0..1000 {
        let here = topology::current_locality();
        assert!(here.domain < topology::domain_count(), "{here:?}");
        // A thread may migrate between the two calls; on one node it cannot change node.
        if topology::node_count() == 1 {
            assert_eq!(here.node, topology::current_node());
        }
        assert_eq!(
            topology.domain_node(here.domain),
            Some(here.node),
            "{here:?}"
        );
    }
    let places: Vec<Locality> = (0..8)
        .map(|_| thread::spawn(topology::current_locality))
        .map(|handle| handle.join().unwrap())
        .collect();
    assert!(
        places
            .iter()
            .all(|p| topology.domain_node(p.domain) == Some(p.node)),
        "{places:?}"
    );
}

#[test]
fn domain_override_wins_and_stays_in_its_thread() {
    let _off = serialize_virtual_nodes();
    topology::set_thread_domain(Some(11));
    assert_eq!(topology::current_locality().domain, 11);
    assert_eq!(topology::current_locality().node, topology::current_node());
    // Virtual domains do not override an explicit domain.
    topology::set_virtual_domains(Some(3)).unwrap();
    assert_eq!(topology::current_locality().domain, 11);
    topology::set_virtual_domains(None).unwrap();
    let other = thread::spawn(topology::current_locality).join().unwrap();
    assert!(other.domain < topology::domain_count(), "{other:?}");
    for domain in [0, 1, 1000, usize::MAX] {
        topology::set_thread_domain(Some(domain));
        assert_eq!(topology::current_locality().domain, domain);
    }
    topology::set_thread_domain(None);
    assert!(topology::current_locality().domain < topology::domain_count());
}

/// A virtual node (explicit or round-robin) without virtual domains is one domain, with the node's id.
#[test]
fn a_virtual_node_is_one_domain() {
    let _off = serialize_virtual_nodes();
    topology::set_thread_node(Some(6));
    assert_eq!(
        topology::current_locality(),
        Locality { node: 6, domain: 6 }
    );
    topology::set_thread_node(Some(usize::MAX));
    assert_eq!(
        topology::current_locality(),
        Locality {
            node: usize::MAX,
            domain: usize::MAX
        }
    );
    topology::set_thread_node(None);
    topology::set_virtual_nodes(Some(3)).unwrap();
    let places: Vec<Locality> = (0..6)
        .map(|_| thread::spawn(topology::current_locality).join().unwrap())
        .collect();
    assert!(
        places.iter().all(|p| p.node < 3 && p.domain == p.node),
        "{places:?}"
    );
}

/// With 2 virtual nodes of 3 virtual domains, consecutive threads fill domain 0 of both nodes, then
/// domain 1, then domain 2: 12 threads in turn use each of the 6 domains twice.
#[test]
fn round_robin_virtual_domains() {
    let _off = serialize_virtual_nodes();
    assert_eq!(topology::virtual_domains(), None);
    topology::set_virtual_nodes(Some(2)).unwrap();
    topology::set_virtual_domains(Some(3)).unwrap();
    assert_eq!(topology::virtual_domains(), Some(3));
    let places: Vec<Locality> = (0..12)
        .map(|_| {
            thread::spawn(|| {
                let first = topology::current_locality();
                assert_eq!(
                    topology::current_locality(),
                    first,
                    "a thread keeps its place"
                );
                assert_eq!(topology::current_node(), first.node);
                first
            })
            .join()
            .unwrap()
        })
        .collect();
    for place in &places {
        assert!(
            place.node < 2 && place.domain / 3 == place.node,
            "{places:?}"
        );
    }
    // Ordinals are process-wide: another test's thread may take one between two of ours, but
    // nothing else runs while we hold the mutex, so each domain is used twice.
    for domain in 0..6 {
        let uses = places.iter().filter(|p| p.domain == domain).count();
        assert_eq!(uses, 2, "domain {domain}: {places:?}");
    }
    // Domains of an explicit node: node * 3 + i.
    let explicit = thread::spawn(|| {
        topology::set_thread_node(Some(10));
        topology::current_locality()
    })
    .join()
    .unwrap();
    assert_eq!(explicit.node, 10);
    assert!((30..33).contains(&explicit.domain), "{explicit:?}");
    // Wrapping, not a panic, for absurd virtual node ids.
    let huge = thread::spawn(|| {
        topology::set_thread_node(Some(usize::MAX));
        topology::current_locality()
    })
    .join()
    .unwrap();
    assert_eq!(huge.node, usize::MAX);

    // Virtual domains on the hardware's nodes: node `n`'s domains are `3n..3n+3`.
    topology::set_virtual_nodes(None).unwrap();
    let hardware = thread::spawn(topology::current_locality).join().unwrap();
    assert!(hardware.node < topology::node_count());
    assert_eq!(hardware.domain / 3, hardware.node, "{hardware:?}");
}

#[test]
fn virtual_domain_counts_out_of_range_are_refused() {
    let _off = serialize_virtual_nodes();
    topology::set_virtual_domains(Some(4)).unwrap();
    for value in [0, MAX_CPUS + 1, usize::MAX] {
        let err = topology::set_virtual_domains(Some(value)).unwrap_err();
        assert_eq!(
            err,
            TopologyError::InvalidVirtualDomainCount {
                value,
                max: MAX_CPUS
            }
        );
        let message = err.to_string();
        assert!(
            message.contains(&value.to_string()) && message.contains(&format!("1 to {MAX_CPUS}")),
            "{message}"
        );
    }
    // The refused calls left the setting alone.
    assert_eq!(topology::virtual_domains(), Some(4));
    topology::set_virtual_domains(Some(MAX_CPUS)).unwrap();
    assert_eq!(topology::virtual_domains(), Some(MAX_CPUS));
    topology::set_virtual_domains(None).unwrap();
    assert_eq!(topology::virtual_domains(), None);
}

/// `current_locality` answers (0, 0) at once on a one-domain machine until a virtual node or domain
/// is set; setting one takes effect at once even after such answers.
#[test]
fn virtual_domains_take_effect_after_fast_answers() {
    let _off = serialize_virtual_nodes();
    for _ in 0..3 {
        assert!(topology::current_locality().domain < topology::domain_count());
    }
    topology::set_thread_domain(Some(7));
    assert_eq!(topology::current_locality().domain, 7);
    topology::set_thread_domain(None);
    topology::set_virtual_domains(Some(4)).unwrap();
    let domains: Vec<usize> = (0..8)
        .map(|_| {
            thread::spawn(|| topology::current_locality().domain)
                .join()
                .unwrap()
        })
        .collect();
    // Eight threads in turn take eight ordinals: not all in one domain, as a stale "always 0"
    // would answer.
    assert!(domains.iter().any(|&d| d != domains[0]), "{domains:?}");
    // current_node keeps its own answer.
    assert!(topology::current_node() < topology::node_count());
}
