//! Simulated machines: the topology (sockets → NUMA nodes → L3 domains → cores → hardware
//! threads), the latency table and the presets.
//!
//! Hardware threads are numbered `0..hw_threads()` in topology order: socket-major, then node,
//! then L3 domain, then core, with the SMT siblings of a core adjacent:
//! `hw = ((((socket * N + node) * L + l3) * C + core) * T + thread)`. This is the simulator's own
//! numbering, not Linux's (which usually numbers siblings `cpu` and `cpu + cores`).

use std::fmt;

/// Picoseconds: the simulator's unit of time. Sub-nanosecond costs (an L1 hit is about 1.5 ns)
/// add up exactly.
pub type Ps = u64;

/// `x` nanoseconds in picoseconds (for the preset tables).
const fn ns(x: f64) -> Ps {
    (x * 1000.0) as Ps
}

/// The most hardware threads a machine may have (the size of the simulator's sharer sets).
pub const MAX_HW_THREADS: usize = 256;

/// The costs of a machine, in picoseconds.
///
/// Transfer latencies are one-way costs of moving one 64-byte line between two hardware
/// threads, by how far apart they are (the classes of [`LatencyClass`]): what a core-to-core
/// latency benchmark reports as "one-way" (half a CAS ping-pong round trip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// Between the SMT siblings of one core.
    pub smt: Ps,
    /// Between two cores that share an L3 (a CCX, or the whole socket on Intel parts).
    pub same_l3: Ps,
    /// Between two cores of one NUMA node that do not share an L3.
    pub same_node: Ps,
    /// Between two NUMA nodes of one socket.
    pub same_socket: Ps,
    /// Between two sockets.
    pub other_socket: Ps,
    /// A load that hits the caller's cache (and a plain store to a line it owns).
    pub l1_hit: Ps,
    /// A locked read-modify-write (swap, CAS, fetch_*) on a line the caller owns.
    pub rmw_hit: Ps,
    /// Fetching a line from the caller's own node's memory.
    pub dram_local: Ps,
    /// Fetching a line from another node's memory.
    pub dram_remote: Ps,
    /// One spin-loop hint (`pause` on x86, `yield` on Arm).
    pub pause: Ps,
    /// Reading the monotonic clock (vDSO `clock_gettime`).
    pub clock_read: Ps,
    /// `sched_yield` with nothing else to run.
    pub yield_: Ps,
    /// The system-call cost of going to sleep in `futex_wait`.
    pub futex_wait: Ps,
    /// The waker's system-call cost of `futex_wake` (when it wakes someone).
    pub futex_wake: Ps,
    /// From a wake until the woken thread runs.
    pub wake_latency: Ps,
}

/// How far apart two hardware threads are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LatencyClass {
    /// The same hardware thread.
    Same,
    /// SMT siblings of one core.
    Smt,
    /// Two cores sharing an L3.
    SameL3,
    /// Two cores of one NUMA node, different L3 domains.
    SameNode,
    /// Two NUMA nodes of one socket.
    SameSocket,
    /// Two sockets.
    OtherSocket,
}

impl LatencyClass {
    /// Every class but [`LatencyClass::Same`], nearest first.
    pub const TRANSFERS: [LatencyClass; 5] = [
        LatencyClass::Smt,
        LatencyClass::SameL3,
        LatencyClass::SameNode,
        LatencyClass::SameSocket,
        LatencyClass::OtherSocket,
    ];
}

/// A simulated machine: a topology and its costs.
///
/// ```
/// use numa_sim::Machine;
///
/// let m = Machine::by_name("x5-4").unwrap();
/// assert_eq!(m.hw_threads(), 144);
/// assert_eq!(m.node_count(), 4);
/// assert!(Machine::by_name("nope").unwrap_err().to_string().contains("x5-4"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The preset's name, as `by_name` takes it.
    pub name: &'static str,
    /// The processor it models.
    pub cpu: &'static str,
    /// Sockets.
    pub sockets: usize,
    /// NUMA nodes per socket.
    pub nodes_per_socket: usize,
    /// L3 domains (CCX, die cluster) per node.
    pub l3_per_node: usize,
    /// Cores per L3 domain.
    pub cores_per_l3: usize,
    /// Hardware threads per core (1 without SMT).
    pub threads_per_core: usize,
    /// The costs.
    pub costs: Costs,
}

/// Where a hardware thread sits, as global indices (`core` counts cores machine-wide, etc.).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Socket index.
    pub socket: usize,
    /// NUMA node index, machine-wide.
    pub node: usize,
    /// L3 domain index, machine-wide.
    pub l3: usize,
    /// Core index, machine-wide.
    pub core: usize,
    /// SMT thread index within the core.
    pub smt: usize,
}

impl Machine {
    /// Every preset.
    pub fn presets() -> &'static [Machine] {
        &PRESETS
    }

    /// The preset called `name`.
    ///
    /// # Errors
    ///
    /// [`UnknownMachine`], which names the value and lists the presets.
    pub fn by_name(name: &str) -> Result<&'static Machine, UnknownMachine> {
        PRESETS
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| UnknownMachine {
                name: name.to_string(),
            })
    }

    /// One line: name, shape and the main latencies (for `--machine list`).
    pub fn describe(&self) -> String {
        let c = &self.costs;
        format!(
            "{:<11} {}: {} sockets x {} nodes x {} L3 x {} cores x {} threads = {} hw threads; \
             transfer smt/l3/node/socket/remote {}/{}/{}/{}/{} ns",
            self.name,
            self.cpu,
            self.sockets,
            self.nodes_per_socket,
            self.l3_per_node,
            self.cores_per_l3,
            self.threads_per_core,
            self.hw_threads(),
            c.smt as f64 / 1000.0,
            c.same_l3 as f64 / 1000.0,
            c.same_node as f64 / 1000.0,
            c.same_socket as f64 / 1000.0,
            c.other_socket as f64 / 1000.0,
        )
    }

    /// Hardware threads in all.
    pub fn hw_threads(&self) -> usize {
        self.cores() * self.threads_per_core
    }

    /// Physical cores in all.
    pub fn cores(&self) -> usize {
        self.sockets * self.nodes_per_socket * self.l3_per_node * self.cores_per_l3
    }

    /// NUMA nodes in all.
    pub fn node_count(&self) -> usize {
        self.sockets * self.nodes_per_socket
    }

    /// Where hardware thread `hw` sits.
    ///
    /// # Panics
    ///
    /// If `hw >= self.hw_threads()`.
    pub fn place(&self, hw: usize) -> Place {
        assert!(
            hw < self.hw_threads(),
            "hardware thread {hw} does not exist on {} ({} hardware threads)",
            self.name,
            self.hw_threads()
        );
        let smt = hw % self.threads_per_core;
        let core = hw / self.threads_per_core;
        let l3 = core / self.cores_per_l3;
        let node = l3 / self.l3_per_node;
        let socket = node / self.nodes_per_socket;
        Place {
            socket,
            node,
            l3,
            core,
            smt,
        }
    }

    /// The NUMA node of hardware thread `hw`.
    pub fn node_of(&self, hw: usize) -> usize {
        self.place(hw).node
    }

    /// How far apart hardware threads `a` and `b` are.
    pub fn class(&self, a: usize, b: usize) -> LatencyClass {
        class_of(&self.place(a), &self.place(b))
    }

    /// The one-way cost of moving a line between hardware threads of class `class`.
    pub fn transfer(&self, class: LatencyClass) -> Ps {
        let c = &self.costs;
        match class {
            LatencyClass::Same => 0,
            LatencyClass::Smt => c.smt,
            LatencyClass::SameL3 => c.same_l3,
            LatencyClass::SameNode => c.same_node,
            LatencyClass::SameSocket => c.same_socket,
            LatencyClass::OtherSocket => c.other_socket,
        }
    }

    /// A pair of hardware threads `(0, b)` of class `class`, if the machine has one (no SMT
    /// pair without SMT, no same-socket pair with one node per socket, ...).
    pub fn pair_of_class(&self, class: LatencyClass) -> Option<(usize, usize)> {
        (0..self.hw_threads())
            .find(|&b| self.class(0, b) == class)
            .map(|b| (0, b))
    }
}

pub(crate) fn class_of(a: &Place, b: &Place) -> LatencyClass {
    if a.core == b.core {
        if a.smt == b.smt {
            LatencyClass::Same
        } else {
            LatencyClass::Smt
        }
    } else if a.l3 == b.l3 {
        LatencyClass::SameL3
    } else if a.node == b.node {
        LatencyClass::SameNode
    } else if a.socket == b.socket {
        LatencyClass::SameSocket
    } else {
        LatencyClass::OtherSocket
    }
}

/// An unknown machine name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMachine {
    /// The name that was asked for.
    pub name: String,
}

impl fmt::Display for UnknownMachine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = PRESETS.iter().map(|m| m.name).collect();
        write!(
            f,
            "unknown machine {:?}: allowed {}",
            self.name,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownMachine {}

/// More threads than the machine has hardware threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyThreads {
    /// The machine's name.
    pub machine: &'static str,
    /// Threads asked for.
    pub threads: usize,
    /// Hardware threads the machine has.
    pub hw_threads: usize,
}

impl fmt::Display for TooManyThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} threads do not fit on {}, which has {} hardware threads (one simulated thread per \
             hardware thread)",
            self.threads, self.machine, self.hw_threads
        )
    }
}

impl std::error::Error for TooManyThreads {}

/// Where `threads` runnable threads go on `machine` under the "spread" policy that Linux's
/// scheduler approximates: over sockets first, then over the nodes of a socket, then the L3
/// domains of a node, then the cores of an L3 domain; SMT siblings only once every core has a
/// thread. Returns one hardware thread per thread.
///
/// ```
/// let m = numa_sim::Machine::by_name("x5-4").unwrap();
/// let hw = numa_sim::placement(m, 16).unwrap();
/// for socket in 0..4 {
///     assert_eq!(hw.iter().filter(|&&h| m.place(h).socket == socket).count(), 4);
/// }
/// assert!(numa_sim::placement(m, 145).is_err());
/// ```
///
/// # Errors
///
/// [`TooManyThreads`] when `threads > machine.hw_threads()`.
pub fn placement(machine: &Machine, threads: usize) -> Result<Vec<usize>, TooManyThreads> {
    if threads > machine.hw_threads() {
        return Err(TooManyThreads {
            machine: machine.name,
            threads,
            hw_threads: machine.hw_threads(),
        });
    }
    let m = machine;
    let mut order: Vec<(usize, usize, usize, usize, usize, usize)> = (0..m.hw_threads())
        .map(|hw| {
            let p = m.place(hw);
            let node_in_socket = p.node % m.nodes_per_socket;
            let l3_in_node = p.l3 % m.l3_per_node;
            let core_in_l3 = p.core % m.cores_per_l3;
            // Sort key: SMT thread, then core within its L3, L3 within its node, node within its
            // socket, socket. Consecutive threads thus go to different sockets first.
            (p.smt, core_in_l3, l3_in_node, node_in_socket, p.socket, hw)
        })
        .collect();
    order.sort_unstable();
    Ok(order.into_iter().take(threads).map(|k| k.5).collect())
}

// PROVISIONAL: every value below is a placeholder of the right order of magnitude, chosen before
// the sourced numbers (notes/presets_research.md) were available. Each preset says which of its
// values are provisional.
static PRESETS: [Machine; 4] = [
    // Oracle X5-4: 4 x Intel Xeon E7-8895 v3 (Haswell-EX, 18 cores, 2 threads), one NUMA node
    // and one L3 per socket, QPI fully connected. The machine of the CNA series (arXiv
    // 1810.05600, "Compact NUMA-aware Locks", Dice & Kogan, EuroSys 2019).
    // PROVISIONAL: all latencies and costs.
    Machine {
        name: "x5-4",
        cpu: "4x Xeon E7-8895 v3 (Haswell-EX)",
        sockets: 4,
        nodes_per_socket: 1,
        l3_per_node: 1,
        cores_per_l3: 18,
        threads_per_core: 2,
        costs: Costs {
            smt: ns(8.0),
            same_l3: ns(45.0),
            same_node: ns(45.0),
            same_socket: ns(45.0),
            other_socket: ns(130.0),
            l1_hit: ns(1.5),
            rmw_hit: ns(7.0),
            dram_local: ns(90.0),
            dram_remote: ns(150.0),
            pause: ns(4.0),
            clock_read: ns(10.0),
            yield_: ns(400.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(2000.0),
            wake_latency: ns(6000.0),
        },
    },
    // Huawei Kunpeng 920 (2 sockets x 48 cores, no SMT): each socket has 2 dies (SCCLs), each
    // its own NUMA node with a shared L3. The machine of the HQ-spinlock RFC.
    // PROVISIONAL: all latencies and costs.
    Machine {
        name: "kunpeng920",
        cpu: "2x Kunpeng 920-4826 (TaiShan v110)",
        sockets: 2,
        nodes_per_socket: 2,
        l3_per_node: 1,
        cores_per_l3: 24,
        threads_per_core: 1,
        costs: Costs {
            smt: ns(8.0),
            same_l3: ns(35.0),
            same_node: ns(35.0),
            same_socket: ns(80.0),
            other_socket: ns(160.0),
            l1_hit: ns(1.5),
            rmw_hit: ns(8.0),
            dram_local: ns(95.0),
            dram_remote: ns(170.0),
            pause: ns(1.0),
            clock_read: ns(20.0),
            yield_: ns(500.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(2000.0),
            wake_latency: ns(6000.0),
        },
    },
    // 2 x AMD EPYC 7763 (Zen 3 "Milan", 64 cores, 2 threads), NPS1 (one node per socket),
    // 8 CCXs of 8 cores per socket, each CCX with its own L3.
    // PROVISIONAL: all latencies and costs.
    Machine {
        name: "epyc-2s",
        cpu: "2x EPYC 7763 (Zen 3), NPS1",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 8,
        cores_per_l3: 8,
        threads_per_core: 2,
        costs: Costs {
            smt: ns(7.0),
            same_l3: ns(25.0),
            same_node: ns(100.0),
            same_socket: ns(100.0),
            other_socket: ns(190.0),
            l1_hit: ns(1.2),
            rmw_hit: ns(6.0),
            dram_local: ns(95.0),
            dram_remote: ns(180.0),
            pause: ns(20.0),
            clock_read: ns(10.0),
            yield_: ns(400.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(2000.0),
            wake_latency: ns(6000.0),
        },
    },
    // A generic 2-socket server: 2 sockets x 16 cores x 2 threads, one node and one L3 per
    // socket; round numbers typical of recent Intel Xeon parts.
    // PROVISIONAL: all latencies and costs.
    Machine {
        name: "2s-generic",
        cpu: "generic 2-socket, 16 cores x 2 threads per socket",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 1,
        cores_per_l3: 16,
        threads_per_core: 2,
        costs: Costs {
            smt: ns(8.0),
            same_l3: ns(50.0),
            same_node: ns(50.0),
            same_socket: ns(50.0),
            other_socket: ns(130.0),
            l1_hit: ns(1.5),
            rmw_hit: ns(7.0),
            dram_local: ns(90.0),
            dram_remote: ns(140.0),
            pause: ns(15.0),
            clock_read: ns(10.0),
            yield_: ns(400.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(2000.0),
            wake_latency: ns(6000.0),
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_fit_and_are_named_uniquely() {
        for (i, m) in Machine::presets().iter().enumerate() {
            assert!(m.hw_threads() <= MAX_HW_THREADS, "{}", m.name);
            assert!(u16::try_from(m.node_count()).is_ok());
            assert_eq!(Machine::by_name(m.name).unwrap(), m);
            assert!(Machine::presets()[..i].iter().all(|o| o.name != m.name));
            let c = &m.costs;
            for v in [
                c.l1_hit,
                c.rmw_hit,
                c.pause,
                c.clock_read,
                c.yield_,
                c.futex_wait,
            ] {
                assert!(v > 0, "{}: every cost must be positive", m.name);
            }
            for class in LatencyClass::TRANSFERS {
                assert!(m.transfer(class) > 0, "{} {class:?}", m.name);
            }
            assert!(m.describe().starts_with(m.name));
        }
    }

    #[test]
    fn unknown_machine_names_value_and_presets() {
        let err = Machine::by_name("x5-8").unwrap_err().to_string();
        assert!(err.contains("\"x5-8\""), "{err}");
        for m in Machine::presets() {
            assert!(err.contains(m.name), "{err}");
        }
    }

    #[test]
    fn classes() {
        let m = Machine::by_name("epyc-2s").unwrap();
        assert_eq!(m.class(0, 0), LatencyClass::Same);
        assert_eq!(m.class(0, 1), LatencyClass::Smt);
        assert_eq!(m.class(0, 2), LatencyClass::SameL3);
        assert_eq!(m.class(0, 16), LatencyClass::SameNode);
        assert_eq!(m.class(0, 128), LatencyClass::OtherSocket);
        let k = Machine::by_name("kunpeng920").unwrap();
        assert_eq!(k.class(0, 24), LatencyClass::SameSocket);
        assert_eq!(k.class(0, 48), LatencyClass::OtherSocket);
        assert_eq!(k.pair_of_class(LatencyClass::Smt), None);
    }

    #[test]
    fn spread_placement() {
        let m = Machine::by_name("x5-4").unwrap();
        let all = placement(m, 144).unwrap();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 144, "every hardware thread once");
        // The first 72 use one thread of every core; the SMT siblings come after.
        assert!(all[..72].iter().all(|&hw| m.place(hw).smt == 0));
        assert!(all[72..].iter().all(|&hw| m.place(hw).smt == 1));
        let first: Vec<usize> = all[..4].iter().map(|&hw| m.place(hw).socket).collect();
        assert_eq!(first, [0, 1, 2, 3]);
        // epyc: 2 sockets, then CCXs.
        let e = Machine::by_name("epyc-2s").unwrap();
        let hw = placement(e, 16).unwrap();
        for l3 in 0..16 {
            assert_eq!(hw.iter().filter(|&&h| e.place(h).l3 == l3).count(), 1);
        }
        let err = placement(m, 145).unwrap_err().to_string();
        assert!(err.contains("145") && err.contains("144"), "{err}");
    }
}
