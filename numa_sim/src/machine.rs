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

/// The most hardware threads a machine may have (the size of the simulator's sharer sets): 512,
/// room for the 384 of the `epyc9654-2s` preset (2 sockets × 96 cores × 2 threads).
pub const MAX_HW_THREADS: usize = 512;

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
    /// If set, a transfer between two L3 domains of one socket costs at least this much when
    /// the line's memory is on another socket: the request goes through the home node's
    /// directory (measured on AMD EPYC, where such transfers cost about as much as crossing
    /// sockets).
    pub remote_home_same_socket: Option<Ps>,
    /// A load that hits the caller's cache (and a plain store to a line it owns).
    pub l1_hit: Ps,
    /// A locked read-modify-write (swap, CAS, fetch_*) on a line the caller owns.
    pub rmw_hit: Ps,
    /// Fetching a line from the caller's own node's memory.
    pub dram_local: Ps,
    /// Fetching a line from the memory of another node of the same socket.
    pub dram_remote: Ps,
    /// Fetching a line from the memory of a node on another socket.
    pub dram_other_socket: Ps,
    /// One core clock cycle at the clock the preset's other cycle counts were measured at.
    pub cycle: Ps,
    /// The issue time of the instructions around one simulated memory access (address
    /// arithmetic, the compare and branch on what it read): charged after every access, so that
    /// code with more accesses costs more even where they hit. A stretch of straight-line code
    /// without accesses is charged explicitly with [`cycles`](crate::cycles).
    pub issue: Ps,
    /// The latency of one 64-bit integer division (`div r64`, `udiv x`), for workloads that
    /// divide (`%` by a value known only at run time).
    pub div64: Ps,
    /// What an indirect call in kernel code costs beyond a predicted call, under the Spectre v2
    /// mitigation the kernel of the preset's published runs picks on this CPU: a retpoline
    /// where the CPU has no enhanced or automatic IBRS, nothing extra where it has, or on Arm.
    /// Only models of kernel code pay it (the `locktorture` writer's calls through
    /// `cxt.cur_ops`, see [`kernel_indirect_call`](crate::kernel_indirect_call)).
    pub kernel_indirect_call: Ps,
    /// One spin-loop hint (`pause` on x86, `yield` on Arm).
    pub pause: Ps,
    /// Reading the monotonic clock (vDSO `clock_gettime`).
    pub clock_read: Ps,
    /// `sched_yield` with nothing else to run.
    pub yield_: Ps,
    /// A system call that returns at once: entry, the futex hash-bucket lookup and exit. What
    /// `futex_wait` costs when the word no longer holds the expected value (Linux checks it
    /// under the bucket's lock before it sleeps) and what `futex_wake` costs when nobody sleeps
    /// on the word (`futex_wake` returns as soon as the bucket shows no waiter).
    pub syscall: Ps,
    /// The system-call cost of going to sleep in `futex_wait` (the check passed: the thread is
    /// switched out).
    pub futex_wait: Ps,
    /// The waker's system-call cost of `futex_wake` when it wakes someone.
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
    /// L3 domains (CCX, die cluster) per node: the latency level [`LatencyClass::SameL3`].
    pub l3_per_node: usize,
    /// Cache domains per node: the L3 caches the operating system reports in a node (sysfs
    /// `cache/index3/shared_cpu_list`), what [`current_domain`](crate::current_domain) answers.
    /// Equal to `l3_per_node` where the latency level is the L3 itself (AMD CCXs, Intel sockets);
    /// 1 on Kunpeng 920, whose L3 is shared by the die (one node) while its latency level is the
    /// 4-core cluster. Divides `l3_per_node`.
    pub cache_domains_per_node: usize,
    /// Cores per L3 domain.
    pub cores_per_l3: usize,
    /// Hardware threads per core (1 without SMT).
    pub threads_per_core: usize,
    /// Entries of a hardware thread's store buffer: plain stores that may be in flight (issued,
    /// not yet committed) at once; a store into a full buffer waits for the oldest to commit.
    pub store_buffer: usize,
    /// Whether the CPU has a prefetch for writing (x86 `PREFETCHW`, CPUID `PRFCHW`, which Linux
    /// lists as the `3dnowprefetch` flag; Arm `PRFM PSTL1KEEP`). The kernel's `prefetchw()`
    /// issues it where the CPU has it, and `prefetcht0`, a prefetch for reading, on an x86-64
    /// CPU without it (`arch/x86/include/asm/processor.h`: `alternative_input(BASE_PREFETCH,
    /// "prefetchw %P1", X86_FEATURE_3DNOWPREFETCH, ...)`, `BASE_PREFETCH` being
    /// `"prefetcht0 %P1"` on 64-bit). See [`kernel_prefetchw`](crate::kernel_prefetchw).
    pub write_prefetch: bool,
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
    pub fn presets() -> &'static [&'static Machine] {
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
            .copied()
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

    /// Cache domains in all (see [`Machine::cache_domains_per_node`]).
    ///
    /// ```
    /// use numa_sim::Machine;
    ///
    /// assert_eq!(Machine::by_name("epyc-2s").unwrap().domain_count(), 12);
    /// assert_eq!(Machine::by_name("kunpeng920").unwrap().domain_count(), 4);
    /// ```
    pub fn domain_count(&self) -> usize {
        self.node_count() * self.cache_domains_per_node
    }

    /// The cache domain of hardware thread `hw`, numbered machine-wide node by node (node 0's
    /// domains first), as an operating system's L3 caches in topology order.
    ///
    /// ```
    /// use numa_sim::Machine;
    ///
    /// let m = Machine::by_name("epyc-2s").unwrap();
    /// assert_eq!(m.domain_of(0), 0);
    /// assert_eq!(m.domain_of(16), 1); // the second CCX: 8 cores x 2 threads further
    /// assert_eq!(m.domain_of(96), 6); // socket 1's first CCX
    /// ```
    ///
    /// # Panics
    ///
    /// If `hw >= self.hw_threads()`.
    pub fn domain_of(&self, hw: usize) -> usize {
        let l3_per_domain = (self.l3_per_node / self.cache_domains_per_node.max(1)).max(1);
        self.place(hw).l3 / l3_per_domain
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
    // Sort key: SMT thread, then core within its L3, L3 within its node, node within its
    // socket, socket. Consecutive threads thus go to different sockets first.
    placed(
        machine,
        threads,
        |p, [node_in_socket, l3_in_node, core_in_l3]| {
            [p.smt, core_in_l3, l3_in_node, node_in_socket, p.socket]
        },
    )
}

/// Where `threads` threads go on `machine` when they are kept on as few NUMA nodes as
/// possible: node 0 first, then the other nodes of its socket, then the next socket; within a
/// node as [`placement`] spreads them (over the L3 domains, then the cores; SMT siblings once
/// every core of the node has a thread). With at most one node's worth of hardware threads,
/// every handoff stays within a node whatever a lock does: the most locality any NUMA policy
/// could give (`numasim --placement packed`).
///
/// ```
/// let m = numa_sim::Machine::by_name("kunpeng920").unwrap();
/// let hw = numa_sim::packed_placement(m, 24).unwrap();
/// assert!(hw.iter().all(|&h| m.node_of(h) == 0));
/// let hw = numa_sim::packed_placement(m, 25).unwrap();
/// assert_eq!(hw.iter().filter(|&&h| m.node_of(h) == 1).count(), 1);
/// assert!(numa_sim::packed_placement(m, 97).is_err());
/// ```
///
/// # Errors
///
/// [`TooManyThreads`] when `threads > machine.hw_threads()`.
pub fn packed_placement(machine: &Machine, threads: usize) -> Result<Vec<usize>, TooManyThreads> {
    placed(
        machine,
        threads,
        |p, [node_in_socket, l3_in_node, core_in_l3]| {
            [p.socket, node_in_socket, p.smt, core_in_l3, l3_in_node]
        },
    )
}

/// Where `threads` unpinned threads end up on `machine` under the Linux scheduler of v5.10 (the
/// CNA v13 letter's stock kernel; [`linux_v5_12_placement`] for v5.11–v5.12), as [`placement`]
/// places them within a node (over the L3
/// domains, then the cores, SMT siblings last), with as many on each node as its load balancer
/// leaves there. Which threads share a node is drawn from `seed`.
///
/// The counts follow the scheduler's code (`kernel/sched/fair.c`):
/// - a new thread starts on its parent's node while that node has an idle CPU
///   (`find_idlest_group`: "keep the task on this node to stay close to its wakeup source");
///   locktorture's writers are all forked by one parent, so they start on node 0;
/// - periodic load balancing then lets each node, in turn, pull half the difference in running
///   threads from the busiest node (`calculate_imbalance`, `nr_diff >> 1` with
///   `prefer_sibling` at the NUMA level), except from a node running at most 2
///   (`adjust_numa_imbalance`'s `imbalance_min`: "allow a small imbalance based on a simple
///   pair of communicating tasks that remain local when the source domain is almost idle"),
///   until nothing moves.
///
/// So 2 threads share node 0, 4 threads on 4 nodes run 2 and 2, and from 8 on every node runs
/// its share. Which threads a balance moves depends on run-queue order, not on creation order:
/// the identities are a seeded permutation, so that a FIFO lock's queue order is not aligned
/// with the nodes as pinned round-robin threads align it.
///
/// ```
/// let m = numa_sim::Machine::by_name("x5-4").unwrap();
/// let nodes = |n| {
///     let hw = numa_sim::linux_placement(m, n, 1).unwrap();
///     let mut per_node = vec![0; 4];
///     hw.iter().for_each(|&h| per_node[m.node_of(h)] += 1);
///     per_node
/// };
/// assert_eq!(nodes(2), [2, 0, 0, 0]);
/// assert_eq!(nodes(4), [2, 2, 0, 0]);
/// assert_eq!(nodes(72), [18, 18, 18, 18]);
/// assert!(numa_sim::linux_placement(m, 145, 1).is_err());
/// ```
///
/// # Errors
///
/// [`TooManyThreads`] when `threads > machine.hw_threads()`.
pub fn linux_placement(
    machine: &Machine,
    threads: usize,
    seed: u64,
) -> Result<Vec<usize>, TooManyThreads> {
    linux_balanced(machine, threads, seed, Balancer::V5_10)
}

/// [`linux_placement`] under the balancer of v5.11–v5.12, the stock kernel of the v15 cover
/// letter's runs (v5.12). Mel Gorman's "Revisit NUMA imbalance tolerance and fork balancing"
/// (merged for v5.11, `kernel/sched/fair.c`) replaced both of v5.10's rules with one test,
/// `allow_numa_imbalance(running, weight)`: `running < weight / 4`.
/// - A new thread stays on its parent's node while that node runs fewer than a quarter of the
///   NUMA domain's CPUs (`find_idlest_group`, `local_sgs.sum_nr_running` against
///   `sd->span_weight`: on a machine with one NUMA level, every CPU of the machine);
/// - a node pulls half the difference from the busiest node, except that an imbalance of at
///   most 2 is left alone while the busiest node runs fewer than a quarter of its own CPUs
///   (`adjust_numa_imbalance(imbalance, busiest->sum_nr_running, busiest->group_weight)`).
///
/// So on `x5-4` (36 hardware threads per node) 4 threads stay on one node and 8 run 4 and 4,
/// where v5.10 gives 2 and 2, and 2 on every node; from 12 threads on the two agree. The rule
/// is the top NUMA level's: on a machine with several nodes per socket (two NUMA levels) the
/// kernel applies it level by level, which this does not model (`numasim` refuses such
/// machines for `--placement linux-5.12`).
///
/// ```
/// let m = numa_sim::Machine::by_name("x5-4").unwrap();
/// let nodes = |n| {
///     let hw = numa_sim::linux_v5_12_placement(m, n, 1).unwrap();
///     let mut per_node = vec![0; 4];
///     hw.iter().for_each(|&h| per_node[m.node_of(h)] += 1);
///     per_node
/// };
/// assert_eq!(nodes(4), [4, 0, 0, 0]);
/// assert_eq!(nodes(8), [4, 4, 0, 0]);
/// assert_eq!(nodes(16), [4, 4, 4, 4]);
/// ```
///
/// # Errors
///
/// [`TooManyThreads`] when `threads > machine.hw_threads()`.
pub fn linux_v5_12_placement(
    machine: &Machine,
    threads: usize,
    seed: u64,
) -> Result<Vec<usize>, TooManyThreads> {
    linux_balanced(machine, threads, seed, Balancer::V5_11)
}

/// Which kernel's NUMA balancing rules [`linux_balanced`] follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Balancer {
    /// v5.10: forks fill the parent's node while it has an idle CPU; a node running at most 2
    /// is never pulled from.
    V5_10,
    /// v5.11–v5.12: `allow_numa_imbalance` (see [`linux_v5_12_placement`]).
    V5_11,
}

/// The placements of [`linux_placement`] and [`linux_v5_12_placement`].
fn linux_balanced(
    machine: &Machine,
    threads: usize,
    seed: u64,
    balancer: Balancer,
) -> Result<Vec<usize>, TooManyThreads> {
    let m = machine;
    if threads > m.hw_threads() {
        return Err(TooManyThreads {
            machine: m.name,
            threads,
            hw_threads: m.hw_threads(),
        });
    }
    let nodes = m.node_count();
    let per_node = m.hw_threads() / nodes;
    // Within a node, threads go where `packed_placement` puts a node's share.
    let all = packed_placement(m, m.hw_threads())?;
    let in_node: Vec<&[usize]> = all.chunks(per_node).collect();
    // Forks fill the parent's node first: v5.10 while it has an idle CPU, v5.11 while it runs
    // fewer than a quarter of the machine's CPUs. The kernel gives each later fork to the
    // idlest node; here they fill the next nodes in turn, and the balancing below evens the
    // counts.
    let first = match balancer {
        Balancer::V5_10 => per_node,
        Balancer::V5_11 => (m.hw_threads() / 4).min(per_node),
    };
    let mut running = vec![0usize; nodes];
    let mut left = threads;
    for (n, r) in running.iter_mut().enumerate() {
        *r = left.min(if n == 0 { first } else { per_node });
        left -= *r;
    }
    // v5.11 on a machine whose quarter is less than a node: node 0 takes the rest last.
    running[0] += left;
    // Load balancing, each node pulling from the busiest in turn, until nothing moves.
    const IMBALANCE_MIN: usize = 2;
    loop {
        let mut moved = false;
        for local in 0..nodes {
            let busiest = (0..nodes)
                .max_by_key(|&n| (running[n], std::cmp::Reverse(n)))
                .expect("a machine has a node");
            if busiest == local {
                continue;
            }
            let imbalance = running[busiest].saturating_sub(running[local]) >> 1;
            let left_alone = match balancer {
                Balancer::V5_10 => running[busiest] <= IMBALANCE_MIN,
                Balancer::V5_11 => running[busiest] < per_node / 4 && imbalance <= IMBALANCE_MIN,
            };
            if left_alone {
                continue;
            }
            let pull = imbalance.min(per_node - running[local]);
            if pull > 0 {
                running[busiest] -= pull;
                running[local] += pull;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let mut slots: Vec<usize> = (0..nodes)
        .flat_map(|n| in_node[n][..running[n]].iter().copied())
        .collect();
    // A seeded Fisher-Yates shuffle of which thread takes which slot.
    let mut state = crate::engine::mix(seed ^ 0x006c_696e_7578);
    for i in (1..slots.len()).rev() {
        state = crate::engine::mix(state);
        let j = (state % (i as u64 + 1)) as usize;
        slots.swap(i, j);
    }
    Ok(slots)
}

/// The first `threads` hardware threads of `machine` in the order of `key`, which gets each
/// one's place and its node within the socket, L3 within the node and core within the L3.
fn placed(
    machine: &Machine,
    threads: usize,
    key: impl Fn(&Place, [usize; 3]) -> [usize; 5],
) -> Result<Vec<usize>, TooManyThreads> {
    if threads > machine.hw_threads() {
        return Err(TooManyThreads {
            machine: machine.name,
            threads,
            hw_threads: machine.hw_threads(),
        });
    }
    let m = machine;
    let mut order: Vec<([usize; 5], usize)> = (0..m.hw_threads())
        .map(|hw| {
            let p = m.place(hw);
            let within = [
                p.node % m.nodes_per_socket,
                p.l3 % m.l3_per_node,
                p.core % m.cores_per_l3,
            ];
            (key(&p, within), hw)
        })
        .collect();
    order.sort_unstable();
    Ok(order.into_iter().take(threads).map(|k| k.1).collect())
}

/// The presets: public statics, each documented with the sources of its numbers.
///
/// Every number cites its source in the rustdoc of the preset that uses it (the research
/// notes they were first collected in are not part of the crate). Marks: **APPROX** = measured
/// on a close relative of the CPU (same core family); **EST** = derived, no direct measurement
/// published; **UNVERIFIED** = recalled from a source that could not be opened (check before
/// relying on it). Unmarked values are direct
/// measurements of the CPU named. Nothing here was fitted to lock benchmark results.
///
/// Instruction costs, common to every preset: `cycle` is the core clock the preset's other
/// cycle counts were taken at. `issue`, the code around one simulated access, is 6 instructions
/// (**EST**: address arithmetic, the compare and the branch on the value read, a loop's
/// increment) at the core's documented issue width: 4 per cycle on Haswell, Cascade Lake
/// (Intel Optimization Reference Manual) and TSV110 (Huawei's Hot Chips 2019 slides: 4-wide
/// decode), 6 on Zen 3 and Zen 4 (AMD's Software Optimization Guides for families 19h): 1.5 and
/// 1 cycles. `div64` is the documented latency of a 64-bit division at the fast end of its
/// range (Agner Fog, "Instruction tables": Haswell `DIV r64` 32–96 cycles, Skylake-X 35–88,
/// Zen 3 9–17, Zen 4 10–18; Arm's Cortex-A76 Software Optimization Guide, `UDIV` X-form 5–12,
/// taken at 12 for TSV110, **APPROX**): the workloads that divide (locktorture's `%`) divide
/// 32-bit values. `syscall` 0.2 µs (**EST**: lmbench's null system call takes 0.05–0.1 µs on
/// these generations, plus the futex hash-bucket lookup and its lock, and the page-table switch
/// of the Meltdown mitigation on Intel parts). `kernel_indirect_call`: a complete retpolined
/// indirect call takes about 33 cycles (Paul Turner, LKML, 2018-01-05, "Re: [PATCH v3 01/13]
/// x86/retpoline: Add initial retpoline support": 33.2 cycles per call for the `pause; jmp`
/// sequence the kernel uses), a predicted one about 1, so 32 cycles more where the kernel
/// retpolines: Haswell (`CONFIG_RETPOLINE` is `default y` since v4.15 and v5.10's
/// `spectre_v2_select_mitigation` picks the generic retpoline on a CPU without enhanced IBRS)
/// and Zen 3 (generic retpoline on AMD since v5.17; the cycle count is Intel's, **APPROX**);
/// nothing on Cascade Lake (enhanced IBRS), Zen 4 (automatic IBRS, used since v6.3) and the
/// Kunpeng 920 (arm64 kernels mitigate at exception entry and context switch, not per call).
pub mod presets {
    use super::{Costs, Machine, ns};

    /// The costs of the Haswell presets (`x5-4`, `e5-2690v3-2s`): Haswell-EP / Broadwell-EP
    /// measurements, sourced on [`X5_4`].
    const HASWELL: Costs = Costs {
        smt: ns(8.0),
        same_l3: ns(45.0),
        same_node: ns(45.0),
        same_socket: ns(45.0),
        other_socket: ns(120.0),
        remote_home_same_socket: None,
        l1_hit: ns(1.5),
        rmw_hit: ns(7.7),
        dram_local: ns(100.0),
        dram_remote: ns(135.0),
        dram_other_socket: ns(135.0),
        cycle: ns(0.385),
        issue: ns(0.577),
        div64: ns(12.3),
        kernel_indirect_call: ns(12.3),
        pause: ns(3.8),
        clock_read: ns(20.0),
        yield_: ns(300.0),
        syscall: ns(200.0),
        futex_wait: ns(1500.0),
        futex_wake: ns(1000.0),
        wake_latency: ns(5000.0),
    };

    /// Oracle X5-4: 4 × Intel Xeon E7-8895 v3 (Haswell-EX, 18 cores, 2 threads, 2.6 GHz), one
    /// NUMA node and one L3 per socket, QPI fully connected (Brickland 4S platform: 3 QPI links
    /// per socket; assumed 1 hop for every pair). The machine of the CNA series (Dice & Kogan,
    /// EuroSys 2019; LKML "[PATCH v13 0/6] Add NUMA-awareness to qspinlock").
    ///
    /// No c2c or memory latency has been published for Haswell-EX: the transfer and DRAM
    /// figures are Haswell-EP / Broadwell-EP measurements (same core and ring L3), **APPROX**:
    /// - SMT 8 ns: nviennot/core-to-core-latency CSVs, E5-2695 v4 / E5-2680 v4 medians 7.6–8.3;
    /// - same socket 45 ns: same CSVs (medians 43.5, 45.2), Intel MLC HITM on E5-2699 v3
    ///   (47.0 ns, FD.io csit calibration);
    /// - other socket 120 ns: core-to-core-latency E5-2695 v4 cross-socket median 118,
    ///   E5-2680 v4 127.5;
    /// - DRAM 100 / 135 ns: MLC idle latency on E5-2699 v3 (FD.io) and E5-2680 v3 (KU Leuven);
    ///   probably higher on EX (SMI2 memory buffers), unsourced.
    ///
    /// Core: L1 hit 4 cycles (7-cpu.com Haswell) = 1.5 ns; `pause` about 10 cycles before
    /// Skylake (Intel Optimization Reference Manual, "Pause Latency in Skylake") = 3.8 ns;
    /// locked RMW on an owned line ~20 cycles = 7.7 ns (**UNVERIFIED**, Agner Fog); store
    /// buffer 42 entries (Intel Optimization Reference Manual, Haswell microarchitecture). No
    /// prefetch for writing: Haswell (family 6, model 63) does not report `PRFCHW` (Linux's
    /// flags for an E5-2690 v3 list `abm` and no `3dnowprefetch`; Intel added it with
    /// Broadwell), so the kernel's `prefetchw()` runs as `prefetcht0`.
    /// OS: vDSO clock read 20 ns (**EST**, 12–23 ns measured on recent x86, perf-book #84);
    /// `sched_yield` 300 ns (**EST**, 0.1–0.5 µs); futex sleep 1.5 µs (**EST** from pinned
    /// context-switch costs of 1.2–1.5 µs, Bendersky 2018), waker's futex_wake 1 µs (**EST**,
    /// 0.5–2 µs), wake-up latency 5 µs (**EST**, cross-core wake plus switch 5–9 µs measured on
    /// Kunpeng 920 with lmbench lat_pipe; no C-state exit).
    pub static X5_4: Machine = Machine {
        name: "x5-4",
        cpu: "4x Xeon E7-8895 v3 (Haswell-EX)",
        sockets: 4,
        nodes_per_socket: 1,
        l3_per_node: 1,
        cache_domains_per_node: 1,
        cores_per_l3: 18,
        threads_per_core: 2,
        store_buffer: 42,
        write_prefetch: false,
        costs: HASWELL,
    };

    /// 2 × Intel Xeon E5-2690 v3 (Haswell-EP, 12 cores, 2 threads, 2.6 GHz), one NUMA node
    /// and one L3 per socket: 48 hardware threads. The machine of parking_lot issue #201 (the
    /// lock-bench figures: "2x Intel(R) Xeon(R) CPU E5-2690 v3 @ 2.60GHz ... 48 hyperthreads
    /// across two NUMA nodes").
    ///
    /// The costs are [`X5_4`]'s, which are Haswell-EP and Broadwell-EP measurements in the first
    /// place (2-socket parts of the same core and ring L3: the E5-2699 v3 and E5-2680 v3 MLC
    /// figures, the E5-2695 v4 and E5-2680 v4 core-to-core medians): here they are measurements
    /// of the same generation rather than **APPROX**. The E5-2690 v3 runs at 2.6 GHz like the
    /// E7-8895 v3, so the cycle-based costs (L1 hit, `pause`, locked RMW) are the same too.
    /// Store buffer 42 entries (Haswell).
    pub static E5_2690V3_2S: Machine = Machine {
        name: "e5-2690v3-2s",
        cpu: "2x Xeon E5-2690 v3 (Haswell-EP, 12 cores)",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 1,
        cache_domains_per_node: 1,
        cores_per_l3: 12,
        threads_per_core: 2,
        store_buffer: 42,
        write_prefetch: false,
        costs: HASWELL,
    };

    /// Huawei Kunpeng 920 (TaiShan v110, 2.6 GHz), 2 sockets × 2 dies × 24 cores, no SMT: 96
    /// cores, 4 NUMA nodes (one per die). The machine of the HQ-spinlock RFC ("96 cores (no
    /// MT), 2 sockets, 4 NUMA nodes"). The simulator's L3 level is the 4-core cluster (CCL):
    /// the cores of a CCL share an L3 tag array (the L3 data is shared by the die), no L2
    /// (openeuler wayca-scheduler `tools/kp920.2P.6CCL`; Chips and Cheese, "Huawei's Kunpeng
    /// 920 and TaiShan v110", 2025).
    ///
    /// Transfers: nviennot/core-to-core-latency, "HiSilicon Kunpeng 920-6426" (one socket, same
    /// die family): same CCL 34 ns, same die 36 ns, other die 80 ns (medians); other socket
    /// 115 ns **EST** (no published figure: from the wayca pipe-latency sheet, the cross-socket
    /// increment is about 1.75 × the cross-die one).
    /// Memory: local 96 ns (**APPROX**, Chips and Cheese, 24-core SoC); other die 115 ns and
    /// other socket 210 ns **EST** (from the ACPI NUMA distances 10 / 12 / 22).
    /// Core: L1 hit 4 cycles = 1.5 ns (Chips and Cheese; LLVM TSV110 model). Spin hint 15 ns
    /// **EST**: Rust's `spin_loop()` emits `ISB SY` on aarch64 (rust-lang/rust #84725), 30–50
    /// cycles according to Arm and AWS engineers, not measured on TSV110 (the kernel's
    /// `cpu_relax()` is a `yield`, about 1 cycle). Locked RMW on an owned line 15 cycles =
    /// 5.8 ns (**EST**, 10–20 cycles, a free parameter). Store buffer 48 entries (**EST**: not
    /// published for TSV110; Arm's Neoverse N1, of the same generation, has 48 store-queue
    /// entries; the lock code keeps a handful of stores in flight, so only the order matters).
    /// Prefetch for writing: arm64's `prefetchw()` is `prfm pstl1keep`.
    /// OS: clock read 20 ns, `sched_yield` 300 ns, futex sleep 1.5 µs, futex_wake 1 µs (all
    /// **EST**, as for x5-4); wake-up latency 6 µs (**EST**: lat_pipe round trips of 10–18 µs
    /// for two wakes, pipe overhead included, wayca-scheduler `log.pipe-latency`).
    pub static KUNPENG920: Machine = Machine {
        name: "kunpeng920",
        cpu: "2x Kunpeng 920 (TaiShan v110, 48 cores)",
        sockets: 2,
        nodes_per_socket: 2,
        l3_per_node: 6,
        cache_domains_per_node: 1,
        cores_per_l3: 4,
        threads_per_core: 1,
        store_buffer: 48,
        write_prefetch: true,
        costs: Costs {
            smt: ns(34.0), // no SMT: never used
            same_l3: ns(34.0),
            same_node: ns(36.0),
            same_socket: ns(80.0),
            other_socket: ns(115.0),
            remote_home_same_socket: None,
            l1_hit: ns(1.5),
            rmw_hit: ns(5.8),
            dram_local: ns(96.0),
            dram_remote: ns(115.0),
            dram_other_socket: ns(210.0),
            cycle: ns(0.385),
            issue: ns(0.577),
            div64: ns(4.6),
            kernel_indirect_call: ns(0.0),
            pause: ns(15.0),
            clock_read: ns(20.0),
            yield_: ns(300.0),
            syscall: ns(200.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(1000.0),
            wake_latency: ns(6000.0),
        },
    };

    /// 2 × AMD EPYC 7R13 (Zen 3 "Milan", AWS c6a.metal): 2 sockets × 6 CCXs × 8 cores × 2
    /// threads, NPS1 (one NUMA node per socket), one L3 per CCX. Chosen because it is the only
    /// dual-socket Milan with a complete published core-to-core matrix (the 7763 has the same
    /// CCD and IO die, and similar published results).
    ///
    /// Transfers (nviennot/core-to-core-latency, "AMD EPYC 7R13" CSV and README): SMT 9.8 ns,
    /// same CCX 23 ns, other CCX of the same socket 108 ns when the line's memory is on that
    /// socket, and 200 ns (186–207) when it is on the other socket (the same CSV, socket 1;
    /// core-to-core-latency issue #97), other socket 197 ns.
    /// Core: L1 hit 4 cycles = 1.2 ns (7-cpu.com Zen 3); `pause` about 64 cycles = 20 ns
    /// (**UNVERIFIED** for Zen 3: 64 cycles documented for Zen 4, 40–65 seen); locked RMW on
    /// an owned line ~8 cycles = 2.5 ns (**UNVERIFIED**, Agner Fog); store queue 64 entries
    /// (AMD's Software Optimization Guide for family 19h, Zen 3). Prefetch for writing: AMD
    /// parts report `PRFCHW` (`3dnowprefetch`).
    /// Memory: local 115 ns, remote 195 ns (**EST**, no published idle latency found).
    /// OS: clock read 20 ns (EPYC 9274F, perf-book #84); `sched_yield` 300 ns, futex sleep
    /// 1.5 µs, futex_wake 1 µs, wake-up latency 5 µs (**EST**, as for x5-4).
    pub static EPYC_2S: Machine = Machine {
        name: "epyc-2s",
        cpu: "2x EPYC 7R13 (Zen 3 Milan, 48 cores), NPS1",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 6,
        cache_domains_per_node: 6,
        cores_per_l3: 8,
        threads_per_core: 2,
        store_buffer: 64,
        write_prefetch: true,
        costs: Costs {
            smt: ns(9.8),
            same_l3: ns(23.0),
            same_node: ns(108.0),
            same_socket: ns(108.0),
            other_socket: ns(197.0),
            remote_home_same_socket: Some(ns(200.0)),
            l1_hit: ns(1.2),
            rmw_hit: ns(2.5),
            dram_local: ns(115.0),
            dram_remote: ns(195.0),
            dram_other_socket: ns(195.0),
            cycle: ns(0.300),
            issue: ns(0.300),
            div64: ns(2.7),
            kernel_indirect_call: ns(9.6),
            pause: ns(20.0),
            clock_read: ns(20.0),
            yield_: ns(300.0),
            syscall: ns(200.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(1000.0),
            wake_latency: ns(5000.0),
        },
    };

    /// 2 × AMD EPYC 9654 (Zen 4 "Genoa", 96 cores, 2 threads, 2.4 GHz base, 3.55 GHz all-core
    /// boost): 2 sockets × 12 CCDs × 8 cores × 2 threads = 384 hardware threads, NPS1 (one NUMA
    /// node per socket), one CCX and one 32 MiB L3 per CCD, so 12 cache domains per node. The
    /// most common large AMD cloud and HPC server of its generation (AMD's product page for the
    /// 9654: 96 cores, 192 threads, 384 MB L3).
    ///
    /// No core-to-core matrix of a dual 9654 has been published; the transfers are those of a
    /// dual **EPYC 9274F** (Genoa, the same Zen 4 CCD and IO die, 8 CCDs with 3 active cores
    /// each, 4.05 GHz base), nviennot/core-to-core-latency issue #132
    /// (<https://github.com/nviennot/core-to-core-latency/issues/132>, CAS ping-pong, one way):
    /// SMT 9 ns; same CCX 23 ns (22–25); other CCX of the same socket 97 ns (87–104); other
    /// socket 193 ns (187–200). **APPROX** for the 9654, whose cores and L3 run slower (3.55
    /// against about 4.1 GHz): the same-CCX figure may be a few ns higher there; the
    /// cross-CCX and cross-socket ones go through the IO die and xGMI, which do not scale with
    /// the core clock. Unlike Milan ([`EPYC_2S`]), the socket that does not hold the line's
    /// memory shows no extra cost for a transfer between two of its CCXs (the 9274F's second
    /// socket measures the same 87–104 ns, where the 7R13's measured 186–207), so
    /// `remote_home_same_socket` is off.
    /// Core: L1 hit 4 cycles = 1.1 ns at 3.55 GHz (Zen 3's 4 cycles, **UNVERIFIED** for Zen 4);
    /// `pause` 64 cycles = 18 ns (as documented for Zen 4, see [`EPYC_2S`]); locked RMW on an
    /// owned line ~8 cycles = 2.3 ns (**UNVERIFIED**, Agner Fog, as for Zen 3); store queue 64
    /// entries (Chips and Cheese, "AMD's Zen 4, Part 2: Memory Subsystem and Conclusion", 2022,
    /// <https://chipsandcheese.com/2022/11/08/amds-zen-4-part-2-memory-subsystem-and-conclusion/>:
    /// "a relatively small 64 entry store queue").
    /// Memory: local 120 ns, other socket 200 ns (**EST**: no idle latency of a 9654 found;
    /// Chips and Cheese, "Genoa-X: Server V-Cache Round 2", 2023,
    /// <https://chipsandcheese.com/2023/07/17/genoa-x-server-v-cache-round-2/>, finds Genoa-X's
    /// DRAM latency a little above Milan-X's and close to Sapphire Rapids'; Milan's figures of
    /// [`EPYC_2S`] plus a few ns).
    /// OS: clock read 20 ns (measured on an EPYC 9274F, a Genoa, perf-book #84); `sched_yield`
    /// 300 ns, futex sleep 1.5 µs, futex_wake 1 µs, wake-up latency 5 µs (**EST**, as for x5-4).
    pub static EPYC9654_2S: Machine = Machine {
        name: "epyc9654-2s",
        cpu: "2x EPYC 9654 (Zen 4 Genoa, 96 cores), NPS1",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 12,
        cache_domains_per_node: 12,
        cores_per_l3: 8,
        threads_per_core: 2,
        store_buffer: 64,
        write_prefetch: true,
        costs: Costs {
            smt: ns(9.0),
            same_l3: ns(23.0),
            same_node: ns(97.0),
            same_socket: ns(97.0), // one node per socket: never used
            other_socket: ns(193.0),
            remote_home_same_socket: None,
            l1_hit: ns(1.1),
            rmw_hit: ns(2.3),
            dram_local: ns(120.0),
            dram_remote: ns(200.0),
            dram_other_socket: ns(200.0),
            cycle: ns(0.282),
            issue: ns(0.282),
            div64: ns(2.8),
            kernel_indirect_call: ns(0.0),
            pause: ns(18.0),
            clock_read: ns(20.0),
            yield_: ns(300.0),
            syscall: ns(200.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(1000.0),
            wake_latency: ns(5000.0),
        },
    };

    /// A generic 2-socket Intel server: 2 × Xeon Gold 6242 (Cascade Lake-SP, 16 cores, 2
    /// threads, 2.8 GHz), one node and one (mesh) L3 per socket, SNC off.
    ///
    /// Transfers (nviennot/core-to-core-latency, "Dual Intel Xeon Gold 6242"): SMT 7.4 ns, same
    /// socket 48 ns (MLC HITM 48.8–55.6 on Gold 6240 and Platinum 8280 agree), other socket
    /// 141 ns.
    /// Memory: Intel MLC idle latency on 2 × Gold 6240 (KU Leuven) and 2 × Platinum 8280
    /// (FD.io): local 81 ns, remote 135 ns.
    /// Core: L1 hit 4–5 cycles = 1.6 ns (7-cpu.com Skylake-X); `pause` "as many as 140 cycles"
    /// since Skylake (Intel Optimization Reference Manual), 43 ns measured on Skylake-X
    /// (rocksdb #4086); locked RMW on an owned line ~20 cycles = 6 ns (**UNVERIFIED**; 5.8 ns
    /// measured on Coffee Lake, portable-atomic #156); store buffer 56 entries (Intel
    /// Optimization Reference Manual, Skylake Server microarchitecture). Prefetch for writing:
    /// `PRFCHW` since Broadwell (`3dnowprefetch`).
    /// OS: clock read 23 ns (Xeon Gold 5318Y, perf-book #84); `sched_yield` 300 ns, futex sleep
    /// 1.5 µs, futex_wake 1 µs, wake-up latency 5 µs (**EST**, as for x5-4).
    pub static GENERIC_2S: Machine = Machine {
        name: "2s-generic",
        cpu: "2x Xeon Gold 6242 (Cascade Lake-SP, 16 cores)",
        sockets: 2,
        nodes_per_socket: 1,
        l3_per_node: 1,
        cache_domains_per_node: 1,
        cores_per_l3: 16,
        threads_per_core: 2,
        store_buffer: 56,
        write_prefetch: true,
        costs: Costs {
            smt: ns(7.4),
            same_l3: ns(48.0),
            same_node: ns(48.0),
            same_socket: ns(48.0),
            other_socket: ns(141.0),
            remote_home_same_socket: None,
            l1_hit: ns(1.6),
            rmw_hit: ns(6.0),
            dram_local: ns(81.0),
            dram_remote: ns(135.0),
            dram_other_socket: ns(135.0),
            cycle: ns(0.357),
            issue: ns(0.536),
            div64: ns(12.5),
            kernel_indirect_call: ns(0.0),
            pause: ns(43.0),
            clock_read: ns(23.0),
            yield_: ns(300.0),
            syscall: ns(200.0),
            futex_wait: ns(1500.0),
            futex_wake: ns(1000.0),
            wake_latency: ns(5000.0),
        },
    };
}

static PRESETS: [&Machine; 6] = [
    &presets::X5_4,
    &presets::E5_2690V3_2S,
    &presets::KUNPENG920,
    &presets::EPYC_2S,
    &presets::EPYC9654_2S,
    &presets::GENERIC_2S,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_fit_and_are_named_uniquely() {
        for (i, m) in Machine::presets().iter().enumerate() {
            assert!(m.hw_threads() <= MAX_HW_THREADS, "{}", m.name);
            assert!(u16::try_from(m.node_count()).is_ok());
            assert_eq!(Machine::by_name(m.name).unwrap(), *m);
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
            assert!(
                m.cache_domains_per_node >= 1 && m.l3_per_node % m.cache_domains_per_node == 0,
                "{}: cache domains must divide the L3 domains",
                m.name
            );
            // Domains are contiguous per node and nest in them.
            for hw in 0..m.hw_threads() {
                assert_eq!(
                    m.domain_of(hw) / m.cache_domains_per_node,
                    m.node_of(hw),
                    "{}",
                    m.name
                );
            }
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
        assert_eq!(m.class(0, 96), LatencyClass::OtherSocket);
        let k = Machine::by_name("kunpeng920").unwrap();
        assert_eq!(k.class(0, 3), LatencyClass::SameL3);
        assert_eq!(k.class(0, 4), LatencyClass::SameNode);
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
        for l3 in 0..12 {
            let n = hw.iter().filter(|&&h| e.place(h).l3 == l3).count();
            assert!((1..=2).contains(&n), "{hw:?}");
        }
        let err = placement(m, 145).unwrap_err().to_string();
        assert!(err.contains("145") && err.contains("144"), "{err}");
    }

    /// The threads per node of placement `hw` on `m`, checked to put one thread per hardware
    /// thread.
    fn threads_per_node(m: &Machine, hw: &[usize]) -> Vec<usize> {
        let mut sorted = hw.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            hw.len(),
            "{}: one thread per hardware thread",
            m.name
        );
        let mut counts = vec![0; m.node_count()];
        hw.iter().for_each(|&h| counts[m.node_of(h)] += 1);
        counts
    }

    #[test]
    fn linux_placement_balances_as_the_scheduler_does() {
        let per_node = |m: &Machine, n: usize, seed: u64| {
            threads_per_node(m, &linux_placement(m, n, seed).unwrap())
        };
        let x = Machine::by_name("x5-4").unwrap();
        // At most 2 stay together (adjust_numa_imbalance); then half the difference moves.
        assert_eq!(per_node(x, 1, 1), [1, 0, 0, 0]);
        assert_eq!(per_node(x, 2, 1), [2, 0, 0, 0]);
        assert_eq!(per_node(x, 3, 1), [2, 1, 0, 0]);
        assert_eq!(per_node(x, 4, 1), [2, 2, 0, 0]);
        for n in [8, 16, 32, 36, 72, 144] {
            assert_eq!(per_node(x, n, 1), vec![n / 4; 4], "{n}");
        }
        let e = Machine::by_name("epyc9654-2s").unwrap();
        assert_eq!(per_node(e, 2, 3), [2, 0]);
        assert_eq!(per_node(e, 192, 3), [96, 96]);
        // One core each before SMT siblings; the seed decides only who sits where.
        let hw = linux_placement(x, 72, 1).unwrap();
        assert!(hw.iter().all(|&h| x.place(h).smt == 0));
        let (mut a, mut b) = (hw.clone(), linux_placement(x, 72, 2).unwrap());
        assert_ne!(a, b, "seeds draw different identities");
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "on the same hardware threads");
        assert_eq!(hw, linux_placement(x, 72, 1).unwrap(), "deterministic");
        assert!(linux_placement(x, 145, 1).is_err());
    }

    #[test]
    fn linux_v5_12_placement_leaves_small_imbalances_on_lightly_loaded_nodes() {
        let per_node =
            |m: &Machine, n: usize| threads_per_node(m, &linux_v5_12_placement(m, n, 1).unwrap());
        let x = Machine::by_name("x5-4").unwrap();
        // x5-4: 36 CPUs a node, so a node running fewer than 9 keeps an imbalance of up to 2.
        assert_eq!(per_node(x, 2), [2, 0, 0, 0]);
        assert_eq!(per_node(x, 4), [4, 0, 0, 0]);
        assert_eq!(per_node(x, 6), [3, 3, 0, 0]);
        assert_eq!(per_node(x, 8), [4, 4, 0, 0]);
        for n in [12, 16, 32, 36, 72, 144] {
            assert_eq!(per_node(x, n), vec![n / 4; 4], "{n}");
        }
        // Beyond 11 threads the two kernels agree on x5-4.
        for n in 12..=144 {
            assert_eq!(
                linux_v5_12_placement(x, n, 1).unwrap(),
                linux_placement(x, n, 1).unwrap(),
                "{n}: the same hardware threads, drawn the same way"
            );
        }
        // 2s-generic: 64 CPUs, so forks stay on node 0 up to 16; 32 CPUs a node, quarter 8.
        let g = Machine::by_name("2s-generic").unwrap();
        assert_eq!(per_node(g, 4), [4, 0]);
        assert_eq!(
            per_node(g, 5),
            [5, 0],
            "an imbalance of 2 on a node below its quarter"
        );
        assert_eq!(per_node(g, 6), [3, 3], "an imbalance of 3 moves");
        assert_eq!(per_node(g, 8), [4, 4]);
        assert_eq!(per_node(g, 64), [32, 32]);
        assert!(linux_v5_12_placement(x, 145, 1).is_err());
    }

    #[test]
    fn packed_placement_fills_one_node_at_a_time() {
        for m in PRESETS.iter().copied() {
            let all = packed_placement(m, m.hw_threads()).unwrap();
            let mut sorted = all.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                m.hw_threads(),
                "{}: every hardware thread once",
                m.name
            );
            // Nodes in order, each one whole before the next.
            let per_node = m.hw_threads() / m.node_count();
            for (i, &hw) in all.iter().enumerate() {
                assert_eq!(m.node_of(hw), i / per_node, "{}: thread {i}", m.name);
            }
            // Within a node, every core before any SMT sibling, and over the L3 domains first.
            let cores = per_node / m.threads_per_core;
            assert!(all[..cores].iter().all(|&hw| m.place(hw).smt == 0));
            let l3s: Vec<usize> = all[..m.l3_per_node]
                .iter()
                .map(|&h| m.place(h).l3)
                .collect();
            assert_eq!(l3s, (0..m.l3_per_node).collect::<Vec<_>>(), "{}", m.name);
        }
        let k = Machine::by_name("kunpeng920").unwrap();
        assert_eq!(
            packed_placement(k, 30).unwrap(),
            packed_placement(k, 96).unwrap()[..30]
        );
        let err = packed_placement(k, 97).unwrap_err().to_string();
        assert!(err.contains("97") && err.contains("96"), "{err}");
    }
}
