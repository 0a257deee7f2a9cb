//! Who may use the test API, and how much one client may take (SECURITY.md).

use std::time::Duration;

use serde_json::json;
use server_mock::{start, Secret, ServerConfig};

use crate::common::*;

fn new_user() -> serde_json::Value {
    json!({"display_name": "M", "balance_minor": 1_000_000_000_000_000i64, "currency": "BDT"})
}

#[tokio::test]
async fn the_test_api_refuses_foreign_hosts_and_non_json_posts() {
    let s = start_default().await;
    let url = format!("{}/v1/test/users", s.url);
    // DNS rebinding: the attacker's name resolves to 127.0.0.1, the Host header stays theirs.
    let rebound = s
        .client
        .post(&url)
        .header("host", "evil.example:8080")
        .json(&new_user())
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // CSRF: a cross-origin page can POST text/plain without a preflight.
    let csrf = s
        .client
        .post(&url)
        .header("content-type", "text/plain")
        .header("origin", "https://evil.example")
        .body(new_user().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(csrf.status(), 415);
    assert!(
        csrf.headers().get("access-control-allow-origin").is_none(),
        "no CORS, ever"
    );
    assert!(
        s.ledger().await.is_empty(),
        "no user (and no money) was created"
    );
    let rebound_read = s
        .client
        .get(format!("{}/v1/test/ledger", s.url))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound_read.status(), 403);
    // The same requests from loopback work.
    assert_eq!(s.post_json("/v1/test/users", &new_user()).await.status, 201);
    s.stop().await;
}

#[tokio::test]
async fn fault_values_are_bounded() {
    let s = start_default().await;
    for patch in [
        json!({"gateway_delay_ms": u64::MAX}),
        json!({"slow_gateway_ms": 3_600_000}),
        json!({"error_503_rate": 1.5}),
    ] {
        let r = s.put_json("/v1/test/faults", &patch).await;
        assert_eq!(r.status, 400, "{patch} must be refused: {:?}", r.json());
    }
    let r = s
        .post_json("/v1/test/clock", &json!({"advance_ms": i64::MAX}))
        .await;
    assert_eq!(r.status, 400, "a clock jump of i64::MAX expires every key");
    s.stop().await;
}

#[tokio::test]
async fn a_test_api_token_is_required_when_configured_and_beyond_loopback() {
    let refused = start(ServerConfig::default(), "0.0.0.0:0".parse().unwrap()).await;
    assert!(
        refused.is_err(),
        "the test API beyond loopback needs a token"
    );
    let s = start_with(|c| c.test_api_token = Some(Secret::new("t0ken"))).await;
    assert_eq!(s.post_json("/v1/test/users", &new_user()).await.status, 403);
    let ok = s
        .client
        .post(format!("{}/v1/test/users", s.url))
        .bearer_auth("t0ken")
        .json(&new_user())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 201);
    assert!(!format!(
        "{:?}",
        ServerConfig {
            test_api_token: Some(Secret::new("t0ken")),
            ..Default::default()
        }
    )
    .contains("t0ken"));
    s.stop().await;
}

#[tokio::test]
async fn a_definitive_402_costs_no_gateway_call() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 0).await, s.user("B", 0).await);
    for i in 0..5 {
        let r = s
            .transfer(&a.token, Some(&format!("k{i}")), &transfer_body(&b.id, 100))
            .await;
        assert_eq!(r.status, 402);
    }
    let stats = s.get("/v1/test/stats", None).await.json();
    assert_eq!(stats["gateway_calls"], 0, "{stats}");
    tokio::time::sleep(Duration::ZERO).await;
    s.stop().await;
}

#[tokio::test]
async fn names_and_notes_are_stored_clean_and_sms_stays_bounded() {
    let s = start_default().await;
    let phishing = format!(
        "Ann\nURGENT: your wallet is locked, call +880\u{202E}{}",
        " ".repeat(15_000)
    );
    let r = s
        .post_json(
            "/v1/test/users",
            &json!({"display_name": phishing, "balance_minor": 100, "currency": "BDT"}),
        )
        .await;
    assert_eq!(
        r.code(),
        "invalid_request",
        "control and bidi characters are refused"
    );
    let (a, b) = (s.user("  Ann  ", 100).await, s.user("B", 0).await);
    let profile = s
        .client
        .put(format!("{}/v1/profile", s.url))
        .bearer_auth(&a.token)
        .json(&json!({"display_name": format!("Ann{}", " ".repeat(15_000))}))
        .send()
        .await
        .unwrap();
    let profile: serde_json::Value = profile.json().await.unwrap();
    assert_eq!(
        profile["display_name"], "Ann",
        "the trimmed value is what is stored"
    );
    let bad_note =
        json!({"to_user_id": b.id, "amount_minor": 1, "currency": "BDT", "note": "hi\u{0007}"});
    let r = s
        .transfer(&a.token, Some("note"), &bad_note.to_string())
        .await;
    assert_eq!(r.code(), "invalid_request");
    assert_eq!(
        s.transfer(&a.token, Some("ok"), &transfer_body(&b.id, 1))
            .await
            .status,
        201
    );
    s.settle().await;
    let sms = s.get("/v1/test/sms", None).await.json();
    let text = sms[0]["text"].as_str().unwrap();
    assert!(
        text.contains("from Ann (ref") && text.len() < 120,
        "{text:?}"
    );
    s.stop().await;
}
