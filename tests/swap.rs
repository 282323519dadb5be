//! The drop-in swap: two programs written against parking_lot's API (one with its mutexes,
//! one with its rwlocks), each compiled four times: against parking_lot itself (the
//! reference), and with only the type names changed to this crate's Mcs, Cna and Hq families.
//! Each `names` module below is the whole difference.
#![cfg(not(loom))]

/// parking_lot's names, as a program written for parking_lot imports them.
mod parking_lot_names {
    pub use parking_lot::{
        Condvar, MappedMutexGuard, Mutex, MutexGuard, ReentrantMutex, ReentrantMutexGuard,
        WaitTimeoutResult,
    };
}

/// The same names, swapped to `numa_locks`' CNA family. (The MCS and HQ modules are the same
/// with the prefix changed.)
mod cna_names {
    pub use numa_locks::{
        CnaCondvar as Condvar, CnaMappedMutexGuard as MappedMutexGuard, CnaMutex as Mutex,
        CnaMutexGuard as MutexGuard, CnaReentrantMutex as ReentrantMutex,
        CnaReentrantMutexGuard as ReentrantMutexGuard, WaitTimeoutResult,
    };
}

mod mcs_names {
    pub use numa_locks::{
        McsCondvar as Condvar, McsMappedMutexGuard as MappedMutexGuard, McsMutex as Mutex,
        McsMutexGuard as MutexGuard, McsReentrantMutex as ReentrantMutex,
        McsReentrantMutexGuard as ReentrantMutexGuard, WaitTimeoutResult,
    };
}

mod hq_names {
    pub use numa_locks::{
        HqCondvar as Condvar, HqMappedMutexGuard as MappedMutexGuard, HqMutex as Mutex,
        HqMutexGuard as MutexGuard, HqReentrantMutex as ReentrantMutex,
        HqReentrantMutexGuard as ReentrantMutexGuard, WaitTimeoutResult,
    };
}

/// The program. `$names` is the module it imports its lock types from; nothing else differs.
macro_rules! program {
    ($module:ident, $names:ident) => {
        mod $module {
            use super::$names::{
                Condvar, MappedMutexGuard, Mutex, MutexGuard, ReentrantMutex, ReentrantMutexGuard,
                WaitTimeoutResult,
            };
            use std::cell::RefCell;
            use std::collections::VecDeque;
            use std::sync::Arc;
            use std::thread;
            use std::time::{Duration, Instant};

            static CONFIG: Mutex<Vec<&str>> = Mutex::new(Vec::new());

            struct Account {
                owner: String,
                balance: i64,
            }

            fn owner_of(guard: MutexGuard<'_, Account>) -> MappedMutexGuard<'_, String> {
                MutexGuard::map(guard, |account| &mut account.owner)
            }

            #[test]
            fn mutex_basics_and_map() {
                CONFIG.lock().push("a");
                assert_eq!(CONFIG.lock().len(), 1);

                let account = Mutex::new(Account {
                    owner: "ada".to_string(),
                    balance: 10,
                });
                account.lock().balance += 5;
                owner_of(account.lock()).push_str(" lovelace");
                let guard = account.lock();
                assert_eq!(guard.owner, "ada lovelace");
                assert_eq!(guard.balance, 15);
                // try_map: a failed projection hands the guard back.
                let guard = match MutexGuard::try_map(guard, |a| {
                    if a.balance > 100 {
                        Some(&mut a.balance)
                    } else {
                        None
                    }
                }) {
                    Ok(_) => panic!("balance is not above 100"),
                    Err(guard) => guard,
                };
                assert!(account.is_locked());
                MutexGuard::unlock_fair(guard);
                assert!(!account.is_locked());
                let mut guard = account.lock();
                MutexGuard::unlocked(&mut guard, || assert!(!account.is_locked()));
                MutexGuard::bump(&mut guard);
                drop(guard);
                let mut owned = account;
                owned.get_mut().balance = 0;
                assert_eq!(owned.into_inner().balance, 0);
            }

            #[test]
            fn timed_locking() {
                let lock = Arc::new(Mutex::new(0u32));
                let guard = lock.lock();
                let other = lock.clone();
                let started = Instant::now();
                let waited = thread::spawn(move || {
                    assert!(other.try_lock_for(Duration::from_millis(5)).is_none());
                    assert!(
                        other
                            .try_lock_until(Instant::now() + Duration::from_millis(5))
                            .is_none()
                    );
                })
                .join();
                waited.unwrap();
                assert!(started.elapsed() >= Duration::from_millis(10));
                drop(guard);
                *lock.try_lock_for(Duration::from_secs(60)).unwrap() += 1;
                assert_eq!(*lock.try_lock().unwrap(), 1);
            }

            #[test]
            fn condvar_producer_consumer() {
                struct Channel {
                    items: Mutex<VecDeque<u32>>,
                    ready: Condvar,
                }
                let channel = Arc::new(Channel {
                    items: Mutex::new(VecDeque::new()),
                    ready: Condvar::new(),
                });
                let consumers: Vec<_> = (0..3)
                    .map(|_| {
                        let channel = channel.clone();
                        thread::spawn(move || {
                            let mut got = Vec::new();
                            loop {
                                let mut items = channel.items.lock();
                                channel.ready.wait_while(&mut items, |q| q.is_empty());
                                match items.pop_front() {
                                    Some(u32::MAX) => {
                                        // Leave the end marker for the others.
                                        items.push_front(u32::MAX);
                                        channel.ready.notify_all();
                                        return got;
                                    }
                                    Some(item) => got.push(item),
                                    None => unreachable!("waited until not empty"),
                                }
                            }
                        })
                    })
                    .collect();
                for item in 0..1_000 {
                    channel.items.lock().push_back(item);
                    channel.ready.notify_one();
                }
                channel.items.lock().push_back(u32::MAX);
                channel.ready.notify_all();
                let mut all: Vec<u32> = consumers
                    .into_iter()
                    .flat_map(|c| c.join().unwrap())
                    .collect();
                all.sort_unstable();
                assert_eq!(all, (0..1_000).collect::<Vec<_>>());
            }

            #[test]
            fn condvar_wait_while_for() {
                let pair = Arc::new((Mutex::new(false), Condvar::new()));
                // Nobody sets the flag: times out, not early.
                let mut ready = pair.0.lock();
                let started = Instant::now();
                let result: WaitTimeoutResult =
                    pair.1
                        .wait_while_for(&mut ready, |ready| !*ready, Duration::from_millis(5));
                assert!(result.timed_out());
                assert!(started.elapsed() >= Duration::from_millis(5));
                drop(ready);
                // Someone does: returns with the flag set.
                let setter = {
                    let pair = pair.clone();
                    thread::spawn(move || {
                        *pair.0.lock() = true;
                        pair.1.notify_all();
                    })
                };
                let mut ready = pair.0.lock();
                let result =
                    pair.1
                        .wait_while_for(&mut ready, |ready| !*ready, Duration::from_secs(60));
                assert!(!result.timed_out());
                assert!(*ready);
                drop(ready);
                setter.join().unwrap();
                assert!(!pair.1.notify_one(), "nobody waits any more");
            }

            #[test]
            fn reentrant_mutex() {
                let lock = Arc::new(ReentrantMutex::new(RefCell::new(Vec::new())));
                fn push_twice(lock: &ReentrantMutex<RefCell<Vec<u32>>>, value: u32) {
                    let outer: ReentrantMutexGuard<'_, _> = lock.lock();
                    outer.borrow_mut().push(value);
                    let inner = lock.lock();
                    inner.borrow_mut().push(value);
                }
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let lock = lock.clone();
                        thread::spawn(move || {
                            for i in 0..100 {
                                push_twice(&lock, t * 1_000 + i);
                            }
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
                let guard = lock.lock();
                let values = guard.borrow();
                assert_eq!(values.len(), 800);
                // Each pair was pushed under one outer acquisition: never interleaved.
                for pair in values.chunks(2) {
                    assert_eq!(pair[0], pair[1]);
                }
                drop(values);
                assert!(lock.is_owned_by_current_thread());
                let again = lock.try_lock_for(Duration::from_millis(1));
                assert!(again.is_some(), "the owner may lock again");
            }
        }
    };
}

program!(parking_lot_reference, parking_lot_names);
program!(mcs, mcs_names);
program!(cna, cna_names);
program!(hq, hq_names);

/// parking_lot's RwLock names, as a program written for parking_lot imports them.
mod parking_lot_rw_names {
    pub use parking_lot::{
        MappedRwLockReadGuard, MappedRwLockWriteGuard, RecursiveRwLock, RecursiveRwLockReadGuard,
        RwLock, RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard,
    };
}

/// The same names, swapped to `numa_locks`' CNA rwlocks (MCS and HQ: the prefix changed).
mod cna_rw_names {
    pub use numa_locks::{
        CnaMappedRwLockReadGuard as MappedRwLockReadGuard,
        CnaMappedRwLockWriteGuard as MappedRwLockWriteGuard, CnaRecursiveRwLock as RecursiveRwLock,
        CnaRecursiveRwLockReadGuard as RecursiveRwLockReadGuard, CnaRwLock as RwLock,
        CnaRwLockReadGuard as RwLockReadGuard,
        CnaRwLockUpgradableReadGuard as RwLockUpgradableReadGuard,
        CnaRwLockWriteGuard as RwLockWriteGuard,
    };
}

mod mcs_rw_names {
    pub use numa_locks::{
        McsMappedRwLockReadGuard as MappedRwLockReadGuard,
        McsMappedRwLockWriteGuard as MappedRwLockWriteGuard, McsRecursiveRwLock as RecursiveRwLock,
        McsRecursiveRwLockReadGuard as RecursiveRwLockReadGuard, McsRwLock as RwLock,
        McsRwLockReadGuard as RwLockReadGuard,
        McsRwLockUpgradableReadGuard as RwLockUpgradableReadGuard,
        McsRwLockWriteGuard as RwLockWriteGuard,
    };
}

mod hq_rw_names {
    pub use numa_locks::{
        HqMappedRwLockReadGuard as MappedRwLockReadGuard,
        HqMappedRwLockWriteGuard as MappedRwLockWriteGuard, HqRecursiveRwLock as RecursiveRwLock,
        HqRecursiveRwLockReadGuard as RecursiveRwLockReadGuard, HqRwLock as RwLock,
        HqRwLockReadGuard as RwLockReadGuard,
        HqRwLockUpgradableReadGuard as RwLockUpgradableReadGuard,
        HqRwLockWriteGuard as RwLockWriteGuard,
    };
}

/// The RwLock program: a read-mostly routing table, written against parking_lot's RwLock API.
/// `$names` is the module it imports its lock types from; nothing else differs.
macro_rules! rwlock_program {
    ($module:ident, $names:ident) => {
        mod $module {
            use super::$names::{
                MappedRwLockReadGuard, MappedRwLockWriteGuard, RecursiveRwLock,
                RecursiveRwLockReadGuard, RwLock, RwLockReadGuard, RwLockUpgradableReadGuard,
                RwLockWriteGuard,
            };
            use std::collections::HashMap;
            use std::sync::Arc;
            use std::thread;
            use std::time::{Duration, Instant};

            static ROUTES: RwLock<Vec<(u32, &str)>> = RwLock::new(Vec::new());

            struct Table {
                routes: HashMap<u32, u32>,
                /// Always the sum of the routes' values: a reader that saw a half-done update
                /// would find it wrong.
                checksum: u32,
            }

            fn checksum_of(guard: RwLockReadGuard<'_, Table>) -> MappedRwLockReadGuard<'_, u32> {
                RwLockReadGuard::map(guard, |table| &table.checksum)
            }

            fn routes_of(
                guard: RwLockWriteGuard<'_, Table>,
            ) -> MappedRwLockWriteGuard<'_, HashMap<u32, u32>> {
                RwLockWriteGuard::map(guard, |table| &mut table.routes)
            }

            #[test]
            fn rwlock_basics_map_upgrade_downgrade() {
                ROUTES.write().push((1, "eth0"));
                assert_eq!(ROUTES.read().len(), 1);

                let table = RwLock::new(Table {
                    routes: HashMap::new(),
                    checksum: 0,
                });
                routes_of(table.write()).insert(10, 3);
                table.write().checksum = 3;
                assert_eq!(*checksum_of(table.read()), 3);
                // Readers share.
                let (a, b) = (table.read(), table.read());
                assert_eq!(a.checksum + b.checksum, 6);
                assert!(table.try_write().is_none());
                assert!(table.is_locked() && !table.is_locked_exclusive());
                drop((a, b));
                // Upgradable: shared with readers, then upgraded, then downgraded.
                let upgradable = table.upgradable_read();
                let reader = table.read();
                assert!(table.try_upgradable_read().is_none());
                drop(reader);
                let mut writer = RwLockUpgradableReadGuard::upgrade(upgradable);
                writer.routes.insert(11, 4);
                writer.checksum += 4;
                assert!(table.is_locked_exclusive());
                let upgradable = RwLockWriteGuard::downgrade_to_upgradable(writer);
                let upgradable = match RwLockUpgradableReadGuard::try_upgrade(upgradable) {
                    Ok(writer) => RwLockWriteGuard::downgrade_to_upgradable(writer),
                    Err(_) => panic!("no reader is inside"),
                };
                let reader = RwLockUpgradableReadGuard::downgrade(upgradable);
                assert_eq!(reader.checksum, 7);
                drop(reader);
                // try_map hands the guard back on failure; unlocked, bump and the fair unlock.
                let guard = match RwLockReadGuard::try_map(table.read(), |t| t.routes.get(&99)) {
                    Ok(_) => panic!("no route 99"),
                    Err(guard) => guard,
                };
                RwLockReadGuard::unlock_fair(guard);
                let mut guard = table.write();
                RwLockWriteGuard::unlocked(&mut guard, || assert!(!table.is_locked()));
                RwLockWriteGuard::bump(&mut guard);
                RwLockWriteGuard::unlock_fair(guard);
                let mut owned = table;
                owned.get_mut().checksum = 0;
                assert_eq!(owned.into_inner().checksum, 0);
            }

            #[test]
            fn rwlock_timed_locking() {
                let lock = Arc::new(RwLock::new(0u32));
                let reader = lock.read();
                let other = lock.clone();
                let started = Instant::now();
                thread::spawn(move || {
                    assert!(other.try_write_for(Duration::from_millis(5)).is_none());
                    assert!(other.try_read_for(Duration::from_millis(5)).is_some());
                    let upgradable = other
                        .try_upgradable_read_until(Instant::now() + Duration::from_secs(60))
                        .unwrap();
                    let upgradable = RwLockUpgradableReadGuard::try_upgrade_for(
                        upgradable,
                        Duration::from_millis(5),
                    )
                    .err()
                    .expect("a reader is inside");
                    drop(upgradable);
                })
                .join()
                .unwrap();
                assert!(started.elapsed() >= Duration::from_millis(10));
                drop(reader);
                let writer = lock.write();
                let other = lock.clone();
                thread::spawn(move || {
                    assert!(other.try_read_for(Duration::from_millis(5)).is_none());
                    assert!(
                        other
                            .try_write_until(Instant::now() + Duration::from_millis(5))
                            .is_none()
                    );
                })
                .join()
                .unwrap();
                drop(writer);
                *lock.try_write_for(Duration::from_secs(60)).unwrap() += 1;
                assert_eq!(*lock.try_read().unwrap(), 1);
            }

            #[test]
            fn read_mostly_table() {
                let table = Arc::new(RwLock::new(Table {
                    routes: (0..64).map(|k| (k, 1)).collect(),
                    checksum: 64,
                }));
                // Miri runs this once per lock family at a thousandth of the speed: fewer rounds.
                let (reads, writes) = if cfg!(miri) { (20, 10) } else { (2_000, 200) };
                let readers: Vec<_> = (0..4)
                    .map(|_| {
                        let table = table.clone();
                        thread::spawn(move || {
                            for _ in 0..reads {
                                let t = table.read();
                                assert_eq!(t.routes.values().sum::<u32>(), t.checksum);
                            }
                        })
                    })
                    .collect();
                for i in 0..writes {
                    let mut t = table.write();
                    *t.routes.get_mut(&(i % 64)).unwrap() += 1;
                    t.checksum += 1;
                }
                for r in readers {
                    r.join().unwrap();
                }
                assert_eq!(table.read().checksum, 64 + writes);
            }

            #[test]
            fn recursive_read_with_waiting_writer() {
                let lock = Arc::new(RecursiveRwLock::new(0u32));
                let first: RecursiveRwLockReadGuard<'_, u32> = lock.read();
                let writer = {
                    let lock = lock.clone();
                    thread::spawn(move || *lock.write() += 1)
                };
                thread::sleep(Duration::from_millis(10));
                // The writer waits for `first`; reading again must not wait behind it.
                let second = lock.read();
                assert_eq!(*first + *second, 0);
                drop(first);
                drop(second);
                writer.join().unwrap();
                assert_eq!(*lock.read(), 1);
            }
        }
    };
}

rwlock_program!(parking_lot_rwlock_reference, parking_lot_rw_names);
rwlock_program!(mcs_rwlock, mcs_rw_names);
rwlock_program!(cna_rwlock, cna_rw_names);
rwlock_program!(hq_rwlock, hq_rw_names);
