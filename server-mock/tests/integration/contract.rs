//! Every row of the DESIGN.md contract table, over real HTTP on a real SQLite file.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn first_request_then_byte_identical_replay() {
    let s = start_default().await;
    let (a, b) = (s.user("Asha", 10_000).await, s.user("Bilal", 0).await);
    let body = transfer_body(&b.id, 1_500);
    let first = s.transfer(&a.token, Some("key-1"), &body).await;
    assert_eq!(first.status, 201);
    assert!(!first.replayed());
    assert_eq!(first.content_type(), "application/json");
    let j = first.json();
    assert_eq!(j["status"], "completed");
    assert_eq!(j["from_user_id"], a.id.as_str());
    assert_eq!(j["to_user_id"], b.id.as_str());
    assert_eq!(j["amount_minor"], 1_500);
    assert_eq!(j["currency"], "BDT");
    assert_eq!(j["note"], "rent");
    assert_eq!(j["idempotency_key"], "key-1");
    assert!(j["created_at"].as_str().unwrap().ends_with('Z'));

    let again = s.transfer(&a.token, Some("key-1"), &body).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.body, first.body, "replay must be byte-identical");
    assert_eq!(s.debits_for(&a, "key-1").await, 1);
    s.settle().await;
    assert_eq!(s.balance(&a).await, 8_500);
    assert_eq!(s.balance(&b).await, 1_500);
    s.stop().await;
}

#[tokio::test]
async fn in_memory_database_works_too() {
    let s = start_with(|c| c.db = ":memory:".into()).await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 100);
    let first = s.transfer(&a.token, Some("m"), &body).await;
    let again = s.transfer(&a.token, Some("m"), &body).await;
    assert_eq!((first.status, again.status), (201, 201));
    assert_eq!(first.body, again.body);
    s.settle().await;
    assert_eq!(s.balance(&b).await, 100);
    s.stop().await;
}

#[tokio::test]
async fn missing_and_invalid_keys() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 100);

    let r = s.transfer(&a.token, None, &body).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "idempotency_key_missing")
    );
    assert_eq!(r.content_type(), "application/problem+json");
    for field in ["type", "title", "status", "code", "detail"] {
        assert!(r.json().get(field).is_some(), "problem lacks {field}");
    }

    let k255 = "k".repeat(255);
    let k256 = "k".repeat(256);
    let r = s.transfer(&a.token, Some(&k256), &body).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "idempotency_key_invalid")
    );
    let r = s.transfer(&a.token, Some(&k255), &body).await;
    assert_eq!(r.status, 201, "255 chars is the maximum: {:?}", r.json());
    for bad in ["has space", "\"unterminated", "\"\"", "tab\there"] {
        let r = s.transfer(&a.token, Some(bad), &body).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "idempotency_key_invalid"),
            "{bad:?}"
        );
    }
    assert_eq!(
        s.ledger()
            .await
            .iter()
            .filter(|e| e["kind"] == "debit")
            .count(),
        1
    );
    s.stop().await;
}

#[tokio::test]
async fn quoted_sf_string_key_means_the_bare_key() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 100);
    let quoted = s.transfer(&a.token, Some("\"abc\""), &body).await;
    assert_eq!(quoted.status, 201);
    assert_eq!(quoted.json()["idempotency_key"], "abc");
    let bare = s.transfer(&a.token, Some("abc"), &body).await;
    assert_eq!(bare.status, 201);
    assert!(bare.replayed());
    assert_eq!(bare.body, quoted.body);
    assert_eq!(s.debits_for(&a, "abc").await, 1);
    s.stop().await;
}

#[tokio::test]
async fn authentication_is_required() {
    let s = start_default().await;
    let b = s.user("B", 0).await;
    let body = transfer_body(&b.id, 100);
    let r = s
        .client
        .post(format!("{}/v1/transfers", s.url))
        .header("idempotency-key", "k")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    let r = to_resp(r).await;
    assert_eq!((r.status, r.code().as_str()), (401, "unauthenticated"));
    let r = s.transfer("tok_not-a-real-token", Some("k"), &body).await;
    assert_eq!((r.status, r.code().as_str()), (401, "unauthenticated"));
    for path in [
        "/v1/wallet",
        "/v1/transfers/tr_x",
        "/v1/transfers?idempotency_key=k",
    ] {
        assert_eq!(s.get(path, None).await.status, 401, "{path}");
    }
    assert!(s.ledger().await.iter().all(|e| e["kind"] == "deposit"));
    s.stop().await;
}

#[tokio::test]
async fn same_key_other_body_is_422_and_moves_nothing() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let first = s
        .transfer(&a.token, Some("k"), &transfer_body(&b.id, 100))
        .await;
    assert_eq!(first.status, 201);
    let other = s
        .transfer(&a.token, Some("k"), &transfer_body(&b.id, 200))
        .await;
    assert_eq!(
        (other.status, other.code().as_str()),
        (422, "idempotency_key_reused")
    );
    // Same JSON, different bytes: the fingerprint is over the exact bytes sent.
    let spaced = transfer_body(&b.id, 100).replace(':', ": ");
    let r = s.transfer(&a.token, Some("k"), &spaced).await;
    assert_eq!(r.status, 422);
    assert_eq!(s.debits_for(&a, "k").await, 1);
    // The original is still replayable.
    let again = s
        .transfer(&a.token, Some("k"), &transfer_body(&b.id, 100))
        .await;
    assert_eq!(again.body, first.body);
    s.stop().await;
}

#[tokio::test]
async fn in_progress_key_answers_409_with_retry_after() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    s.faults(json!({"gateway_delay_ms": 600})).await;
    let body = transfer_body(&b.id, 100);
    let slow = {
        let (client, url, token, body) = (
            s.client.clone(),
            s.url.clone(),
            a.token.clone(),
            body.clone(),
        );
        tokio::spawn(async move {
            client
                .post(format!("{url}/v1/transfers"))
                .bearer_auth(token)
                .header("idempotency-key", "slow")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let r = s.transfer(&a.token, Some("slow"), &body).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "idempotency_key_in_use")
    );
    assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    // A different body under the running key is still a reuse.
    let r = s
        .transfer(&a.token, Some("slow"), &transfer_body(&b.id, 5))
        .await;
    assert_eq!(r.status, 422);
    // The look-up reports the same thing.
    let r = s
        .get("/v1/transfers?idempotency_key=slow", Some(&a.token))
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(slow.await.unwrap(), 201);
    assert_eq!(s.debits_for(&a, "slow").await, 1);
    s.stop().await;
}

#[tokio::test]
async fn keys_are_scoped_per_user() {
    let s = start_default().await;
    let (a, b, c) = (
        s.user("A", 10_000).await,
        s.user("B", 10_000).await,
        s.user("C", 0).await,
    );
    let body = transfer_body(&c.id, 100);
    let ra = s.transfer(&a.token, Some("shared"), &body).await;
    let rb = s.transfer(&b.token, Some("shared"), &body).await;
    assert_eq!((ra.status, rb.status), (201, 201));
    assert!(!rb.replayed());
    assert_ne!(ra.json()["transfer_id"], rb.json()["transfer_id"]);
    assert_eq!(s.debits_for(&a, "shared").await, 1);
    assert_eq!(s.debits_for(&b, "shared").await, 1);
    // B cannot see A's transfer, by id or by key.
    let id = ra.json()["transfer_id"].as_str().unwrap().to_string();
    assert_eq!(
        s.get(&format!("/v1/transfers/{id}"), Some(&b.token))
            .await
            .status,
        404
    );
    let by_key = s
        .get("/v1/transfers?idempotency_key=shared", Some(&b.token))
        .await;
    assert_eq!(by_key.json()["transfer_id"], rb.json()["transfer_id"]);
    s.stop().await;
}

#[tokio::test]
async fn insufficient_funds_is_stored_and_replayed() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 5_000);
    let r = s.transfer(&a.token, Some("poor"), &body).await;
    assert_eq!((r.status, r.code().as_str()), (402, "insufficient_funds"));
    assert!(!r.replayed());
    let again = s.transfer(&a.token, Some("poor"), &body).await;
    assert_eq!(again.status, 402);
    assert!(again.replayed());
    assert_eq!(again.body, r.body);
    let look = s
        .get("/v1/transfers?idempotency_key=poor", Some(&a.token))
        .await;
    assert_eq!((look.status, look.body.clone()), (402, r.body.clone()));
    assert_eq!(s.debits_for(&a, "poor").await, 0);
    assert_eq!(s.balance(&a).await, 1_000);
    s.stop().await;
}

#[tokio::test]
async fn validation_errors_are_not_stored() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let cases = [
        ("{not json", 400, "invalid_request"),
        (r#"{"to_user_id": "x"}"#, 400, "invalid_request"),
        (&transfer_body(&b.id, 0) as &str, 400, "invalid_request"),
        (&transfer_body(&b.id, -5), 400, "invalid_request"),
        (
            &transfer_body(&b.id, 1_000_000_000_001),
            400,
            "invalid_request",
        ),
        (&transfer_body(&a.id, 100), 400, "invalid_request"),
        (
            &transfer_body("usr_nobody", 100),
            404,
            "recipient_not_found",
        ),
        (
            &json!({"to_user_id": b.id, "amount_minor": 100, "currency": "USD"}).to_string(),
            400,
            "invalid_request",
        ),
        (
            &json!({"to_user_id": b.id, "amount_minor": 1.5, "currency": "BDT"}).to_string(),
            400,
            "invalid_request",
        ),
    ];
    for (i, (body, status, code)) in cases.iter().enumerate() {
        let key = format!("v-{i}");
        let r = s.transfer(&a.token, Some(&key), body).await;
        assert_eq!(
            (r.status, r.code()),
            (*status, code.to_string()),
            "case {i}: {body}"
        );
        // Not stored: the same key with a valid body then executes.
        let ok = s
            .transfer(&a.token, Some(&key), &transfer_body(&b.id, 1))
            .await;
        assert_eq!(ok.status, 201, "case {i} left its key behind");
        assert!(!ok.replayed());
    }
    s.stop().await;
}

#[tokio::test]
async fn oversized_and_wrong_content_type() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let mut big = transfer_body(&b.id, 100);
    big.pop();
    big.push_str(&format!(r#","pad":"{}"}}"#, "x".repeat(17 * 1024)));
    let r = s.transfer(&a.token, Some("big"), &big).await;
    assert_eq!((r.status, r.code().as_str()), (413, "payload_too_large"));
    let r = s
        .client
        .post(format!("{}/v1/transfers", s.url))
        .bearer_auth(&a.token)
        .header("idempotency-key", "ct")
        .header("content-type", "text/plain")
        .body(transfer_body(&b.id, 100))
        .send()
        .await
        .unwrap();
    let r = to_resp(r).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (415, "unsupported_media_type")
    );
    assert_eq!(s.ledger().await.len(), 1, "only the opening deposit");
    s.stop().await;
}

#[tokio::test]
async fn status_lookups() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let first = s
        .transfer(&a.token, Some("look"), &transfer_body(&b.id, 100))
        .await;
    let id = first.json()["transfer_id"].as_str().unwrap().to_string();
    let by_id = s.get(&format!("/v1/transfers/{id}"), Some(&a.token)).await;
    assert_eq!(by_id.status, 200);
    assert_eq!(by_id.body, first.body);
    let by_key = s
        .get("/v1/transfers?idempotency_key=look", Some(&a.token))
        .await;
    assert_eq!(
        (by_key.status, by_key.body.clone()),
        (200, first.body.clone())
    );
    let quoted = s
        .get("/v1/transfers?idempotency_key=%22look%22", Some(&a.token))
        .await;
    assert_eq!(quoted.status, 200);
    let none = s
        .get("/v1/transfers?idempotency_key=never", Some(&a.token))
        .await;
    assert_eq!(
        (none.status, none.code().as_str()),
        (404, "transfer_not_found")
    );
    let none = s.get("/v1/transfers/tr_unknown", Some(&a.token)).await;
    assert_eq!(none.status, 404);
    let missing = s.get("/v1/transfers", Some(&a.token)).await;
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (400, "idempotency_key_missing")
    );
    s.stop().await;
}

#[tokio::test]
async fn profile_and_beneficiaries_are_naturally_idempotent() {
    let s = start_default().await;
    let a = s.user("A", 0).await;
    let put = |name: &'static str| {
        let (client, url, token) = (s.client.clone(), s.url.clone(), a.token.clone());
        async move {
            to_resp(
                client
                    .put(format!("{url}/v1/profile"))
                    .bearer_auth(token)
                    .json(&json!({"display_name": name}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let p1 = put("Asha R").await;
    let p2 = put("Asha R").await;
    assert_eq!((p1.status, p2.status), (200, 200));
    assert_eq!(p1.body, p2.body);
    assert_eq!(p1.json()["display_name"], "Asha R");

    let post = |phone: &'static str, name: &'static str| {
        let (client, url, token) = (s.client.clone(), s.url.clone(), a.token.clone());
        async move {
            to_resp(
                client
                    .post(format!("{url}/v1/beneficiaries"))
                    .bearer_auth(token)
                    .json(&json!({"phone": phone, "name": name}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let b1 = post("+8801700000000", "Mum").await;
    assert_eq!(b1.status, 201);
    let b2 = post("+8801700000000", "Mother").await;
    assert_eq!(b2.status, 200);
    assert_eq!(b2.body, b1.body, "a repeat returns the existing record");
    let b3 = post("+8801800000000", "Dad").await;
    assert_eq!(b3.status, 201);
    assert_eq!(post("not a phone", "x").await.status, 400);
    s.stop().await;
}

#[tokio::test]
async fn test_api_can_be_switched_off() {
    let s = start_with(|c| c.test_api = false).await;
    let r = s
        .post_json(
            "/v1/test/users",
            &json!({"display_name": "A", "balance_minor": 1, "currency": "BDT"}),
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    assert_eq!(s.get("/v1/test/ledger", None).await.status, 404);
    assert_eq!(s.post_json("/v1/bench/plain", &json!({})).await.status, 404);
    s.stop().await;
}
