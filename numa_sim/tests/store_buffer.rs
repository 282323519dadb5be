//! The store buffer's timing contract (x86-TSO as far as time goes): a plain store does not
//! stall its thread; stores commit in order; a locked read-modify-write, an `SeqCst` fence and
//! a system call drain the buffer; a load of a line with a buffered store forwards from it (or,
//! with `StoreForwarding::Address`, only a load of the store's own address does, and a load of
//! another address waits for the line the store is fetching), and loads of other lines do not
//! wait; a full buffer stalls; an access already in flight when
//! another thread's store is buffered is ordered before that store, in value and in time.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::{Arc, Mutex};

use numa_sim::atomic::{AtomicU32, fence};
use numa_sim::{AccessKind, LatencyClass, Machine, Simulation, StoreForwarding, thread};

/// `a == b` give or take the rounding of two clock readings to whole ns.
fn near(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= 1
}

fn x5_4() -> &'static Machine {
    Machine::by_name("x5-4").unwrap()
}

/// Two hardware threads on different sockets of the X5-4: (writer, reader).
fn far_pair() -> (usize, usize) {
    x5_4().pair_of_class(LatencyClass::OtherSocket).unwrap()
}

/// A word on a line of its own.
#[repr(align(64))]
struct Line(AtomicU32);

impl std::ops::Deref for Line {
    type Target = AtomicU32;

    fn deref(&self) -> &AtomicU32 {
        &self.0
    }
}

/// Lines of their own, so that every access below costs exactly one known transfer.
fn lines(n: usize) -> Arc<Vec<Line>> {
    Arc::new((0..n).map(|_| Line(AtomicU32::new(0))).collect())
}

/// Runs `writer` on one socket after a thread on another socket has read every line of
/// `lines(n)` (so each store must invalidate a copy one socket away), with store buffers on or
/// off; returns what `writer` returned.
fn after_remote_reads<R: Send + 'static>(
    buffered: bool,
    n: usize,
    writer: impl Fn(&[Line]) -> R + Send + Sync + 'static,
) -> R {
    let (a, b) = far_pair();
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    let writer = Arc::new(writer);
    Simulation::new(x5_4())
        .jitter(0.0)
        .store_buffers(buffered)
        .run(move || {
            let l = lines(n);
            // The writer owns every line first, then the reader takes a shared copy of each.
            let lw = l.clone();
            thread::spawn_on(a, move || lw.iter().for_each(|x| x.store(0, Relaxed))).join();
            let lr = l.clone();
            thread::spawn_on(b, move || {
                for x in lr.iter() {
                    x.load(Relaxed);
                }
            })
            .join();
            let (lw, w, o) = (l.clone(), writer.clone(), o.clone());
            let result = thread::spawn_on(a, move || w(&lw)).join();
            *o.lock().unwrap() = Some(result);
        });
    out.lock().unwrap().take().unwrap()
}

#[test]
fn a_buffered_store_does_not_stall_its_thread() {
    let c = x5_4().costs;
    let store = |lines: &[Line]| {
        let before = numa_sim::clock_ns();
        lines[0].store(1, Release);
        numa_sim::clock_ns() - before
    };
    // Buffered: one cache hit's time (1.5 ns, rounded down). Unbuffered: the invalidation of
    // the copy on the other socket.
    assert!(near(after_remote_reads(true, 1, store), c.l1_hit / 1000));
    assert!(near(
        after_remote_reads(false, 1, store),
        c.other_socket / 1000
    ));
}

#[test]
fn a_locked_rmw_and_an_seqcst_fence_drain_the_buffer() {
    let c = x5_4().costs;
    // A store to a line shared with the other socket, then an RMW on a line this thread owns:
    // the RMW waits for the store's commit.
    let rmw = after_remote_reads(true, 2, |l| {
        let before = numa_sim::clock_ns();
        l[0].store(1, Release);
        let owned = AtomicU32::new(0);
        owned.fetch_add(1, SeqCst); // a miss from memory first: take the line...
        let start = numa_sim::clock_ns();
        l[1].store(1, Release);
        owned.fetch_add(1, SeqCst); // ...then time the drain with a hit
        (start - before, numa_sim::clock_ns() - start)
    });
    // The second RMW hits its line, but only after the second store (another invalidation
    // across sockets) has committed; each access is followed by its issue time.
    assert!(
        near(rmw.1, (c.other_socket + c.rmw_hit + c.issue) / 1000),
        "{rmw:?}"
    );
    let fences = after_remote_reads(true, 2, |l| {
        let t0 = numa_sim::clock_ns();
        l[0].store(1, Release);
        fence(Acquire);
        fence(Release);
        let t1 = numa_sim::clock_ns();
        fence(SeqCst);
        let t2 = numa_sim::clock_ns();
        l[1].store(1, Release);
        numa_sim::yield_now(); // a system call drains too
        (t1 - t0, t2 - t0, numa_sim::clock_ns() - t2)
    });
    assert!(
        near(fences.0, c.l1_hit / 1000),
        "weaker fences wait for nothing: {fences:?}"
    );
    assert!(near(fences.1, c.other_socket / 1000), "{fences:?}");
    assert!(
        near(fences.2, (c.other_socket + c.yield_) / 1000),
        "yield after a store: {fences:?}"
    );
}

#[test]
fn loads_forward_from_the_buffer_and_other_lines_do_not_wait() {
    let c = x5_4().costs;
    let (elapsed, value) = after_remote_reads(true, 2, |l| {
        l[1].fetch_add(0, SeqCst); // own line 1 again
        let before = numa_sim::clock_ns();
        l[0].store(7, Release);
        let value = l[0].load(Acquire); // forwarded: a hit
        l[1].load(Acquire); // another line: a hit, no wait for the store
        (numa_sim::clock_ns() - before, value)
    });
    assert_eq!(value, 7);
    assert!(near(elapsed, 3 * (c.l1_hit + c.issue) / 1000), "{elapsed}");
}

/// Two words on one line.
#[repr(align(64))]
struct TwoWords([AtomicU32; 2]);

/// A store to word 0 of a line modified on the other socket (a miss: the line must come over),
/// then a load of word 0 and a load of word 1 of that line; returns the time each load took, in
/// ns, under `rule`.
fn loads_behind_a_store_miss(rule: StoreForwarding) -> (u64, u64) {
    let (a, b) = far_pair();
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    Simulation::new(x5_4())
        .jitter(0.0)
        .store_forwarding(rule)
        .run(move || {
            let line = Arc::new(TwoWords([AtomicU32::new(0), AtomicU32::new(0)]));
            let far = line.clone();
            thread::spawn_on(b, move || far.0[1].store(5, Relaxed)).join();
            let o = o.clone();
            thread::spawn_on(a, move || {
                line.0[0].store(7, Release);
                let t0 = numa_sim::clock_ns();
                assert_eq!(line.0[0].load(Acquire), 7);
                let t1 = numa_sim::clock_ns();
                assert_eq!(line.0[1].load(Acquire), 5);
                *o.lock().unwrap() = Some((t1 - t0, numa_sim::clock_ns() - t1));
            })
            .join();
        });
    out.lock().unwrap().take().unwrap()
}

#[test]
fn by_address_only_the_stores_own_address_is_forwarded() {
    let c = x5_4().costs;
    let hit = (c.l1_hit + c.issue) / 1000;
    // The earlier rule: both loads hit while the line is still on its way.
    let (same, other) = loads_behind_a_store_miss(StoreForwarding::Line);
    assert!(near(same, hit) && near(other, hit), "{same} {other}");
    // Intel's: the store's own word is forwarded, the other word waits for the line, which
    // arrives one cross-socket transfer after the store issued.
    let (same, other) = loads_behind_a_store_miss(StoreForwarding::Address);
    assert!(near(same, hit), "{same}");
    let arrival = c.other_socket / 1000;
    // (The store and the first load took two hits' time of the transfer already.)
    assert!(
        (arrival - 2 * hit - 1..=arrival).contains(&other),
        "{same} {other} against the transfer {arrival}"
    );
}

#[test]
fn stores_commit_in_program_order_and_a_full_buffer_stalls() {
    let m = x5_4();
    let c = m.costs;
    // Many stores to lines shared with the other socket: their transfers overlap, the buffer
    // fills after `store_buffer` of them, and the next one waits for the oldest commit.
    let n = m.store_buffer + 1;
    let times = after_remote_reads(true, n, move |l| {
        let before = numa_sim::clock_ns();
        let mut after = Vec::new();
        for x in l {
            x.store(1, Release);
            after.push(numa_sim::clock_ns() - before);
        }
        after
    });
    let full = m.store_buffer;
    // The buffer's first stores each cost a hit; the one that finds it full waits for the
    // first commit (one transfer after the first store).
    assert!(times[full - 1] < c.other_socket / 1000, "{times:?}");
    assert!(times[full] >= c.other_socket / 1000, "{times:?}");

    // Program order is what other threads see: a far line stored first, then a line this
    // thread owns; a reader of the second line sees it only after the first has committed.
    let (a, b) = far_pair();
    let seen = Arc::new(Mutex::new((0u64, 0u64)));
    let s = seen.clone();
    Simulation::new(m).jitter(0.0).run(move || {
        let l = lines(2);
        let lw = l.clone();
        thread::spawn_on(b, move || {
            lw[0].load(Relaxed);
        })
        .join();
        let (lw, lr) = (l.clone(), l.clone());
        let writer = thread::spawn_on(a, move || {
            lw[1].store(0, Relaxed); // own line 1 (and let this store commit)
            numa_sim::work(1_000);
            let at = numa_sim::clock_ns();
            lw[0].store(1, Release); // far: commits a transfer later
            lw[1].store(1, Release); // near, but after line 0
            at
        });
        let s = s.clone();
        let reader = thread::spawn_on(b + 2, move || {
            numa_sim::spin_deadline(u64::MAX);
            while lr[1].load(Acquire) == 0 {
                numa_sim::pause();
            }
            numa_sim::clock_ns()
        });
        let at = writer.join();
        let saw = reader.join();
        *s.lock().unwrap() = (at, saw);
    });
    let (at, saw) = *seen.lock().unwrap();
    // Line 1 committed with line 0, a cross-socket invalidation after the stores; the reader
    // on the other socket then fetched it across sockets.
    assert!(
        saw >= at + 2 * c.other_socket / 1000,
        "stored at {at}, seen at {saw}"
    );
}

#[test]
fn an_access_in_flight_sees_the_value_before_a_later_buffered_store() {
    // A reader's miss on a word is in flight when another thread stores to it. The store is
    // performed on the real memory when it enters the buffer, but in the model it commits after
    // the read completes, so the read must return the old value, on time, as on the machine;
    // a read issued after the store sees the new value once it commits.
    let m = x5_4();
    let c = m.costs;
    let (a, b) = far_pair();
    for delay in [0u64, 20, 60, 110, 130] {
        for buffered in [true, false] {
            let seen = Arc::new(Mutex::new((0u32, 0u64, 0u64, 0u64)));
            let s = seen.clone();
            Simulation::new(m)
                .jitter(0.0)
                .store_buffers(buffered)
                .run(move || {
                    let l = lines(1);
                    let lw = l.clone();
                    thread::spawn_on(a, move || lw[0].store(0, Relaxed)).join();
                    let (lw, lr) = (l.clone(), l.clone());
                    let reader = thread::spawn_on(b, move || {
                        numa_sim::work(1_000);
                        let issued = numa_sim::clock_ns();
                        let value = lr[0].load(Acquire); // a miss across sockets
                        (value, issued, numa_sim::clock_ns())
                    });
                    let writer = thread::spawn_on(a, move || {
                        numa_sim::work(1_000 + delay);
                        let at = numa_sim::clock_ns();
                        lw[0].store(1, Release);
                        at
                    });
                    let at = writer.join();
                    let (value, issued, done) = reader.join();
                    *s.lock().unwrap() = (value, issued, done, at);
                });
            let (value, issued, done, at) = *seen.lock().unwrap();
            let read_alone = issued + c.other_socket / 1000;
            assert!(near(done, read_alone), "delay {delay}, buffered {buffered}");
            // Whatever the store buffers: a store issued at or after the read's issue commits
            // after the read completes, so the read sees the old value.
            assert_eq!(
                value,
                u32::from(at < issued),
                "delay {delay}, buffered {buffered}: read at {issued}..{done}, stored at {at}"
            );
        }
    }
}

#[test]
fn a_cas_in_flight_fails_against_the_old_value_and_the_store_survives() {
    // A lock word: the holder on one socket releases it with a plain store while a CAS from
    // the other socket (0 → 2) is on its way. The CAS reaches the line first, finds the lock
    // still held (1) and fails; the release commits after it: the word ends at 0, and the CAS
    // returned 1 (the kernel qspinlock's release races its arrivals' CASes like this).
    let m = x5_4();
    let (a, b) = far_pair();
    let seen = Arc::new(Mutex::new((Ok(0), 0)));
    let s = seen.clone();
    Simulation::new(m).jitter(0.0).run(move || {
        let l = lines(1);
        let lw = l.clone();
        thread::spawn_on(a, move || lw[0].store(1, Relaxed)).join();
        let (lw, lr) = (l.clone(), l.clone());
        let arrival = thread::spawn_on(b, move || {
            numa_sim::work(1_000);
            lr[0].compare_exchange(0, 2, Acquire, Relaxed)
        });
        let holder = thread::spawn_on(a, move || {
            numa_sim::work(1_020);
            lw[0].store(0, Release);
        });
        holder.join();
        let cas = arrival.join();
        let after = l[0].load(Relaxed);
        *s.lock().unwrap() = (cas, after);
    });
    assert_eq!(*seen.lock().unwrap(), (Err(1), 0));
}

#[test]
fn a_trace_shows_when_a_buffered_store_commits() {
    let m = x5_4();
    let c = m.costs;
    let (a, b) = far_pair();
    let (_, accesses) = Simulation::new(m)
        .jitter(0.0)
        .run_traced(1_000, 2_000, move || {
            let l = lines(1);
            let lr = l.clone();
            thread::spawn_on(b, move || {
                lr[0].load(Relaxed);
            })
            .join();
            let lw = l.clone();
            thread::spawn_on(a, move || {
                numa_sim::work(1_500);
                lw[0].store(1, Release);
            })
            .join();
        });
    let store = accesses
        .iter()
        .find(|x| x.kind == AccessKind::Store)
        .expect("the store is traced");
    // Recorded from issue to commit: the invalidation across sockets.
    assert_eq!(store.completed_ps - store.issued_ps, c.other_socket);
}

#[test]
fn masked_stores_and_swaps_change_only_their_bits() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    Simulation::new(x5_4()).run(move || {
        let s = s.clone();
        thread::spawn_on(0, move || {
            let word = AtomicU32::new(0x1234_5678);
            word.store_masked(0, 0xff, Release);
            let a = word.load(Relaxed);
            let old = word.swap_masked(0xabcd_0000, 0xffff_0000, AcqRel);
            let b = word.load(Relaxed);
            s.lock().unwrap().extend([a, old, b]);
        })
        .join();
    });
    assert_eq!(
        *seen.lock().unwrap(),
        [0x1234_5600, 0x1234_5600, 0xabcd_5600]
    );
    // Outside a simulation: the same, as plain atomics.
    let word = AtomicU32::new(0xffff_ffff);
    word.store_masked(0x0100, 0xff00, Relaxed);
    assert_eq!(word.load(Relaxed), 0xffff_01ff);
    assert_eq!(word.swap_masked(0, 0xffff, Relaxed), 0xffff_01ff);
    assert_eq!(word.load(Relaxed), 0xffff_0000);
}

#[test]
fn buffered_stores_of_two_threads_to_one_line_do_not_livelock() {
    // Two threads store to two words of one line, over and over, with nothing else in between
    // (a queue lock's link and status stores can do this). Each one's store is performed on
    // the memory before the other's commits; neither must be taken for a read that saw the
    // future and redone, or they would take turns redoing theirs for ever.
    #[repr(align(64))]
    struct TwoWords([AtomicU32; 2]);
    let report = Simulation::new(x5_4()).run(|| {
        let line = Arc::new(TwoWords([AtomicU32::new(0), AtomicU32::new(0)]));
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let line = line.clone();
                thread::spawn_on(2 * i, move || {
                    for n in 0..1_000 {
                        line.0[i].store(n, Relaxed);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join());
    });
    assert!(report.simulated_accesses <= 2_100, "{report:?}");
}
