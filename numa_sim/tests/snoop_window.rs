//! `Simulation::snoop_window`: a line's holders keep it until a request's snoop reaches them
//! (two thirds of the request's transfer after its issue, or a third after the transfer the
//! home held it behind), and what they do until then comes before the request.

use std::sync::Arc;
use std::sync::atomic::AtomicU64 as Seen;
use std::sync::atomic::Ordering::Relaxed;

use numa_sim::atomic::AtomicU64;
use numa_sim::{Access, AccessKind, Machine, Simulation, thread};

#[repr(align(64))]
struct Line(AtomicU64);

fn x5_4() -> &'static Machine {
    Machine::by_name("x5-4").unwrap()
}

/// The first hardware thread of `socket` on the X5-4.
fn on_socket(socket: usize) -> usize {
    let m = x5_4();
    socket * m.hw_threads() / m.sockets
}

/// The owner (socket 0) writes 1 to a line, then writes 2 at `second_write_ns`; a reader on
/// socket 1 loads it at 1,000 ns. Returns what the reader read, and the owner's second write
/// and the reader's load as traced.
fn owner_writes_while_a_read_is_in_flight(
    window: bool,
    second_write_ns: u64,
) -> (u64, Access, Access) {
    let (owner, reader) = (on_socket(0), on_socket(1));
    let read = Arc::new(Seen::new(0));
    let result = read.clone();
    let (_, trace) = Simulation::new(x5_4())
        .jitter(0.0)
        .snoop_window(window)
        .run_traced(0, u64::MAX / 1000, move || {
            let seen = result.clone();
            let line = Arc::new(Line(AtomicU64::new(0)));
            let theirs = line.clone();
            let w = thread::spawn_on(owner, move || {
                line.0.store(1, Relaxed);
                numa_sim::work(second_write_ns - numa_sim::clock_ns());
                line.0.store(2, Relaxed);
            });
            let r = thread::spawn_on(reader, move || {
                numa_sim::work(1000);
                seen.store(theirs.0.load(Relaxed), Relaxed);
            });
            w.join();
            r.join();
        });
    let write = *trace
        .iter()
        .filter(|a| a.hw == owner && a.kind == AccessKind::Store)
        .nth(1)
        .expect("the owner's second write");
    let load = *trace
        .iter()
        .find(|a| a.hw == reader && a.kind == AccessKind::Load)
        .expect("the reader's load");
    (read.load(Relaxed), write, load)
}

/// The reader's request reaches the owner 80 ns after its issue (two thirds of the X5-4's
/// 120 ns cross-socket transfer): a write before that hits and is what the reader gets; a
/// write after it must take the line back and comes after the read. Without the window the
/// line is the reader's from the issue on, and the reader gets the first value either way.
#[test]
fn the_owner_writes_until_the_readers_snoop_arrives() {
    let transfer = x5_4().costs.other_socket;
    // 20 ns after the read's issue, before its snoop arrives.
    let (value, write, load) = owner_writes_while_a_read_is_in_flight(true, 1020);
    assert_eq!(value, 2, "{write:?} {load:?}");
    assert!(write.hit, "{write:?}");
    assert_eq!(load.completed_ps - load.issued_ps, transfer, "{load:?}");
    // 100 ns after it: the snoop has been there.
    let (value, write, load) = owner_writes_while_a_read_is_in_flight(true, 1100);
    assert_eq!(value, 1, "{write:?} {load:?}");
    assert!(!write.hit, "{write:?}");
    // Off: the read owns its turn from its issue.
    let (value, write, _) = owner_writes_while_a_read_is_in_flight(false, 1020);
    assert_eq!(value, 1);
    assert!(!write.hit, "{write:?}");
}

/// Thread A (socket 0) takes a line from its holder (socket 2) with a locked add at 1,000 ns
/// and adds again right after; thread B (socket 1) asks for the line 10 ns after A's first add.
/// The line's home serves B after A's transfer, and B's snoop reaches A a third of a transfer
/// after that: A's second add hits, and B reads both adds, one transfer after A's. Off, B's
/// read is reserved at its issue and A's second add must take the line back.
#[test]
fn a_request_held_at_the_home_leaves_the_previous_requester_a_window() {
    let m = x5_4();
    let transfer = m.costs.other_socket;
    for window in [true, false] {
        let (a, b, holder) = (on_socket(0), on_socket(1), on_socket(2));
        let read = Arc::new(Seen::new(0));
        let result = read.clone();
        let (_, trace) = Simulation::new(m)
            .jitter(0.0)
            .snoop_window(window)
            .run_traced(0, u64::MAX / 1000, move || {
                let seen = result.clone();
                let line = Arc::new(Line(AtomicU64::new(0)));
                let (la, lb) = (line.clone(), line.clone());
                thread::spawn_on(holder, move || line.0.store(0, Relaxed)).join();
                let ta = thread::spawn_on(a, move || {
                    numa_sim::work(1000 - numa_sim::clock_ns());
                    la.0.fetch_add(1, Relaxed);
                    la.0.fetch_add(1, Relaxed);
                });
                let tb = thread::spawn_on(b, move || {
                    numa_sim::work(1010 - numa_sim::clock_ns());
                    seen.store(lb.0.load(Relaxed), Relaxed);
                });
                ta.join();
                tb.join();
            });
        let adds: Vec<&Access> = trace.iter().filter(|x| x.hw == a).collect();
        let load = trace.iter().find(|x| x.hw == b).expect("B's load");
        assert_eq!(adds.len(), 2, "{trace:#?}");
        assert_eq!(adds[0].completed_ps - adds[0].issued_ps, transfer);
        if window {
            assert!(adds[1].hit, "{:?}", adds[1]);
            assert_eq!(read.load(Relaxed), 2);
            assert_eq!(
                load.completed_ps,
                adds[0].completed_ps + transfer,
                "{load:?}"
            );
        } else {
            assert!(!adds[1].hit, "{:?}", adds[1]);
            assert_eq!(read.load(Relaxed), 1);
        }
    }
}

/// The presets' transfer costs are CAS ping-pong and idle-miss measurements: a line handed
/// back and forth between two threads costs the same per round with the window as without it
/// (each request waits for the other thread's write, so no holder's window is ever used).
#[test]
fn the_window_leaves_a_ping_pong_round_alone() {
    let run = |window: bool| {
        Simulation::new(x5_4())
            .jitter(0.0)
            .snoop_window(window)
            .run(move || {
                let flag = Arc::new(Line(AtomicU64::new(0)));
                let f = flag.clone();
                let pong = thread::spawn_on(on_socket(1), move || {
                    for i in 0..100u64 {
                        while f
                            .0
                            .compare_exchange(2 * i + 1, 2 * i + 2, Relaxed, Relaxed)
                            .is_err()
                        {}
                    }
                });
                let ping = thread::spawn_on(on_socket(0), move || {
                    for i in 0..100u64 {
                        while flag
                            .0
                            .compare_exchange(2 * i, 2 * i + 1, Relaxed, Relaxed)
                            .is_err()
                        {}
                    }
                });
                ping.join();
                pong.join();
            })
            .virtual_end_ns
    };
    assert_eq!(run(true), run(false));
}
