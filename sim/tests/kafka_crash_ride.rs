//! The Kafka broker SIGKILLed in the middle of a ride and started again on its data
//! (`scripts/kafka crash`): the relay resumes from the outbox, the consumers resume from their
//! committed offsets, and every debit still gets exactly one credit and one SMS. Needs
//! `SENDONCE_KAFKA` and the streams binaries built beside this one (`scripts/test-all kafka`
//! provides both). Its own test binary: the crash must not land in another ride.

mod support;

use std::time::{Duration, Instant};

#[test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
fn a_ride_through_kafka_survives_the_broker_sigkilled_and_restarted() {
    let url = std::env::var("SENDONCE_KAFKA").expect("SENDONCE_KAFKA=kafka://127.0.0.1:PORT");
    let started = Instant::now();
    let crash = support::crash_after("kafka", Duration::from_secs(6));
    let ride = support::ride_with_env(
        &[
            "--users",
            "8",
            "--transfers",
            "8",
            "--seed",
            "21",
            "--broker",
            &url,
            "--kafka-single-broker-dev",
        ],
        &[("RUST_LOG", "sendonce_sim=info")],
    );
    let ride_took = started.elapsed();
    let crashed_at = crash.join().expect("the crash thread");
    let r = ride.assert_holds();
    assert!(
        crashed_at < ride_took,
        "the ride ended ({ride_took:?}) before the broker was back ({crashed_at:?}): {r:#}"
    );
    support::assert_credits_delivered(r);
}
