//! `numasim`: the locktorture table on a simulated multi-socket machine, deterministic.
//!
//! McsMutex, CnaMutex and HqMutex run unchanged on a `numa_sim` machine (a preset such as the
//! 4-socket X5-4 of the CNA series), beside baseline **models** written for the simulator: the
//! kernel's stock qspinlock (`qspinlock`) and its CNA slow path (`cna-kernel`), Rust std's futex
//! mutex (`std`), parking_lot's `RawMutex` (`ttas`) and a plain spinning MCS queue lock
//! (`spin-mcs`); likewise McsRwLock, CnaRwLock and HqRwLock (`mcs-rw`, `cna-rw`, `hq-rw`) beside
//! models of parking_lot's `RawRwLock` (`pl-rwlock`) and std's futex `RwLock` (`std-rwlock`),
//! on the read-mostly `rw` workload. Every simulated
//! thread is pinned to its own hardware thread (numa_sim's "spread" placement, or with
//! `--placement packed` on as few NUMA nodes as possible) and loops "one critical section, then
//! the workload's local work" for `--duration-us` of virtual time. The harness counts, inside
//! every critical section, how many handoffs crossed NUMA nodes, from data stored with the
//! protected lines, so every lock is measured the same way.
//!
//! ```text
//! RUSTFLAGS="--cfg numa_sim" cargo run --release --example numasim --target-dir target/sim -- \
//!     --machine x5-4 --threads 1,2,4,8,16,32,72 --locks mcs,cna,hq,ttas --workload counter --seed 1
//! RUSTFLAGS="--cfg numa_sim" cargo run --release --example numasim --target-dir target/sim -- --machine list
//! RUSTFLAGS="--cfg numa_sim" cargo run --release --example numasim --target-dir target/sim -- --help
//! ```
//!
//! The same arguments give the same output, byte for byte, except the `host_ms` column (host wall
//! time). Results go to stdout, progress and errors to stderr. Exit codes: 0 success, 1 a run
//! failed (mutual exclusion violated, or the simulator reported a deadlock or a runaway spin),
//! 2 bad command line.
//!
//! Without `--cfg numa_sim` the locks use real atomics and cannot be simulated: the example then
//! only prints how to build it and exits with code 2 (so `cargo build --examples` still works).

// The tool's code lives in numa_bench (harness, workloads, models, report, command line).
#[cfg(numa_sim)]
use numa_bench::common;
#[cfg(numa_sim)]
use numa_bench::numasim::{cli, harness, report};

use std::process::ExitCode;

#[cfg(not(numa_sim))]
fn main() -> ExitCode {
    eprintln!(
        "numasim runs the locks on a simulated machine and needs the numa_sim backend; build it with\n    \
         RUSTFLAGS=\"--cfg numa_sim\" cargo run --release --example numasim --target-dir target/sim -- --help"
    );
    ExitCode::from(2)
}

#[cfg(numa_sim)]
fn main() -> ExitCode {
    use cli::{Command, Format};

    let options = match cli::parse(std::env::args_os()) {
        Ok(Command::ListMachines) => {
            for machine in numa_sim::Machine::presets() {
                println!("{}", machine.describe());
            }
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(options)) => options,
        Err(exit) => return exit,
    };
    let Some(rows) = sweep(&options) else {
        return ExitCode::FAILURE;
    };
    let columns = report::Columns {
        paths: options.paths,
        write_wait: options.workloads.contains(&cli::WorkloadKind::Rw),
        roles: options.writers.is_some(),
    };
    match options.format {
        Format::Table => report::print_table(&rows, columns),
        Format::Csv => report::print_csv(&rows, columns),
    }
    if let Some(path) = &options.plot {
        let written = report::plot(path, options.machine.name, options.read_pct, &rows);
        if !common::plot::report_written("numasim", written) {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Runs every (workload, threads, lock) once and summarises each; `None` if a run failed (the
/// failure is reported on stderr).
#[cfg(numa_sim)]
fn sweep(options: &cli::Options) -> Option<Vec<report::Row>> {
    use std::time::Instant;

    let machine = options.machine;
    let total = options.workloads.len() * options.threads.len() * options.locks.len();
    eprintln!(
        "numasim: {total} runs of {} us simulated on {} ({} hw threads, {} nodes), seed {}, \
         stealing {}, placement {}, store buffers {}, store forwarding {}, snoop window {}, \
         wake phase {}, locktorture stutter {} jiffies, cna-kernel threshold {} ns",
        options.duration_us,
        machine.name,
        machine.hw_threads(),
        machine.node_count(),
        options.seed,
        if options.stealing { "on" } else { "off" },
        options.placement.name(),
        if options.store_buffers { "on" } else { "off" },
        match options.store_forwarding {
            numa_sim::StoreForwarding::Line => "line",
            numa_sim::StoreForwarding::Address => "address",
        },
        if options.snoop_window { "on" } else { "off" },
        if options.wake_phase { "on" } else { "off" },
        options.stutter_jiffies,
        options.cna_kernel_threshold_ns,
    );
    let began = Instant::now();
    let mut rows = Vec::new();
    let mut done = 0;
    let mut simulated_ops = 0u64;
    for &workload in &options.workloads {
        for &threads in &options.threads {
            for &lock in &options.locks {
                done += 1;
                eprintln!(
                    "[{done}/{total}] {} {} {threads}",
                    lock.name(),
                    workload.name()
                );
                let config = harness::RunConfig {
                    machine,
                    threads,
                    placement: options.placement,
                    duration_ns: options.duration_us * 1000,
                    seed: options.seed,
                    ttas_fairness: options.ttas_fairness,
                    read_pct: options.read_pct,
                    // Dedicated roles only where there are reads (the other workloads' rows
                    // leave reads_per_sec and writes_per_sec empty).
                    writers: options
                        .writers
                        .filter(|_| workload == cli::WorkloadKind::Rw),
                    lockbench_locks: options.lockbench_locks,
                    lockbench_ops: options.lockbench_ops,
                    store_buffers: options.store_buffers,
                    store_forwarding: options.store_forwarding,
                    snoop_window: options.snoop_window,
                    wake_phase: options.wake_phase,
                    stutter_jiffies: options.stutter_jiffies,
                    cna_kernel_threshold_ns: options.cna_kernel_threshold_ns,
                    trace: options.trace,
                };
                let result = match harness::run_once(lock, workload, &config) {
                    Ok(result) => result,
                    Err(failure) => {
                        eprintln!(
                            "error: {} {} {threads} threads: {failure}",
                            lock.name(),
                            workload.name()
                        );
                        return None;
                    }
                };
                if let Some(trace) = &result.trace {
                    print_trace(trace, lock.name(), workload.name(), threads);
                }
                simulated_ops += result.total_ops();
                let key = report::RowKey {
                    machine: machine.name,
                    lock: lock.name(),
                    workload: workload.name(),
                    threads,
                };
                rows.push(report::summarize(key, &result));
            }
        }
    }
    report::fill_speedups(&mut rows);
    eprintln!(
        "numasim: {total} runs, {simulated_ops} simulated critical sections, done in {:.1} s of \
         host time",
        began.elapsed().as_secs_f64()
    );
    Some(rows)
}

#[cfg(numa_sim)]
/// Writes a run's recorded accesses to stderr, one line each: issue time (ns), cost (ns), task,
/// hardware thread, kind, address (labelled when it is the lock's or the protected data's), and
/// whether it missed. Futex sleeps (cost: until the thread ran again; `woken` or `timeout`;
/// one in progress at the window's start is listed at its start) and wakes (`woke` or `none`)
/// are on the same timeline.
fn print_trace(trace: &harness::Trace, lock: &str, workload: &str, threads: usize) {
    use numa_sim::AccessKind;
    let futex = |a: &&numa_sim::Access| matches!(a.kind, AccessKind::Sleep | AccessKind::Wake);
    let events = trace.accesses.iter().filter(futex).count();
    eprintln!(
        "trace: {lock} {workload} {threads} threads: {} accesses, {events} futex sleeps and \
         wakes; lock at {:#x} ({} bytes), protected data at {:#x} ({} bytes)",
        trace.accesses.len() - events,
        trace.lock.0,
        trace.lock.1,
        trace.data.0,
        trace.data.1
    );
    eprintln!("  issued_ns        cost_ns  task  hw  kind   address             what");
    for a in &trace.accesses {
        eprintln!(
            "  {:>12.1} {:>9.1}  {:>4}  {:>3}  {:<5}  {:#018x}  {}{}",
            a.issued_ps as f64 / 1000.0,
            (a.completed_ps - a.issued_ps) as f64 / 1000.0,
            a.task,
            a.hw,
            format!("{:?}", a.kind),
            a.address,
            match (a.kind, a.hit) {
                (AccessKind::Sleep, true) => "woken",
                (AccessKind::Sleep, false) => "timeout",
                (AccessKind::Wake, true) => "woke",
                (AccessKind::Wake, false) => "none",
                (_, true) => "hit",
                (_, false) => "MISS",
            },
            match trace.label(a.address) {
                label if label.is_empty() => String::new(),
                label => format!(" {label}"),
            }
        );
    }
}
