//! The PostgreSQL crash ride of `ride_postgres_crash.rs` against a broken server: the same three
//! instances, the same `scripts/pg crash` in the middle, with gateway steps slower than the key
//! lock and the fence left out (test-only build, feature server-mock/unfenced). Requests that
//! lost their lock still debit after a look-up said "not found": the checker must fail the ride.
//! This is what shows the crash ride can fail at all. In real time the catch needs a slow request
//! to outlive its lease while a look-up asks for it, which a loaded machine can miss in one ride:
//! up to three seeds are ridden, and one of them must be failed. Needs `SENDONCE_TEST_POSTGRES` and its
//! cluster's `SENDONCE_PG_DIR` (the `postgres` stage sets both). Its own test binary: the crash
//! must not land in another ride.

mod support;

#[test]
fn the_crash_ride_catches_an_unfenced_server() {
    let Ok(db) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        return;
    };
    let extra = ["--slow-gateway-rate", "0.3", "--unsafe-no-fence"];
    let mut escaped = Vec::new();
    for seed in ["11", "12", "13"] {
        let ride = support::pg_crash_ride(&db, seed, &extra);
        assert_eq!(ride.report["unfenced"], true);
        if ride.code == 0 {
            escaped.push(seed);
            continue;
        }
        ride.assert_caught(
            "the unfenced server, PostgreSQL crashing mid-ride",
            &[
                "FAIL server agrees with its ledger",
                "but the ledger has debit",
            ],
        );
        return;
    }
    panic!("the unfenced server escaped the checker on seeds {escaped:?}");
}
