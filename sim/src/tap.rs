//! The wire tap: a transport under the network simulator that sees every request that really
//! reaches the server and every answer it really gave (before the simulator loses any).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sendonce::transport::{
    BoxFuture, HttpRequest, HttpResponse, HttpTransport, Method, Transport, TransportError,
};

/// What one request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUse {
    /// The transfer's note (the ride makes it unique per intent).
    pub note: Option<String>,
    /// Exact body bytes.
    pub body: Vec<u8>,
}

/// Counts and key uses of every SDK instance of a ride.
#[derive(Debug, Default)]
pub struct WireLog {
    /// `POST /v1/transfers` that reached the server.
    pub posts: u64,
    /// Status look-ups that reached the server.
    pub look_ups: u64,
    /// Answers by status code.
    pub statuses: HashMap<u16, u64>,
    /// Answers carrying `Idempotent-Replayed: true`.
    pub replays: u64,
    /// Requests that got no answer from the real network (connection errors, real timeouts).
    pub transport_errors: u64,
    /// Every key sent, with the bodies sent under it (more than one body is a bug).
    pub keys: HashMap<String, Vec<KeyUse>>,
}

impl WireLog {
    /// Answers with this status.
    pub fn status(&self, code: u16) -> u64 {
        self.statuses.get(&code).copied().unwrap_or(0)
    }

    /// Answers with a status in `range`.
    pub fn statuses_in(&self, range: std::ops::Range<u16>) -> u64 {
        self.statuses
            .iter()
            .filter(|(c, _)| range.contains(c))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Shared by every tap of a ride.
pub type SharedWireLog = Arc<Mutex<WireLog>>;

/// A real HTTP transport that records into a [`WireLog`].
pub struct Tap {
    inner: HttpTransport,
    log: SharedWireLog,
}

impl Tap {
    /// A fresh HTTP client (one per SDK instance: its connections live on that instance's runtime).
    pub fn new(log: SharedWireLog, request_timeout: Duration) -> anyhow::Result<Self> {
        let inner = HttpTransport::new(request_timeout, Duration::from_secs(5))
            .map_err(|e| anyhow::anyhow!("http client: {e}"))?;
        Ok(Self { inner, log })
    }

    fn before(&self, request: &HttpRequest) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if request.method == Method::Get {
            log.look_ups += 1;
            return;
        }
        log.posts += 1;
        let key = request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("idempotency-key"))
            .map(|(_, v)| v.clone());
        if let Some(key) = key {
            let note = serde_json::from_slice::<serde_json::Value>(&request.body)
                .ok()
                .and_then(|v| v.get("note").and_then(|n| n.as_str()).map(str::to_string));
            let uses = log.keys.entry(key).or_default();
            let this = KeyUse {
                note,
                body: request.body.clone(),
            };
            if !uses.contains(&this) {
                uses.push(this);
            }
        }
    }

    fn after(&self, answer: &Result<HttpResponse, TransportError>) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        match answer {
            Ok(response) => {
                *log.statuses.entry(response.status).or_default() += 1;
                if response
                    .header("idempotent-replayed")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"))
                {
                    log.replays += 1;
                }
            }
            Err(_) => log.transport_errors += 1,
        }
    }
}

impl Transport for Tap {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            self.before(&request);
            let answer = self.inner.send(request).await;
            self.after(&answer);
            answer
        })
    }
}
