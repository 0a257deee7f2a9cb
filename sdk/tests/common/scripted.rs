//! A scripted server on loopback that answers whatever status, headers and body a test needs, in order.
//!
//! It also opens the SDK's SQLite file on every arrival, proving the row was durable first. `{key}` in a
//! scripted body is replaced by the request's idempotency key (POST header, or look-up query).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sendonce::{Sdk, SdkConfig, SdkConfigBuilder, TransferRequest};
use tokio::sync::Semaphore;

/// One scripted answer: status, extra headers, body (`{key}` stands for the request's key).
#[derive(Clone, Debug)]
pub struct Answer(
    pub u16,
    pub Vec<(&'static str, &'static str)>,
    pub &'static str,
);

/// The server's content type for errors.
pub const PROBLEM: (&str, &str) = ("content-type", "application/problem+json");
/// The server's content type for transfers.
pub const JSON: (&str, &str) = ("content-type", "application/json");
/// What a captive portal or a proxy sends.
pub const HTML: (&str, &str) = ("content-type", "text/html; charset=utf-8");

/// The server's transfer body for the key of the request.
pub const OK: &str = r#"{"transfer_id":"t_1","status":"completed","idempotency_key":"{key}"}"#;

/// 201 with a transfer for the request's key, as server-mock answers.
pub fn created() -> Answer {
    Answer(201, vec![JSON], OK)
}

/// A problem+json answer with a stable code, as server-mock answers.
pub fn problem(status: u16, body: &'static str) -> Answer {
    Answer(status, vec![PROBLEM], body)
}

/// What the test told the server to answer, and what arrived.
#[derive(Default)]
pub struct Script {
    /// Answers to the POSTs, in order; the last one repeats.
    pub answers: Vec<Answer>,
    /// Every POST that arrived.
    pub arrivals: Vec<Arrival>,
    /// The SDK's file, read on every arrival.
    pub db: Option<PathBuf>,
    /// Answer to every look-up (default: the server's 404 `transfer_not_found`).
    pub lookup: Option<Answer>,
    /// Look-ups that arrived.
    pub lookups: usize,
    /// When set, every request waits for a permit before it is answered (a request "out").
    pub gate: Option<Arc<Semaphore>>,
}

/// One POST as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub key: String,
    pub body: Vec<u8>,
    pub auth: String,
    /// State of the row with this key in the SDK's file at the moment the request arrived.
    pub row_state_at_arrival: Option<String>,
}

pub type Shared = Arc<Mutex<Script>>;

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

async fn pass_gate(s: &Shared) {
    let gate = s.lock().unwrap().gate.clone();
    if let Some(gate) = gate {
        gate.acquire().await.unwrap().forget();
    }
}

async fn transfers(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let key = header(&headers, "idempotency-key");
    let auth = header(&headers, "authorization");
    let db = s.lock().unwrap().db.clone();
    let row_state_at_arrival = db.and_then(|p| row_state(&p, &key));
    let answer = {
        let mut script = s.lock().unwrap();
        script.arrivals.push(Arrival {
            key: key.clone(),
            body: body.to_vec(),
            auth,
            row_state_at_arrival,
        });
        let n = script.arrivals.len() - 1;
        script
            .answers
            .get(n)
            .or(script.answers.last())
            .cloned()
            .unwrap_or_else(created)
    };
    pass_gate(&s).await;
    reply(answer, &key)
}

async fn lookup(State(s): State<Shared>, RawQuery(query): RawQuery) -> Response {
    let key = query
        .unwrap_or_default()
        .strip_prefix("idempotency_key=")
        .unwrap_or_default()
        .to_string();
    let answer = {
        let mut script = s.lock().unwrap();
        script.lookups += 1;
        script.lookup.clone().unwrap_or(problem(
            404,
            r#"{"status":404,"code":"transfer_not_found","detail":"no transfer of yours matches"}"#,
        ))
    };
    pass_gate(&s).await;
    reply(answer, &key)
}

fn reply(Answer(status, headers, body): Answer, key: &str) -> Response {
    let body = body.replace("{key}", key);
    let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
    // An answer with no content type of its own has none at all (axum would say text/plain).
    r.headers_mut().remove("content-type");
    for (k, v) in headers {
        r.headers_mut().insert(k, v.parse().unwrap());
    }
    r
}

/// Reads the SDK's file through a separate read-only connection, as another process would.
fn row_state(path: &PathBuf, key: &str) -> Option<String> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT state FROM transfers WHERE idem_key = ?1",
        [key],
        |r| r.get::<_, String>(0),
    )
    .ok()
}

/// A scripted server and an SDK on a temp file pointed at it.
pub struct Rig {
    pub sdk: Sdk,
    pub script: Shared,
    pub url: String,
    pub db: PathBuf,
    pub dir: tempfile::TempDir,
}

/// Starts the scripted server; returns its base URL.
pub async fn serve(script: Shared) -> String {
    let app = Router::new()
        .route("/v1/transfers", post(transfers).get(lookup))
        .route("/", get(|| async { "" }))
        .with_state(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The config every scripted test starts from: token `tok-1`, fast retries.
pub fn base_config(url: &str, db: &Path) -> SdkConfigBuilder {
    SdkConfig::builder(url, db)
        .access_token("tok-1")
        .retry_base(Duration::from_millis(10))
        .retry_cap(Duration::from_millis(100))
}

pub async fn rig(answers: Vec<Answer>) -> Rig {
    rig_with(answers, |c| c).await
}

/// A rig whose config the test adjusts.
pub async fn rig_with(
    answers: Vec<Answer>,
    adjust: impl FnOnce(SdkConfigBuilder) -> SdkConfigBuilder,
) -> Rig {
    let script: Shared = Arc::new(Mutex::new(Script {
        answers,
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    script.lock().unwrap().db = Some(db.clone());
    let config = adjust(base_config(&url, &db)).build().unwrap();
    Rig {
        sdk: Sdk::open(config).unwrap(),
        script,
        url,
        db,
        dir,
    }
}

pub fn req() -> TransferRequest {
    TransferRequest {
        to_user_id: "u_bob".into(),
        amount_minor: 1234,
        currency: "BDT".into(),
        note: Some("rent".into()),
    }
}

/// Bounded wait for the outcome of `local_id`: a hung test fails instead of hanging CI.
pub async fn wait(sdk: &Sdk, local_id: &str) -> sendonce::Transfer {
    tokio::time::timeout(Duration::from_secs(20), sdk.wait_for_outcome(local_id))
        .await
        .expect("no outcome within 20 s")
        .unwrap()
}

pub async fn settle(rig: &Rig) -> sendonce::Transfer {
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    wait(&rig.sdk, &t.local_id).await
}

pub fn arrivals(rig: &Rig) -> Vec<Arrival> {
    rig.script.lock().unwrap().arrivals.clone()
}

/// Polls a condition on shared state (never a fixed sleep as the assertion); panics after 20 s.
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}
