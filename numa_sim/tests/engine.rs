//! The engine's contract: latencies, serialization, spin sleep, futex, determinism, randomized
//! mode and errors.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, Mutex};

use numa_sim::atomic::{AtomicU32, AtomicU64};
use numa_sim::{LatencyClass, Machine, RunReport, Simulation, thread};

fn machine(name: &str) -> &'static Machine {
    Machine::by_name(name).unwrap()
}

fn panic_message<R: std::fmt::Debug>(f: impl FnOnce() -> R) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A and B hand one line back and forth `rounds` times (A writes 2i+1, B waits for it and
/// writes 2i+2, A waits for that), on a line whose memory is on the node of hardware thread
/// `home` (its first toucher). Returns the run's report (virtual end time, ns).
fn ping_pong_homed(m: &'static Machine, a: usize, b: usize, home: usize, rounds: u32) -> RunReport {
    ping_pong_with(Simulation::new(m), a, b, home, rounds)
}

/// `ping_pong_homed` in the simulation `sim` (store buffers on or off).
fn ping_pong_with(sim: Simulation, a: usize, b: usize, home: usize, rounds: u32) -> RunReport {
    sim.jitter(0.0).run(move || {
        let flag = Arc::new(AtomicU32::new(0));
        let f = flag.clone();
        thread::spawn_on(home, move || f.store(0, Relaxed)).join();
        let f = flag.clone();
        let pong = thread::spawn_on(b, move || {
            for i in 0..rounds {
                numa_sim::spin_deadline(u64::MAX);
                while f.load(Acquire) != 2 * i + 1 {
                    numa_sim::pause();
                }
                f.store(2 * i + 2, Release);
            }
        });
        let ping = thread::spawn_on(a, move || {
            for i in 0..rounds {
                flag.store(2 * i + 1, Release);
                numa_sim::spin_deadline(u64::MAX);
                while flag.load(Acquire) != 2 * i + 2 {
                    numa_sim::pause();
                }
            }
        });
        ping.join();
        pong.join();
    })
}

#[test]
fn ping_pong_measures_each_latency_class_exactly() {
    for m in Machine::presets() {
        for class in LatencyClass::TRANSFERS {
            let Some((a, b)) = m.pair_of_class(class) else {
                continue;
            };
            let l = m.transfer(class);
            let (hit, pause) = (m.costs.l1_hit, m.costs.pause);
            // Per round: B's read miss, B's write (invalidating A's copy), A's read miss, A's
            // write: four one-way transfers of the class. A thread that has just written sees
            // the next write only at a look at the line after a `pause` (which bounds the round
            // when those take longer than the transfers, as between SMT siblings with a slow
            // `pause`).
            // - Without store buffers each write stalls its thread for its transfer, then the
            //   thread looks once and pauses: `2l + max(2l, hit + pause)`.
            // - With them the writer goes on at once (one hit) while its write commits; its
            //   first iteration, which wrote, does not sleep; it looks, pauses, looks again,
            //   pauses and sleeps. If all that ends before the other thread's write (two and
            //   three transfers after its own), it is woken by that write and the round is the
            //   four transfers exactly. Otherwise its looks, and the other's, fall on their
            //   `pause` periods, and the round lies between the four transfers and one more
            //   writer's worth of looks and pauses.
            // Each thread's load that sees the other's write is followed by the issue time of
            // the code around it before the thread writes: two per round on the critical path
            // (three where a look and a `pause` bound the round: the look's too).
            let i = m.costs.issue;
            for (buffered, expected) in [
                (false, 2 * l + (2 * l + 2 * i).max(hit + pause + 3 * i)),
                (true, 4 * l + 2 * i),
            ] {
                let run = |rounds| {
                    let sim = Simulation::new(m).store_buffers(buffered);
                    ping_pong_with(sim, a, b, a, rounds)
                };
                let (short, long) = (run(10), run(110));
                let per_round_ps = (long.virtual_end_ns - short.virtual_end_ns) * 1000 / 100;
                let exact = !buffered || (2 * l > 2 * hit + pause && 3 * l >= 3 * hit + 2 * pause);
                // ns rounding of the two end times: at most 2 ns over 100 rounds.
                let within = if exact {
                    per_round_ps.abs_diff(expected) <= 20
                } else {
                    (expected..=expected + 3 * (hit + i) + 2 * pause + 20).contains(&per_round_ps)
                };
                assert!(
                    within,
                    "{} {class:?}, store buffers {buffered}: {per_round_ps} ps per round, \
                     expected {expected} (exactly: {exact})",
                    m.name
                );
                // Spinning is compressed: a handful of accesses per round, not one per pause.
                assert!(long.simulated_accesses < 110 * 12, "{long:?}");
            }
        }
    }
}

#[test]
fn a_line_homed_on_another_socket_crosses_ccxs_slowly() {
    let m = machine("epyc-2s");
    let (a, b) = m.pair_of_class(LatencyClass::SameNode).unwrap();
    let far = m.pair_of_class(LatencyClass::OtherSocket).unwrap().1;
    let per_round = |home| {
        let short = ping_pong_homed(m, a, b, home, 10);
        let long = ping_pong_homed(m, a, b, home, 110);
        (long.virtual_end_ns - short.virtual_end_ns) * 1000 / 100
    };
    let near = m.costs.same_node;
    let remote = m.costs.remote_home_same_socket.unwrap();
    // Four transfers and, on the critical path, two accesses' issue time (see above).
    let issue = 2 * m.costs.issue;
    assert!(per_round(a).abs_diff(4 * near + issue) <= 20);
    assert!(
        per_round(far).abs_diff(4 * remote + issue) <= 20,
        "{}",
        per_round(far)
    );
}

/// `threads` threads on one socket each do `ops` RMWs on one line.
fn rmw_storm(threads: usize, ops: u32) -> RunReport {
    let m = machine("x5-4");
    Simulation::new(m).jitter(0.0).run(move || {
        let word = Arc::new(AtomicU64::new(0));
        // Hardware threads 0, 2, 4, ...: distinct cores of socket 0.
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let word = word.clone();
                thread::spawn_on(2 * i, move || {
                    for _ in 0..ops {
                        word.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(word.load(Relaxed), threads as u64 * u64::from(ops));
    })
}

#[test]
fn rmws_on_one_line_serialize() {
    let m = machine("x5-4");
    let l3 = m.costs.same_l3 / 1000;
    let r4 = rmw_storm(4, 200);
    let r8 = rmw_storm(8, 200);
    // Every RMW but the very first of each line transfer waits for the previous one.
    for (threads, r) in [(4u64, r4), (8, r8)] {
        let transfers = threads * 200;
        assert!(
            r.virtual_end_ns >= (transfers - threads) * l3
                && r.virtual_end_ns <= transfers * l3 + 1000,
            "{threads} threads: {r:?}"
        );
    }
    let ratio = r8.virtual_end_ns as f64 / r4.virtual_end_ns as f64;
    assert!((1.9..2.1).contains(&ratio), "{ratio}");
}

#[test]
fn a_spin_loop_sleeps_until_the_write_or_its_deadline() {
    let m = machine("x5-4");
    let (a, b) = m.pair_of_class(LatencyClass::OtherSocket).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let report = Simulation::new(m).jitter(0.0).run(move || {
        let flag = Arc::new(AtomicU32::new(0));
        let (f1, f2, f3) = (flag.clone(), flag.clone(), flag.clone());
        let (s1, s2) = (s.clone(), s.clone());
        let writer = thread::spawn_on(a, move || {
            numa_sim::work(100_000);
            let issued = numa_sim::clock_ns();
            f1.store(1, Release);
            (issued, numa_sim::clock_ns())
        });
        let reader = thread::spawn_on(b, move || {
            numa_sim::spin_deadline(u64::MAX);
            while f2.load(Acquire) == 0 {
                numa_sim::pause();
            }
            s1.lock().unwrap().push(("reader", numa_sim::now_ns()));
        });
        // A spinner with a 20 us deadline on a line nobody writes before then.
        let (c, _) = m
            .pair_of_class(LatencyClass::Smt)
            .map(|(x, y)| (y + 2, x))
            .unwrap();
        let timed = thread::spawn_on(c, move || {
            let deadline = numa_sim::now_ns() + 20_000;
            numa_sim::spin_deadline(deadline);
            while f3.load(Acquire) == 0 && numa_sim::now_ns() < deadline {
                numa_sim::pause();
            }
            s2.lock().unwrap().push(("timed", numa_sim::now_ns()));
        });
        let (issued, went_on) = writer.join();
        reader.join();
        timed.join();
        s.lock().unwrap().push(("issued", issued));
        s.lock().unwrap().push(("went on", went_on));
    });
    let seen = seen.lock().unwrap().clone();
    let at = |who| seen.iter().find(|(w, _)| *w == who).unwrap().1;
    let c = &m.costs;
    // The store commits once it has invalidated the reader's copy (one transfer across
    // sockets); the reader wakes then and misses once more, then reads the clock. The writer
    // went on at once (its store buffer).
    let expected = at("issued") + (2 * c.other_socket + c.clock_read) / 1000;
    assert!(at("reader").abs_diff(expected) <= 2, "{seen:?}");
    assert!(at("went on") - at("issued") <= 2, "{seen:?}");
    // The timed spinner gave up right after its deadline.
    assert!((20_000..20_100).contains(&at("timed")), "{seen:?}");
    // 100 us of spinning by two threads at 4 ns a pause would be 50,000 iterations.
    assert!(report.simulated_accesses < 100, "{report:?}");
}

/// A write reserved between a spinner's last cache hit and its `pause` (the hit completes
/// before the write does, so it reads the old value) must still end the spinner's sleep: the
/// write has woken the line's sleepers already, so the spinner must not go to sleep on a copy the
/// write has invalidated. The writer's store is swept over every ns around the moment the
/// spinner's first hit is issued; each run must end.
#[test]
fn a_write_reserved_just_after_the_last_hit_still_wakes_the_spinner() {
    let m = machine("x5-4");
    let (a, b) = m.pair_of_class(LatencyClass::OtherSocket).unwrap();
    for delay in 0..300 {
        Simulation::new(m).jitter(0.0).run(move || {
            let flag = Arc::new(AtomicU32::new(0));
            let (f1, f2) = (flag.clone(), flag.clone());
            let writer = thread::spawn_on(a, move || {
                numa_sim::work(delay);
                f1.store(1, Release);
            });
            let reader = thread::spawn_on(b, move || {
                numa_sim::spin_deadline(u64::MAX);
                while f2.load(Acquire) == 0 {
                    numa_sim::pause();
                }
            });
            writer.join();
            reader.join();
        });
    }
}

#[test]
fn undeclared_and_left_loops_run_as_written() {
    let m = machine("x5-4");
    let iterations = Arc::new(Mutex::new(Vec::new()));
    let out = iterations.clone();
    let report = Simulation::new(m).jitter(0.0).run(move || {
        let word = Arc::new(AtomicU32::new(0));
        let w = word.clone();
        let out = out.clone();
        thread::spawn_on(0, move || {
            // An iteration-bounded loop: no declaration, so all 100 iterations run.
            let mut n = 0;
            while w.load(Acquire) == 0 && n < 100 {
                n += 1;
                numa_sim::pause();
            }
            // A declaration, then a write: the loop after it is not covered either.
            numa_sim::spin_deadline(u64::MAX);
            w.fetch_add(0, Relaxed);
            let mut m = 0;
            while w.load(Acquire) == 0 && m < 50 {
                m += 1;
                numa_sim::pause();
            }
            out.lock().unwrap().push((n, m));
        })
        .join();
    });
    assert_eq!(*iterations.lock().unwrap(), [(100, 50)]);
    // One load per iteration, each followed by a `pause`.
    let c = m.costs;
    let expected = (150 * (c.l1_hit + c.pause) + c.rmw_hit) / 1000;
    assert!(
        report.virtual_end_ns.abs_diff(expected) <= 200,
        "{report:?}"
    );
}

#[test]
fn futex_wake_latency_timeout_and_lost_wakeup() {
    let m = machine("2s-generic");
    let c = m.costs;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    Simulation::new(m).jitter(0.0).run(move || {
        let word = Arc::new(AtomicU32::new(0));
        let (w1, w2) = (word.clone(), word.clone());
        let (s1, s2, s3) = (s.clone(), s.clone(), s.clone());
        let sleeper = thread::spawn_on(0, move || {
            while w1.load(Acquire) == 0 {
                numa_sim::futex_wait(&w1, 0, None);
            }
            s1.lock().unwrap().push(("woken", numa_sim::now_ns()));
        });
        let timed = thread::spawn_on(4, move || {
            let other = AtomicU32::new(7);
            numa_sim::futex_wait(&other, 7, Some(3_000));
            s2.lock().unwrap().push(("timed out", numa_sim::now_ns()));
        });
        let waker = thread::spawn_on(2, move || {
            numa_sim::work(50_000);
            let at = numa_sim::clock_ns();
            w2.store(1, Release);
            numa_sim::futex_wake(&*w2, 1);
            s3.lock().unwrap().push(("store", at));
        });
        sleeper.join();
        timed.join();
        waker.join();
    });
    let seen = seen.lock().unwrap().clone();
    let at = |who| seen.iter().find(|(w, _)| *w == who).unwrap().1;
    // The wake is a system call: it waits for the store to commit (invalidating the
    // sleeper's copy, one same-socket transfer). Woken wake_latency after the wake, the sleeper
    // re-reads the word (one same-socket miss) and the clock.
    let woken = at("store") + (2 * c.same_l3 + c.wake_latency + c.clock_read) / 1000;
    assert!(at("woken").abs_diff(woken) <= 2, "{seen:?}");
    assert!(
        (3_000..=3_001 + c.clock_read / 1000).contains(&at("timed out")),
        "{seen:?}"
    );

    let message = panic_message(|| {
        Simulation::new(m).run(|| {
            let t = thread::spawn_on(1, || {
                let word = AtomicU32::new(0);
                numa_sim::futex_wait(&word, 0, None);
            });
            t.join();
        });
    });
    assert!(
        message.contains("deadlock/lost wake-up") && message.contains("futex_wait"),
        "{message}"
    );
}

#[test]
fn a_spinner_nobody_wakes_is_a_deadlock() {
    let m = machine("x5-4");
    let message = panic_message(|| {
        Simulation::new(m).run(|| {
            let t = thread::spawn_on(5, || {
                let flag = AtomicU32::new(0);
                numa_sim::spin_deadline(u64::MAX);
                while flag.load(Acquire) == 0 {
                    numa_sim::pause();
                }
            });
            t.join();
        });
    });
    assert!(
        message.contains("deadlock/lost wake-up") && message.contains("spinning"),
        "{message}"
    );
}

/// A word alone on its 128 bytes: two small heap objects may share a line or not depending on
/// where the allocator puts them, and the simulated costs with them.
#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

#[test]
fn an_undeclared_endless_spin_is_reported() {
    let message = panic_message(|| {
        Simulation::new(machine("2s-generic")).run(|| {
            let t = thread::spawn_on(1, || {
                let flag = AtomicU32::new(0);
                while flag.load(Acquire) == 0 {
                    numa_sim::pause();
                }
            });
            t.join();
        });
    });
    assert!(message.contains("spin_deadline(u64::MAX)"), "{message}");
}

/// 8 threads over 4 sockets take turns on a ticket-style counter and spin on a flag.
fn contended(seed: u64, jitter: f64, lookahead: bool) -> (RunReport, u64) {
    let m = machine("x5-4");
    let sum = Arc::new(Padded::default());
    let out = sum.clone();
    let report = Simulation::new(m)
        .seed(seed)
        .jitter(jitter)
        .lookahead(lookahead)
        .run(move || {
            let turn = Arc::new(Padded::default());
            let workers: Vec<_> = numa_sim::placement(m, 8)
                .unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, hw)| {
                    let (turn, sum) = (turn.clone(), sum.clone());
                    thread::spawn_on(hw, move || {
                        for round in 0..20u64 {
                            numa_sim::spin_deadline(u64::MAX);
                            while turn.load(Acquire) != round * 8 + i as u64 {
                                numa_sim::pause();
                            }
                            sum.fetch_add(numa_sim::now_ns() ^ numa_sim::thread_seed(), Relaxed);
                            numa_sim::work(100);
                            turn.fetch_add(1, Release);
                        }
                    })
                })
                .collect();
            workers.into_iter().for_each(|w| w.join());
        });
    (report, out.load(SeqCst))
}

fn same_figures(a: &RunReport, b: &RunReport) -> bool {
    a.virtual_end_ns == b.virtual_end_ns && a.simulated_accesses == b.simulated_accesses
}

#[test]
fn runs_repeat_exactly_and_seeds_differ() {
    let (a, sum_a) = contended(1, 0.05, true);
    let (b, sum_b) = contended(1, 0.05, true);
    assert!(same_figures(&a, &b), "{a:?} {b:?}");
    assert_eq!(a.scheduling_decisions, b.scheduling_decisions);
    assert_eq!(sum_a, sum_b);
    let (c, sum_c) = contended(2, 0.05, true);
    assert!(
        c.virtual_end_ns != a.virtual_end_ns && sum_c != sum_a,
        "{a:?} {c:?}"
    );
}

#[test]
fn lookahead_changes_nothing_but_decisions() {
    let (on, sum_on) = contended(3, 0.05, true);
    let (off, sum_off) = contended(3, 0.05, false);
    assert!(same_figures(&on, &off), "{on:?} {off:?}");
    assert_eq!(sum_on, sum_off);
    assert!(
        on.scheduling_decisions < off.scheduling_decisions,
        "{on:?} {off:?}"
    );
}

#[test]
fn threads_see_their_own_thread_locals_and_topology() {
    numa_sim::thread_local! {
        static SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    let m = machine("kunpeng920");
    let nodes = Arc::new(Mutex::new(Vec::new()));
    let n = nodes.clone();
    Simulation::new(m).run(move || {
        assert_eq!(numa_sim::node_count(), 4);
        let ts: Vec<_> = numa_sim::placement(m, 8)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let n = n.clone();
                thread::spawn_on(hw, move || {
                    SLOT.with(|s| {
                        assert_eq!(s.get(), usize::MAX);
                        s.set(hw);
                    });
                    numa_sim::yield_now();
                    assert_eq!(SLOT.with(std::cell::Cell::get), hw);
                    n.lock().unwrap().push(numa_sim::current_node());
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join());
    });
    let mut nodes = nodes.lock().unwrap().clone();
    nodes.sort_unstable();
    assert_eq!(nodes, [0, 0, 1, 1, 2, 2, 3, 3]);
}

/// Two threads increment with a load and a store split by another atomic access.
fn racy_increment() {
    let x = Arc::new(AtomicU32::new(0));
    let other = Arc::new(AtomicU32::new(0));
    let ts: Vec<_> = (0..2)
        .map(|hw| {
            let (x, other) = (x.clone(), other.clone());
            thread::spawn_on(hw, move || {
                let v = x.load(Relaxed);
                other.fetch_add(1, Relaxed);
                x.store(v + 1, Relaxed);
            })
        })
        .collect();
    ts.into_iter().for_each(|t| t.join());
    assert_eq!(x.load(Relaxed), 2, "lost update");
}

#[test]
fn random_mode_finds_a_planted_bug_and_passes_a_correct_program() {
    let m = machine("2s-generic");
    let message = panic_message(|| numa_sim::check_random(m, 42, 300, racy_increment));
    assert!(message.contains("lost update"), "{message}");
    let message = panic_message(|| numa_sim::check_pct(m, 42, 300, 3, racy_increment));
    assert!(message.contains("lost update"), "{message}");
    let report = numa_sim::check_random(m, 42, 2000, || {
        let x = Arc::new(AtomicU32::new(0));
        let ts: Vec<_> = (0..3)
            .map(|hw| {
                let x = x.clone();
                thread::spawn_on(hw, move || {
                    x.fetch_add(1, Relaxed);
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join());
        assert_eq!(x.load(Relaxed), 3);
    });
    assert_eq!(report.executions, 2000);
}

#[test]
fn random_mode_futex_blocks_and_wakes() {
    let m = machine("2s-generic");
    numa_sim::check_pct(m, 7, 300, 2, || {
        let word = Arc::new(AtomicU32::new(0));
        let w = word.clone();
        let sleeper = thread::spawn_on(0, move || {
            while w.load(Acquire) == 0 {
                numa_sim::futex_wait(&w, 0, None);
            }
        });
        let w = word.clone();
        let timed = thread::spawn_on(1, move || {
            let start = numa_sim::now_ns();
            while w.load(Acquire) == 0 && numa_sim::now_ns() < start + 10_000 {
                numa_sim::futex_wait(&w, 0, Some(start + 10_000));
            }
        });
        word.store(1, Release);
        numa_sim::futex_wake(&*word, u32::MAX);
        sleeper.join();
        timed.join();
    });
}

#[test]
fn clear_errors() {
    let m = machine("x5-4");
    let message = panic_message(|| {
        Simulation::new(m).run(|| {
            let a = thread::spawn_on(3, || {});
            let b = thread::spawn_on(3, || {});
            a.join();
            b.join();
        });
    });
    assert!(
        message.contains("hardware thread 3") && message.contains("already runs"),
        "{message}"
    );
    let message = panic_message(|| {
        Simulation::new(m).run(|| thread::spawn_on(144, || {}).join());
    });
    assert!(message.contains("144 hardware threads"), "{message}");
    let err = numa_sim::placement(m, 200).unwrap_err().to_string();
    assert!(err.contains("200") && err.contains("144"), "{err}");
    let err = Machine::by_name("x5-2").unwrap_err().to_string();
    assert!(err.contains("x5-2") && err.contains("kunpeng920"), "{err}");
    let message = panic_message(|| {
        Simulation::new(m).run(|| {
            let _forgotten = thread::spawn_on(0, || numa_sim::work(10));
        });
    });
    assert!(message.contains("join every thread"), "{message}");
}

#[test]
fn a_hundred_and_forty_four_threads() {
    let m = machine("x5-4");
    let report = Simulation::new(m).run(move || {
        let word = Arc::new(AtomicU64::new(0));
        let ts: Vec<_> = numa_sim::placement(m, 144)
            .unwrap()
            .into_iter()
            .map(|hw| {
                let word = word.clone();
                thread::spawn_on(hw, move || {
                    for _ in 0..20 {
                        word.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join());
        assert_eq!(word.load(Relaxed), 144 * 20);
    });
    assert!(report.simulated_accesses >= 144 * 20);
}

#[test]
fn tallies_count_events_for_free() {
    // Two threads each count 3 events of slot 1 and one of slot 7 around a fixed amount of work;
    // the counts come back in the report and the virtual time is that of the work alone.
    let run = |count: bool| {
        Simulation::new(machine("x5-4")).jitter(0.0).run(move || {
            let workers: Vec<_> = [0, 36]
                .into_iter()
                .map(|hw| {
                    thread::spawn_on(hw, move || {
                        for _ in 0..3 {
                            if count {
                                numa_sim::tally(1);
                            }
                            numa_sim::work(100);
                        }
                        if count {
                            numa_sim::tally(7);
                        }
                    })
                })
                .collect();
            workers.into_iter().for_each(|w| w.join());
        })
    };
    let counted = run(true);
    let mut expected = [0; numa_sim::TALLY_SLOTS];
    expected[1] = 6;
    expected[7] = 2;
    assert_eq!(counted.tallies, expected);
    let plain = run(false);
    assert_eq!(plain.tallies, [0; numa_sim::TALLY_SLOTS]);
    assert_eq!(counted.virtual_end_ns, plain.virtual_end_ns);
    // Outside a simulation: nothing happens; an out-of-range slot is a clear panic.
    numa_sim::tally(0);
    let msg = panic_message(|| numa_sim::tally(numa_sim::TALLY_SLOTS));
    let bound = numa_sim::TALLY_SLOTS;
    assert!(
        msg.contains(&format!("slot {bound} is not below {bound}")),
        "{msg}"
    );
}

#[test]
fn a_traced_run_records_each_access_and_changes_nothing() {
    // hw 0 (socket 0) writes a line; hw 36 (socket 1) reads it 1 us later, then twice more.
    let m = machine("x5-4");
    let program = || {
        let flag = Arc::new(AtomicU32::new(0));
        let f = flag.clone();
        let writer = thread::spawn_on(0, move || f.store(1, Relaxed));
        let f = flag.clone();
        let reader = thread::spawn_on(36, move || {
            numa_sim::work(1000);
            for _ in 0..3 {
                assert_eq!(f.load(Relaxed), 1);
            }
        });
        writer.join();
        reader.join();
    };
    let sim = Simulation::new(m).jitter(0.0);
    let plain = sim.run(program);
    let (traced, accesses) = sim.run_traced(0, 2_000, program);
    assert_eq!(traced.virtual_end_ns, plain.virtual_end_ns);
    assert_eq!(traced.simulated_accesses, plain.simulated_accesses);
    let kinds: Vec<(usize, numa_sim::AccessKind, bool)> =
        accesses.iter().map(|a| (a.hw, a.kind, a.hit)).collect();
    use numa_sim::AccessKind::{Load, Store};
    assert_eq!(
        kinds,
        [
            (0, Store, false),
            (36, Load, false),
            (36, Load, true),
            (36, Load, true)
        ],
        "{accesses:?}"
    );
    // The reader's first load crosses sockets: the other-socket latency, exactly.
    let miss = accesses[1];
    assert_eq!(
        miss.completed_ps - miss.issued_ps,
        m.costs.other_socket,
        "{miss:?}"
    );
    assert_eq!(miss.address >> 6, accesses[0].address >> 6);
    // A window that ends before the reader's first look records only the write.
    let (_, early) = sim.run_traced(0, 500, program);
    assert_eq!(early.len(), 1, "{early:?}");
}

#[test]
fn a_trace_records_futex_sleeps_and_wakes_on_the_same_timeline() {
    // hw 1 sleeps on a word; hw 0 sets it 2 us in and wakes it: the sleeper runs
    // `wake_latency` after the wake. A second wake finds nobody.
    let m = machine("x5-4");
    let program = || {
        let word = Arc::new(AtomicU32::new(0));
        let w = word.clone();
        let sleeper = thread::spawn_on(1, move || {
            while w.load(Relaxed) == 0 {
                numa_sim::futex_wait(&w, 0, None);
            }
        });
        let w = word.clone();
        let waker = thread::spawn_on(0, move || {
            numa_sim::work(2_000);
            w.store(1, Relaxed);
            numa_sim::futex_wake(&*w, 1);
            numa_sim::futex_wake(&*w, 1);
        });
        sleeper.join();
        waker.join();
    };
    let sim = Simulation::new(m).jitter(0.0);
    let plain = sim.run(program);
    let (traced, mut entries) = sim.run_traced(0, 20_000, program);
    entries.sort_by_key(|a| a.issued_ps);
    assert_eq!(traced.virtual_end_ns, plain.virtual_end_ns);
    assert_eq!(traced.simulated_accesses, plain.simulated_accesses);
    use numa_sim::AccessKind::{Sleep, Wake};
    let futex: Vec<_> = entries
        .iter()
        .filter(|a| matches!(a.kind, Sleep | Wake))
        .collect();
    let summary: Vec<(usize, numa_sim::AccessKind, bool)> =
        futex.iter().map(|a| (a.hw, a.kind, a.hit)).collect();
    assert_eq!(
        summary,
        [(1, Sleep, true), (0, Wake, true), (0, Wake, false)],
        "{entries:?}"
    );
    let (sleep, wake, idle) = (futex[0], futex[1], futex[2]);
    assert!(sleep.issued_ps < wake.issued_ps, "{entries:?}");
    assert_eq!(sleep.completed_ps, wake.issued_ps + m.costs.wake_latency);
    assert_eq!(wake.completed_ps - wake.issued_ps, m.costs.futex_wake);
    assert_eq!(idle.issued_ps, wake.completed_ps);
    assert_eq!(sleep.address, wake.address);
    // A sleep is recorded if it overlaps the window, even if it began before (1.6 us in, here).
    let sleeps = |from, to| {
        let (_, entries) = sim.run_traced(from, to, program);
        entries.iter().filter(|a| a.kind == Sleep).count()
    };
    assert_eq!(sleeps(2_000, 20_000), 1);
    assert_eq!(sleeps(0, 1_000), 0);
    assert_eq!(sleeps(7_100, 20_000), 0);
}

/// Linux checks a futex word before it sleeps and returns from a wake that finds nobody
/// asleep: both cost a system call that returns at once (`Costs::syscall`), not a sleep or a
/// wake. A sleep costs `futex_wait` and a wake that wakes someone `futex_wake`.
#[test]
fn futex_calls_that_do_nothing_cost_a_system_call() {
    let m = machine("x5-4");
    let c = m.costs;
    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    Simulation::new(m).jitter(0.0).run(move || {
        let o = o.clone();
        thread::spawn_on(0, move || {
            let word = AtomicU32::new(1);
            word.load(Relaxed); // owned: the check below hits
            let t0 = numa_sim::clock_ns();
            numa_sim::futex_wait(&word, 0, None); // the word is not 0: returns
            let t1 = numa_sim::clock_ns();
            numa_sim::futex_wake(&word, 1); // nobody sleeps on it
            let t2 = numa_sim::clock_ns();
            o.lock().unwrap().extend([t1 - t0, t2 - t1]);
        })
        .join();
    });
    let out = out.lock().unwrap().clone();
    // The failed check: the system call, then the load (a hit) and its issue time.
    assert_eq!(out[0], (c.syscall + c.l1_hit + c.issue) / 1000, "{out:?}");
    assert_eq!(out[1], c.syscall / 1000, "{out:?}");
    assert!(c.syscall < c.futex_wait && c.syscall < c.futex_wake);
}

/// `cycles` and `div64` charge straight-line code at the machine's clock and its division
/// latency, and every access pays its issue time: more code costs more.
#[test]
fn instructions_cost_issue_time() {
    for m in Machine::presets() {
        let c = m.costs;
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        Simulation::new(m).jitter(0.0).run(move || {
            let o = o.clone();
            thread::spawn_on(0, move || {
                let word = AtomicU64::new(0);
                word.load(Relaxed);
                let t0 = numa_sim::clock_ns();
                numa_sim::cycles(1000);
                let t1 = numa_sim::clock_ns();
                numa_sim::div64();
                numa_sim::div64();
                let t2 = numa_sim::clock_ns();
                for _ in 0..100 {
                    word.load(Relaxed);
                }
                let t3 = numa_sim::clock_ns();
                o.lock().unwrap().extend([t1 - t0, t2 - t1, t3 - t2]);
            })
            .join();
        });
        let out = out.lock().unwrap().clone();
        assert!(
            out[0].abs_diff(1000 * c.cycle / 1000) <= 1,
            "{} {out:?}",
            m.name
        );
        assert!(
            out[1].abs_diff(2 * c.div64 / 1000) <= 1,
            "{} {out:?}",
            m.name
        );
        assert!(
            out[2].abs_diff(100 * (c.l1_hit + c.issue) / 1000) <= 1,
            "{} {out:?}",
            m.name
        );
        assert!(
            c.issue > 0 && c.cycle > 0 && c.div64 >= 9 * c.cycle,
            "{}",
            m.name
        );
    }
}

/// `kernel_indirect_call` charges the preset's retpoline: 32 cycles at the preset's clock where
/// the kernel of its published runs retpolines (Haswell, Zen 3), nothing where the CPU has
/// enhanced or automatic IBRS (Cascade Lake, Zen 4) or is an Arm core.
#[test]
fn kernel_indirect_calls_pay_the_retpoline_where_the_kernel_uses_one() {
    for m in Machine::presets() {
        let out = Arc::new(Mutex::new(0));
        let o = out.clone();
        Simulation::new(m).jitter(0.0).run(move || {
            let o = o.clone();
            thread::spawn_on(0, move || {
                let t0 = numa_sim::clock_ns();
                for _ in 0..10 {
                    numa_sim::kernel_indirect_call();
                }
                *o.lock().unwrap() = numa_sim::clock_ns() - t0;
            })
            .join();
        });
        let ten_calls = *out.lock().unwrap();
        let retpoline = matches!(m.name, "x5-4" | "e5-2690v3-2s" | "epyc-2s");
        let expected = if retpoline {
            10 * 32 * m.costs.cycle / 1000
        } else {
            0
        };
        assert!(
            ten_calls.abs_diff(expected) <= 1,
            "{}: ten calls took {ten_calls} ns, expected {expected}",
            m.name
        );
    }
    numa_sim::kernel_indirect_call(); // outside a simulation: nothing to charge
}

/// Outside a simulation the futex is not emulated: a wait whose word still holds the expected
/// value returns at once (a spurious return, which the contract allows), and a wake is a no-op.
/// Code that sleeps on real threads brings its own platform futex.
#[test]
fn futex_outside_a_simulation_returns_at_once() {
    let word = AtomicU32::new(7);
    assert!(!numa_sim::in_simulation());
    let started = std::time::Instant::now();
    numa_sim::futex_wait(&word, 7, None);
    numa_sim::futex_wake(&word, u32::MAX);
    // Returned without sleeping (no deadline was given, so a sleep would never have ended).
    assert_eq!(word.load(Relaxed), 7);
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// Accesses to one line are reserved in the order of their issue times, including a locked
/// instruction issued behind buffered stores: it waits for them to commit, and only then, as
/// the earliest thread, takes its turn on the line (it used to be reserved at the later time
/// while other threads' earlier requests for the line were still to come).
#[test]
fn a_locked_instruction_behind_buffered_stores_is_reserved_in_issue_order() {
    #[repr(align(64))]
    struct Line(AtomicU64);
    let m = machine("x5-4");
    // Four threads on four sockets; each writes its own line, which the next one reads (so
    // the write misses and waits in the store buffer), then increments the shared counter.
    let hws = [0, 36, 72, 108];
    let (report, trace) = Simulation::new(m).run_traced(0, u64::MAX / 1000, move || {
        let shared = Arc::new(Line(AtomicU64::new(0)));
        let own: Arc<Vec<Line>> = Arc::new((0..4).map(|_| Line(AtomicU64::new(0))).collect());
        let workers: Vec<_> = hws
            .iter()
            .enumerate()
            .map(|(i, &hw)| {
                let (shared, own) = (shared.clone(), own.clone());
                thread::spawn_on(hw, move || {
                    for k in 0..200u64 {
                        own[i].0.store(k, Relaxed);
                        let _ = own[(i + 1) % 4].0.load(Relaxed);
                        shared.0.fetch_add(1, Relaxed);
                        let _ = shared.0.load(Relaxed);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
        assert_eq!(shared.0.load(Relaxed), 800);
    });
    assert!(report.simulated_accesses > 3000, "{report:?}");
    let mut last_issue = std::collections::HashMap::new();
    let mut rmws = 0;
    for a in &trace {
        if a.kind == numa_sim::AccessKind::Rmw {
            rmws += 1;
        }
        let line = a.address >> 6;
        let last = last_issue.entry(line).or_insert(0);
        assert!(
            a.issued_ps >= *last,
            "{a:?} reserved after an access to its line issued at {last} ps"
        );
        *last = a.issued_ps;
    }
    assert_eq!(rmws, 800);
}

/// `kernel_prefetchw`: the thread goes on after the instruction's issue while the line comes,
/// and its first load of the line waits for the fill; on a CPU with a prefetch for writing the
/// other copies are invalidated (the holder's next load misses), on one without (Haswell:
/// `x5-4`) the prefetch reads and the holder keeps its copy.
#[test]
fn a_prefetch_does_not_stall_and_its_line_is_read_after_the_fill() {
    #[repr(align(64))]
    struct Line(AtomicU64);
    for (name, writes) in [("x5-4", false), ("2s-generic", true)] {
        let m = machine(name);
        assert_eq!(m.write_prefetch, writes, "{name}");
        let other_socket = m.costs.other_socket;
        let (_, trace) = Simulation::new(m)
            .jitter(0.0)
            .run_traced(0, u64::MAX / 1000, move || {
                let line = Arc::new(Line(AtomicU64::new(7)));
                let theirs = line.clone();
                // The holder on socket 0 reads the line at once and again at 2 µs.
                let holder = thread::spawn_on(0, move || {
                    assert_eq!(line.0.load(Relaxed), 7);
                    numa_sim::work(2000);
                    assert_eq!(line.0.load(Relaxed), 7);
                });
                // Socket 1 prefetches it at 1 µs and reads it right after.
                let prefetcher = thread::spawn_on(m.hw_threads() / m.sockets, move || {
                    numa_sim::work(1000);
                    numa_sim::kernel_prefetchw(std::ptr::from_ref(&theirs.0).cast());
                    assert_eq!(theirs.0.load(Relaxed), 7);
                });
                holder.join();
                prefetcher.join();
            });
        let prefetcher_hw = m.hw_threads() / m.sockets;
        let mine: Vec<_> = trace.iter().filter(|a| a.hw == prefetcher_hw).collect();
        assert_eq!(mine.len(), 2, "{name}: {trace:#?}");
        let (prefetch, load) = (mine[0], mine[1]);
        assert_eq!(prefetch.issued_ps, 1_000_000, "{name}: {prefetch:?}");
        assert_eq!(
            prefetch.kind,
            if writes {
                numa_sim::AccessKind::Store
            } else {
                numa_sim::AccessKind::Load
            },
            "{name}"
        );
        assert_eq!(
            prefetch.completed_ps - prefetch.issued_ps,
            other_socket,
            "{name}"
        );
        // Issued right after the prefetch's issue, the load hits and completes at the fill.
        assert!(
            load.issued_ps < prefetch.issued_ps + 5_000,
            "{name}: {load:?}"
        );
        assert!(load.hit, "{name}: {load:?}");
        assert_eq!(load.completed_ps, prefetch.completed_ps, "{name}: {load:?}");
        // The holder's second load: a hit unless the prefetch took its copy away.
        let second = trace
            .iter()
            .filter(|a| a.hw == 0)
            .nth(1)
            .expect("the holder's second load");
        assert_eq!(second.hit, !writes, "{name}: {second:?}");
    }
}
