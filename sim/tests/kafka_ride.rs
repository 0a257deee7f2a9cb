//! A ride whose credits and SMS go through a real Kafka broker, with server and consumer
//! SIGKILLs and a mid-ride replay from offset 0: every invariant still holds. Needs
//! `SENDONCE_KAFKA` and the streams binaries built beside this one (`scripts/test-all
//! kafka` provides both).

mod support;

#[test]
#[ignore = "needs a Kafka broker: scripts/test-all kafka"]
fn a_ride_through_kafka_keeps_every_invariant() {
    let url = std::env::var("SENDONCE_KAFKA").expect("SENDONCE_KAFKA=kafka://127.0.0.1:PORT");
    let ride = support::ride_with_env(
        &[
            "--users",
            "8",
            "--transfers",
            "6",
            "--seed",
            "15",
            "--server-kill-rate",
            "0.1",
            "--broker",
            &url,
            "--kafka-single-broker-dev",
        ],
        &[("RUST_LOG", "sendonce_sim=info")],
    );
    let r = ride.assert_holds();
    // Both causes of real time named: the killed server and the broker.
    ride.assert_real_time_because(&["SIGKILL", "Kafka"]);
    let stderr = &ride.stderr;
    // The consumers really were broken: a replay from offset 0 at least.
    assert!(stderr.contains("Kafka consumers broken"), "{stderr}");
    support::assert_credits_delivered(r);
}
