//! The critical sections `locktorture` runs, and the thread-local PRNG that feeds them.
//!
//! A workload is the data a lock protects plus one operation on it. Anything random is drawn by
//! [`Workload::prepare`] *before* the lock is taken, so the critical section holds only the accesses
//! to shared data.

use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hint::black_box;

/// A xorshift64 generator: three shifts and three xors, a couple of ns per number.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator for stream `seed`; distinct seeds give distinct streams.
    pub fn new(seed: u64) -> Self {
        // Spread small seeds over the whole word; xorshift's state must never be 0.
        Self((seed.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next pseudo-random number.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The protected state of one workload and the operation a critical section performs on it.
pub trait Workload: Send + 'static {
    /// Everything random the operation needs, drawn outside the critical section.
    type Input: Copy;
    /// Per-thread state carried from one critical section to the next.
    type Local: Default;

    /// Fresh shared state for a run with `threads` threads.
    fn new(threads: usize) -> Self;

    /// Draws the input of the next operation (runs outside the lock).
    fn prepare(rng: &mut XorShift) -> Self::Input;

    /// The operation (runs inside the lock).
    fn critical_section(&mut self, input: Self::Input, local: &mut Self::Local);

    /// After a run of `ops` critical sections: whether the state is what mutual exclusion
    /// guarantees (the harness's own correctness check of the lock). The message says what is wrong.
    fn check(&self, ops: u64) -> Result<(), String>;
}

/// `empty`: the critical section does nothing beyond the harness's handoff bookkeeping.
pub struct Empty;

impl Workload for Empty {
    type Input = ();
    type Local = ();

    fn new(_threads: usize) -> Self {
        Empty
    }

    fn prepare(_rng: &mut XorShift) {}

    #[inline]
    fn critical_section(&mut self, (): (), _local: &mut ()) {}

    fn check(&self, _ops: u64) -> Result<(), String> {
        Ok(())
    }
}

/// `counter`: four shared counters, each on its own cache line (`CachePadded`: 128 bytes on x86-64,
/// so the adjacent-line prefetcher does not pair them), all incremented by every critical section.
pub struct Counter {
    counters: [CachePadded<u64>; 4],
}

impl Workload for Counter {
    type Input = ();
    type Local = ();

    fn new(_threads: usize) -> Self {
        Counter {
            counters: Default::default(),
        }
    }

    fn prepare(_rng: &mut XorShift) {}

    #[inline]
    fn critical_section(&mut self, (): (), _local: &mut ()) {
        for counter in &mut self.counters {
            **counter = counter.wrapping_add(1);
        }
    }

    /// The increments are plain read-modify-writes: two threads inside the lock at once lose one.
    fn check(&self, ops: u64) -> Result<(), String> {
        for (index, counter) in self.counters.iter().enumerate() {
            if **counter != ops {
                return Err(format!(
                    "counter {index} is {}, but {ops} critical sections ran (lost updates)",
                    **counter
                ));
            }
        }
        Ok(())
    }
}

/// The number of keys in the `kv` map.
const KV_KEYS: u64 = 65_536;

/// `kv`: a shared `HashMap<u64, u64>` holding the keys `0..KV_KEYS`.
pub struct Kv {
    map: HashMap<u64, u64>,
}

/// One `kv` operation: `put == true` stores `value` under `key`, otherwise `key` is looked up.
#[derive(Clone, Copy)]
pub struct KvOp {
    key: u64,
    value: u64,
    put: bool,
}

impl Workload for Kv {
    type Input = KvOp;
    type Local = ();

    fn new(_threads: usize) -> Self {
        Kv {
            map: (0..KV_KEYS).map(|key| (key, key)).collect(),
        }
    }

    /// `key = r1 % (r2 % KV_KEYS + 1)`: the bound is uniform, so small keys are far more likely
    /// than large ones (P(key = k) is about ln(KV_KEYS / k) / KV_KEYS), a cheap zipf-like skew.
    /// One operation in ten is a put (decided by bits of `r2` the bound does not use).
    fn prepare(rng: &mut XorShift) -> KvOp {
        let r1 = rng.next_u64();
        let r2 = rng.next_u64();
        KvOp {
            key: r1 % (r2 % KV_KEYS + 1),
            value: r1,
            put: (r2 >> 32).is_multiple_of(10),
        }
    }

    #[inline]
    fn critical_section(&mut self, op: KvOp, _local: &mut ()) {
        if op.put {
            // Every key is present, so a put overwrites and the map never grows.
            self.map.insert(op.key, op.value);
        } else {
            black_box(self.map.get(&op.key).copied());
        }
    }

    fn check(&self, _ops: u64) -> Result<(), String> {
        let len = self.map.len() as u64;
        if len == KV_KEYS && (0..KV_KEYS).all(|key| self.map.contains_key(&key)) {
            Ok(())
        } else {
            Err(format!(
                "the map holds {len} entries, expected the {KV_KEYS} keys 0..{KV_KEYS}"
            ))
        }
    }
}

/// "No block": the end of the free list.
const NIL: u32 = u32::MAX;

/// One allocatable block, a cache line like a `struct page`.
#[repr(align(64))]
struct Block {
    /// The next free block while this one is on the list.
    next: u32,
    /// Written by the thread that pops the block, standing in for initialising it.
    stamp: u32,
}

/// `freelist`: an index-linked LIFO free list of 64-byte blocks, like a page allocator's free list
/// under its zone lock. Each critical section pops the head block and pushes back the block the
/// thread popped in its previous critical section (so each thread holds at most one block and the
/// list never runs dry). It touches the list head, the popped block and the pushed block: three
/// cache lines that migrate between threads.
pub struct FreeList {
    blocks: Vec<Block>,
    head: u32,
    free: u64,
}

impl FreeList {
    fn pop(&mut self) -> Option<u32> {
        let block = self.head;
        let next = self.blocks.get(block as usize)?.next;
        self.head = next;
        self.free -= 1;
        Some(block)
    }

    fn push(&mut self, block: u32) {
        self.blocks[block as usize].next = self.head;
        self.head = block;
        self.free += 1;
    }
}

impl Workload for FreeList {
    type Input = u32;
    /// The block this thread holds between critical sections.
    type Local = Option<u32>;

    fn new(threads: usize) -> Self {
        // At least one block more than threads, so `pop` always succeeds.
        let len = u32::try_from(threads.saturating_mul(2).max(4096)).unwrap_or(NIL - 1);
        let blocks = (0..len)
            .map(|i| Block {
                next: if i + 1 < len { i + 1 } else { NIL },
                stamp: 0,
            })
            .collect();
        FreeList {
            blocks,
            head: 0,
            free: u64::from(len),
        }
    }

    fn prepare(rng: &mut XorShift) -> u32 {
        rng.next_u64() as u32
    }

    #[inline]
    fn critical_section(&mut self, stamp: u32, held: &mut Option<u32>) {
        let popped = self.pop();
        if let Some(block) = held.take() {
            self.push(block);
        }
        if let Some(block) = popped {
            self.blocks[block as usize].stamp = stamp;
        }
        *held = popped;
    }

    /// Every block is either on the list exactly once or held by a thread (at most one each), and
    /// the `free` count matches the list.
    fn check(&self, _ops: u64) -> Result<(), String> {
        let mut on_list = vec![false; self.blocks.len()];
        let mut block = self.head;
        let mut listed = 0u64;
        while block != NIL {
            let Some(seen) = on_list.get_mut(block as usize) else {
                return Err(format!(
                    "the list links to block {block}, which does not exist"
                ));
            };
            if *seen {
                return Err(format!("block {block} is on the list twice (a cycle)"));
            }
            *seen = true;
            listed += 1;
            block = self.blocks[block as usize].next;
        }
        if listed != self.free {
            return Err(format!(
                "{listed} blocks on the list, but the free count is {}",
                self.free
            ));
        }
        Ok(())
    }
}
