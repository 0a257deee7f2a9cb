//! Races and injected faults: one key, many deliveries, exactly one debit.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_requests_one_debit() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 1_000_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 777);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (client, url, token, body, barrier) = (
            client(),
            s.url.clone(),
            a.token.clone(),
            body.clone(),
            barrier.clone(),
        );
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let r = client
                .post(format!("{url}/v1/transfers"))
                .bearer_auth(token)
                .header("idempotency-key", "one-key")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("send");
            to_resp(r).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let fresh: Vec<_> = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .collect();
    assert_eq!(fresh.len(), 1, "exactly one fresh 201");
    let original = &fresh[0].body;
    for r in &answers {
        match r.status {
            409 => assert_eq!(r.code(), "idempotency_key_in_use"),
            201 => assert_eq!(&r.body, original, "replays are byte-identical"),
            other => panic!("unexpected status {other}: {:?}", r.json()),
        }
    }
    assert_eq!(s.debits_for(&a, "one-key").await, 1);
    let stats = s.settle().await;
    assert_eq!(stats["credits"], 1);
    assert_eq!(stats["sms_sent"], 1);
    assert_eq!(s.balance(&a).await, 1_000_000 - 777);
    s.stop().await;
}

#[tokio::test]
async fn dropped_response_after_commit_is_recovered_by_retry_or_lookup() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 250);
    s.faults(json!({"drop_response_after_commit_rate": 1.0}))
        .await;
    let lost = s.try_transfer(&a.token, Some("train"), &body).await;
    assert!(lost.is_err(), "the client must see no answer, got {lost:?}");
    // The money moved: the look-up tells without a new key.
    let look = s
        .get("/v1/transfers?idempotency_key=train", Some(&a.token))
        .await;
    assert_eq!(look.status, 200);
    // The retry with the same key is a replay (drops only hit fresh commits).
    let retry = s.transfer(&a.token, Some("train"), &body).await;
    assert_eq!(retry.status, 201);
    assert!(retry.replayed());
    assert_eq!(retry.body, look.body);
    assert_eq!(s.debits_for(&a, "train").await, 1);
    s.stop().await;
}

#[tokio::test]
async fn duplicate_delivery_moves_money_once() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    s.faults(json!({"duplicate_delivery_rate": 1.0, "seed": 7}))
        .await;
    for i in 0..10 {
        let key = format!("dup-{i}");
        let r = s
            .transfer_until_done(&a.token, &key, &transfer_body(&b.id, 10))
            .await;
        assert_eq!(r.status, 201);
        assert_eq!(s.debits_for(&a, &key).await, 1);
    }
    let stats = s.settle().await;
    assert_eq!(
        stats["gateway_authorizations"], 10,
        "one authorisation per key"
    );
    assert_eq!(s.balance(&b).await, 100);
    s.stop().await;
}

#[tokio::test]
async fn injected_503_touches_nothing() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    s.faults(json!({"error_503_rate": 1.0})).await;
    let r = s
        .transfer(&a.token, Some("busy"), &transfer_body(&b.id, 10))
        .await;
    assert_eq!((r.status, r.code().as_str()), (503, "service_unavailable"));
    let stats = s.get("/v1/test/stats", None).await.json();
    assert_eq!(stats["idempotency_keys"], 0);
    assert_eq!(
        s.client
            .delete(format!("{}/v1/test/faults", s.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = s
        .transfer(&a.token, Some("busy"), &transfer_body(&b.id, 10))
        .await;
    assert_eq!(r.status, 201);
    assert!(!r.replayed());
    s.stop().await;
}

#[tokio::test]
async fn attempt_slower_than_lock_timeout_still_debits_once() {
    // The reaper releases a key whose first attempt is merely slow; the retry then runs
    // concurrently with it. The first attempt lost its lock, so the fence keeps it from
    // moving money: it answers 409 and the retry's outcome is the key's.
    let s = start_with(|c| c.lock_timeout = Duration::from_millis(200)).await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 300);
    s.faults(json!({"gateway_delay_ms": 900})).await;
    let slow = s.post_in_background(&a, "slow", &body);
    tokio::time::sleep(Duration::from_millis(600)).await;
    // By now the reaper has released the key: this retry executes again.
    let retry = s.transfer_until_done(&a.token, "slow", &body).await;
    let first = slow.await.unwrap();
    assert_eq!(
        (first.status, first.code()),
        (409, "idempotency_key_in_use".into())
    );
    assert_eq!(retry.status, 201);
    let again = s.transfer(&a.token, Some("slow"), &body).await;
    assert_eq!(
        (again.status, &again.body),
        (201, &retry.body),
        "the key's one outcome"
    );
    assert_eq!(s.debits_for(&a, "slow").await, 1);
    let stats = s.get("/v1/test/stats", None).await.json();
    assert_eq!(
        stats["gateway_authorizations"], 1,
        "the gateway is idempotent on the key"
    );
    assert!(stats["gateway_calls"].as_i64().unwrap() >= 2, "{stats}");
    s.stop().await;
}
