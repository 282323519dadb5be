//! The critical sections `locktorture` runs, and the thread-local PRNG that feeds them.
//!
//! A workload is the data a lock protects plus one operation on it. Anything random is drawn by
//! [`Workload::prepare`] *before* the lock is taken, so the critical section holds only the accesses
//! to shared data.

use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::hint::black_box;

use crate::common::workload::XorShift;
use crate::common::workload::{
    KV_KEYS, check_free_list, free_list_len, fresh_links, kv_key, kv_put,
};

/// The generator of worker `id`; distinct ids give distinct streams.
pub fn rng_for_worker(id: u64) -> XorShift {
    // Spread small ids over the whole word (odd, so never 0).
    XorShift::new((id.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
}

/// The protected state of one workload and the operation a critical section performs on it.
pub trait Workload: Send + Sync + 'static {
    /// Everything random the operation needs, drawn outside the critical section.
    type Input: Copy + Send + Sync;
    /// Per-thread state carried from one critical section to the next.
    type Local: Default + Send;

    /// Fresh shared state for a run with `threads` threads.
    fn new(threads: usize) -> Self;

    /// Draws the input of the next operation (runs outside the lock).
    fn prepare(rng: &mut XorShift) -> Self::Input;

    /// The operation (runs inside the lock; under an rwlock, its exclusive lock).
    fn critical_section(&mut self, input: Self::Input, local: &mut Self::Local);

    /// Whether the workload also has a read-only operation, [`Workload::read_section`]: then
    /// the harness runs it for `--read-pct` of the operations, under the shared lock.
    const HAS_READS: bool = false;

    /// The read-only operation (runs under an rwlock's shared lock, or a mutex's only lock).
    /// A read that finds the data half-written must make [`Workload::check`] fail.
    fn read_section(&self, _input: Self::Input) {}

    /// After a run of `exclusive_ops` critical sections under the exclusive lock (and any
    /// number of reads): whether the state is what mutual exclusion guarantees (the harness's
    /// own correctness check of the lock). The message says what is wrong.
    fn check(&self, exclusive_ops: u64) -> Result<(), String>;
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

/// `hammer`: one shared counter, and about 1 µs of spinning between acquisitions (in
/// [`Workload::prepare`], outside the lock): the loop a new user writes to try a lock, where a
/// thread comes back to the lock while the others still wait.
pub struct Hammer {
    counter: CachePadded<u64>,
}

/// The spin between two of `hammer`'s acquisitions.
const HAMMER_SPIN: std::time::Duration = std::time::Duration::from_micros(1);

/// `--think-spins`: `hammer` thinks for this many `spin_loop` hints instead of `HAMMER_SPIN`;
/// `u64::MAX` (the default) keeps the clock-timed spin. Set once before the runs.
pub static THINK_SPINS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

impl Workload for Hammer {
    type Input = ();
    type Local = ();

    fn new(_threads: usize) -> Self {
        Hammer {
            counter: CachePadded::new(0),
        }
    }

    fn prepare(_rng: &mut XorShift) {
        let spins = THINK_SPINS.load(std::sync::atomic::Ordering::Relaxed);
        if spins != u64::MAX {
            for _ in 0..spins {
                std::hint::spin_loop();
            }
            return;
        }
        let start = std::time::Instant::now();
        while start.elapsed() < HAMMER_SPIN {
            std::hint::spin_loop();
        }
    }

    #[inline]
    fn critical_section(&mut self, (): (), _local: &mut ()) {
        *self.counter = self.counter.wrapping_add(1);
    }

    /// A plain read-modify-write: two threads inside the lock at once lose an increment.
    fn check(&self, ops: u64) -> Result<(), String> {
        if *self.counter != ops {
            return Err(format!(
                "the counter is {}, but {ops} critical sections ran (lost updates)",
                *self.counter
            ));
        }
        Ok(())
    }
}

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

    /// A skewed key ([`kv_key`]); one operation in ten is a put ([`kv_put`]).
    fn prepare(rng: &mut XorShift) -> KvOp {
        let r1 = rng.next_u64();
        let r2 = rng.next_u64();
        KvOp {
            key: kv_key(r1, r2),
            value: r1,
            put: kv_put(r2),
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
        let len = free_list_len(threads);
        let blocks = fresh_links(len)
            .map(|next| Block { next, stamp: 0 })
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
        check_free_list(self.head, self.free, self.blocks.len(), |block| {
            self.blocks[block as usize].next
        })
    }
}

/// `rw`'s buckets.
const RW_BUCKETS: usize = 1024;
/// Entries per `rw` bucket: the keys `0..RW_BUCKETS * RW_BUCKET_ENTRIES` fill every bucket.
const RW_BUCKET_ENTRIES: usize = 4;
/// `rw`'s keys: `0..RW_KEYS`.
const RW_KEYS: u64 = (RW_BUCKETS * RW_BUCKET_ENTRIES) as u64;

/// One `rw` entry: a key, its value, and the seal of both. A write stores the value, then
/// (after the table's sum) the seal: a read that overlaps it finds a seal that does not match.
#[derive(Clone, Copy)]
struct RwEntry {
    key: u64,
    value: u64,
    seal: u64,
}

/// The seal of `key` holding `value`: any change to either changes it.
fn rw_seal(key: u64, value: u64) -> u64 {
    (value ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .rotate_left(23)
        .wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// `rw`: a read-mostly hash table of `RW_BUCKETS` buckets, each holding `RW_BUCKET_ENTRIES`
/// entries; key `k` lives in bucket `k % RW_BUCKETS`. A read looks a key up and checks its seal
/// (shared lock); a write stores a new value and seal, and updates the table's write count and
/// the sum of its values (exclusive lock).
pub struct Rw {
    buckets: Vec<[RwEntry; RW_BUCKET_ENTRIES]>,
    /// Writes done (a plain increment: two writers inside at once lose one).
    writes: u64,
    /// The wrapping sum of every entry's value, kept by the writes.
    value_sum: u64,
    /// Reads that found a key missing or an entry's seal broken: a write was half done (or two
    /// were interleaved). An atomic, because readers hold only the shared lock; it stays 0
    /// unless exclusion is broken, so it costs nothing otherwise.
    torn_reads: std::sync::atomic::AtomicU64,
}

/// One `rw` operation on `key`: a write stores `value`; a read ignores it.
#[derive(Clone, Copy)]
pub struct RwOp {
    key: u64,
    value: u64,
}

impl Rw {
    /// The entry of `key` (every key in `0..RW_KEYS` is present).
    #[inline]
    fn find(&self, key: u64) -> Option<&RwEntry> {
        self.buckets[(key % RW_BUCKETS as u64) as usize]
            .iter()
            .find(|entry| entry.key == key)
    }
}

impl Workload for Rw {
    type Input = RwOp;
    type Local = ();
    const HAS_READS: bool = true;

    fn new(_threads: usize) -> Self {
        let buckets = (0..RW_BUCKETS as u64)
            .map(|bucket| {
                std::array::from_fn(|slot| {
                    let key = bucket + (slot * RW_BUCKETS) as u64;
                    RwEntry {
                        key,
                        value: key,
                        seal: rw_seal(key, key),
                    }
                })
            })
            .collect();
        Rw {
            buckets,
            writes: 0,
            value_sum: (0..RW_KEYS).fold(0, u64::wrapping_add),
            torn_reads: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A uniform key; the value a write would store.
    fn prepare(rng: &mut XorShift) -> RwOp {
        let r = rng.next_u64();
        RwOp {
            key: r % RW_KEYS,
            value: r >> 12,
        }
    }

    #[inline]
    fn critical_section(&mut self, op: RwOp, _local: &mut ()) {
        let bucket = &mut self.buckets[(op.key % RW_BUCKETS as u64) as usize];
        let Some(entry) = bucket.iter_mut().find(|entry| entry.key == op.key) else {
            // A missing key is a torn table; `check` reports it.
            *self.torn_reads.get_mut() += 1;
            return;
        };
        let old = entry.value;
        entry.value = op.value;
        self.value_sum = self.value_sum.wrapping_sub(old).wrapping_add(op.value);
        entry.seal = rw_seal(op.key, op.value);
        self.writes += 1;
    }

    #[inline]
    fn read_section(&self, op: RwOp) {
        let intact = self
            .find(op.key)
            .is_some_and(|entry| black_box(entry.seal) == rw_seal(entry.key, entry.value));
        if !intact {
            // Relaxed: a count read after the threads are joined.
            self.torn_reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// No read found a half-done write, no write was lost (the count equals the exclusive
    /// sections, the sum equals the values'), and every entry is sealed.
    fn check(&self, exclusive_ops: u64) -> Result<(), String> {
        let torn = self.torn_reads.load(std::sync::atomic::Ordering::Relaxed);
        if torn != 0 {
            return Err(format!(
                "{torn} operation(s) found an entry half written (a read overlapped a write)"
            ));
        }
        if self.writes != exclusive_ops {
            return Err(format!(
                "the table counted {} writes, but {exclusive_ops} ran under the exclusive lock \
                 (lost updates)",
                self.writes
            ));
        }
        let entries = self.buckets.iter().flatten();
        if let Some(entry) = entries
            .clone()
            .find(|entry| entry.seal != rw_seal(entry.key, entry.value))
        {
            return Err(format!(
                "key {} holds value {} under a seal that does not match (a torn write)",
                entry.key, entry.value
            ));
        }
        let sum = entries.fold(0, |sum: u64, entry| sum.wrapping_add(entry.value));
        if sum != self.value_sum {
            return Err(format!(
                "the values sum to {sum}, but the writes kept {} (lost or interleaved writes)",
                self.value_sum
            ));
        }
        Ok(())
    }
}
