//! locktorture's stutter (#34): the kernel's torture framework halts every writer every few
//! jiffies and releases them together (`numa_bench::numasim::stutter`), so that the published
//! averages span many queue orders, each starting from an empty queue; and the validation rows
//! against the CNA series' locktorture table that the instrument meets.

use numa_bench::numasim::harness::{RunConfig, WINDOW_NS};
use numa_bench::numasim::{cli, harness, stutter};

/// 8 locktorture writers on the X5-4, placed as the kernel's scheduler placed them, for
/// `duration_ns` with `stutter_jiffies`.
fn config(stutter_jiffies: u64, duration_ns: u64) -> RunConfig {
    RunConfig {
        duration_ns,
        stutter_jiffies,
        ..crate::locks::run_config("x5-4", 8, cli::Placement::Linux)
    }
}

/// Acquisitions in each millisecond of a run.
fn per_ms(run: &harness::RunResult) -> Vec<u32> {
    let per = (stutter::JIFFY_NS / WINDOW_NS) as usize;
    run.windows
        .chunks(per)
        .map(|ms| ms.iter().map(|w| w[0]).sum())
        .collect()
}

/// With the kernel's default stutter of 5 jiffies, the writers run for 5 ms, take no lock for
/// the next 4 ms and some (the halt: 4 jiffies and a random part of a fifth), and are running
/// again 10 ms in; without it they never stop. Halted, the run makes about half the
/// acquisitions.
#[test]
fn locktorture_writers_halt_and_restart_together() {
    use cli::LockKind::QSpinLock;
    use cli::WorkloadKind::LockTorture;
    let halting = harness::run_once(QSpinLock, LockTorture, &config(5, 20_000_000)).unwrap();
    let running = harness::run_once(QSpinLock, LockTorture, &config(0, 20_000_000)).unwrap();
    let (halting_ms, running_ms) = (per_ms(&halting), per_ms(&running));
    println!("per ms, stutter 5: {halting_ms:?}\nper ms, stutter 0: {running_ms:?}");
    assert_eq!(halting_ms.len(), 20);
    assert!(running_ms.iter().all(|&n| n > 500), "{running_ms:?}");
    // Run: 0-5 ms. Halt: from 5 ms (the last critical sections then end within a microsecond
    // or two, inside the 6th millisecond) until 9-10 ms. Run again: 10-15 ms.
    assert!(halting_ms[..5].iter().all(|&n| n > 500), "{halting_ms:?}");
    assert!(halting_ms[6..9].iter().all(|&n| n == 0), "{halting_ms:?}");
    assert!(
        halting_ms[10..15].iter().all(|&n| n > 500),
        "{halting_ms:?}"
    );
    let ratio = halting.total_ops() as f64 / running.total_ops() as f64;
    assert!((0.4..0.65).contains(&ratio), "{ratio}");
    // The other workloads ignore it.
    let counter = |stutter_jiffies| {
        harness::run_once(
            QSpinLock,
            cli::WorkloadKind::Counter,
            &config(stutter_jiffies, 12_000_000),
        )
        .unwrap()
        .total_ops()
    };
    assert_eq!(counter(5), counter(0));
}

/// A run whose writers fill every hardware thread leaves the kthread none to sleep on, and
/// does not stutter (the simulator runs one thread per hardware thread).
#[test]
fn a_full_machine_does_not_stutter() {
    use cli::LockKind::QSpinLock;
    use cli::WorkloadKind::LockTorture;
    let full = |stutter_jiffies| RunConfig {
        threads: 144,
        ..config(stutter_jiffies, 6_000_000)
    };
    let halting = harness::run_once(QSpinLock, LockTorture, &full(5)).unwrap();
    let running = harness::run_once(QSpinLock, LockTorture, &full(0)).unwrap();
    assert_eq!(halting.total_ops(), running.total_ops());
    assert!(per_ms(&halting)[5..].iter().all(|&n| n > 0));
}

/// The validation rows the faithful instrument meets (BENCHMARKS.md, "Validation against the
/// kernel's published runs"), seed 1, 50 ms runs of five stuttered bursts, the writers placed
/// as the kernel's scheduler placed them, stores forwarded by address: CNA v15's gain over the
/// stock qspinlock within 10% of the v15 cover letter's CNA column at #34's rows 16, 32, 36
/// and 72 (seed 1: −1%, −2%, +1%, −7%), v15 without shuffle reduction at 32 and 72 (+7%,
/// +2%), and CNA v13's within 10% of the v13 letter's columns at 72 and 142 writers, with and
/// without shuffle reduction (+8%, +1%; +6%, 0%), and v15's at 4 and 8 writers placed by
/// v5.12's balancer. The rows it misses (stock's shape, v13 at 16–36) are named there, not
/// pinned.
#[test]
fn the_validation_rows_the_instrument_meets() {
    use cli::LockKind::{CnaKernel, CnaKernelV13, CnaKernelV13WoSro, CnaKernelWoSro, QSpinLock};
    use cli::Placement::{Linux, Linux512};
    use cli::WorkloadKind::LockTorture;
    let ops = |lock, threads, placement| {
        let config = RunConfig {
            threads,
            placement,
            ..config(stutter::DEFAULT_STUTTER_JIFFIES, 50_000_000)
        };
        harness::run_once(lock, LockTorture, &config)
            .unwrap()
            .total_ops() as f64
    };
    let mut stock = std::collections::HashMap::new();
    let mut within = |lock, threads, placement: cli::Placement, published: f64| {
        let base = *stock
            .entry((threads, placement.name()))
            .or_insert_with(|| ops(QSpinLock, threads, placement));
        let model = ops(lock, threads, placement) / base;
        let placement = placement.name();
        println!(
            "{lock:?} / qspinlock, {threads}, {placement}: {model:.3} (published {published})"
        );
        assert!(
            (0.9 * published..=1.1 * published).contains(&model),
            "{lock:?} / qspinlock, {threads}, {placement}: {model:.3} against {published}"
        );
    };
    // The v15 letter's CNA column (1 ms threshold).
    for (threads, published) in [(16, 1.532), (32, 1.539), (36, 1.534), (72, 1.608)] {
        within(CnaKernel, threads, Linux, published);
    }
    for (threads, published) in [(32, 1.539), (72, 1.608)] {
        within(CnaKernelWoSro, threads, Linux, published);
    }
    // The v13 letter's two CNA columns.
    for (threads, with_sro, without_sro) in [(72, 1.612, 1.642), (142, 1.768, 1.778)] {
        within(CnaKernelV13, threads, Linux, with_sro);
        within(CnaKernelV13WoSro, threads, Linux, without_sro);
    }
    // The v15 letter's rows at 4 and 8 writers, placed by its stock kernel's (v5.12) balancer,
    // which keeps 4 writers on one node and runs 8 as 4 and 4 (seed 1: +0%, +3%; v5.10's
    // placement, 2 and 2, and 2 on each node, gave +4% and −13%).
    for (threads, published) in [(4, 1.014), (8, 1.359)] {
        within(CnaKernel, threads, Linux512, published);
    }
}

/// CNA v15's flush threshold is its module parameter (`numa_spinlock_threshold_ns`,
/// `numasim --cna-kernel-threshold-ns`), and the v15 letter's two columns, 1 ms and 10 ms, say
/// how much the machine lost to the flushes: 0.2–2.1% at 16–142 writers. Plumbing: a 1 µs
/// threshold flushes far more often than the default. The row met: without shuffle reduction
/// the model loses as little, 10 ms over 1 ms at 16, 32 and 72 writers (50 ms runs, seed 1:
/// −1%, +2%, +4%; seeds 1–3: −1% to +4%; published +0.9%, +1.2%, +0.2%). (With shuffle
/// reduction the model's `cna-kernel` gains 2–18% from the longer threshold: after each flush
/// its heads leave the queue in arrival order until one both draws shuffle reduction's 1-in-128
/// and finds the lock busy, which after a remote handoff is rare in the model; see
/// BENCHMARKS.md, "Validation against the kernel's published runs".)
#[test]
fn the_cna_v15_flush_threshold_is_its_module_parameter() {
    use cli::LockKind::CnaKernelWoSro;
    use cli::WorkloadKind::LockTorture;
    use numa_bench::numasim::kernel::{CnaPath, DEFAULT_CNA_THRESHOLD_NS};
    let flush_pct = |threshold_ns| {
        let config = RunConfig {
            threads: 32,
            cna_kernel_threshold_ns: threshold_ns,
            ..config(stutter::DEFAULT_STUTTER_JIFFIES, 10_000_000)
        };
        let row = crate::cna_paths::summarized_run(CnaKernelWoSro, LockTorture, &config);
        row.cna.unwrap().path_pct[CnaPath::Flush as usize]
    };
    let (short, default) = (flush_pct(1_000), flush_pct(DEFAULT_CNA_THRESHOLD_NS));
    println!("flushes: {short:.2}% of the handoffs at 1 us, {default:.2}% at 1 ms");
    assert!(
        short > 10.0 * default.max(0.01),
        "{short} against {default}"
    );

    let ops = |threads, threshold_ns| {
        let config = RunConfig {
            threads,
            cna_kernel_threshold_ns: threshold_ns,
            ..config(stutter::DEFAULT_STUTTER_JIFFIES, 50_000_000)
        };
        harness::run_once(CnaKernelWoSro, LockTorture, &config)
            .unwrap()
            .total_ops() as f64
    };
    for (threads, published) in [(16, 1.009), (32, 1.012), (72, 1.002)] {
        let gain = ops(threads, 10_000_000) / ops(threads, DEFAULT_CNA_THRESHOLD_NS);
        println!("cna-kernel-wo-sro, {threads}: 10 ms over 1 ms {gain:.3} (published {published})");
        assert!((0.95..=1.06).contains(&gain), "{threads}: {gain:.3}");
    }
}
