//! Key expiry under wall-clock steps: a server clock stepped days forward must not expire
//! keys whose window has not passed, so a stored answer keeps being replayed.
//!
//! One process (SQLite, or PostgreSQL with `SENDONCE_TEST_POSTGRES`) and two instances on
//! one PostgreSQL database, one of them stepped (PostgreSQL only).

use serde_json::json;

use crate::common::*;
use crate::instances::{instances, post, send, settle, user};

const DAY_MS: i64 = 86_400_000;

/// A stored 402 for K, then money for its user: a retry of K must still get the 402.
fn assert_replayed_402(r: &Resp, first: &Resp) {
    assert_eq!(
        (r.status, r.replayed()),
        (402, true),
        "K's stored 402 was lost and K ran again: {} {:?}",
        r.status,
        r.json()
    );
    assert_eq!(r.body, first.body, "the stored answer, byte for byte");
}

#[tokio::test]
async fn a_stored_402_survives_a_clock_step_of_three_days() {
    let s = start_default().await; // 48 h window
    let (poor, rich, to) = (
        s.user("P", 100).await,
        s.user("F", 1_000_000).await,
        s.user("T", 0).await,
    );
    let body = transfer_body(&to.id, 5_000);
    let first = s.transfer(&poor.token, Some("K"), &body).await;
    assert_eq!(first.status, 402, "{:?}", first.json());
    // Fund the user: now K would move money if it ran again.
    let fund = s
        .transfer(&rich.token, Some("fund"), &transfer_body(&poor.id, 10_000))
        .await;
    assert_eq!(fund.status, 201);
    s.settle().await;
    assert_eq!(s.balance(&poor).await, 10_100);

    // The server's wall clock steps three days forward; the reaper runs.
    s.post_json("/v1/test/clock", &json!({"advance_ms": 3 * DAY_MS}))
        .await;
    assert_eq!(s.post_json("/v1/test/reap", &json!({})).await.status, 200);

    let again = s.transfer(&poor.token, Some("K"), &body).await;
    assert_replayed_402(&again, &first);
    assert_eq!(s.debits_for(&poor, "K").await, 0, "K never moved money");
    s.stop().await;
}

#[tokio::test]
async fn another_instance_stepped_three_days_cannot_expire_a_stored_402() {
    let Some((_db, all)) = instances(2, &[]).await else {
        return;
    };
    let (a, b) = (all[0].url.clone(), all[1].url.clone());
    let poor = user(&a, "P", 100).await;
    let rich = user(&a, "F", 1_000_000).await;
    let to = user(&b, "T", 0).await;
    let body = transfer_body(&to.id, 5_000);
    let first = send(&a, &poor, "K", &body).await.unwrap();
    assert_eq!(first.status, 402, "{:?}", first.json());
    let fund = send(&a, &rich, "fund", &transfer_body(&poor.id, 10_000))
        .await
        .unwrap();
    assert_eq!(fund.status, 201);
    settle(&[a.clone(), b.clone()]).await;

    // B's wall clock steps three days forward; B keeps serving (a claim at its time) and reaps.
    post(&b, "/v1/test/clock", json!({"advance_ms": 3 * DAY_MS})).await;
    let on_b = send(&b, &rich, "on-b", &transfer_body(&to.id, 1))
        .await
        .unwrap();
    assert_eq!(on_b.status, 201, "{:?}", on_b.json());
    post(&b, "/v1/test/reap", json!({})).await;

    let again = send(&a, &poor, "K", &body).await.unwrap();
    assert_replayed_402(&again, &first);
    drop(all);
}
