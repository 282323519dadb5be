//! The harness's own guarantees, checked without timing: a worker that first runs after the
//! end of a run (a loaded machine, a short run) still completes one operation, so a row never
//! reports zero whatever the scheduling.

use super::*;

fn config(read_pct: u64) -> RunConfig {
    RunConfig {
        threads: 2,
        duration: Duration::ZERO,
        virtual_nodes: Some(2),
        remote_penalty: Duration::ZERO,
        slots: 1,
        notify_all: false,
        read_pct,
        writers: None,
        work: 0,
        stats: None,
    }
}

/// Runs worker 0 alone with the stop flag already set and returns what it counted.
fn late_worker<L, W>(config: &RunConfig) -> ThreadCounts
where
    L: LockUnderTest<Protected<W>>,
    W: Workload,
{
    let lock = L::new(Protected::new(1));
    let start = StartLine::new(1);
    let stop = AtomicBool::new(true);
    let counts = thread::scope(|scope| {
        let worker = scope.spawn(|| worker::<L, W>(0, &lock, config, &start, &stop));
        start.open();
        worker.join().expect("the worker panicked")
    });
    let exclusive = counts.ops - counts.reads;
    assert_eq!(lock.into_data().workload.check(exclusive), Ok(()));
    counts
}

#[test]
fn a_worker_that_starts_after_the_stop_completes_one_operation() {
    let exclusive = config(0);
    assert_eq!(
        late_worker::<McsMutex<Protected<Counter>>, Counter>(&exclusive).ops,
        1
    );
    assert_eq!(
        late_worker::<CnaMutex<Protected<Kv>>, Kv>(&exclusive).ops,
        1
    );
    assert_eq!(
        late_worker::<HqMutex<Protected<FreeList>>, FreeList>(&exclusive).ops,
        1
    );
    assert_eq!(
        late_worker::<parking_lot::Mutex<Protected<Hammer>>, Hammer>(&exclusive).ops,
        1
    );
    type Delegating = Delegated<CnaMutex<Protected<Counter>>>;
    assert_eq!(late_worker::<Delegating, Counter>(&exclusive).ops, 1);
    let reads_only = late_worker::<CnaRwLock<Protected<Rw>>, Rw>(&config(100));
    assert_eq!((reads_only.ops, reads_only.reads), (1, 1));
    let writes_only = late_worker::<CnaRwLock<Protected<Rw>>, Rw>(&exclusive);
    assert_eq!((writes_only.ops, writes_only.reads), (1, 0));
}

#[test]
fn a_pc_run_that_stops_before_its_workers_start_still_moves_a_message() {
    let config = config(0);
    let lock = CnaMutex::new(PcQueue {
        items: VecDeque::new(),
        stop: true,
        pushed: 0,
        popped: 0,
    });
    let (not_empty, not_full) = (
        <CnaMutex<PcQueue> as CondvarLock<PcQueue>>::new_condvar(),
        <CnaMutex<PcQueue> as CondvarLock<PcQueue>>::new_condvar(),
    );
    // Worker 0 produces, worker 1 consumes (`pc_producers(2)` is 1); each runs alone.
    let run_alone = |id| {
        let start = StartLine::new(1);
        thread::scope(|scope| {
            let worker = scope.spawn(|| {
                pc_worker::<CnaMutex<PcQueue>>(id, &lock, &not_empty, &not_full, &config, &start)
            });
            start.open();
            worker.join().expect("the worker panicked")
        })
    };
    // A consumer finding the queue empty leaves with nothing; a producer's first push goes in;
    // a consumer then takes it; a second producer finds the one slot full and leaves.
    assert_eq!(run_alone(1).ops, 0);
    assert_eq!(run_alone(0).ops, 1);
    assert_eq!(run_alone(1).ops, 1);
    let full = |queue: &mut PcQueue| queue.items.push_back(7);
    lock.wait_while_then(&not_full, |_| false, full);
    assert_eq!(run_alone(0).ops, 0);
    let queue = lock.into_data();
    assert_eq!((queue.pushed, queue.popped, queue.items.len()), (1, 1, 1));
}
