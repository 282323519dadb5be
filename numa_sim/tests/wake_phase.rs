//! `Simulation::wake_phase`: a spinner woken by a write looks again at a phase of its loop's
//! iteration (a `pause` and a hit) after the write, drawn from the seed for each write, so that
//! the spinners one write wakes do not take their turns in the same order every time.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use numa_sim::atomic::AtomicU64;
use numa_sim::{AccessKind, Machine, Simulation, thread};

#[repr(align(64))]
struct Line(AtomicU64);

const SPINNERS: usize = 6;
const ROUNDS: u64 = 40;

/// A starter (socket 0) releases `SPINNERS` spinners (one per hardware thread of socket 1) by
/// writing round `r` to a flag, `ROUNDS` times; each woken spinner adds 1 to a counter and
/// waits for the next round once all have. Returns, for each round, the order in which the
/// spinners' adds were issued, and the issue times of the first load each spinner made after a
/// round's write together with that write's completion.
fn rounds(phase: bool) -> (Vec<Vec<usize>>, Vec<(u64, u64)>) {
    let m = Machine::by_name("x5-4").unwrap();
    let socket = m.hw_threads() / m.sockets;
    let (_, trace) = Simulation::new(m).jitter(0.0).wake_phase(phase).run_traced(
        0,
        u64::MAX / 1000,
        move || {
            let flag = Arc::new(Line(AtomicU64::new(0)));
            let count = Arc::new(Line(AtomicU64::new(0)));
            let spinners: Vec<_> = (0..SPINNERS)
                .map(|i| {
                    let (flag, count) = (flag.clone(), count.clone());
                    thread::spawn_on(socket + 2 * i, move || {
                        for r in 1..=ROUNDS {
                            numa_sim::spin_deadline(u64::MAX);
                            while flag.0.load(Acquire) != r {
                                numa_sim::pause();
                            }
                            count.0.fetch_add(1, Relaxed);
                        }
                    })
                })
                .collect();
            let starter = thread::spawn_on(0, move || {
                for r in 1..=ROUNDS {
                    flag.0.store(r, Release);
                    numa_sim::spin_deadline(u64::MAX);
                    while count.0.load(Acquire) != r * SPINNERS as u64 {
                        numa_sim::pause();
                    }
                }
            });
            starter.join();
            spinners.into_iter().for_each(|s| s.join());
        },
    );
    let rmws: Vec<_> = trace.iter().filter(|a| a.kind == AccessKind::Rmw).collect();
    assert_eq!(rmws.len(), SPINNERS * ROUNDS as usize);
    let orders = rmws
        .chunks(SPINNERS)
        .map(|round| round.iter().map(|a| a.hw).collect())
        .collect();
    // The flag's writes (the starter's stores) and the first load after each by each spinner,
    // from the second round on (the first write comes before the spinners wait).
    let writes: Vec<_> = trace
        .iter()
        .filter(|a| a.hw == 0 && a.kind == AccessKind::Store)
        .collect();
    let mut looks = Vec::new();
    for w in writes.iter().skip(1) {
        for i in 0..SPINNERS {
            if let Some(look) = trace.iter().find(|a| {
                a.hw == socket + 2 * i
                    && a.kind == AccessKind::Load
                    && a.issued_ps >= w.completed_ps
                    && a.address == w.address
            }) {
                looks.push((look.issued_ps, w.completed_ps));
            }
        }
    }
    (orders, looks)
}

/// Off, the spinners look again when the write completes, so each round's adds go in the same
/// order; on, each looks within one iteration after it (the first look is a miss, issued
/// then), and the order changes from round to round; the same seed gives the same rounds.
#[test]
fn woken_spinners_look_again_within_an_iteration_in_a_drawn_order() {
    let m = Machine::by_name("x5-4").unwrap();
    let iteration = m.costs.pause + m.costs.l1_hit;
    let (fixed, looks) = rounds(false);
    assert!(
        looks.iter().all(|&(look, write)| look == write),
        "{looks:?}"
    );
    assert!(fixed.windows(2).all(|w| w[0] == w[1]), "{fixed:?}");
    let (drawn, looks) = rounds(true);
    assert!(!looks.is_empty());
    assert!(
        looks
            .iter()
            .all(|&(look, write)| (write..write + iteration).contains(&look)),
        "{looks:?}"
    );
    assert!(looks.iter().any(|&(look, write)| look > write), "{looks:?}");
    let distinct: std::collections::HashSet<_> = drawn.iter().collect();
    assert!(distinct.len() > ROUNDS as usize / 2, "{drawn:?}");
    assert_eq!(rounds(true).0, drawn);
}
