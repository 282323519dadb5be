//! The tunables' setters: valid values take effect, invalid ones return an error naming the
//! value and the allowed range and change nothing. One test: the tunables are process-wide.

use std::time::Duration;

use numa_locks::tunables::{self, TunableError};

fn assert_rejected(result: Result<(), TunableError>, name: &str, value: &str) {
    let err = result.expect_err("an invalid value must be rejected");
    assert_eq!(err.name, name);
    let text = err.to_string();
    assert!(text.contains(name), "{text}");
    assert!(text.contains(value), "{text} should name {value}");
    assert!(
        text.contains("allowed"),
        "{text} should say what is allowed"
    );
}

#[test]
fn setters_validate_and_take_effect() {
    tunables::reset_defaults();
    assert_eq!(tunables::spin_time(), tunables::DEFAULT_SPIN_TIME);
    assert_eq!(tunables::steal_bound(), tunables::DEFAULT_STEAL_BOUND);
    assert_eq!(
        tunables::cna_flush_threshold(),
        tunables::DEFAULT_CNA_FLUSH_THRESHOLD
    );
    assert_eq!(
        tunables::hq_local_handoffs(),
        tunables::DEFAULT_HQ_LOCAL_HANDOFFS
    );
    assert!(tunables::stealing());

    tunables::set_spin_time(Duration::ZERO).unwrap();
    assert_eq!(tunables::spin_time(), Duration::ZERO);
    assert_rejected(
        tunables::set_spin_time(Duration::from_secs(2)),
        "spin_time",
        "2s",
    );
    assert_eq!(
        tunables::spin_time(),
        Duration::ZERO,
        "a rejected value changes nothing"
    );

    tunables::set_steal_bound(Duration::from_micros(50)).unwrap();
    assert_eq!(tunables::steal_bound(), Duration::from_micros(50));
    assert_rejected(
        tunables::set_steal_bound(Duration::ZERO),
        "steal_bound",
        "0ns",
    );
    assert_rejected(
        tunables::set_steal_bound(Duration::from_secs(11)),
        "steal_bound",
        "11s",
    );
    assert_eq!(tunables::steal_bound(), Duration::from_micros(50));

    tunables::set_cna_flush_threshold(Duration::from_millis(3)).unwrap();
    assert_eq!(tunables::cna_flush_threshold(), Duration::from_millis(3));
    assert_rejected(
        tunables::set_cna_flush_threshold(Duration::from_nanos(10)),
        "cna_flush_threshold",
        "10ns",
    );
    assert_eq!(tunables::cna_flush_threshold(), Duration::from_millis(3));

    tunables::set_hq_local_handoffs(64).unwrap();
    assert_eq!(tunables::hq_local_handoffs(), 64);
    assert_rejected(tunables::set_hq_local_handoffs(0), "hq_local_handoffs", "0");
    assert_rejected(
        tunables::set_hq_local_handoffs(1 << 30),
        "hq_local_handoffs",
        &(1u64 << 30).to_string(),
    );
    assert_eq!(tunables::hq_local_handoffs(), 64);

    tunables::set_stealing(false).unwrap();
    assert!(!tunables::stealing());

    // The locks keep working with the extreme settings: park at once, no stealing.
    let m = std::sync::Arc::new(numa_locks::CnaMutex::new(0u32));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), 4_000);

    tunables::reset_defaults();
    assert_eq!(tunables::spin_time(), tunables::DEFAULT_SPIN_TIME);
    assert!(tunables::stealing());
}
