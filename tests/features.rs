//! The features passed through to lock_api: `arc_lock` and `serde`, named as parking_lot names
//! them. Run with `cargo test --features arc_lock,serde --test features`.
#![cfg(not(loom))]

#[cfg(feature = "arc_lock")]
#[test]
fn lock_arc_on_every_lock() {
    use std::sync::Arc;
    use std::thread;

    fn hammer<R: lock_api::RawMutex + Send + Sync + 'static>() {
        let lock = Arc::new(lock_api::Mutex::<R, u64>::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || {
                    for _ in 0..1_000 {
                        // An owned guard: it keeps the Arc alive and can move between threads.
                        let mut guard = lock.lock_arc();
                        *guard += 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let guard = lock.try_lock_arc().expect("free");
        assert_eq!(*guard, 4_000);
        assert_eq!(Arc::strong_count(&lock), 2, "the guard holds the Arc");
    }
    hammer::<numa_locks::raw::RawMcs>();
    hammer::<numa_locks::raw::RawCna>();
    hammer::<numa_locks::raw::RawHq>();

    // The exact call from the issue.
    let lock = Arc::new(numa_locks::CnaMutex::new(vec![1]));
    lock.lock_arc().push(2);
    assert_eq!(*lock.lock(), [1, 2]);
}

#[cfg(feature = "serde")]
#[test]
fn serde_round_trip() {
    let lock = numa_locks::HqMutex::new(vec![1u32, 2, 3]);
    let json = serde_json::to_string(&lock).unwrap();
    assert_eq!(json, "[1,2,3]");
    let back: numa_locks::CnaMutex<Vec<u32>> = serde_json::from_str(&json).unwrap();
    assert_eq!(*back.lock(), [1, 2, 3]);
    let mcs: numa_locks::McsMutex<u8> = serde_json::from_str("7").unwrap();
    assert_eq!(*mcs.lock(), 7);
}
