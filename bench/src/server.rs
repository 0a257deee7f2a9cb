//! The server under test (server-mock, in process) and the small HTTP client the figures share.

use std::time::{Duration, Instant};

use server_mock::{RunningServer, ServerConfig};

/// The requests whose counts figures 3 and 9 compare (issue 33), each with the path it posts
/// to: a first request (with a fresh key), the contract's floor, the peer and the plain insert.
pub const COUNTED: [(&str, &str); 4] = [
    ("first", "/v1/transfers"),
    ("floor", "/v1/bench/floor"),
    ("peer", "/v1/bench/peer"),
    ("plain", "/v1/bench/plain"),
];

/// The counts' gate on a first request over the contract's floor (issue 33, point 3), on both
/// stores.
pub const FIRST_OVER_FLOOR_TARGET: f64 = 1.05;

/// The bench's server configuration on `db`.
pub fn config(db: &str, gateway_delay: Duration) -> ServerConfig {
    ServerConfig {
        db: db.to_string(),
        gateway_delay,
        // The bench measures the idempotency machinery, not the per-user quotas.
        quotas: server_mock::quota::QuotaLimits {
            requests_per_second: 1e6,
            burst: 1e6,
            keys_per_hour: u32::MAX,
        },
        ..ServerConfig::default()
    }
}

/// Starts server-mock on a free local port.
pub async fn start(db: &str, gateway_delay: Duration) -> RunningServer {
    server_mock::start(
        config(db, gateway_delay),
        "127.0.0.1:0".parse().expect("address"),
    )
    .await
    .expect("server-mock starts")
}

/// A user made through the test API.
#[derive(Debug, Clone)]
pub struct User {
    pub user_id: String,
    pub token: String,
}

/// One reqwest client without automatic retries (like the SDK's).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("reqwest client")
}

/// `POST /v1/test/users`.
pub async fn create_user(c: &reqwest::Client, base: &str, name: &str, balance: i64) -> User {
    let body =
        serde_json::json!({"display_name": name, "balance_minor": balance, "currency": "BDT"});
    let r = c
        .post(format!("{base}/v1/test/users"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("create user");
    assert_eq!(r.status().as_u16(), 201, "create user");
    let v: serde_json::Value =
        serde_json::from_slice(&r.bytes().await.expect("body")).expect("json");
    User {
        user_id: v["user_id"].as_str().unwrap_or_default().to_string(),
        token: v["token"].as_str().unwrap_or_default().to_string(),
    }
}

/// A test-API call with a JSON body; returns the parsed answer.
pub async fn test_api(
    c: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let r = c
        .request(method, format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("test api");
    let bytes = r.bytes().await.unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
}

/// The body a transfer (and the plain baseline) sends.
pub fn transfer_body(to: &str, amount: i64) -> String {
    serde_json::json!({"to_user_id": to, "amount_minor": amount, "currency": "BDT", "note": "bench"})
        .to_string()
}

/// What one request saw.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub status: u16,
    pub replayed: bool,
    /// Seconds from send to the last body byte.
    pub secs: f64,
}

/// POSTs `body` to `url` with the bearer token and, if given, an idempotency key.
pub async fn post(
    c: &reqwest::Client,
    url: &str,
    token: &str,
    key: Option<&str>,
    body: String,
) -> Answer {
    let start = Instant::now();
    let mut b = c
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        b = b.header("idempotency-key", k);
    }
    match b.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let replayed = r.headers().contains_key("idempotent-replayed");
            let _ = r.bytes().await;
            Answer {
                status,
                replayed,
                secs: start.elapsed().as_secs_f64(),
            }
        }
        Err(_) => Answer {
            status: 0,
            replayed: false,
            secs: start.elapsed().as_secs_f64(),
        },
    }
}
