//! HTTP calls to the backend (directly or through the chaos proxy), each one recorded
//! so a failed check can show every request and answer it made.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Method;
use serde::Serialize;
use serde_json::Value;

pub use crate::error_text::error_chain;
use crate::proxy::{Fault, FAULT_HEADER};

/// Tries of a GET before its transient failure counts.
const GET_ATTEMPTS: u32 = 5;

/// Exchanges kept per check: a soak makes thousands, the first ones tell the story.
const MAX_RECORDED: usize = 400;

/// One request as sent, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct SentRequest {
    /// HTTP method.
    pub method: String,
    /// Full URL (the proxy's when it went through it).
    pub url: String,
    /// Headers, with bearer tokens masked.
    pub headers: Vec<(String, String)>,
    /// Body as text (lossy UTF-8).
    pub body: String,
}

/// One answer as received, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct ReceivedAnswer {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// Body as text (lossy UTF-8).
    pub body: String,
}

/// A request and what came back (an answer or a transport error).
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// What was sent.
    pub request: SentRequest,
    /// The answer, if one arrived.
    pub answer: Option<ReceivedAnswer>,
    /// Why no answer arrived (timeout, connection closed).
    pub error: Option<String>,
}

/// An answer from the backend, body kept as exact bytes.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Exact body bytes.
    pub body: Vec<u8>,
    /// The body field that names the operation (`transfer_id` unless the profile says).
    pub id_field: Arc<str>,
}

impl Answer {
    /// The id of the operation this answer names, if it is a success that names one.
    pub fn id(&self) -> Option<String> {
        self.field(&self.id_field)
    }

    /// Status, `replayed` and the problem code: what a tally of answers counts.
    pub fn label(&self) -> String {
        let mut s = self.status.to_string();
        if self.replayed() {
            s.push_str(" replayed");
        }
        if let Some(code) = self.code() {
            s.push(' ');
            s.push_str(&code);
        }
        s
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// True when the answer carries `Idempotent-Replayed: true`.
    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The problem `code`, if the body has one.
    pub fn code(&self) -> Option<String> {
        self.json()?.get("code")?.as_str().map(str::to_string)
    }

    /// A string field of a JSON body.
    pub fn field(&self, name: &str) -> Option<String> {
        self.json()?.get(name)?.as_str().map(str::to_string)
    }

    /// True for answers that end a request: 2xx and 4xx other than "try again" ones.
    pub fn definitive(&self) -> bool {
        matches!(self.status, 200..=299 | 400..=499)
            && !matches!(self.status, 408 | 409 | 425 | 429)
    }

    /// `201 replayed transfer_id=…` / `400 idempotency_key_missing`: for evidence lines.
    pub fn summary(&self) -> String {
        let mut s = self.label();
        if let (None, Some(id)) = (self.code(), self.id()) {
            s.push_str(&format!(" {}={id}", self.id_field));
        }
        s
    }
}

/// How a request reaches the backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Route {
    /// Straight to the backend.
    Direct,
    /// Through the kit's chaos proxy, with this fault.
    Proxy(Fault),
}

/// The kit's HTTP client: one for the backend, one for the proxy, and the log.
#[derive(Clone)]
pub struct Api {
    base: String,
    proxy_base: Option<String>,
    http: reqwest::Client,
    // A connection per request: a pooled connection the proxy closed would make the HTTP
    // stack retry on its own, and the kit must see every drop itself.
    proxy_http: reqwest::Client,
    timeout: Duration,
    test_token: Option<String>,
    account_path: String,
    id_field: Arc<str>,
    log: Arc<Mutex<Vec<Exchange>>>,
}

/// A request to make.
pub struct Call<'a> {
    /// Method.
    pub method: Method,
    /// Path and query, e.g. `/v1/wallet`.
    pub path: String,
    /// Bearer token, if any.
    pub token: Option<&'a str>,
    /// Raw `Idempotency-Key` value, if any (raw bytes: invalid keys must be sendable).
    pub key: Option<&'a [u8]>,
    /// Body bytes (sent as `application/json`).
    pub body: Option<&'a [u8]>,
    /// Where it goes.
    pub route: Route,
    /// Per-request timeout, when not the default.
    pub timeout: Option<Duration>,
}

impl<'a> Call<'a> {
    /// A GET of `path` with `token`.
    pub fn get(path: impl Into<String>, token: Option<&'a str>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            token,
            key: None,
            body: None,
            route: Route::Direct,
            timeout: None,
        }
    }

    /// A POST of `body` to `path` with `token`.
    pub fn post(path: impl Into<String>, token: Option<&'a str>, body: &'a [u8]) -> Self {
        Self {
            method: Method::POST,
            body: Some(body),
            ..Self::get(path, token)
        }
    }
}

impl Api {
    /// A client for `base` (no trailing slash needed); `timeout` is the default per request.
    pub fn new(base: &str, timeout: Duration) -> anyhow::Result<Self> {
        // No system proxy: the kit decides what sits between it and the backend.
        let http = reqwest::Client::builder().no_proxy().build()?;
        let proxy_http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()?;
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            proxy_base: None,
            http,
            proxy_http,
            timeout,
            test_token: None,
            account_path: "/v1/wallet".into(),
            id_field: "transfer_id".into(),
            log: Arc::default(),
        })
    }

    /// The backend's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Routes `Route::Proxy` calls to the chaos proxy at `base`.
    pub fn set_proxy(&mut self, base: String) {
        self.proxy_base = Some(base);
    }

    /// Sends `token` as the bearer token of test-API calls (server-mock's `--test-api-token`).
    pub fn set_test_token(&mut self, token: Option<String>) {
        self.test_token = token;
    }

    /// Sets the path that answers the caller's `user_id`, `currency` and `balance_minor`,
    /// and the body field of a success that names the operation.
    pub fn set_operation(&mut self, account_path: &str, id_field: &str) {
        self.account_path = account_path.to_string();
        self.id_field = id_field.into();
    }

    /// The path that answers the caller's `user_id`, `currency` and `balance_minor`
    /// (`/v1/wallet` unless the operation profile says otherwise).
    pub fn account_path(&self) -> &str {
        &self.account_path
    }

    /// The bearer token for test-API calls, if one was given.
    pub fn test_token(&self) -> Option<&str> {
        self.test_token.as_deref()
    }

    /// The default per-request timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Takes the exchanges recorded since the last call.
    pub fn take_log(&self) -> Vec<Exchange> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Sends `call`; `Err` when no answer arrived (the error is recorded too). A GET
    /// (wallet, look-up: safe to repeat) is retried a few times on a transport error or
    /// a transient status, so a backend's passing 503 cannot blind a measurement.
    pub async fn send(&self, call: Call<'_>) -> Result<Answer, reqwest::Error> {
        if call.method != Method::GET {
            return self.send_once(call).await;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let again = Call {
                method: Method::GET,
                path: call.path.clone(),
                ..call
            };
            let result = self.send_once(again).await;
            let transient = match &result {
                Ok(a) => matches!(a.status, 408 | 429 | 500..=599),
                Err(_) => true,
            };
            if !transient || attempt >= GET_ATTEMPTS {
                return result;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn send_once(&self, call: Call<'_>) -> Result<Answer, reqwest::Error> {
        let (client, base) = match (call.route, &self.proxy_base) {
            (Route::Proxy(_), Some(p)) => (&self.proxy_http, p.as_str()),
            _ => (&self.http, self.base.as_str()),
        };
        let url = format!("{base}{}", call.path);
        let mut headers = HeaderMap::new();
        if let Some(t) = call.token {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {t}")) {
                headers.insert(reqwest::header::AUTHORIZATION, v);
            }
        }
        if let Some(k) = call.key {
            // Bytes a header cannot carry at all (CR, LF, NUL) are not sendable: the
            // checks only use keys an HTTP stack can put on the wire.
            if let Ok(v) = HeaderValue::from_bytes(k) {
                headers.insert(HeaderName::from_static("idempotency-key"), v);
            }
        }
        if call.body.is_some() {
            headers.insert(
                reqwest::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        if let Route::Proxy(f) = call.route {
            headers.insert(
                HeaderName::from_static(FAULT_HEADER),
                HeaderValue::from_str(&f.to_header()).unwrap_or(HeaderValue::from_static("none")),
            );
        }
        let sent = SentRequest {
            method: call.method.to_string(),
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    let v = if k == reqwest::header::AUTHORIZATION {
                        "Bearer ***".to_string()
                    } else {
                        String::from_utf8_lossy(v.as_bytes()).into_owned()
                    };
                    (k.to_string(), v)
                })
                .collect(),
            body: call
                .body
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default(),
        };
        let mut req = client
            .request(call.method, &url)
            .headers(headers)
            .timeout(call.timeout.unwrap_or(self.timeout));
        if let Some(b) = call.body {
            req = req.body(b.to_vec());
        }
        let result = async {
            let resp = req.send().await?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp.bytes().await?.to_vec();
            Ok(Answer {
                status,
                headers,
                body,
                id_field: Arc::clone(&self.id_field),
            })
        }
        .await;
        let exchange = match &result {
            Ok(a) => Exchange {
                request: sent,
                answer: Some(ReceivedAnswer {
                    status: a.status,
                    headers: a
                        .headers
                        .iter()
                        .map(|(k, v)| {
                            (
                                k.to_string(),
                                String::from_utf8_lossy(v.as_bytes()).into_owned(),
                            )
                        })
                        .collect(),
                    body: String::from_utf8_lossy(&a.body).into_owned(),
                }),
                error: None,
            },
            Err(e) => Exchange {
                request: sent,
                answer: None,
                error: Some(error_chain(e)),
            },
        };
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < MAX_RECORDED {
            log.push(exchange);
        }
        result
    }
}
