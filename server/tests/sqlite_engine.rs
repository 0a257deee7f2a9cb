//! The engine on SQLite, on the request path, with the faults that break an idempotency layer:
//! concurrent duplicates, a step slower than its lease (the key taken over meanwhile), a failing
//! step, a refusal that must not be stored, a look-up's 404 that must stay true, and two bodies
//! racing for one key. The background jobs (reaper, relay, expiry): `sqlite_background.rs`.

mod sqlite_engine_support;

use std::sync::atomic::Ordering;

use sendonce_server::Problem;
use sqlite_engine_support::{fixture, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_duplicates_run_the_work_once() {
    let f = fixture();
    let all: Vec<_> = (0..16).map(|_| f.spawn("k", r#"{"amount":5}"#)).collect();
    let mut statuses = Vec::new();
    for h in all {
        let a = h.await.unwrap();
        statuses.push((a.status, a.replayed));
    }
    assert_eq!(f.runs("k").await, 1, "{statuses:?}");
    assert_eq!(f.events().await, 1);
    let fresh = statuses.iter().filter(|s| **s == (201, false)).count();
    assert_eq!(fresh, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| s.0 == 201 || s.0 == 409),
        "{statuses:?}"
    );
    let again = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((again.status, again.replayed), (201, true));
}

/// A request asleep in its step past its lease loses the key (here: released, as a reaper
/// would, and taken and finished by a retry). When it wakes, the fence finds the key not
/// its own: its work never runs. Without the fence the work runs twice (shown by removing
/// the `holds` check in store/sqlite/contract.rs: this test then fails with 2 runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_slower_than_its_lease_moves_nothing_after_losing_the_key() {
    let f = fixture();
    f.op.pause_next.store(true, Ordering::SeqCst);
    let slow = f.spawn("k", r#"{"amount":5}"#);
    f.op.paused.notified().await;
    // The lease ran out: the key row is released from under the sleeping request.
    f.db.call(|c| Ok(c.execute("DELETE FROM idempotency_keys WHERE idem_key = 'k'", [])?))
        .await
        .unwrap();
    let retry = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    f.op.go.notify_one();
    let woke = slow.await.unwrap();
    assert_eq!(
        woke.status, 409,
        "the request that lost its lock answers retry"
    );
    assert_eq!(f.runs("k").await, 1, "the work ran once");
    let after = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(
        (after.status, after.replayed, after.body),
        (201, true, retry.body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_frees_the_key_and_a_refusal_is_not_stored() {
    let f = fixture();
    f.op.failing_steps.store(1, Ordering::SeqCst);
    let failed = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(failed.status, 503);
    let refused = f
        .engine
        .run(&*f.op, &request("k2", r#"{"amount":0}"#))
        .await;
    assert_eq!(refused.status, 400);
    // Both keys are free: the same keys run now (the second with a valid body).
    let k = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    let k2 = f
        .engine
        .run(&*f.op, &request("k2", r#"{"amount":7}"#))
        .await;
    assert_eq!((k.status, k2.status), (201, 201));
    assert_eq!((f.runs("k").await, f.runs("k2").await), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_ups_404_stays_true() {
    let f = fixture();
    let nf = || {
        Problem::new(
            axum::http::StatusCode::NOT_FOUND,
            "not_found",
            "nothing ran",
        )
    };
    assert_eq!(f.engine.lookup("u1", "k", nf()).await.status, 404);
    // The late request under that key replays the 404 and runs nothing.
    let late = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((late.status, late.replayed), (404, true));
    assert_eq!(f.runs("k").await, 0);
    // A key that ran looks up as 200 with the bytes of its 201.
    let ran = f
        .engine
        .run(&*f.op, &request("k3", r#"{"amount":5}"#))
        .await;
    let found = f.engine.lookup("u1", "k3", nf()).await;
    assert_eq!((found.status, &found.body), (200, &ran.body));
    // Another principal's key is not ours to see.
    assert_eq!(f.engine.lookup("u2", "k3", nf()).await.status, 404);
}

/// Two bodies race for one key: one runs, the other gets 422 (or 409 while the first
/// runs) — on the path where its claim lost the race too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bodies_racing_for_one_key_run_one() {
    for round in 0..20 {
        let f = fixture();
        let a = f.spawn("k", r#"{"amount":5}"#);
        let b = f.spawn("k", r#"{"amount":6}"#);
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let mut got = [a.status, b.status];
        got.sort_unstable();
        assert!(
            got == [201, 409] || got == [201, 422],
            "round {round}: {got:?}"
        );
        assert_eq!(f.runs("k").await, 1);
    }
}
