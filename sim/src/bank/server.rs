//! The bank's server: payment orders under its own key header, strong customer authentication
//! above a threshold, a look-up by key that closes the key, and the ride's test API (users,
//! wallets, ledger, notices, faults, settle) on the same paths as server-mock's.
//!
//! Its state lives in memory behind one lock that is never held across an await, on tokio's
//! clock: on a deterministic ride's paused clock every processing delay is simulated time.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Order, KEY_HEADER, OPERATION_ID_HEADER, ORDERS, REPLAYED_HEADER, SCA_THRESHOLD_MINOR};
use crate::rng::Rng;
use crate::testapi::{Entry, Sms};

/// The bank's error media type.
pub const ERROR_TYPE: &str = "application/vnd.bank.error+json";

/// What the bank holds under one (user, key).
#[derive(Clone)]
enum Key {
    /// A request with this key is being executed now.
    InFlight(Vec<u8>),
    /// Waits for the customer's strong authentication of `challenge`.
    Parked { challenge: String, body: Vec<u8> },
    /// Answered for good: replayed to every later request (`body` None: closed by a look-up).
    Done {
        body: Option<Vec<u8>>,
        answer: Stored,
    },
}

/// A stored answer.
#[derive(Clone)]
struct Stored {
    status: u16,
    order_id: Option<String>,
    body: String,
}

struct Challenge {
    user: String,
    approved: bool,
}

#[derive(Default)]
struct Faults {
    error_503_rate: f64,
    drop_response_after_commit_rate: f64,
}

struct Books {
    tokens: HashMap<String, String>,
    users: BTreeMap<String, String>,
    ledger: Vec<Entry>,
    notices: Vec<Sms>,
    keys: HashMap<(String, String), Key>,
    challenges: HashMap<String, Challenge>,
    faults: Faults,
    rng: Rng,
    orders: u64,
}

/// The bank: cheap to clone, one state.
#[derive(Clone)]
pub struct Bank(Arc<Mutex<Books>>);

impl Bank {
    /// An empty bank whose faults and delays follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self(Arc::new(Mutex::new(Books {
            tokens: HashMap::new(),
            users: BTreeMap::new(),
            ledger: Vec::new(),
            notices: Vec::new(),
            keys: HashMap::new(),
            challenges: HashMap::new(),
            faults: Faults::default(),
            rng: Rng::new(seed, 77_000),
            orders: 0,
        })))
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its HTTP surface: the bank's API and the ride's test API.
    pub fn router(&self) -> Router {
        Router::new()
            .route(ORDERS, post(create_order))
            .route(&format!("{ORDERS}/by-key/{{key}}"), get(look_up))
            .route("/api/v2/sca/{challenge}/approve", post(approve))
            .route("/v1/test/users", post(create_user))
            .route("/v1/wallet", get(wallet))
            .route("/v1/test/ledger", get(ledger))
            .route("/v1/test/sms", get(notices))
            .route("/v1/test/faults", put(set_faults).delete(clear_faults))
            .route("/v1/test/settle", post(settle))
            .with_state(self.clone())
    }
}

/// The bank's error answer.
fn error(status: u16, code: &str, message: &str, extra: Option<Value>) -> Stored {
    let mut e = json!({"code": code, "message": message});
    if let Some(extra) = extra {
        e["sca"] = extra;
    }
    Stored {
        status,
        order_id: None,
        body: json!({ "error": e }).to_string(),
    }
}

fn respond(stored: &Stored, key: &str, replayed: bool) -> Response {
    let mut r = (
        StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        stored.body.clone(),
    )
        .into_response();
    let h = r.headers_mut();
    let json = stored.order_id.is_some();
    let content_type = if json { "application/json" } else { ERROR_TYPE };
    h.insert("content-type", content_type.parse().expect("static"));
    if let (Some(id), Ok(k)) = (&stored.order_id, key.parse()) {
        h.insert(KEY_HEADER, k);
        h.insert(
            OPERATION_ID_HEADER,
            id.parse().expect("order ids are ASCII"),
        );
    }
    if replayed {
        h.insert(REPLAYED_HEADER, "true".parse().expect("static"));
    }
    if stored.status == 409 || stored.status == 503 {
        h.insert("retry-after", "1".parse().expect("static"));
    }
    r
}

fn sca(challenge: &str) -> Stored {
    let sca = json!({
        "redirect_url": format!("https://bank.example/sca/{challenge}"),
        "challenge_id": challenge,
    });
    error(
        428,
        "SCA_REQUIRED",
        "confirm in your banking app",
        Some(sca),
    )
}

fn user_of(books: &Books, headers: &HeaderMap) -> Option<String> {
    let token = headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    books.tokens.get(token).cloned()
}

fn key_of(headers: &HeaderMap) -> Option<String> {
    let key = headers.get(KEY_HEADER)?.to_str().ok()?;
    let visible = key.bytes().all(|b| (0x21..=0x7e).contains(&b));
    (visible && (1..=255).contains(&key.len())).then(|| key.to_string())
}

fn unauthenticated() -> Response {
    respond(
        &error(401, "TOKEN_EXPIRED", "sign in again", None),
        "",
        false,
    )
}

/// `POST /api/v2/payment-orders`: claim the key, authenticate the customer above the threshold,
/// execute after a processing delay, store the answer with the key.
async fn create_order(State(bank): State<Bank>, headers: HeaderMap, body: Bytes) -> Response {
    let (user, key, order, delay) = {
        let mut books = bank.books();
        let Some(user) = user_of(&books, &headers) else {
            return unauthenticated();
        };
        let Some(key) = key_of(&headers) else {
            let e = error(
                400,
                "VALIDATION_FAILED",
                "X-Request-Key missing or invalid",
                None,
            );
            return respond(&e, "", false);
        };
        let rate = books.faults.error_503_rate;
        if books.rng.chance(rate) {
            let e = error(503, "SERVICE_UNAVAILABLE", "try again", None);
            return respond(&e, &key, false);
        }
        let slot = (user.clone(), key.clone());
        let same = |b: &[u8]| b == body.as_ref();
        let conflict = error(409, "REQUEST_IN_PROGRESS", "still processing", None);
        let reused = error(
            422,
            "REQUEST_KEY_CONFLICT",
            "key used with another order",
            None,
        );
        match books.keys.get(&slot).cloned() {
            Some(Key::Done { body: Some(b), .. }) if !same(&b) => {
                return respond(&reused, &key, false)
            }
            Some(Key::Done { answer, .. }) => return respond(&answer, &key, true),
            Some(Key::InFlight(b)) if !same(&b) => return respond(&reused, &key, false),
            Some(Key::InFlight(_)) => return respond(&conflict, &key, false),
            Some(Key::Parked { body: b, .. }) if !same(&b) => return respond(&reused, &key, false),
            Some(Key::Parked { challenge, .. })
                if !books.challenges.get(&challenge).is_some_and(|c| c.approved) =>
            {
                return respond(&sca(&challenge), &key, false)
            }
            Some(Key::Parked { .. }) | None => {}
        }
        let order = match Order::parse(&body, &user) {
            Ok(order) => order,
            Err(why) => return respond(&error(400, "VALIDATION_FAILED", &why, None), &key, false),
        };
        let parked = matches!(books.keys.get(&slot), Some(Key::Parked { .. }));
        if !parked && order.amount_minor >= SCA_THRESHOLD_MINOR {
            let challenge = format!("ch-{}", books.challenges.len() + 1);
            books.challenges.insert(
                challenge.clone(),
                Challenge {
                    user: user.clone(),
                    approved: false,
                },
            );
            let body = body.to_vec();
            let parked = Key::Parked {
                challenge: challenge.clone(),
                body,
            };
            books.keys.insert(slot, parked);
            return respond(&sca(&challenge), &key, false);
        }
        books.keys.insert(slot, Key::InFlight(body.to_vec()));
        let delay = Duration::from_millis(books.rng.range(20, 400) as u64);
        (user, key, order, delay)
    };
    // The core banking system takes its time: a duplicate arriving now meets the claim (409). The
    // order runs to its end even if the client goes away meanwhile (its connection dropped, the
    // app killed): only then is the key answered for good, never left claimed.
    let execution = tokio::spawn({
        let (bank, key, body) = (bank.clone(), key.clone(), body.to_vec());
        async move {
            tokio::time::sleep(delay).await;
            let mut books = bank.books();
            let answer = books.execute(&user, &key, &order);
            let stored = Key::Done {
                body: Some(body),
                answer: answer.clone(),
            };
            books.keys.insert((user, key), stored);
            let rate = books.faults.drop_response_after_commit_rate;
            let dropped = books.rng.chance(rate);
            (answer, dropped)
        }
    });
    match execution.await {
        Ok((_, true)) => Response::new(Body::new(server_mock::faults::FailingBody)),
        Ok((answer, false)) => respond(&answer, &key, false),
        Err(e) => respond(&error(500, "INTERNAL", &e.to_string(), None), &key, false),
    }
}

impl Books {
    fn balance(&self, user: &str) -> i64 {
        self.ledger
            .iter()
            .filter(|e| e.user_id == user)
            .map(|e| match e.kind.as_str() {
                "debit" => -e.amount_minor,
                _ => e.amount_minor,
            })
            .sum()
    }

    fn book(&mut self, user: &str, kind: &str, amount: i64, order: Option<(&str, &str)>) {
        self.ledger.push(Entry {
            entry_id: self.ledger.len() as i64 + 1,
            user_id: user.to_string(),
            kind: kind.into(),
            amount_minor: amount,
            transfer_id: order.map(|(id, _)| id.to_string()),
            idempotency_key: order.map(|(_, key)| key.to_string()),
        });
    }

    /// Debit, credit and the payee's notice in one step (under the lock): the order's answer.
    fn execute(&mut self, user: &str, key: &str, order: &Order) -> Stored {
        if !self.users.contains_key(&order.destination) {
            return error(404, "ACCOUNT_UNKNOWN", "no such destination account", None);
        }
        if self.balance(user) < order.amount_minor {
            return error(422, "FUNDS_INSUFFICIENT", "not enough money", None);
        }
        self.orders += 1;
        let id = format!("po-{}", self.orders);
        self.book(user, "debit", order.amount_minor, Some((&id, key)));
        self.book(
            &order.destination,
            "credit",
            order.amount_minor,
            Some((&id, key)),
        );
        self.notices.push(Sms {
            sms_id: self.notices.len() as i64 + 1,
            user_id: order.destination.clone(),
            transfer_id: id.clone(),
        });
        Stored {
            status: 201,
            body: json!({"order_id": id, "status": "EXECUTED"}).to_string(),
            order_id: Some(id),
        }
    }
}

/// `GET …/by-key/{key}`: the order, or the bank's not-found, which closes the key for good.
async fn look_up(
    State(bank): State<Bank>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut books = bank.books();
    let Some(user) = user_of(&books, &headers) else {
        return unauthenticated();
    };
    let slot = (user, key.clone());
    let not_found = error(404, "ORDER_NOT_FOUND", "no order with this key", None);
    match books.keys.get(&slot).cloned() {
        Some(Key::Done { answer, .. }) if answer.order_id.is_some() => {
            let mut found = answer;
            found.status = 200;
            respond(&found, &key, false)
        }
        Some(Key::Done { .. }) => respond(&not_found, &key, false),
        Some(Key::InFlight(_)) => {
            let e = error(409, "REQUEST_IN_PROGRESS", "still processing", None);
            respond(&e, &key, false)
        }
        Some(Key::Parked { challenge, .. }) => respond(&sca(&challenge), &key, false),
        None => {
            let closed = Key::Done {
                body: None,
                answer: not_found.clone(),
            };
            books.keys.insert(slot, closed);
            respond(&not_found, &key, false)
        }
    }
}

/// `POST /api/v2/sca/{challenge}/approve`: the customer passed the challenge in the banking app.
async fn approve(
    State(bank): State<Bank>,
    Path(challenge): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut books = bank.books();
    let user = user_of(&books, &headers);
    match books.challenges.get_mut(&challenge) {
        Some(c) if Some(&c.user) == user.as_ref() => {
            c.approved = true;
            StatusCode::NO_CONTENT.into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

#[derive(Deserialize)]
struct NewUser {
    balance_minor: i64,
}

async fn create_user(State(bank): State<Bank>, Json(new): Json<NewUser>) -> Response {
    let mut books = bank.books();
    let n = books.users.len() + 1;
    let (user, token) = (format!("acc-{n}"), format!("bank-token-{n}"));
    books.users.insert(user.clone(), token.clone());
    books.tokens.insert(token.clone(), user.clone());
    if new.balance_minor > 0 {
        books.book(&user, "deposit", new.balance_minor, None);
    }
    Json(json!({"user_id": user, "token": token})).into_response()
}

async fn wallet(State(bank): State<Bank>, headers: HeaderMap) -> Response {
    let books = bank.books();
    match user_of(&books, &headers) {
        Some(user) => Json(json!({"balance_minor": books.balance(&user)})).into_response(),
        None => unauthenticated(),
    }
}

#[derive(Deserialize)]
struct Page {
    after: i64,
    limit: usize,
}

async fn ledger(State(bank): State<Bank>, Query(p): Query<Page>) -> Json<Vec<Entry>> {
    let books = bank.books();
    let page = books.ledger.iter().filter(|e| e.entry_id > p.after);
    Json(page.take(p.limit).cloned().collect())
}

async fn notices(State(bank): State<Bank>, Query(p): Query<Page>) -> Json<Value> {
    let books = bank.books();
    let page: Vec<Value> = (books.notices.iter().filter(|s| s.sms_id > p.after))
        .take(p.limit)
        .map(|s| json!({"sms_id": s.sms_id, "user_id": s.user_id, "transfer_id": s.transfer_id}))
        .collect();
    Json(Value::Array(page))
}

/// The ride's fault switches the bank has: 503s and answers dropped after the order executed.
async fn set_faults(State(bank): State<Bank>, Json(patch): Json<Value>) -> Json<Value> {
    let mut books = bank.books();
    let rate = |name: &str| patch.get(name).and_then(Value::as_f64);
    if let Some(r) = rate("error_503_rate") {
        books.faults.error_503_rate = r;
    }
    if let Some(r) = rate("drop_response_after_commit_rate") {
        books.faults.drop_response_after_commit_rate = r;
    }
    Json(json!({}))
}

async fn clear_faults(State(bank): State<Bank>) -> Json<Value> {
    bank.books().faults = Faults::default();
    Json(json!({}))
}

/// Nothing is deferred at this bank (credit and notice go with the debit): only in-flight keys.
async fn settle(State(bank): State<Bank>) -> Json<Value> {
    let books = bank.books();
    let in_flight = books.keys.values();
    let in_flight = in_flight.filter(|k| matches!(k, Key::InFlight(_))).count();
    Json(json!({"outbox_pending": 0, "keys_in_progress": in_flight}))
}
