//! What HqMutex hands on with headship: the `HEAD` payload (the turn's count and the streak) and
//! a flat waiter's count, encoded and decoded here only.

use super::*;

/// Bits of the `HEAD` payload that hold the local-handoff count; the streak is above them.
/// `tunables::hq_local_handoffs()` is at most 2^24, so a count below it fits.
pub(super) const COUNT_BITS: u32 = 24;
pub(super) const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;

/// In a flat waiter's `HEAD` payload count: the bits above the flat-window looks to skip (at most
/// [`FLAT_CHECKS_SKIPPED`]) hold the slot of the holder that handed it headship, plus one (0: not
/// known, as from `unlock`'s deferred handoff or a waiter of a local queue), and above them
/// [`CROSSED`]. A flat lock turns hierarchical only if one of the contended handoffs of its streak
/// crossed nodes: with every waiter on one node the per-node queues could keep nothing more local
/// than the plain queue does, and only cost (docs/DESIGN.md, "Decision record: HQ barren turns").
pub(super) const FROM_SHIFT: u32 = 8;
pub(super) const SKIP_MASK: u32 = (1 << FROM_SHIFT) - 1;
pub(super) const FROM_MASK: u32 = 0x7f;
const _: () = assert!(FLAT_CHECKS_SKIPPED <= SKIP_MASK && MAX_SLOTS as u32 <= FROM_MASK);
/// In a flat waiter's `HEAD` payload count: a contended handoff of the current streak crossed
/// nodes (see [`FROM_SHIFT`]).
pub(super) const CROSSED: u32 = (FROM_MASK + 1) << FROM_SHIFT;

/// The `HEAD` payload HqMutex hands on with headship (`qnode::status`), encoded and decoded
/// here only: `count | streak << COUNT_BITS`. `count` is the number of consecutive local
/// handoffs of the node's turn, or, for a flat waiter, a [`FlatCount`]; `streak` the contended
/// handoffs in a row with the barren score above [`HIERARCHICAL_AFTER`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Payload(u32);

impl Payload {
    /// The payload of a waiter that starts a queue (nothing counted yet).
    pub(super) const FIRST: Payload = Payload(0);

    #[inline]
    pub(super) const fn new(count: u32, streak: u32) -> Self {
        Payload(count | streak << COUNT_BITS)
    }

    /// One more local handoff counted in the node's turn (saturating).
    #[inline]
    pub(super) const fn one_more(self) -> Self {
        let count = self.count();
        let count = if count < COUNT_MASK { count + 1 } else { count };
        Payload::new(count, self.streak())
    }

    /// The payload a `HEAD` status carries.
    #[inline]
    pub(super) const fn of_status(status: u32) -> Self {
        Payload(status::payload(status))
    }

    #[inline]
    pub(super) const fn count(self) -> u32 {
        self.0 & COUNT_MASK
    }

    #[inline]
    pub(super) const fn streak(self) -> u32 {
        self.0 >> COUNT_BITS
    }

    /// The bits, for the `HEAD` status (`LockWord::hand_to`, `hand_to_marked`).
    #[inline]
    pub(super) const fn bits(self) -> u32 {
        self.0
    }
}

/// A flat waiter's payload count (see [`FROM_SHIFT`]): flat-window checks still to skip, the slot
/// of the holder that handed it headship (if known), and whether its streak crossed nodes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct FlatCount {
    pub(super) skip: u32,
    pub(super) from: Option<u32>,
    pub(super) crossed: bool,
}

impl FlatCount {
    #[inline]
    pub(super) const fn decode(count: u32) -> Self {
        let from = (count >> FROM_SHIFT) & FROM_MASK;
        FlatCount {
            skip: count & SKIP_MASK,
            from: if from == 0 { None } else { Some(from - 1) },
            crossed: count & CROSSED != 0,
        }
    }

    #[inline]
    pub(super) const fn encode(self) -> u32 {
        let from = match self.from {
            Some(slot) => slot + 1,
            None => 0,
        };
        self.skip | from << FROM_SHIFT | if self.crossed { CROSSED } else { 0 }
    }
}
