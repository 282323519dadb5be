//! The coherence and cost model of one 64-byte line.
//!
//! Coherence is tracked per **hardware thread** rather than per core: SMT siblings then behave
//! like two caches `smt` apart, which gives the `smt` latency class its plain meaning (the cost
//! of a sibling's write reaching the other sibling) without special cases. Two siblings that
//! only read a line both hit it, as they would in a shared L1.
//!
//! Every access is a **reservation**: it is costed from the line's state at the moment it is
//! issued, and the line's state (holders, `busy_until`) is updated at once, so that later
//! requests queue behind it. The caller performs the real memory operation at the access's
//! completion time (see `engine.rs`).

use crate::machine::{LatencyClass, Machine, Place, Ps, class_of};

/// A set of hardware threads (at most [`crate::machine::MAX_HW_THREADS`]).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HwSet([u64; HW_SET_WORDS]);

/// 64 hardware threads per word.
const HW_SET_WORDS: usize = crate::machine::MAX_HW_THREADS / 64;

impl HwSet {
    #[inline]
    pub(crate) fn insert(&mut self, hw: usize) {
        self.0[hw / 64] |= 1 << (hw % 64);
    }

    #[inline]
    pub(crate) fn contains(&self, hw: usize) -> bool {
        self.0[hw / 64] & (1 << (hw % 64)) != 0
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0 == [0; HW_SET_WORDS]
    }

    #[inline]
    pub(crate) fn only(hw: usize) -> Self {
        let mut s = HwSet::default();
        s.insert(hw);
        s
    }

    #[inline]
    pub(crate) fn is_only(&self, hw: usize) -> bool {
        *self == HwSet::only(hw)
    }

    /// The members, in increasing order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * 64 + bit)
            })
        })
    }
}

impl std::fmt::Debug for HwSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The machine as the cost model needs it: per hardware thread, where it sits.
pub(crate) struct Topo {
    pub(crate) machine: &'static Machine,
    pub(crate) places: Vec<Place>,
}

impl Topo {
    pub(crate) fn new(machine: &'static Machine) -> Self {
        Topo {
            machine,
            places: (0..machine.hw_threads())
                .map(|hw| machine.place(hw))
                .collect(),
        }
    }

    /// One-way transfer cost between hardware threads `a` and `b` of a line homed on node
    /// `home` (see [`Costs::remote_home_same_socket`](crate::Costs::remote_home_same_socket)).
    #[inline]
    pub(crate) fn transfer(&self, a: usize, b: usize, home: usize) -> Ps {
        let (pa, pb) = (&self.places[a], &self.places[b]);
        let class = class_of(pa, pb);
        let cost = self.machine.transfer(class);
        match (self.machine.costs.remote_home_same_socket, class) {
            (Some(remote_home), LatencyClass::SameNode | LatencyClass::SameSocket)
                if pa.socket != home / self.machine.nodes_per_socket =>
            {
                cost.max(remote_home)
            }
            _ => cost,
        }
    }

    /// The cost of fetching a line homed on node `home` from memory into `hw`.
    #[inline]
    pub(crate) fn memory(&self, hw: usize, home: usize) -> Ps {
        let place = &self.places[hw];
        let costs = &self.machine.costs;
        if place.node == home {
            costs.dram_local
        } else if place.socket == home / self.machine.nodes_per_socket {
            costs.dram_remote
        } else {
            costs.dram_other_socket
        }
    }
}

/// [`Line::fill`] when no prefetch is pending.
pub(crate) const NO_FILL: (u16, Ps) = (u16::MAX, 0);

/// One 64-byte line.
///
/// | `holders` | `modified` | MESI state                                             |
/// |-----------|------------|--------------------------------------------------------|
/// | empty     | false      | Invalid: only in memory (at node `home`)               |
/// | {a, ...}  | false      | Shared by those hardware threads (Exclusive if one)    |
/// | {a}       | true       | Modified in `a`'s cache                                |
#[derive(Debug)]
pub(crate) struct Line {
    pub(crate) holders: HwSet,
    pub(crate) modified: bool,
    /// When the last transfer reserved on this line completes: a miss starts no earlier.
    pub(crate) busy_until: Ps,
    /// When the last load reserved on this line (hit or miss) completes: a write, which takes
    /// every other copy away, starts no earlier. Loads do not wait for each other's hits.
    pub(crate) reads_until: Ps,
    /// The NUMA node whose memory holds the line.
    pub(crate) home: u16,
    /// The hardware thread whose software prefetch of this line was last reserved, and when its
    /// fill completes: until then that thread's hits wait for it ([`NO_FILL`]: none).
    pub(crate) fill: (u16, Ps),
    /// Spinners sleeping until this line is written: (task, sleep sequence number). Entries
    /// whose sequence number is no longer the task's current sleep are stale and skipped.
    pub(crate) sleepers: Vec<(u32, u32)>,
    /// The buffered stores to this line that may not have committed yet (see
    /// `Engine::reserve`), oldest first.
    pub(crate) buffered: Vec<BufferedStore>,
    /// With the snoop window on: the holders that keep the line until a request's snoop
    /// reaches them ([`Line::open_windows`]).
    pub(crate) windows: Vec<Window>,
}

/// A cache-to-cache transfer in legs: the request to the line's home (its L3 slice on a socket,
/// its home agent across sockets), the snoop from there to the caches that hold the line, and
/// the data (or the acknowledgements) back to the requester: Intel's home-snoop flow. The
/// presets' transfer costs are measured whole, and the legs are taken as equal (**EST**). A
/// request's snoop reaches the holder this share of its transfer after the request's issue...
pub(crate) const SNOOP_AFTER_ISSUE: (u64, u64) = (2, 3);
/// ...or, for a request that the home holds behind another transfer of the line (conflicting
/// requests for a line are served one at a time, in the order they reach its home), this share
/// after that transfer completes: its request is at the home already.
pub(crate) const SNOOP_AFTER_TURN: (u64, u64) = (1, 3);

/// A hardware thread that still holds a line another thread's request has been reserved for,
/// until that request's snoop reaches it ([`Line::open_windows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    hw: u16,
    /// When the snoop arrives (ps).
    until: Ps,
    /// The holder had the line modified or exclusive, and the request was not a buffered
    /// store: it may write too.
    writable: bool,
}

/// A miss just reserved on a line, for [`Line::open_windows`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub(crate) hw: usize,
    /// A store or a locked RMW (it takes every other copy).
    pub(crate) write: bool,
    /// A buffered store (performed on the memory when issued).
    pub(crate) buffered: bool,
    pub(crate) issue: Ps,
    /// When its transfer started: its issue, or the completion of the transfer it waited for.
    pub(crate) start: Ps,
    pub(crate) completion: Ps,
}

/// A plain store that went through its thread's store buffer: performed on the real memory when
/// it was issued, visible in the model only from `commit` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BufferedStore {
    /// The word it wrote.
    pub(crate) word: Word,
    /// What it wrote.
    pub(crate) write: Write,
    /// The word's value just before it was performed (`None` until it is performed).
    pub(crate) before: Option<u64>,
    /// The storing task.
    pub(crate) task: usize,
    /// Its reservation's sequence number.
    pub(crate) seq: u64,
    /// When it commits.
    pub(crate) commit: Ps,
}

/// An atomic word of the simulated code: its address and size in bytes (1, 4 or 8), and
/// whether it holds a pointer (whose value the simulator handles with exposed provenance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) addr: usize,
    pub(crate) width: u8,
    pub(crate) ptr: bool,
}

/// What a store writes to its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// The whole word.
    Full(u64),
    /// The bits of `mask` only (a narrower store to part of the word).
    Masked { bits: u64, mask: u64 },
}

impl Write {
    /// The word's value after this write to a word holding `old`.
    pub(crate) fn apply(self, old: u64) -> u64 {
        match self {
            Write::Full(v) => v,
            Write::Masked { bits, mask } => (old & !mask) | (bits & mask),
        }
    }
}

/// What a reservation cost and found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// When the access completes.
    pub(crate) completion: Ps,
    /// Whether it hit the caller's cache.
    pub(crate) hit: bool,
}

impl Line {
    pub(crate) fn new(home: usize) -> Self {
        Line {
            holders: HwSet::default(),
            modified: false,
            busy_until: 0,
            reads_until: 0,
            home: home as u16,
            fill: NO_FILL,
            sleepers: Vec::new(),
            buffered: Vec::new(),
            windows: Vec::new(),
        }
    }

    /// When the snoop of a request issued at `issue`, whose transfer costs `cost` and started
    /// at `start`, reaches the holder: [`SNOOP_AFTER_ISSUE`] of the transfer after the issue,
    /// and no earlier than [`SNOOP_AFTER_TURN`] after the start.
    pub(crate) fn snoop_arrival(issue: Ps, start: Ps, cost: Ps) -> Ps {
        let after_issue = issue + cost * SNOOP_AFTER_ISSUE.0 / SNOOP_AFTER_ISSUE.1;
        let after_turn = start + cost * SNOOP_AFTER_TURN.0 / SNOOP_AFTER_TURN.1;
        after_issue.max(after_turn)
    }

    /// If `hw` still holds the line at `now` for an access (a write with `write`) although a
    /// request has been reserved for it: until when.
    pub(crate) fn window(&self, hw: usize, now: Ps, write: bool) -> Option<Ps> {
        self.windows
            .iter()
            .find(|w| usize::from(w.hw) == hw && now < w.until && (w.writable || !write))
            .map(|w| w.until)
    }

    /// After a miss `request` was reserved, the line's holders before it (`holders`, modified
    /// or exclusive with `modified`) keep it until its snoop reaches them
    /// ([`snoop_arrival`](Self::snoop_arrival)): a write takes every copy away then, a read
    /// only the owner's right to write. Their accesses until then hit and come before the
    /// request, in value as in time: the request is performed at its completion, after them
    /// (and `Engine::rewind` keeps the holder's loads before a buffered store's value, which is
    /// performed when issued). After a buffered store, whose value is in the memory already,
    /// the holder only reads.
    pub(crate) fn open_windows(&mut self, request: Request, holders: HwSet, modified: bool) {
        let cost = request
            .completion
            .saturating_sub(request.start.max(request.issue));
        let until = Self::snoop_arrival(request.issue, request.start, cost);
        self.windows.retain(|w| w.until > request.issue);
        for h in holders.iter().filter(|&h| h != request.hw) {
            let owner = modified && holders.is_only(h);
            if request.write || owner {
                self.windows.push(Window {
                    hw: h as u16,
                    until,
                    writable: owner && !request.buffered,
                });
            }
        }
    }

    /// The cost of bringing the line to `hw` from its nearest copy (the owner if modified, the
    /// nearest sharer, or memory).
    fn fetch_cost(&self, topo: &Topo, hw: usize) -> Ps {
        if self.holders.is_empty() {
            return topo.memory(hw, self.home as usize);
        }
        self.holders
            .iter()
            .map(|h| topo.transfer(hw, h, self.home as usize))
            .min()
            .unwrap_or(0)
    }

    /// A hit by `hw` completing at `completion`, or when `hw`'s prefetch of the line fills it,
    /// if that is later.
    pub(crate) fn after_fill(&self, hw: usize, completion: Ps) -> Ps {
        if usize::from(self.fill.0) == hw {
            completion.max(self.fill.1)
        } else {
            completion
        }
    }

    /// A load by `hw` at `now`; `jitter` scales transfer costs.
    pub(crate) fn load(
        &mut self,
        topo: &Topo,
        hw: usize,
        now: Ps,
        jitter: impl FnOnce(Ps) -> Ps,
    ) -> Reservation {
        if self.holders.contains(hw) {
            let completion = self.after_fill(hw, now + topo.machine.costs.l1_hit);
            self.reads_until = self.reads_until.max(completion);
            return Reservation {
                completion,
                hit: true,
            };
        }
        let cost = jitter(self.fetch_cost(topo, hw));
        let completion = now.max(self.busy_until) + cost;
        self.busy_until = completion;
        self.reads_until = self.reads_until.max(completion);
        // A modified owner keeps a shared copy.
        self.modified = false;
        self.holders.insert(hw);
        Reservation {
            completion,
            hit: false,
        }
    }

    /// A store (`rmw == false`) or a locked read-modify-write by `hw` at `now`. A failed CAS is
    /// an RMW too: the locked instruction takes the line exclusive whatever it returns.
    pub(crate) fn store(
        &mut self,
        topo: &Topo,
        hw: usize,
        now: Ps,
        rmw: bool,
        jitter: impl FnOnce(Ps) -> Ps,
    ) -> Reservation {
        let costs = &topo.machine.costs;
        if self.holders.is_only(hw) {
            // Modified or Exclusive here: no other copy to invalidate.
            let hit = now + if rmw { costs.rmw_hit } else { costs.l1_hit };
            let completion = self.after_fill(hw, hit);
            self.busy_until = self.busy_until.max(completion);
            self.modified = true;
            return Reservation {
                completion,
                hit: true,
            };
        }
        let fetch = if self.holders.contains(hw) {
            0
        } else {
            self.fetch_cost(topo, hw)
        };
        let invalidate = self
            .holders
            .iter()
            .filter(|&h| h != hw)
            .map(|h| topo.transfer(hw, h, self.home as usize))
            .max()
            .unwrap_or(0);
        let cost = jitter(fetch.max(invalidate));
        let completion = now.max(self.busy_until).max(self.reads_until) + cost;
        self.busy_until = completion;
        self.holders = HwSet::only(hw);
        self.modified = true;
        Reservation {
            completion,
            hit: false,
        }
    }

    /// A write by the unpinned harness: free, and it leaves the line in memory only.
    pub(crate) fn harness_store(&mut self) {
        self.holders = HwSet::default();
        self.modified = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topo {
        Topo::new(Machine::by_name("x5-4").unwrap())
    }

    #[test]
    fn hwset() {
        let mut s = HwSet::default();
        assert!(s.is_empty());
        for hw in [0, 63, 64, 143, 255] {
            s.insert(hw);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 63, 64, 143, 255]);
        assert!(s.contains(64) && !s.contains(65));
        assert!(HwSet::only(7).is_only(7) && !s.is_only(0));
    }

    #[test]
    fn load_store_costs() {
        let t = topo();
        let c = t.machine.costs;
        let id = |x| x;
        let mut line = Line::new(0);
        // Cold miss from local memory, then hits.
        let r = line.load(&t, 0, 0, id);
        assert_eq!(
            r,
            Reservation {
                completion: c.dram_local,
                hit: false
            }
        );
        let r = line.load(&t, 0, r.completion, id);
        assert!(r.hit);
        // Another socket (hw 36 is socket 1) reads it from hw 0's cache.
        let r = line.load(&t, 36, 0, id);
        assert_eq!(r.completion, line.busy_until);
        assert!(!r.hit);
        // hw 0 writes: invalidates hw 36 (other socket).
        let before = line.busy_until;
        let r = line.store(&t, 0, 0, true, id);
        assert_eq!(r.completion, before + c.other_socket);
        // Now an RMW by the owner hits.
        let r = line.store(&t, 0, r.completion, true, id);
        assert!(r.hit);
        // A sibling (hw 1) loads: smt transfer, serialized after the owner's RMW.
        let busy = line.busy_until;
        let r = line.load(&t, 1, 0, id);
        assert_eq!(r.completion, busy + c.smt);
        // The owner's load hit does not wait for that transfer, but a write waits for both.
        let hit = line.load(&t, 0, 0, id);
        assert_eq!(hit.completion, c.l1_hit);
        let w = line.store(&t, 36, 0, false, id);
        assert_eq!(w.completion, r.completion + c.other_socket);
    }
}
