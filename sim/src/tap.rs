//! The wire tap: a transport under the network simulator that sees every request that really
//! reaches the server and every answer it really gave (before the simulator loses any).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use sendonce::transport::{
    BoxFuture, HttpRequest, HttpResponse, Method, Transport, TransportError,
};
use sendonce::{Clock, SimClock};
// tokio's instant: simulated on a deterministic ride's paused clock.
use tokio::time::Instant;

use crate::api::Api;
use crate::timeline::{Mark, SharedTimeline};

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
    pub statuses: BTreeMap<u16, u64>,
    /// Answers carrying `Idempotent-Replayed: true`.
    pub replays: u64,
    /// Requests that got no answer from the real network (connection errors, real timeouts).
    pub transport_errors: u64,
    /// Every key sent, with the bodies sent under it (more than one body is a bug).
    pub keys: BTreeMap<String, Vec<KeyUse>>,
    /// Every answer the server gave about a key (invariant 6 checks them against the ledger).
    pub answers: Vec<KeyAnswer>,
    /// Answers an intermediary replaced with a portal or proxy page (`--proxy-garbage-rate`).
    pub garbage: u64,
    /// POSTs on the wire now: key → (sent at, the `Authorization` it carried).
    pub in_flight: BTreeMap<String, (Instant, String)>,
}

/// One answer the server gave about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAnswer {
    /// The idempotency key.
    pub key: String,
    /// HTTP status.
    pub status: u16,
    /// The problem's `code`, if any.
    pub code: Option<String>,
    /// The transfer it names, if any.
    pub transfer_id: Option<String>,
    /// A status look-up (not a POST).
    pub look_up: bool,
    /// It said no money moved under the key ([`KeyAnswer::says_not_moved`]).
    not_moved: bool,
}

impl KeyAnswer {
    /// What `response` says about `key`, read under `api`'s contract.
    pub fn new(api: Api, key: &str, response: &HttpResponse, look_up: bool) -> Self {
        let code = api.code_of(response);
        Self {
            key: key.to_string(),
            status: response.status,
            not_moved: api.says_not_moved(response, code.as_deref(), look_up),
            code,
            transfer_id: api.operation_id_of(response),
            look_up,
        }
    }

    /// The server said no money moved under the key: an insufficient-funds refusal, or the
    /// look-up's not-found.
    pub fn says_not_moved(&self) -> bool {
        self.not_moved
    }
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

/// The transport to the server of one phone, recording into a [`WireLog`] and the timeline.
pub struct Tap {
    inner: Arc<dyn Transport>,
    api: Api,
    log: SharedWireLog,
    phone: usize,
    clock: Arc<SimClock>,
    timeline: SharedTimeline,
}

impl Tap {
    /// Wraps `inner` (a fresh one per SDK instance: a real client's connections live on its runtime).
    pub fn new(
        inner: Arc<dyn Transport>,
        api: Api,
        log: SharedWireLog,
        phone: usize,
        clock: Arc<SimClock>,
        timeline: SharedTimeline,
    ) -> Self {
        Self {
            inner,
            api,
            log,
            phone,
            clock,
            timeline,
        }
    }

    fn before(&self, request: &HttpRequest) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if request.method == Method::Get {
            log.look_ups += 1;
            return;
        }
        log.posts += 1;
        if let Some(key) = self.api.key_of(request) {
            let auth = request
                .headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            log.in_flight.insert(key.clone(), (Instant::now(), auth));
            let note = self.api.note_of(&request.body);
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

    fn after(&self, request: &HttpRequest, answer: &Result<HttpResponse, TransportError>) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let key = self.api.key_of(request);
        let look_up = request.method == Method::Get;
        if let (Some(key), false) = (&key, look_up) {
            log.in_flight.remove(key);
        }
        match answer {
            Ok(response) => {
                if let Some(key) = &key {
                    log.answers
                        .push(KeyAnswer::new(self.api, key, response, look_up));
                }
                *log.statuses.entry(response.status).or_default() += 1;
                if self.api.is_replay(response) {
                    log.replays += 1;
                }
            }
            Err(_) => log.transport_errors += 1,
        }
        drop(log);
        let mark = match answer {
            Ok(r) => Mark::Answer {
                status: r.status,
                replayed: self.api.is_replay(r),
            },
            Err(_) => Mark::Dropped,
        };
        self.timeline
            .record(Some(self.phone), self.clock.monotonic_ms(), mark);
    }
}

impl Transport for Tap {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            self.before(&request);
            let sent = HttpRequest {
                method: request.method,
                url: request.url.clone(),
                headers: request.headers.clone(),
                body: Vec::new(),
            };
            let answer = self.inner.send(request).await;
            self.after(&sent, &answer);
            answer
        })
    }
}
