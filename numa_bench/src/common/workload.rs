//! What the two tools' workloads share: the xorshift generator that draws their random inputs,
//! the `kv` workload's skewed keys, and the `freelist` workload's list check. `locktorture` runs
//! the workloads on real data; `numasim` models the same operations as simulated cache-line
//! accesses beside host data the check reads. Both draw the same inputs and check the same
//! invariants with this one code.

/// A xorshift64 generator: three shifts and three xors, a couple of ns per number.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator started from `state` (0 is replaced by 1: xorshift's state must never be 0).
    pub fn new(state: u64) -> Self {
        Self(state.max(1))
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

/// The number of keys in the `kv` map.
pub const KV_KEYS: u64 = 65_536;

/// The key of a `kv` operation drawn as `(r1, r2)`: `r1 % (r2 % KV_KEYS + 1)`. The bound is
/// uniform, so small keys are far more likely than large ones (P(key = k) is about
/// ln(KV_KEYS / k) / KV_KEYS), a cheap zipf-like skew.
pub fn kv_key(r1: u64, r2: u64) -> u64 {
    r1 % (r2 % KV_KEYS + 1)
}

/// Whether a `kv` operation drawn as `(r1, r2)` is a put: one in ten, decided by bits of `r2`
/// that the key's bound does not use.
pub fn kv_put(r2: u64) -> bool {
    (r2 >> 32).is_multiple_of(10)
}

/// "No block": the end of the free list.
pub const NIL: u32 = u32::MAX;

/// The number of blocks of a `freelist` run with `threads` threads: at least one more than
/// threads (each holds at most one), so a pop always succeeds.
pub fn free_list_len(threads: usize) -> u32 {
    u32::try_from(threads.saturating_mul(2).max(4096)).unwrap_or(NIL - 1)
}

/// The links of a fresh free list of `len` blocks, block by block: block i links to i + 1, the
/// last one to [`NIL`].
pub fn fresh_links(len: u32) -> impl Iterator<Item = u32> {
    (0..len).map(move |i| if i + 1 < len { i + 1 } else { NIL })
}

/// Checks an index-linked free list of `len` blocks that starts at `head` and should hold `free`
/// of them (`next` gives a listed block's successor): every block is on it at most once, and
/// the count matches. The message says what is wrong.
pub fn check_free_list(
    head: u32,
    free: u64,
    len: usize,
    next: impl Fn(u32) -> u32,
) -> Result<(), String> {
    let mut on_list = vec![false; len];
    let mut block = head;
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
        block = next(block);
    }
    if listed != free {
        return Err(format!(
            "{listed} blocks on the list, but the free count is {free}"
        ));
    }
    Ok(())
}
