//! PostgreSQL crashes in the middle of a ride over three instances (`scripts/pg crash`: an
//! immediate stop, every session cut mid-transaction and mid-COMMIT, crash recovery, a start on
//! the same port): the instances must answer only what they know (a lost COMMIT is for the retry
//! with the same key to find), their pools recover, and every invariant of the ride holds.
//! Needs `SENDONCE_TEST_POSTGRES` and its cluster's `SENDONCE_PG_DIR` (the `postgres` stage of
//! scripts/test-all sets both). Its own test binary: the crash must not land in another ride.

mod support;

#[test]
fn a_ride_over_three_instances_survives_postgresql_crashing_in_the_middle() {
    let Ok(db) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        return;
    };
    support::pg_crash_ride(&db, "11", &["--server-faults", "0.03"]).assert_holds();
}
