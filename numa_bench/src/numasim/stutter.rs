//! locktorture's `stutter`: every few jiffies the kernel's torture framework halts every
//! writer and then releases them together, so that a run of many seconds is many short bursts,
//! each starting from an empty lock queue.
//!
//! The kernels of the CNA series' runs (v5.10–v5.12, `kernel/torture.c`) do this with one
//! kthread, `torture_stutter`, and a flag, `stutter_pause_test`, that every writer reads after
//! each release (`stutter_wait`). With locktorture's default `stutter` of 5 jiffies
//! (`torture_param(int, stutter, 5, "Number of jiffies to run/halt test, 0=disable")`, passed as
//! `torture_stutter_init(stutter, stutter)`), one period is:
//! - the flag at 1 for `stutter - 3` jiffies plus a random part of a millisecond: writers that
//!   see it sleep a jiffy at a time;
//! - the flag at 2 for 2 jiffies: writers spin on it (`while (READ_ONCE(stutter_pause_test))
//!   cond_resched();`), so every writer is spinning when it clears;
//! - the flag at 0 for `stutter_gap` (= `stutter`) jiffies: the writers run.
//!
//! The model keeps what the lock sees: the halt as one spin on the flag's line (a sleeping
//! writer and a spinning one take no lock alike), and the release as the kthread's store to
//! that line, which each writer's next load misses on, so writers near the kthread restart
//! first. The kthread sleeps between its stores on a hardware thread the writers leave idle;
//! where they leave none (as many writers as hardware threads) the run does not stutter.
//!
//! A jiffy is 1 ms: `CONFIG_HZ=1000`, the setting of the enterprise x86 distributions' kernels of
//! the time (RHEL and Oracle Linux 7: `CONFIG_HZ_1000=y`); the series does not state its
//! kernel configuration (**EST**). The kernel starts its stutter halted; a simulated run lasts
//! milliseconds, not the published runs' seconds, so the model starts with the run phase, and a
//! run shorter than one run phase never halts.

use std::sync::atomic::Ordering::Relaxed;

use crossbeam_utils::CachePadded;
use numa_sim::atomic::AtomicU32;

use crate::numasim::workload::XorShift;

/// One jiffy at `CONFIG_HZ=1000` (see the module doc).
pub const JIFFY_NS: u64 = 1_000_000;

/// locktorture's default `stutter`, jiffies.
pub const DEFAULT_STUTTER_JIFFIES: u64 = 5;

/// The flag's values (`stutter_pause_test`): 0 runs, anything else halts.
const RUN: u32 = 0;
/// The halt's spinning phase; the model spins through the whole halt (see the module doc).
const HALT: u32 = 2;

/// How long one halt lasts with `stutter_jiffies` (> 1), given a random draw: 2 jiffies at
/// `stutter` 2; from 3 on, `stutter - 3` jiffies plus `(torture_random(&rand) >> 3) %
/// NSEC_PER_MSEC` at 1, then 2 jiffies at 2.
pub fn halt_ns(stutter_jiffies: u64, random: u64) -> u64 {
    if stutter_jiffies > 2 {
        (stutter_jiffies - 1) * JIFFY_NS + (random >> 3) % JIFFY_NS
    } else {
        stutter_jiffies * JIFFY_NS
    }
}

/// `torture_stutter`: run for `stutter_jiffies` (`stutter_gap`), halt for [`halt_ns`], over
/// and over until `end_ns`; then the flag stays clear. At `stutter_jiffies` ≤ 1 the kernel's
/// kthread never halts (`stutter > 1`), and neither does this one.
pub fn torture_stutter(flag: &AtomicU32, stutter_jiffies: u64, end_ns: u64) {
    let mut rng = XorShift::new(numa_sim::thread_seed());
    // The kthread's own futex word, which nobody wakes: its sleeps are timeouts. On a line of
    // its own, as everything a run allocates.
    let timer = Box::new(CachePadded::new(AtomicU32::new(0)));
    let sleep_until = |deadline: u64| {
        while numa_sim::clock_ns() < deadline.min(end_ns) {
            numa_sim::futex_wait(&timer, 0, Some(deadline.min(end_ns)));
        }
    };
    let stutter_ns = stutter_jiffies * JIFFY_NS;
    loop {
        // WRITE_ONCE(stutter_pause_test, 0), then the gap.
        sleep_until(numa_sim::clock_ns() + stutter_ns);
        if numa_sim::clock_ns() >= end_ns {
            return;
        }
        if stutter_jiffies <= 1 {
            continue;
        }
        flag.store(HALT, Relaxed);
        sleep_until(numa_sim::clock_ns() + halt_ns(stutter_jiffies, rng.next_u64()));
        flag.store(RUN, Relaxed);
        if numa_sim::clock_ns() >= end_ns {
            return;
        }
    }
}

/// `stutter_wait`, called by a writer after each release: one load of the flag, and while it
/// is set, a spin on it (ended early by the run's end, when the kthread has stopped toggling).
pub fn stutter_wait(flag: &AtomicU32, end_ns: u64) {
    if flag.load(Relaxed) == RUN {
        return;
    }
    numa_sim::spin_deadline(end_ns);
    while flag.load(Relaxed) != RUN && numa_sim::clock_ns() < end_ns {
        // cond_resched(): a call that finds nothing to schedule; the spin-loop hint stands in
        // for it (a few cycles either way) and lets the simulator sleep through the halt.
        numa_sim::pause();
    }
}

/// The hardware thread the stutter kthread sleeps on: the first one no writer runs on. `None`
/// when the writers fill the machine: the simulator runs one thread per hardware thread, and
/// such a run does not stutter.
pub fn kthread_hw(placement: &[usize], hw_threads: usize) -> Option<usize> {
    (0..hw_threads).find(|hw| !placement.contains(hw))
}

#[cfg(test)]
mod tests {
    use super::kthread_hw;

    #[test]
    fn the_kthread_takes_the_first_idle_hardware_thread() {
        assert_eq!(kthread_hw(&[0, 2, 1], 4), Some(3));
        assert_eq!(kthread_hw(&[1, 2], 4), Some(0));
        assert_eq!(kthread_hw(&[3, 2, 1, 0], 4), None);
    }

    #[test]
    fn a_halt_lasts_what_the_kernels_kthread_sleeps() {
        use super::{JIFFY_NS, halt_ns};
        // stutter 5: 2 jiffies plus under a millisecond at 1, then 2 at 2.
        assert_eq!(halt_ns(5, 0), 4 * JIFFY_NS);
        assert_eq!(halt_ns(5, 8 * 999_999), 4 * JIFFY_NS + 999_999);
        assert_eq!(
            halt_ns(5, u64::MAX),
            4 * JIFFY_NS + (u64::MAX >> 3) % JIFFY_NS
        );
        assert!(halt_ns(5, u64::MAX) < 5 * JIFFY_NS);
        // stutter 2: 2 jiffies at 2, nothing random.
        assert_eq!(halt_ns(2, 12345), 2 * JIFFY_NS);
    }
}
