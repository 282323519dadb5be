//! A fixed-size log-bucket histogram of durations (the HdrHistogram idea, coarse and small).
//!
//! Bucket 0 holds 0, bucket 1 holds 1, then each power of two `[2^p, 2^(p+1))` is split into two
//! buckets, `[2^p, 1.5·2^p)` and `[1.5·2^p, 2^(p+1))`, up to `2^40` ticks (over 60 s at any
//! clock rate up to 18 GHz); larger values land in the last bucket. So a recorded value is known
//! to within half of itself (a third in the upper half of each power of two), which is what
//! percentiles of lock waits need, in 80 counters.
//!
//! Inside a lock the values are clock ticks (`sync::ticks`, the TSC on x86-64: a few ns to read),
//! recorded by the lock holder with plain loads and stores ([`Recorder`]); a snapshot converts
//! them to nanoseconds ([`Histogram`]). A hand-written histogram rather than the `hdrhistogram`
//! crate: that one allocates, records with `&mut self`, and would need a lock of its own or an
//! RMW per sample on the lock's hot path; this one is 80 relaxed counters written only by the
//! holder, and fits in a few dozen lines.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets: 0, 1, then two per power of two for `2^1 ..= 2^39`.
pub(crate) const BUCKETS: usize = 80;

/// The bucket of `value` (saturating at the last one).
#[inline]
fn bucket_of(value: u64) -> usize {
    if value < 2 {
        return value as usize;
    }
    let power = 63 - value.leading_zeros() as usize;
    let upper_half = ((value >> (power - 1)) & 1) as usize;
    (2 * power + upper_half).min(BUCKETS - 1)
}

/// The smallest value of bucket `bucket`.
fn bucket_low(bucket: usize) -> u64 {
    if bucket < 2 {
        return bucket as u64;
    }
    let power = bucket / 2;
    (1u64 << power) + (bucket as u64 % 2) * (1u64 << (power - 1))
}

/// The largest value of bucket `bucket` (the last bucket has none: `u64::MAX`).
fn bucket_high(bucket: usize) -> u64 {
    if bucket + 1 >= BUCKETS {
        u64::MAX
    } else {
        bucket_low(bucket + 1) - 1
    }
}

/// The counters embedded in a lock (feature `stats`). Only the lock holder records, so plain
/// relaxed loads and stores suffice (the lock orders one holder's update before the next's);
/// a reader that is not the holder may see a snapshot a few samples behind, or a sample whose
/// count, sum and bucket are not all updated yet.
pub(crate) struct Recorder {
    counts: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl Recorder {
    pub(crate) const fn new() -> Self {
        Recorder {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }

    /// Records one value (clock ticks). Must be called by the lock holder.
    #[inline]
    pub(crate) fn record(&self, ticks: u64) {
        self.record_sample(ticks, 1);
    }

    /// Counts one event and records a sample of it (clock ticks) that stands for `weight`
    /// events: the distribution (buckets, sum) is weighted, the count is not. Must be called by
    /// the lock holder.
    #[inline]
    pub(crate) fn record_sample(&self, ticks: u64, weight: u64) {
        bump(&self.counts[bucket_of(ticks)], weight);
        bump(&self.count, 1);
        self.sum.store(
            self.sum
                .load(Relaxed)
                .saturating_add(ticks.saturating_mul(weight)),
            Relaxed,
        );
        if ticks < self.min.load(Relaxed) {
            self.min.store(ticks, Relaxed);
        }
        if ticks > self.max.load(Relaxed) {
            self.max.store(ticks, Relaxed);
        }
    }

    /// Forgets every sample. Must be called by the lock holder.
    pub(crate) fn reset(&self) {
        for count in &self.counts {
            count.store(0, Relaxed);
        }
        self.count.store(0, Relaxed);
        self.sum.store(0, Relaxed);
        self.min.store(u64::MAX, Relaxed);
        self.max.store(0, Relaxed);
    }

    /// The samples so far, with `ns_per_tick` to convert them, plus `zeros` events of value 0
    /// and `unsampled` events without a sample, counted elsewhere (the uncontended
    /// acquisitions' waits; the holds not timed).
    pub(crate) fn snapshot(&self, ns_per_tick: f64, zeros: u64, unsampled: u64) -> Histogram {
        let mut counts = [0; BUCKETS];
        for (to, from) in counts.iter_mut().zip(&self.counts) {
            *to = from.load(Relaxed);
        }
        counts[0] += zeros;
        Histogram {
            counts,
            count: self.count.load(Relaxed) + zeros + unsampled,
            sum: self.sum.load(Relaxed),
            min: if zeros > 0 { 0 } else { self.min.load(Relaxed) },
            max: self.max.load(Relaxed),
            ns_per_tick,
        }
    }
}

/// A distribution of durations: a snapshot of a lock's wait or hold times
/// ([`LockStats::wait`](super::LockStats::wait), [`LockStats::hold`](super::LockStats::hold)),
/// or one you fill yourself with [`record`](Self::record).
///
/// Values are kept in log buckets (two per power of two), so [`percentile`](Self::percentile)
/// overstates the exact percentile by at most half of it; [`min`](Self::min), [`max`](Self::max)
/// and [`mean`](Self::mean) are exact, of the values recorded.
///
/// A lock's hold times are sampled: every hold that follows an acquisition that waited is
/// recorded, and one in [`HOLD_SAMPLE_EVERY`](super::HOLD_SAMPLE_EVERY) of the others, weighted
/// by that number in the buckets and the mean. [`count`](Self::count) still counts every hold;
/// `min` and `max` are those of the samples. (Reading the clock twice per hold would otherwise
/// be most of the cost of an uncontended lock and unlock.)
///
/// ```
/// use std::time::Duration;
/// use numa_locks::stats::Histogram;
///
/// let mut waits = Histogram::new();
/// for us in 1..=100 {
///     waits.record(Duration::from_micros(us));
/// }
/// assert_eq!(waits.count(), 100);
/// assert_eq!(waits.max(), Duration::from_micros(100));
/// let p50 = waits.percentile(50.0);
/// assert!(p50 >= Duration::from_micros(50) && p50 <= Duration::from_micros(75));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    count: u64,
    /// Sum of the values, in ticks (saturating).
    sum: u64,
    /// Smallest value in ticks (`u64::MAX` while empty).
    min: u64,
    /// Largest value in ticks.
    max: u64,
    ns_per_tick: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram of durations (in nanoseconds).
    pub fn new() -> Self {
        Recorder::new().snapshot(1.0, 0, 0)
    }

    /// Adds one duration (saturating at `u64::MAX` nanoseconds).
    pub fn record(&mut self, value: Duration) {
        let ticks =
            ((value.as_nanos() as f64 / self.ns_per_tick) as u128).min(u64::MAX as u128) as u64;
        self.counts[bucket_of(ticks)] += 1;
        self.count += 1;
        self.sum = self.sum.saturating_add(ticks);
        self.min = self.min.min(ticks);
        self.max = self.max.max(ticks);
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest value (zero while empty).
    pub fn min(&self) -> Duration {
        if self.weight() == 0 {
            Duration::ZERO
        } else {
            self.duration(self.min)
        }
    }

    /// The largest value (zero while empty).
    pub fn max(&self) -> Duration {
        self.duration(self.max)
    }

    /// The mean value (zero while empty).
    pub fn mean(&self) -> Duration {
        let weight = self.weight();
        if weight == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos((self.sum as f64 / weight as f64 * self.ns_per_tick) as u64)
        }
    }

    /// The weight of the recorded samples: [`count`](Self::count), unless samples were weighted.
    fn weight(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The value below which `percent` percent of the values lie (`percent` in 0 to 100, clamped):
    /// the largest value of the bucket that holds that rank, clamped to [`min`](Self::min) and
    /// [`max`](Self::max). So `percentile(0.0) == min()`, `percentile(100.0) == max()`, and a
    /// percentile overstates the exact one by at most half of it. Zero while empty.
    pub fn percentile(&self, percent: f64) -> Duration {
        let weight = self.weight();
        if weight == 0 {
            return Duration::ZERO;
        }
        let fraction = (percent / 100.0).clamp(0.0, 1.0);
        if fraction == 0.0 {
            return self.min();
        }
        // The rank of the value asked for, 1-based: at least 1, at most the samples' weight.
        let rank = ((fraction * weight as f64).ceil() as u64).clamp(1, weight);
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return self.duration(bucket_high(bucket).clamp(self.min, self.max));
            }
        }
        self.max()
    }

    fn duration(&self, ticks: u64) -> Duration {
        Duration::from_nanos((ticks as f64 * self.ns_per_tick) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        for bucket in 0..BUCKETS - 1 {
            assert_eq!(bucket_of(bucket_low(bucket)), bucket);
            assert_eq!(bucket_of(bucket_high(bucket)), bucket);
            assert_eq!(bucket_high(bucket) + 1, bucket_low(bucket + 1));
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        // Two buckets per power of two: each at most half as wide as its smallest value.
        for bucket in 2..BUCKETS - 1 {
            let (low, high) = (bucket_low(bucket), bucket_high(bucket));
            assert!(
                (high - low + 1) * 2 <= low + 1,
                "bucket {bucket}: {low}..={high}"
            );
        }
    }
}
