//! The Kafka crash ride of `kafka_crash_ride.rs` against a broken relay: the broker SIGKILLed and
//! restarted mid-ride while the relay marks every batch published whether the broker acknowledged it
//! or not (test-only build, feature server-mock/unsafe-relay). The events of the outage are lost, so
//! debits go without their credit and SMS: the checker must fail the ride. This is what shows the
//! Kafka crash ride can fail at all. Needs `SENDONCE_KAFKA` and the streams binaries built beside
//! this one (`scripts/test-all kafka` provides both). Its own test binary: the crash must not land in
//! another ride.

mod support;

use std::time::{Duration, Instant};

#[test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
fn the_kafka_crash_ride_catches_a_relay_that_marks_unacknowledged_events() {
    let url = std::env::var("SENDONCE_KAFKA").expect("SENDONCE_KAFKA=kafka://127.0.0.1:PORT");
    let started = Instant::now();
    let crash = support::crash_after("kafka", Duration::from_secs(2));
    let ride = support::ride_with_env(
        &[
            "--users",
            "8",
            "--transfers",
            "24",
            "--seed",
            "21",
            "--broker",
            &url,
            "--kafka-single-broker-dev",
            "--unsafe-relay-marks-unacked",
        ],
        &[("RUST_LOG", "sendonce_sim=info")],
    );
    let ride_took = started.elapsed();
    let crashed_at = crash.join().expect("the crash thread");
    assert!(
        crashed_at < ride_took,
        "the ride ended ({ride_took:?}) before the broker was back ({crashed_at:?}): {:#}",
        ride.report
    );
    ride.assert_caught(
        "a relay marking unacknowledged events, the broker crashed mid-ride",
        &["FAIL one credit and one SMS per debit"],
    );
}
