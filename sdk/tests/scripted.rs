//! The classification table and wire discipline against a scripted server that answers what each test needs.
//!
//! The scripted server also opens the SDK's SQLite file on every arrival, proving the row was durable first.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::scripted::{arrivals, created, problem, req, rig, settle, Answer, JSON, OK};
use sendonce::{Sdk, SdkConfig, TransferState};

#[tokio::test]
async fn the_row_is_durable_before_the_first_byte_and_every_retry_is_byte_identical() {
    let a503 = problem(503, r#"{"code":"service_unavailable"}"#);
    let rig = rig(vec![a503.clone(), a503, Answer(500, vec![], ""), created()]).await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Succeeded);
    assert_eq!(t.server_transfer_id.as_deref(), Some("t_1"));
    let seen = arrivals(&rig);
    assert_eq!(seen.len(), 4);
    for a in &seen {
        assert_eq!(a.key, t.idempotency_key, "a retry never mints a key");
        assert_eq!(a.body, seen[0].body, "the body never changes under a key");
        assert_eq!(a.auth, "Bearer tok-1");
        assert_eq!(
            a.row_state_at_arrival.as_deref(),
            Some("sending"),
            "row committed (and marked on the wire) before arrival"
        );
    }
    let body: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body["amount_minor"], 1234);
    assert_eq!(t.attempts, 4);
}

#[tokio::test]
async fn replay_counts_as_success() {
    let rig = rig(vec![Answer(
        200,
        vec![JSON, ("idempotent-replayed", "true")],
        OK,
    )])
    .await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Succeeded);
    assert!(t.replayed);
}

#[tokio::test]
async fn insufficient_funds_is_a_definitive_rejection_sent_once() {
    let rig = rig(vec![problem(
        402,
        r#"{"code":"insufficient_funds","detail":"balance 10"}"#,
    )])
    .await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Rejected);
    let r = t.rejection.unwrap();
    assert_eq!(
        (r.code.as_str(), r.http_status),
        ("insufficient_funds", 402)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(arrivals(&rig).len(), 1, "a definitive no is never retried");
}

#[tokio::test]
async fn validation_errors_reject_without_retry() {
    for status in [400u16, 404, 413, 415] {
        let rig = rig(vec![problem(status, r#"{"code":"invalid_request"}"#)]).await;
        let t = settle(&rig).await;
        assert_eq!(t.state, TransferState::Rejected, "status {status}");
        assert_eq!(arrivals(&rig).len(), 1);
    }
}

#[tokio::test]
async fn key_reused_fails_at_once_and_is_never_retried() {
    let rig = rig(vec![problem(422, r#"{"code":"idempotency_key_reused"}"#)]).await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Failed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(arrivals(&rig).len(), 1);
}

#[tokio::test]
async fn in_use_waits_for_retry_after_then_succeeds() {
    let rig = rig(vec![
        Answer(
            409,
            vec![common::scripted::PROBLEM, ("retry-after", "1")],
            r#"{"code":"idempotency_key_in_use"}"#,
        ),
        created(),
    ])
    .await;
    let mut rx = rig.sdk.send_transfer(req()).await.unwrap();
    // The 409 answer's wait is the server's Retry-After (1 s), clamped to the cap (100 ms here).
    rx = tokio::time::timeout(
        Duration::from_secs(10),
        rig.sdk.wait_for_outcome(&rx.local_id),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(rx.state, TransferState::Succeeded);
    assert_eq!(arrivals(&rig).len(), 2);
}

#[tokio::test]
async fn unknown_outcomes_retry_with_backoff_for_every_retryable_status() {
    for status in [408u16, 425, 429, 500, 502, 503, 504] {
        let rig = rig(vec![Answer(status, vec![], ""), created()]).await;
        let t = settle(&rig).await;
        assert_eq!(t.state, TransferState::Succeeded, "status {status}");
        assert_eq!(t.attempts, 2, "status {status}");
    }
}

#[tokio::test]
async fn unauthorised_holds_until_a_new_token_then_resumes_with_the_same_key() {
    let rig = rig(vec![
        problem(401, r#"{"code":"unauthenticated"}"#),
        created(),
    ])
    .await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    let mut state = TransferState::Pending;
    for _ in 0..200 {
        state = rig.sdk.transfer(&t.local_id).unwrap().state;
        if state == TransferState::AuthRequired {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state, TransferState::AuthRequired);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        arrivals(&rig).len(),
        1,
        "no retries while credentials are missing"
    );
    rig.sdk.set_access_token(Some("tok-2".into())).unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        rig.sdk.wait_for_outcome(&t.local_id),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(done.state, TransferState::Succeeded);
    let seen = arrivals(&rig);
    assert_eq!(seen[1].auth, "Bearer tok-2");
    assert_eq!(seen[0].key, seen[1].key);
}

#[tokio::test]
async fn connection_errors_are_retried() {
    // Nothing listens on this port until the SDK has failed at least once.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let dir = tempfile::tempdir().unwrap();
    let config = SdkConfig::builder(format!("http://{addr}"), dir.path().join("d.db"))
        .retry_base(Duration::from_millis(50))
        .retry_cap(Duration::from_millis(200))
        .build()
        .unwrap();
    let sdk = Sdk::open(config).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();
    for _ in 0..500 {
        if sdk.transfer(&t.local_id).unwrap().attempts >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = sdk.transfer(&t.local_id).unwrap();
    assert!(
        waiting.attempts >= 2 && !waiting.state.is_final(),
        "{waiting:?}"
    );
    assert!(waiting.last_error.unwrap().contains("connection"));
    let app = Router::new().route(
        "/v1/transfers",
        post(|headers: axum::http::HeaderMap| async move {
            let key = headers["idempotency-key"].to_str().unwrap().to_string();
            (StatusCode::CREATED, OK.replace("{key}", &key))
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let done = tokio::time::timeout(Duration::from_secs(10), sdk.wait_for_outcome(&t.local_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.state, TransferState::Succeeded);
}
