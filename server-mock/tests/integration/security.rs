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

mod connections {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use crate::common::*;

    /// Reads until the server closes the connection (Ok) or `limit` passes (Err).
    async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, ()> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let read = async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        };
        tokio::time::timeout(limit, read).await.map_err(|_| ())?;
        Ok(got)
    }

    #[tokio::test]
    async fn slow_headers_and_idle_keep_alive_are_closed() {
        let s = start_with(|c| c.limits.header_read_timeout = Duration::from_millis(300)).await;
        let addr = s.server.addr;
        // Dripped headers: never a whole head.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /v1/wallet HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let mut closed = false;
        for _ in 0..40 {
            if slow.write_all(b"X-Drip: 1\r\n").await.is_err() {
                closed = true;
                break;
            }
            let mut b = [0u8; 1];
            if let Ok(Ok(0)) =
                tokio::time::timeout(Duration::from_millis(100), slow.read(&mut b)).await
            {
                closed = true;
                break;
            }
        }
        assert!(
            closed,
            "a client dripping headers for 4 s was still being served"
        );
        // Idle after one answered request.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /v1/wallet HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let answer = closed_within(&mut idle, Duration::from_secs(10)).await;
        let answer = answer.expect("an idle keep-alive connection must be closed");
        assert!(
            answer.starts_with(b"HTTP/1.1 401"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        s.stop().await;
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_get_503_and_the_server_recovers() {
        let s = start_with(|c| c.limits.max_connections = 4).await;
        let addr = s.server.addr;
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(b"GET /v1/wallet HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await
                .unwrap();
            held.push(c);
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // let the loop accept them
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let answer = closed_within(&mut extra, Duration::from_secs(5))
            .await
            .expect("answered and closed");
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with("HTTP/1.1 503") && text.contains("too_many_connections"),
            "{text}"
        );
        drop(held);
        let mut ok = None;
        for _ in 0..50 {
            let r = s.get("/v1/wallet", None).await;
            if r.status == 401 {
                ok = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ok.is_some(), "freed slots serve again");
        s.stop().await;
    }

    #[tokio::test]
    async fn a_request_past_its_deadline_gets_503_and_the_transfer_still_completes_once() {
        let s = start_with(|c| c.limits.request_timeout = Duration::from_millis(300)).await;
        let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
        s.faults(serde_json::json!({"gateway_delay_ms": 1_000}))
            .await;
        let body = transfer_body(&b.id, 10);
        let first = s.transfer(&a.token, Some("late"), &body).await;
        assert_eq!(
            (first.status, first.code()),
            (503, "request_timeout".into())
        );
        assert!(first.headers.get("retry-after").is_some());
        s.faults(serde_json::json!({"gateway_delay_ms": 0})).await;
        let done = s.transfer_until_done(&a.token, "late", &body).await;
        assert_eq!(done.status, 201);
        assert_eq!(s.debits_for(&a, "late").await, 1);
        s.stop().await;
    }
}

#[tokio::test]
async fn per_user_quotas_answer_429_and_store_nothing() {
    let s = start_with(|c| {
        c.quotas = server_mock::quota::QuotaLimits {
            requests_per_second: 0.01,
            burst: 4.0,
            keys_per_hour: 2,
        }
    })
    .await;
    let (a, b, c) = (
        s.user("A", 1_000).await,
        s.user("B", 0).await,
        s.user("C", 1_000).await,
    );
    let body = transfer_body(&b.id, 1);
    assert_eq!(s.transfer(&a.token, Some("k1"), &body).await.status, 201);
    assert_eq!(s.transfer(&a.token, Some("k2"), &body).await.status, 201);
    let third = s.transfer(&a.token, Some("k3"), &body).await;
    assert_eq!(
        (third.status, third.code()),
        (429, "rate_limited".into()),
        "keys per hour"
    );
    assert!(third.headers.get("retry-after").is_some());
    let replay = s.transfer(&a.token, Some("k1"), &body).await;
    assert_eq!(
        (replay.status, replay.replayed()),
        (201, true),
        "a known key still replays"
    );
    let flood = s.transfer(&a.token, Some("k1"), &body).await;
    assert_eq!(flood.status, 429, "the request bucket (burst 4) is empty");
    assert_eq!(
        s.transfer(&c.token, Some("k3"), &body).await.status,
        201,
        "other users are not starved"
    );
    assert_eq!(
        s.debits_for(&a, "k3").await,
        0,
        "the refused key stored nothing"
    );
    // A look-up's 404 closes a key (a row): it counts against the same quota. C has used
    // one of its two keys.
    let closing = s
        .get("/v1/transfers?idempotency_key=never-sent", Some(&c.token))
        .await;
    assert_eq!(closing.code(), "transfer_not_found");
    let over = s
        .get("/v1/transfers?idempotency_key=never-sent-2", Some(&c.token))
        .await;
    assert_eq!(over.status, 429, "{:?}", over.json());
    s.stop().await;
}

#[tokio::test]
async fn beneficiaries_are_capped_per_user() {
    let s = start_default().await;
    let a = s.user("A", 0).await;
    let add = |phone: String| {
        let (client, url, token) = (s.client.clone(), s.url.clone(), a.token.clone());
        async move {
            client
                .post(format!("{url}/v1/beneficiaries"))
                .bearer_auth(token)
                .json(&json!({"phone": phone, "name": "N"}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    for i in 0..200 {
        assert_eq!(add(format!("+8801{i:07}")).await, 201);
    }
    assert_eq!(add("+8801999999".into()).await, 422, "the 201st is refused");
    assert_eq!(
        add("+88010000007".into()).await,
        200,
        "a repeat is still answered with its record"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_database_is_private_and_holds_no_token() {
    use std::os::unix::fs::PermissionsExt;
    let s = start_default().await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    assert_eq!(
        s.transfer(&a.token, Some("k"), &transfer_body(&b.id, 1))
            .await
            .status,
        201
    );
    if postgres().is_some() {
        // A file of our own exists only with SQLite; PostgreSQL's files are the cluster's.
        eprintln!("skipped on PostgreSQL: the database is not a file of ours");
        return;
    }
    let db = std::path::PathBuf::from(&s.server.app().config.db);
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path} is {mode:o}");
        let bytes = std::fs::read(&path).unwrap();
        let token = a.token.as_bytes();
        assert!(
            !bytes.windows(token.len()).any(|w| w == token),
            "{path} holds a bearer token"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn tokens_expire_and_can_be_revoked() {
    let s = start_default().await;
    let short = s
        .post_json(
            "/v1/test/users",
            &json!({"display_name": "S", "balance_minor": 0, "currency": "BDT", "token_ttl_ms": 60_000}),
        )
        .await
        .json();
    let token = short["token"].as_str().unwrap();
    assert_eq!(s.get("/v1/wallet", Some(token)).await.status, 200);
    s.post_json("/v1/test/clock", &json!({"advance_ms": 61_000}))
        .await;
    assert_eq!(
        s.get("/v1/wallet", Some(token)).await.status,
        401,
        "expired"
    );
    let a = s.user("A", 0).await;
    assert_eq!(s.get("/v1/wallet", Some(&a.token)).await.status, 200);
    let revoke = s
        .post_json(&format!("/v1/test/users/{}/revoke", a.id), &json!({}))
        .await;
    assert_eq!(revoke.status, 200);
    assert_eq!(
        s.get("/v1/wallet", Some(&a.token)).await.status,
        401,
        "revoked"
    );
    s.stop().await;
}

#[tokio::test]
async fn test_listings_are_paged() {
    let s = start_default().await;
    for i in 0..25 {
        s.user(&format!("U{i}"), 1).await; // one deposit entry each
    }
    let page = s.get("/v1/test/ledger?limit=10", None).await.json();
    let page = page.as_array().unwrap();
    assert_eq!(page.len(), 10);
    let last = page[9]["entry_id"].as_i64().unwrap();
    let next = s
        .get(&format!("/v1/test/ledger?after={last}&limit=100"), None)
        .await
        .json();
    assert_eq!(next.as_array().unwrap().len(), 15);
    assert_eq!(s.get("/v1/test/ledger?limit=20000", None).await.status, 400);
    assert_eq!(s.get("/v1/test/ledger?limit=0", None).await.status, 400);
    assert_eq!(s.get("/v1/test/sms?limit=5", None).await.status, 200);
    s.stop().await;
}

#[tokio::test]
async fn a_balance_can_never_grow_past_the_ceiling() {
    let s = start_with(|c| c.max_balance_minor = 1_000).await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 900).await);
    let body = transfer_body(&b.id, 200);
    let r = s.transfer(&a.token, Some("big"), &body).await;
    assert_eq!(
        (r.status, r.code()),
        (422, "recipient_balance_limit".into())
    );
    let again = s.transfer(&a.token, Some("big"), &body).await;
    assert_eq!(
        (again.status, again.replayed()),
        (422, true),
        "stored like a 402"
    );
    assert_eq!(
        s.transfer(&a.token, Some("ok"), &transfer_body(&b.id, 100))
            .await
            .status,
        201
    );
    s.settle().await;
    assert_eq!(s.balance(&b).await, 1_000);
    assert_eq!(s.debits_for(&a, "big").await, 0);
    s.stop().await;
}
