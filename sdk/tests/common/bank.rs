//! A scripted server with a bank's own API, not server-mock's: other paths, its own key header, the
//! key and the operation id in response headers, its own error media type and codes, and "action
//! required" (SCA) answers. `{key}` in a scripted header value or body is the request's key.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sendonce::transport::Method as SdkMethod;
use sendonce::{
    ActionRule, Locator, LookupRoute, Operation, OperationSummary, ProblemFormat, RefusalCode,
    RejectionReason, ResponseContract, Sdk, SdkConfig, SdkConfigBuilder,
};

/// The bank's error media type.
pub const ERROR: (&str, &str) = ("content-type", "application/vnd.bank.error+json");
/// What a captive portal or a proxy sends.
pub const HTML: (&str, &str) = ("content-type", "text/html; charset=utf-8");
/// Plain JSON (a proxy's, or a cache's).
pub const JSON: (&str, &str) = ("content-type", "application/json");
/// Where payment orders are created.
pub const ORDERS: &str = "/api/v2/payment-orders";

/// One scripted answer: status, headers, body.
#[derive(Clone, Debug)]
pub struct Reply(
    pub u16,
    pub Vec<(&'static str, &'static str)>,
    pub &'static str,
);

/// The bank's success for the request's key: the key and the order id in headers.
pub fn executed() -> Reply {
    Reply(
        201,
        vec![JSON, ("x-request-key", "{key}"), ("x-operation-id", "po_1")],
        r#"{"status":"EXECUTED"}"#,
    )
}

/// The bank's own error.
pub fn error(status: u16, body: &'static str) -> Reply {
    Reply(status, vec![ERROR], body)
}

/// The bank's "strong customer authentication required" answer.
pub fn sca() -> Reply {
    error(
        428,
        r#"{"error":{"code":"SCA_REQUIRED","message":"confirm in your banking app","sca":{"redirect_url":"https://bank.example/sca/ch_1","challenge_id":"ch_1"}}}"#,
    )
}

/// The bank's contract.
pub fn contract() -> ResponseContract {
    ResponseContract {
        key_header: "x-request-key".into(),
        key_echo: Some(Locator::Header("x-request-key".into())),
        operation_id: Locator::Header("x-operation-id".into()),
        replayed_header: Some("x-replayed".into()),
        problem: ProblemFormat {
            content_type: "application/vnd.bank.error+json".into(),
            code: "/error/code".into(),
            detail: "/error/message".into(),
        },
        refusals: vec![
            RefusalCode::new("FUNDS_INSUFFICIENT", RejectionReason::InsufficientFunds),
            RefusalCode::new("ACCOUNT_UNKNOWN", RejectionReason::RecipientNotFound),
            RefusalCode::new("VALIDATION_FAILED", RejectionReason::InvalidRequest),
            RefusalCode::new(
                "LIMIT_EXCEEDED",
                RejectionReason::Other("LIMIT_EXCEEDED".into()),
            ),
        ],
        other_codes_refuse: false,
        key_in_use: vec!["REQUEST_IN_PROGRESS".into()],
        key_reused: vec!["REQUEST_KEY_CONFLICT".into()],
        auth: vec!["TOKEN_EXPIRED".into()],
        action_required: Some(ActionRule {
            codes: vec!["SCA_REQUIRED".into()],
            url: Some(Locator::Body("/error/sca/redirect_url".into())),
            challenge_id: Some(Locator::Body("/error/sca/challenge_id".into())),
        }),
        lookup: LookupRoute {
            path: format!("{ORDERS}/by-key/{{key}}"),
            not_found_codes: vec!["ORDER_NOT_FOUND".into()],
        },
    }
}

/// A payment order as the bank's app describes it: a source account and metadata in the body.
pub fn order(amount: &str) -> Operation {
    let body = format!(
        r#"{{"source_account":"DE02-ACC-1","destination":{{"iban":"DE89370400440532013000"}},"amount":{{"value":"{amount}","currency":"EUR"}},"metadata":{{"channel":"ios","basket":"b-7"}}}}"#
    );
    Operation::new("payment_order", SdkMethod::Post, ORDERS)
        .header("x-channel", "mobile")
        .body("application/json", body.into_bytes())
        .summary(OperationSummary {
            counterparty: "DE89370400440532013000".into(),
            amount_minor: 1250,
            currency: "EUR".into(),
            note: None,
        })
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub method: String,
    pub path: String,
    pub key: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What the test told the server to answer, and what arrived.
#[derive(Default)]
pub struct Script {
    /// Answers to the operations, in order; the last one repeats.
    pub answers: Vec<Reply>,
    /// Answers to the look-ups, in order; the last one repeats (default: the bank's own not-found).
    pub lookups: Vec<Reply>,
    /// Every operation request.
    pub arrivals: Vec<Arrival>,
    /// Look-up paths that arrived.
    pub lookup_paths: Vec<String>,
}

pub type Shared = Arc<Mutex<Script>>;

async fn any(
    State(s): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let mut script = s.lock().unwrap();
    if method == Method::GET {
        let key = path.rsplit('/').next().unwrap_or_default().to_string();
        script.lookup_paths.push(uri.to_string());
        let n = script.lookup_paths.len() - 1;
        let answer = script
            .lookups
            .get(n)
            .or(script.lookups.last())
            .cloned()
            .unwrap_or_else(|| {
                error(
                    404,
                    r#"{"error":{"code":"ORDER_NOT_FOUND","message":"no order with this key"}}"#,
                )
            });
        return reply(answer, &key);
    }
    let key = headers
        .get("x-request-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    script.arrivals.push(Arrival {
        method: method.to_string(),
        path,
        key: key.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: body.to_vec(),
    });
    let n = script.arrivals.len() - 1;
    let answer = script
        .answers
        .get(n)
        .or(script.answers.last())
        .cloned()
        .unwrap_or_else(executed);
    reply(answer, &key)
}

fn reply(Reply(status, headers, body): Reply, key: &str) -> Response {
    let mut r = (
        StatusCode::from_u16(status).unwrap(),
        body.replace("{key}", key),
    )
        .into_response();
    r.headers_mut().remove("content-type");
    for (k, v) in headers {
        r.headers_mut()
            .insert(k, v.replace("{key}", key).parse().unwrap());
    }
    r
}

/// Starts the scripted bank; returns its base URL.
pub async fn serve(script: Shared) -> String {
    let app = Router::new().fallback(any).with_state(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A scripted bank and an SDK on a temp file configured with its contract.
pub struct BankRig {
    pub sdk: Sdk,
    pub script: Shared,
    pub url: String,
    pub db: PathBuf,
    pub dir: tempfile::TempDir,
}

/// The config of a bank test: the bank's contract, fast retries.
pub fn config(url: &str, db: &std::path::Path) -> SdkConfigBuilder {
    SdkConfig::builder(url, db)
        .access_token("tok-1")
        .contract(contract())
        .retry_base(Duration::from_millis(10))
        .retry_cap(Duration::from_millis(100))
}

pub async fn bank(answers: Vec<Reply>) -> BankRig {
    bank_with(answers, |c| c).await
}

pub async fn bank_with(
    answers: Vec<Reply>,
    adjust: impl FnOnce(SdkConfigBuilder) -> SdkConfigBuilder,
) -> BankRig {
    let script: Shared = Arc::new(Mutex::new(Script {
        answers,
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let sdk = Sdk::open(adjust(config(&url, &db)).build().unwrap()).unwrap();
    BankRig {
        sdk,
        script,
        url,
        db,
        dir,
    }
}

impl BankRig {
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.script.lock().unwrap().arrivals.clone()
    }
    pub fn set_lookups(&self, lookups: Vec<Reply>) {
        self.script.lock().unwrap().lookups = lookups;
    }
}

/// Bounded wait for a settled state (final, NeedsAttention or RequiresAction).
pub async fn settled(sdk: &Sdk, local_id: &str) -> sendonce::Transfer {
    tokio::time::timeout(Duration::from_secs(20), sdk.wait_for_outcome(local_id))
        .await
        .expect("no outcome within 20 s")
        .unwrap()
}
