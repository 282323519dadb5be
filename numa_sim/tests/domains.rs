//! Cache domains: `current_domain` / `domain_count` answer what the preset says, for every
//! hardware thread of every preset, inside and outside a simulation.

use std::sync::{Arc, Mutex};

use numa_sim::{LatencyClass, Machine, Simulation, thread};

/// Each simulated thread, pinned to one hardware thread, reports its node and domain; they must
/// be the preset's (`node_of`, `domain_of`), domains contiguous per node.
#[test]
fn current_domain_matches_every_preset() {
    for &m in Machine::presets() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        Simulation::new(m).run(move || {
            assert_eq!(numa_sim::domain_count(), m.domain_count());
            assert_eq!(numa_sim::node_count(), m.node_count());
            // One thread per hardware thread would be slow for 384; every fourth one (and the
            // last) covers every core of every CCX.
            let hws: Vec<usize> = (0..m.hw_threads())
                .filter(|hw| hw % 4 == 0 || hw + 1 == m.hw_threads())
                .collect();
            let threads: Vec<_> = hws
                .iter()
                .map(|&hw| {
                    thread::spawn_on(hw, move || {
                        (hw, numa_sim::current_node(), numa_sim::current_domain())
                    })
                })
                .collect();
            let answers: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
            sink.lock().unwrap().extend(answers);
        });
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        for &(hw, node, domain) in seen.iter() {
            assert_eq!(node, m.node_of(hw), "{} hw {hw}", m.name);
            assert_eq!(domain, m.domain_of(hw), "{} hw {hw}", m.name);
            assert!(domain < m.domain_count(), "{} hw {hw}", m.name);
            assert_eq!(
                domain / m.cache_domains_per_node,
                node,
                "{} hw {hw}: a node's domains are contiguous",
                m.name
            );
        }
    }
}

/// On machines whose cache domains are their L3 latency domains, two hardware threads share a
/// domain exactly when they are at most `SameL3` apart.
#[test]
fn domains_are_the_l3_latency_level_where_the_os_sees_it() {
    for &m in Machine::presets() {
        if m.cache_domains_per_node != m.l3_per_node {
            continue;
        }
        for b in 0..m.hw_threads() {
            let near = m.class(0, b) <= LatencyClass::SameL3;
            assert_eq!(m.domain_of(0) == m.domain_of(b), near, "{} hw {b}", m.name);
        }
    }
}

/// The presets' cache domains: EPYC's CCXs, one per node elsewhere (Kunpeng 920's L3 is the
/// die's, although its latency level is the 4-core cluster).
#[test]
fn preset_domain_counts() {
    let count = |name: &str| Machine::by_name(name).unwrap().domain_count();
    assert_eq!(count("epyc-2s"), 12);
    assert_eq!(count("epyc9654-2s"), 24);
    assert_eq!(count("x5-4"), 4);
    assert_eq!(count("kunpeng920"), 4);
    assert_eq!(count("e5-2690v3-2s"), 2);
    assert_eq!(count("2s-generic"), 2);
}

#[test]
fn outside_a_simulation_one_domain() {
    assert_eq!(numa_sim::current_domain(), 0);
    assert_eq!(numa_sim::domain_count(), 1);
    Simulation::new(Machine::by_name("epyc-2s").unwrap()).run(|| {
        // The harness is on no core: domain 0, of the machine's 12.
        assert_eq!(numa_sim::current_domain(), 0);
        assert_eq!(numa_sim::domain_count(), 12);
    });
}

/// 2 × EPYC 9654: 2 sockets (one node each) × 12 CCXs × 8 cores × 2 threads, and its latency
/// classes as the preset's documentation cites them.
#[test]
fn epyc9654_2s_shape_and_classes() {
    let m = Machine::by_name("epyc9654-2s").unwrap();
    assert_eq!(m.hw_threads(), 384);
    assert!(m.hw_threads() <= numa_sim::MAX_HW_THREADS);
    assert_eq!((m.node_count(), m.domain_count()), (2, 24));
    assert_eq!(m.class(0, 1), LatencyClass::Smt);
    assert_eq!(m.class(0, 15), LatencyClass::SameL3);
    assert_eq!(m.class(0, 16), LatencyClass::SameNode);
    assert_eq!(m.class(0, 191), LatencyClass::SameNode);
    assert_eq!(m.class(0, 192), LatencyClass::OtherSocket);
    assert_eq!((m.domain_of(15), m.domain_of(16)), (0, 1));
    assert_eq!((m.domain_of(191), m.domain_of(192)), (11, 12));
    let ns = |class| m.transfer(class) / 1000;
    assert_eq!(
        [
            LatencyClass::Smt,
            LatencyClass::SameL3,
            LatencyClass::SameNode,
            LatencyClass::OtherSocket
        ]
        .map(ns),
        [9, 23, 97, 193]
    );
    assert_eq!(m.costs.remote_home_same_socket, None);
    // 384 simulated threads, one per hardware thread, each on its own domain's answer.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    Simulation::new(m).run(move || {
        let threads: Vec<_> = (0..m.hw_threads())
            .map(|hw| thread::spawn_on(hw, move || (hw, numa_sim::current_domain())))
            .collect();
        let answers: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        sink.lock().unwrap().extend(answers);
    });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 384);
    assert!(seen.iter().all(|&(hw, domain)| domain == hw / 16));
}
