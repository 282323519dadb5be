//! The critical sections `numasim` runs, on simulated cache lines.
//!
//! A workload is the data a lock protects plus one operation on it. What the operation costs is
//! modelled with `numa_sim::touch` / `touch_read` on the lines it would access (issued together
//! when the accesses are independent, one after another when each address depends on the value
//! read before) and `numa_sim::work` for computation; the host data beside them (counts, the free
//! list's links) is real, so that the harness can check mutual exclusion afterwards. Every
//! simulated object is 64-byte aligned, so each is its own line whatever the allocator does.
//!
//! Every critical section starts by writing the harness's first protected line (`head`: the
//! handoff bookkeeping, and whatever the workload keeps beside it: the map's header, the free
//! list's head, locktorture's `lock_is_write_held` flag), or, for `lockbench`, whose counter
//! sits beside the lock, the lock's own line.

pub use crate::common::workload::XorShift;
use crate::common::workload::{NIL, check_free_list, free_list_len, fresh_links, kv_key, kv_put};
use crate::numasim::harness::RunConfig;

thread_local! {
    /// The line of the lock the thread last took: v5.10's locktorture module lays `cxt` out on
    /// the line of `torture_spinlock` (BENCHMARKS.md, "Where locktorture's module puts its lock").
    pub static LOCK_LINE: std::cell::Cell<*const u8> = const { std::cell::Cell::new(std::ptr::null()) };
}
fn lock_line() -> *const u8 {
    LOCK_LINE.with(|c| c.get())
}

/// One simulated 64-byte cache line.
#[repr(align(64))]
#[derive(Clone, Copy)]
pub struct Line([u8; 64]);

impl Line {
    const ZERO: Line = Line([0; 64]);

    fn addr(&self) -> *const u8 {
        self.0.as_ptr()
    }
}

/// The protected state of one workload and the operation a critical section performs on it.
pub trait Workload: Send + 'static {
    /// Everything random the operation needs, drawn before the lock is taken.
    type Input: Copy;
    /// Per-thread state carried from one critical section to the next.
    type Local: Default;

    /// Whether the data sits on the lock's own line (the critical section's first line is then
    /// the lock's, not the harness's head line).
    const ON_LOCK_LINE: bool = false;

    /// Whether the run halts and restarts its threads every few jiffies as the kernel's
    /// locktorture does (`RunConfig::stutter_jiffies`, [`crate::numasim::stutter`]).
    const STUTTERS: bool = false;

    /// How many locks (each with its own copy of this state) a run has.
    fn locks(_config: &RunConfig) -> usize {
        1
    }

    /// Which of the run's locks an operation takes.
    fn lock_of(_input: &Self::Input) -> usize {
        0
    }

    /// A fixed number of operations per thread, the run lasting until the last thread is done
    /// (`None`: the run's duration).
    fn fixed_ops(_config: &RunConfig) -> Option<u64> {
        None
    }

    /// Fresh shared state for a run with `threads` threads.
    fn new(threads: usize) -> Self;

    /// Draws the input of the next operation, for a run `config` with `locks` locks (runs
    /// outside the lock, costs nothing simulated).
    fn prepare(rng: &mut XorShift, config: &RunConfig, locks: usize) -> Self::Input;

    /// Whether the operation only reads: the harness takes the lock shared for it (a mutex
    /// takes its only lock) and runs [`Workload::read_section`], which several threads may run
    /// at once. Only `rw` has reads.
    fn is_read(_input: &Self::Input) -> bool {
        false
    }

    /// `input` made a read (`read`) or a write, for a dedicated reader or writer thread
    /// (`--writers`); workloads without reads keep it as it is.
    fn dedicated(input: Self::Input, _read: bool) -> Self::Input {
        input
    }

    /// A read operation (see [`Workload::is_read`]), by simulated thread `thread`, under the
    /// shared lock: it must not change the state the harness checks except through atomics.
    fn read_section(&self, _input: Self::Input, _thread: usize) {
        unreachable!("only workloads with reads are asked to read");
    }

    /// How many read operations ran (the harness checks them against its own count).
    fn reads(&self) -> u64 {
        0
    }

    /// The operation (runs inside the lock), by simulated thread `thread`. `first` is the line
    /// it writes first: the harness's head line, or the lock's own line if `ON_LOCK_LINE`.
    fn critical_section(
        &mut self,
        first: *const u8,
        input: Self::Input,
        local: &mut Self::Local,
        thread: usize,
    );

    /// The local work between two acquisitions.
    fn between_acquisitions();

    /// After a run of `entries` critical sections: whether the state is what mutual exclusion
    /// guarantees. The message says what is wrong.
    fn check(&self, entries: u64) -> Result<(), String>;
}

/// `counter`, the reference (the same as tests/sim): `count += 1` on 2 protected lines (the
/// harness's head line and one more), each read (the loads issued together) and then written,
/// 50 ns of work inside, 200 ns outside.
pub struct Counter {
    line: Line,
    count: u64,
}

impl Workload for Counter {
    type Input = ();
    type Local = ();

    fn new(_threads: usize) -> Self {
        Counter {
            line: Line::ZERO,
            count: 0,
        }
    }

    fn prepare(_rng: &mut XorShift, _config: &RunConfig, _locks: usize) {}

    fn critical_section(&mut self, head: *const u8, (): (), _local: &mut (), _thread: usize) {
        // A read-modify-write of each line: the loads miss, then the stores.
        numa_sim::touch_read(&[head, self.line.addr()]);
        numa_sim::touch(&[head, self.line.addr()]);
        numa_sim::work(50);
        self.count += 1;
    }

    fn between_acquisitions() {
        numa_sim::work(200);
    }

    fn check(&self, entries: u64) -> Result<(), String> {
        if self.count == entries {
            Ok(())
        } else {
            Err(format!(
                "the counter is {}, but {entries} critical sections ran (lost updates)",
                self.count
            ))
        }
    }
}

/// Buckets of the simulated hash table: hashbrown's for 65536 entries (load factor at most 7/8,
/// rounded up to a power of two).
const KV_BUCKETS: usize = 131_072;
/// One control byte per bucket.
const KV_CTRL_LINES: usize = KV_BUCKETS / 64;
/// 16-byte (u64, u64) entries.
const KV_ENTRY_LINES: usize = KV_BUCKETS * 16 / 64;
/// Hashing a u64 key with std's SipHash-1-3: about 20 ns.
const KV_HASH_NS: u64 = 20;
/// Local work between acquisitions for `kv` and `freelist`: locktorture's few xorshift rounds
/// and the input's preparation.
const SHORT_LOCAL_WORK_NS: u64 = 10;

/// `kv`: locktorture's skewed get/put on a `HashMap<u64, u64>` of 65536 keys, as the lines a
/// hashbrown lookup touches: the map's header (on the head line), then the control group of the
/// key's bucket, then its entry; each address depends on what the previous access read.
pub struct Kv {
    ctrl: Vec<Line>,
    entries: Vec<Line>,
    gets: u64,
    puts: u64,
}

/// One `kv` operation: `put` writes the entry of `key`, otherwise it is read.
#[derive(Clone, Copy)]
pub struct KvOp {
    key: u64,
    put: bool,
}

impl Workload for Kv {
    type Input = KvOp;
    type Local = ();

    fn new(_threads: usize) -> Self {
        Kv {
            ctrl: vec![Line::ZERO; KV_CTRL_LINES],
            entries: vec![Line::ZERO; KV_ENTRY_LINES],
            gets: 0,
            puts: 0,
        }
    }

    /// As locktorture: a skewed key ([`kv_key`]), one operation in ten a put ([`kv_put`]).
    fn prepare(rng: &mut XorShift, _config: &RunConfig, _locks: usize) -> KvOp {
        let r1 = rng.next_u64();
        let r2 = rng.next_u64();
        KvOp {
            key: kv_key(r1, r2),
            put: kv_put(r2),
        }
    }

    fn critical_section(&mut self, head: *const u8, op: KvOp, _local: &mut (), _thread: usize) {
        // The header (bucket mask, control pointer) sits beside the harness's bookkeeping,
        // which the section reads and updates.
        numa_sim::touch_read(&[head]);
        numa_sim::touch(&[head]);
        numa_sim::work(KV_HASH_NS);
        // A multiplicative hash spreads the keys over the buckets (the top 17 bits).
        let bucket = (op.key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 47) as usize % KV_BUCKETS;
        numa_sim::touch_read(&[self.ctrl[bucket / 64].addr()]);
        let entry = self.entries[bucket / 4].addr();
        if op.put {
            // The key is compared before its value is overwritten.
            numa_sim::touch_read(&[entry]);
            numa_sim::touch(&[entry]);
            self.puts += 1;
        } else {
            numa_sim::touch_read(&[entry]);
            self.gets += 1;
        }
    }

    fn between_acquisitions() {
        numa_sim::work(SHORT_LOCAL_WORK_NS);
    }

    fn check(&self, entries: u64) -> Result<(), String> {
        if self.gets + self.puts == entries {
            Ok(())
        } else {
            Err(format!(
                "{} gets and {} puts, but {entries} critical sections ran (lost updates)",
                self.gets, self.puts
            ))
        }
    }
}

/// One allocatable block, a cache line like a `struct page`.
#[repr(align(64))]
struct Block {
    /// The next free block while this one is on the list.
    next: u32,
}

/// `freelist`: locktorture's index-linked LIFO free list of 64-byte blocks under a zone lock.
/// Each critical section pops the head block and pushes back the block the thread popped last
/// time: it writes the list head (on the head line), then the popped and the pushed block
/// together (their addresses are known once the head is read).
pub struct FreeList {
    blocks: Vec<Block>,
    head: u32,
    free: u64,
}

impl Workload for FreeList {
    type Input = ();
    /// The block this thread holds between critical sections.
    type Local = Option<u32>;

    fn new(threads: usize) -> Self {
        let len = free_list_len(threads);
        FreeList {
            blocks: fresh_links(len).map(|next| Block { next }).collect(),
            head: 0,
            free: u64::from(len),
        }
    }

    fn prepare(_rng: &mut XorShift, _config: &RunConfig, _locks: usize) {}

    fn critical_section(
        &mut self,
        head: *const u8,
        (): (),
        held: &mut Option<u32>,
        _thread: usize,
    ) {
        // The list head is read, then the popped block's link (its address is the head's
        // value), then both are written.
        numa_sim::touch_read(&[head]);
        let popped = self.head;
        if let Some(block) = self.blocks.get(popped as usize) {
            numa_sim::touch_read(&[(block as *const Block).cast()]);
        }
        numa_sim::touch(&[head]);
        // The popped block (its contents initialised) and the pushed one (its link written).
        let mut blocks = [head; 2];
        let mut touched = 0;
        if let Some(block) = self.blocks.get(popped as usize) {
            self.head = block.next;
            self.free -= 1;
            blocks[touched] = (block as *const Block).cast();
            touched += 1;
        }
        if let Some(block) = held.take() {
            self.blocks[block as usize].next = self.head;
            self.head = block;
            self.free += 1;
            blocks[touched] = (&self.blocks[block as usize] as *const Block).cast();
            touched += 1;
        }
        numa_sim::touch(&blocks[..touched]);
        *held = (popped != NIL).then_some(popped);
    }

    fn between_acquisitions() {
        numa_sim::work(SHORT_LOCAL_WORK_NS);
    }

    /// Every block is on the list at most once, and the free count matches the list.
    fn check(&self, _entries: u64) -> Result<(), String> {
        check_free_list(self.head, self.free, self.blocks.len(), |block| {
            self.blocks[block as usize].next
        })
    }
}

/// The kernel's locktorture short hold: `udelay(2)`.
const LOCKTORTURE_DELAY_NS: u64 = 2_000;
/// How much shorter, and so how much more frequent, the model makes locktorture's long hold
/// (`mdelay(100)` with probability 1/(threads·2000·100)): a 10 ms run cannot hold a lock for
/// 100 ms, so it holds it 100 µs with probability 1000/(threads·200000), the same expected
/// hold time per critical section (500 ns / threads) and still long enough for a queue head to
/// order a queue of every waiter while it waits.
const LOCKTORTURE_LONG_SCALE: u64 = 1_000;
/// The long hold as the model takes it: 100 ms / [`LOCKTORTURE_LONG_SCALE`].
const LOCKTORTURE_LONG_DELAY_NS: u64 = 100_000_000 / LOCKTORTURE_LONG_SCALE;
/// `struct lock_stress_stats` (two `long`s) per writer, allocated as one array: four writers'
/// records share a line.
const LOCKTORTURE_STATS_PER_LINE: usize = 4;
/// `torture_random()` (`kernel/torture.c`): decrement and test of the refresh count, then
/// `state * 39916801 + 479001701` and `swab32`, a dependent chain of `imul` (3 cycles), `add`
/// and `bswap` (1 each) plus the count's `dec` and branch: 6 cycles (Agner Fog's instruction
/// tables, latencies on every preset's core within a cycle of these).
const TORTURE_RANDOM_CYCLES: u64 = 6;
/// `torture_spin_lock_write_delay` without its draws and divisions: the indirect call and
/// return, the three divisors (`nrealwriters_stress * 2000 * 100`, `* 2 * 2`, `* 20000`: loads
/// of `cxt` and multiplies) and the three tests: about 20 instructions, taken at one a cycle
/// (**EST**, counted from the v5.10 source).
const WRITE_DELAY_CYCLES: u64 = 20;
/// The writer's loop outside the lock (`lock_torture_writer`, v5.10): the test
/// `(torture_random(&rand) & 0xfffff) == 0` (its draw is charged apart), the indirect calls of
/// `task_boost` (a no-op for spinlocks), `writelock` and `writeunlock` through
/// `torture_spin_lock_write_lock` and `spin_lock`/`spin_unlock` (`preempt_disable` and
/// `preempt_enable` included), `stutter_wait` (`cond_resched_tasks_rcu_qs`,
/// `READ_ONCE(stutter_pause_test)`, `torture_shutdown_absorb`) and `torture_must_stop`
/// (`torture_must_stop_irq`, `kthread_should_stop`): about 60 instructions, taken at one a cycle
/// (**EST**, counted from the source). Every line it reads is the writer's own or read-only
/// during a run, so it hits.
const WRITER_LOOP_CYCLES: u64 = 60;

/// `locktorture`: the kernel's locktorture spin_lock writer of v5.10–v5.12, the kernels of the
/// CNA series' runs (`kernel/locking/locktorture.c`, `lock_torture_writer` and
/// `torture_spin_lock_write_delay`). Inside the lock: `WARN_ON_ONCE(lock_is_write_held)` reads
/// the flag (on the head line, with `lock_is_read_held` and `last_lock_release` beside it) and
/// `lock_is_write_held = true` sets it; `lwsp->n_lock_acquired++` reads and writes the writer's
/// statistics record, one of four on a line (`lwsa` is a plain array of 16-byte records); the
/// two reads are independent, so their misses overlap (Haswell has 10 L1 fill buffers: Intel
/// Optimization Reference Manual; the x86 kernels reach the section from the MCS queue with
/// plain stores, no locked instruction that would hold the loads back); then
/// `write_delay` (an indirect call through `cxt.cur_ops`, as `writeunlock` is: each pays the
/// preset's `kernel_indirect_call`, the retpoline of the kernels of the x86 runs): three
/// `torture_random()` draws, each tested with a 64-bit `%` (the third test is compiled only with
/// `CONFIG_PREEMPTION`, which the series does not state; charged here): the first
/// holds the lock for `mdelay(100)` with probability 1/(threads·200000) (scaled, see
/// [`LOCKTORTURE_LONG_SCALE`]), the second for a 2 µs `udelay` with probability
/// 1/(threads·2·2); then it clears the flag. Both holds add 500 ns / threads to a critical
/// section on average: at 1 writer they are most of its time. Outside the lock, the rest of the
/// writer's loop ([`WRITER_LOOP_CYCLES`], one draw, and the indirect calls of `task_boost` and
/// `writelock`). Omitted: the one-jiffy sleep
/// (probability 2^-20) and `torture_preempt_schedule` (a no-op unless the writer must be
/// rescheduled, which the pinned model never needs).
pub struct LockTorture {
    entries: u64,
    /// The writers' statistics records, four to a line.
    stats: Vec<Line>,
}

impl Workload for LockTorture {
    /// Whether this critical section takes the long hold, and whether the 2 µs one.
    type Input = (bool, bool);
    type Local = ();

    const STUTTERS: bool = true;

    fn new(threads: usize) -> Self {
        LockTorture {
            entries: 0,
            stats: vec![Line::ZERO; threads.div_ceil(LOCKTORTURE_STATS_PER_LINE)],
        }
    }

    fn prepare(rng: &mut XorShift, config: &RunConfig, _locks: usize) -> (bool, bool) {
        let writers = config.threads as u64;
        let long = rng
            .next_u64()
            .is_multiple_of(2000 * 100 / LOCKTORTURE_LONG_SCALE * writers);
        (long, rng.next_u64().is_multiple_of(2 * 2 * writers))
    }

    fn critical_section(
        &mut self,
        head: *const u8,
        (long, short): (bool, bool),
        _local: &mut (),
        thread: usize,
    ) {
        // WARN_ON_ONCE(lock_is_write_held); lock_is_write_held = true; then
        // lwsp->n_lock_acquired++, a load and a store of the writer's record. The two loads do
        // not depend on each other (the branch on the first is predicted), so an out-of-order
        // core has both misses in flight at once: one batch.
        let stats = self.stats[thread / LOCKTORTURE_STATS_PER_LINE].addr();
        // ... and cxt.cur_ops for the indirect call of write_delay, on the lock's line.
        numa_sim::touch_read(&[head, stats, lock_line()]);
        numa_sim::touch(&[head]);
        numa_sim::touch(&[stats]);
        // cxt.cur_ops->write_delay(&rand), an indirect call: three draws, each tested with a
        // division.
        numa_sim::kernel_indirect_call();
        // write_delay's divisors: cxt.nrealwriters_stress, on the lock's line.
        numa_sim::touch_read(&[lock_line()]);
        numa_sim::cycles(WRITE_DELAY_CYCLES);
        for _ in 0..3 {
            numa_sim::cycles(TORTURE_RANDOM_CYCLES);
            numa_sim::div64();
        }
        if long {
            numa_sim::work(LOCKTORTURE_LONG_DELAY_NS);
        }
        if short {
            numa_sim::work(LOCKTORTURE_DELAY_NS);
        }
        // lock_is_write_held = false; then the indirect call cxt.cur_ops->writeunlock(), before
        // the unlock's store.
        numa_sim::touch(&[head]);
        // cxt.cur_ops for writeunlock's indirect call: the retpoline waits for it.
        numa_sim::touch_read(&[lock_line()]);
        numa_sim::kernel_indirect_call();
        self.entries += 1;
    }

    fn between_acquisitions() {
        // With the indirect calls cxt.cur_ops->task_boost() and ->writelock().
        numa_sim::cycles(WRITER_LOOP_CYCLES + TORTURE_RANDOM_CYCLES);
        // cxt.cur_ops for task_boost and writelock, on the lock's line, before spin_lock.
        numa_sim::touch_read(&[lock_line()]);
        numa_sim::kernel_indirect_call();
        numa_sim::kernel_indirect_call();
    }

    fn check(&self, entries: u64) -> Result<(), String> {
        if self.entries == entries {
            Ok(())
        } else {
            Err(format!(
                "the writer count is {}, but {entries} critical sections ran (lost updates)",
                self.entries
            ))
        }
    }
}

/// `lockbench`: matklad/lock-bench, the benchmark of parking_lot issues #201 and #418. `N` locks
/// (`--lockbench-locks`, default 2), each `CachePadded` with its counter beside it (a
/// `Mutex<u32>`: the counter on the lock's line); every operation takes a lock chosen at random
/// and increments its counter; nothing happens between acquisitions. Like every workload it runs
/// for the run's duration; with `--lockbench-ops N` each thread runs N operations and the run
/// lasts until the last thread is done, as lock-bench times it (its runs: 10,000 per thread).
pub struct LockBench {
    count: u64,
}

impl Workload for LockBench {
    /// The lock this operation takes.
    type Input = usize;
    type Local = ();

    const ON_LOCK_LINE: bool = true;

    fn locks(config: &RunConfig) -> usize {
        config.lockbench_locks
    }

    fn lock_of(input: &usize) -> usize {
        *input
    }

    fn fixed_ops(config: &RunConfig) -> Option<u64> {
        config.lockbench_ops
    }

    fn new(_threads: usize) -> Self {
        LockBench { count: 0 }
    }

    /// As lock-bench: `random % n_locks` from a per-thread xorshift.
    fn prepare(rng: &mut XorShift, _config: &RunConfig, locks: usize) -> usize {
        (rng.next_u64() % locks as u64) as usize
    }

    fn critical_section(
        &mut self,
        lock_line: *const u8,
        _lock: usize,
        _local: &mut (),
        _thread: usize,
    ) {
        // `*cnt += 1` on the counter beside the lock word.
        numa_sim::touch_read(&[lock_line]);
        numa_sim::touch(&[lock_line]);
        self.count += 1;
    }

    /// lock-bench's draw of the next lock: a xorshift step (three shift-xor pairs, 6 cycles)
    /// and `% n_locks`, a division.
    fn between_acquisitions() {
        numa_sim::cycles(6);
        numa_sim::div64();
    }

    fn check(&self, entries: u64) -> Result<(), String> {
        if self.count == entries {
            Ok(())
        } else {
            Err(format!(
                "the counter is {}, but {entries} critical sections ran under its lock (lost \
                 updates)",
                self.count
            ))
        }
    }
}

/// `rw`: a read-mostly hash table, `kv`'s `HashMap<u64, u64>` of 65536 keys with the same
/// skewed keys, `--read-pct` percent of the operations reads. A read (under the shared lock)
/// reads the map's header (its own line: the bucket mask and control pointer, which updates in
/// place never change), hashes the key, reads the control group of its bucket and then its
/// entry, each address depending on the previous read: it writes no line of the table. A write
/// (under the exclusive lock) writes the harness's head line (as every exclusive critical
/// section does), then reads the header, hashes, reads the control group and writes the entry.
/// So readers of a hot key miss on its entry after each write to it, as they would on a real
/// table.
pub struct Rw {
    header: Line,
    ctrl: Vec<Line>,
    entries: Vec<Line>,
    /// Reads done (host counter: several readers run at once, so an atomic; not simulated).
    reads: std::sync::atomic::AtomicU64,
    writes: u64,
}

/// Whether an `rw` operation drawn as `(r1, r2)` (its key is [`kv_key`]`(r1, r2)`) is a read,
/// for `read_pct` percent reads (0 to 100): bits of `r2` that the key's bound does not use.
fn rw_is_read(r2: u64, read_pct: u32) -> bool {
    (r2 >> 32) % 100 < u64::from(read_pct)
}

/// One `rw` operation: a read or a write of the entry of `key`.
#[derive(Clone, Copy)]
pub struct RwOp {
    key: u64,
    read: bool,
}

impl Rw {
    /// The header, control and entry lines of `key`'s lookup, in the order it touches them.
    fn lookup(&self, key: u64) -> (*const u8, *const u8) {
        numa_sim::touch_read(&[self.header.addr()]);
        numa_sim::work(KV_HASH_NS);
        let bucket = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 47) as usize % KV_BUCKETS;
        let ctrl = self.ctrl[bucket / 64].addr();
        (ctrl, self.entries[bucket / 4].addr())
    }
}

impl Workload for Rw {
    type Input = RwOp;
    type Local = ();

    fn new(_threads: usize) -> Self {
        Rw {
            header: Line::ZERO,
            ctrl: vec![Line::ZERO; KV_CTRL_LINES],
            entries: vec![Line::ZERO; KV_ENTRY_LINES],
            reads: std::sync::atomic::AtomicU64::new(0),
            writes: 0,
        }
    }

    /// A skewed key ([`kv_key`]); a read with probability `--read-pct` ([`rw_is_read`]).
    fn prepare(rng: &mut XorShift, config: &RunConfig, _locks: usize) -> RwOp {
        let r1 = rng.next_u64();
        let r2 = rng.next_u64();
        RwOp {
            key: kv_key(r1, r2),
            read: rw_is_read(r2, config.read_pct),
        }
    }

    fn is_read(op: &RwOp) -> bool {
        op.read
    }

    fn dedicated(op: RwOp, read: bool) -> RwOp {
        RwOp { read, ..op }
    }

    fn read_section(&self, op: RwOp, _thread: usize) {
        let (ctrl, entry) = self.lookup(op.key);
        numa_sim::touch_read(&[ctrl]);
        numa_sim::touch_read(&[entry]);
        // Relaxed: a host count, summed after every thread has been joined.
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn critical_section(&mut self, head: *const u8, op: RwOp, _local: &mut (), _thread: usize) {
        numa_sim::touch_read(&[head]);
        numa_sim::touch(&[head]);
        let (ctrl, entry) = self.lookup(op.key);
        numa_sim::touch_read(&[ctrl]);
        numa_sim::touch_read(&[entry]);
        numa_sim::touch(&[entry]);
        self.writes += 1;
    }

    fn between_acquisitions() {
        numa_sim::work(SHORT_LOCAL_WORK_NS);
    }

    /// `entries` counts the exclusive critical sections only; the harness checks the reads'
    /// count against its own.
    fn check(&self, entries: u64) -> Result<(), String> {
        if self.writes == entries {
            Ok(())
        } else {
            Err(format!(
                "{} writes, but {entries} exclusive critical sections ran (lost updates)",
                self.writes
            ))
        }
    }
}
