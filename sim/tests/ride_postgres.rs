//! Rides against three server-mock instances on one PostgreSQL database behind a
//! round-robin balancer (`--db postgres://… --instances 3`): retries and replays of one
//! transfer land on different instances. Needs `SENDONCE_TEST_POSTGRES` (what
//! `scripts/pg start` prints; the `postgres` stage of scripts/test-all sets it).

mod support;

use support::Ride;

/// A ride over three instances of the test cluster, or `None` (and a note) without one.
fn ride(args: &[&str]) -> Option<Ride> {
    let Ok(db) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        return None;
    };
    let mut all = vec!["--db", &db, "--instances", "3"];
    all.extend(FAULTS);
    all.extend(args);
    Some(support::ride(&all))
}

/// Gateway steps slower than the key lock, server clocks jumping both ways (on every
/// instance), injected 503s, dropped responses and duplicate deliveries.
const FAULTS: [&str; 8] = [
    "--profile",
    "lb-replay",
    "--slow-gateway-rate",
    "0.2",
    "--server-clock-jump-rate",
    "0.05",
    "--server-faults",
    "0.05",
];

#[test]
fn a_ride_over_three_instances_holds_every_invariant() {
    let Some(ride) = ride(&["--users", "8", "--transfers", "5", "--seed", "3"]) else {
        return;
    };
    ride.assert_holds();
    // Real instances on a real database: the report must not claim the seed replays.
    ride.assert_real_time_because(&["PostgreSQL"]);
}

/// The same ride with the instances as real processes SIGKILLed now and then and restarted
/// on the one database: a dead instance's claims wait out their lock and are taken over by
/// the others; the phones' replays reach the survivors.
#[test]
fn a_ride_over_three_instances_some_sigkilled_holds_every_invariant() {
    let Some(ride) = ride(&[
        "--users",
        "8",
        "--transfers",
        "10",
        // Seeded rolls every 250 ms: this seed's first kill comes in the first ticks of a ride
        // of some seconds (the count is asserted below, so the test cannot pass without one).
        "--seed",
        "5",
        "--server-kill-rate",
        "0.3",
    ]) else {
        return;
    };
    let r = ride.assert_holds();
    // The ride must really have killed instances, or it proves nothing.
    assert!(
        r["server_kills"].as_u64().is_some_and(|k| k > 0),
        "no instance was killed: {r:#}"
    );
    ride.assert_real_time_because(&["PostgreSQL", "SIGKILL"]);
}
