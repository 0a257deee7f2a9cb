//! Deliberately broken backends: a small in-memory implementation of the contract (the
//! same HTTP surface and test API the kit uses) in which one [`Mutation`] breaks one
//! rule. With `Mutation::None` it is correct, and the kit passes it, so a failure on a
//! mutant is the mutation's doing, not the mock's.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

/// The one rule a mutant breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// None: a correct backend.
    None,
    /// Executes every request, whatever its key.
    IgnoresKey,
    /// Stores finished answers but takes no lock while running: concurrent duplicates
    /// both execute.
    NoInFlightLock,
    /// Replays the stored answer to a different body under the same key.
    IgnoresBody,
    /// Keys are global, not per user.
    GlobalKeys,
    /// Replays without `Idempotent-Replayed: true`.
    NoReplayHeader,
    /// Replays a re-serialised body (same JSON, other bytes).
    ReplayReserialised,
    /// A 402 is not stored: the same request is evaluated again.
    PaymentRequiredNotStored,
    /// A malformed key is a 500.
    ServerErrorOnBadKey,
    /// Validation failures are stored under the key (it is burnt).
    StoresValidation,
    /// A look-up's 404 does not close the key: a late duplicate still executes.
    LookupNotFinal,
    /// The look-up finds anyone's transfer with that key.
    LookupAnyUser,
    /// Errors are `application/json`, not problem+json.
    PlainJsonErrors,
    /// Keys of any length are accepted.
    NoKeyLengthLimit,
    /// A quoted sf-string key is a different key from its bare form.
    QuotesAreLiteral,
}

#[derive(Clone)]
enum Row {
    Running {
        fp: Vec<u8>,
    },
    Done {
        fp: Option<Vec<u8>>,
        status: u16,
        body: Vec<u8>,
    },
}

#[derive(Default)]
struct Inner {
    users: HashMap<String, (String, String)>, // token -> (user_id, currency)
    balances: HashMap<String, i64>,
    keys: HashMap<(String, String), Row>,
    debits: HashMap<(String, String), Vec<u8>>,
    gateway_delay_ms: u64,
    next: u64,
}

#[derive(Clone)]
struct Mock {
    m: Mutation,
    inner: Arc<Mutex<Inner>>,
}

impl Mock {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }
}

/// Starts a mutant on 127.0.0.1; returns its base URL. It lives until the test ends.
pub async fn start(m: Mutation) -> String {
    let mock = Mock {
        m,
        inner: Arc::new(Mutex::new(Inner {
            gateway_delay_ms: default_delay(m),
            ..Default::default()
        })),
    };
    let app = Router::new()
        .route("/v1/test/users", post(create_user))
        .route(
            "/v1/test/faults",
            get(get_faults).put(put_faults).delete(delete_faults),
        )
        .route("/v1/wallet", get(wallet))
        .route("/v1/transfers", post(post_transfer).get(lookup))
        .with_state(mock);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn answer(m: Mutation, status: u16, body: Vec<u8>, replayed: bool) -> Response {
    let ct = if status < 300 || m == Mutation::PlainJsonErrors {
        "application/json"
    } else {
        "application/problem+json"
    };
    let mut r = (
        StatusCode::from_u16(status).unwrap(),
        [(header::CONTENT_TYPE, ct)],
        body,
    )
        .into_response();
    if replayed && m != Mutation::NoReplayHeader {
        r.headers_mut()
            .insert("idempotent-replayed", "true".parse().unwrap());
    }
    if status == 409 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, "1".parse().unwrap());
    }
    r
}

fn problem_body(status: u16, code: &str) -> Vec<u8> {
    json!({"type": "about:blank", "title": code, "status": status, "code": code, "detail": code})
        .to_string()
        .into_bytes()
}

fn problem(m: Mutation, status: u16, code: &str) -> Response {
    answer(m, status, problem_body(status, code), false)
}

fn replay(m: Mutation, status: u16, body: &[u8]) -> Response {
    let body = if m == Mutation::ReplayReserialised {
        let v: Value = serde_json::from_slice(body).unwrap();
        serde_json::to_vec_pretty(&v).unwrap()
    } else {
        body.to_vec()
    };
    answer(m, status, body, true)
}

async fn create_user(State(s): State<Mock>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut i = s.lock();
    i.next += 1;
    let (id, token) = (
        format!("u{}", i.next),
        format!("t{}-{}", i.next, uuid::Uuid::new_v4()),
    );
    let currency = v["currency"].as_str().unwrap_or("BDT").to_string();
    i.users.insert(token.clone(), (id.clone(), currency));
    i.balances
        .insert(id.clone(), v["balance_minor"].as_i64().unwrap_or(0));
    answer(
        s.m,
        201,
        json!({"user_id": id, "token": token})
            .to_string()
            .into_bytes(),
        false,
    )
}

async fn get_faults(State(s): State<Mock>) -> Response {
    let ms = s.lock().gateway_delay_ms;
    answer(
        s.m,
        200,
        json!({"gateway_delay_ms": ms}).to_string().into_bytes(),
        false,
    )
}

async fn put_faults(State(s): State<Mock>, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    if let Some(ms) = v["gateway_delay_ms"].as_u64() {
        s.lock().gateway_delay_ms = ms;
    }
    get_faults(State(s)).await
}

/// Gateway latency: long enough for the lock-less mutant that requests sent together
/// overlap even on a loaded machine.
fn default_delay(m: Mutation) -> u64 {
    if m == Mutation::NoInFlightLock {
        300
    } else {
        20
    }
}

async fn delete_faults(State(s): State<Mock>) -> Response {
    s.lock().gateway_delay_ms = default_delay(s.m);
    get_faults(State(s)).await
}

fn auth(s: &Mock, headers: &HeaderMap) -> Option<(String, String)> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    s.lock().users.get(token).cloned()
}

async fn wallet(State(s): State<Mock>, headers: HeaderMap) -> Response {
    let Some((id, currency)) = auth(&s, &headers) else {
        return problem(s.m, 401, "unauthenticated");
    };
    let balance = s.lock().balances[&id];
    let body = json!({"user_id": id, "balance_minor": balance, "currency": currency});
    answer(s.m, 200, body.to_string().into_bytes(), false)
}

fn parse_key(m: Mutation, raw: &[u8]) -> Option<String> {
    let limit = if m == Mutation::NoKeyLengthLimit {
        4096
    } else {
        255
    };
    let inner = match raw {
        [b'"', rest @ .., b'"'] if m != Mutation::QuotesAreLiteral => rest,
        _ => raw,
    };
    let ok = !inner.is_empty()
        && inner.len() <= limit
        && inner.iter().all(|b| (0x21..=0x7e).contains(b))
        && (m == Mutation::QuotesAreLiteral || !inner.contains(&b'"'));
    ok.then(|| String::from_utf8_lossy(inner).into_owned())
}

/// The stored answer for a known key, if the key answers from its row.
fn from_row(m: Mutation, row: &Row, fp: &[u8]) -> Response {
    match row {
        Row::Done {
            fp: None,
            status,
            body,
        } => replay(m, *status, body),
        Row::Done {
            fp: Some(f),
            status,
            body,
        } if f == fp || m == Mutation::IgnoresBody => replay(m, *status, body),
        Row::Running { fp: f } if f == fp || m == Mutation::IgnoresBody => {
            problem(m, 409, "idempotency_key_in_use")
        }
        _ => problem(m, 422, "idempotency_key_reused"),
    }
}

async fn post_transfer(State(s): State<Mock>, headers: HeaderMap, body: Bytes) -> Response {
    let m = s.m;
    let Some((user, currency)) = auth(&s, &headers) else {
        return problem(m, 401, "unauthenticated");
    };
    let Some(raw) = headers.get("idempotency-key") else {
        return problem(m, 400, "idempotency_key_missing");
    };
    let Some(key) = parse_key(m, raw.as_bytes()) else {
        return if m == Mutation::ServerErrorOnBadKey {
            problem(m, 500, "internal")
        } else {
            problem(m, 400, "idempotency_key_invalid")
        };
    };
    let scope = if m == Mutation::GlobalKeys {
        String::new()
    } else {
        user.clone()
    };
    let slot = (scope, key.clone());
    let fp = body.to_vec();
    let keyed = m != Mutation::IgnoresKey;
    if keyed {
        if let Some(row) = s.lock().keys.get(&slot) {
            return from_row(m, row, &fp);
        }
    }
    // Validation: never stored (unless that is the mutation).
    let invalid = match serde_json::from_slice::<Value>(&body) {
        Err(_) => Some((400, "invalid_request")),
        Ok(v) => {
            let amount = v["amount_minor"].as_i64().unwrap_or(0);
            let to = v["to_user_id"].as_str().unwrap_or("").to_string();
            if amount <= 0
                || amount > 1_000_000_000_000
                || v["currency"].as_str() != Some(&currency)
                || to == user
            {
                Some((400, "invalid_request"))
            } else if !s.lock().balances.contains_key(&to) {
                Some((404, "recipient_not_found"))
            } else {
                None
            }
        }
    };
    if let Some((status, code)) = invalid {
        if m == Mutation::StoresValidation {
            let row = Row::Done {
                fp: Some(fp),
                status,
                body: problem_body(status, code),
            };
            s.lock().keys.insert(slot, row);
        }
        return problem(m, status, code);
    }
    let v: Value = serde_json::from_slice(&body).unwrap();
    let locks = keyed && m != Mutation::NoInFlightLock;
    let delay = {
        let mut i = s.lock();
        if locks {
            if let Some(row) = i.keys.get(&slot) {
                return from_row(m, row, &fp);
            }
            i.keys.insert(slot.clone(), Row::Running { fp: fp.clone() });
        }
        i.gateway_delay_ms
    };
    tokio::time::sleep(Duration::from_millis(delay)).await;

    let mut i = s.lock();
    let amount = v["amount_minor"].as_i64().unwrap();
    let balance = i.balances[&user];
    if balance < amount {
        let body = problem_body(402, "insufficient_funds");
        if keyed && m != Mutation::PaymentRequiredNotStored {
            i.keys.insert(
                slot,
                Row::Done {
                    fp: Some(fp),
                    status: 402,
                    body: body.clone(),
                },
            );
        } else {
            i.keys.remove(&slot);
        }
        return answer(m, 402, body, false);
    }
    i.balances.insert(user.clone(), balance - amount);
    i.next += 1;
    let transfer = json!({
        "transfer_id": format!("tr{}", i.next), "status": "completed", "from_user_id": user,
        "to_user_id": v["to_user_id"], "amount_minor": amount, "currency": currency,
        "note": v["note"], "created_at": "2026-01-01T00:00:00Z", "idempotency_key": key,
    })
    .to_string()
    .into_bytes();
    i.debits.insert((user, key), transfer.clone());
    if keyed {
        i.keys.insert(
            slot,
            Row::Done {
                fp: Some(fp),
                status: 201,
                body: transfer.clone(),
            },
        );
    }
    answer(m, 201, transfer, false)
}

async fn lookup(
    State(s): State<Mock>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let m = s.m;
    let Some((user, _)) = auth(&s, &headers) else {
        return problem(m, 401, "unauthenticated");
    };
    let Some(key) = q
        .get("idempotency_key")
        .and_then(|k| parse_key(m, k.as_bytes()))
    else {
        return problem(m, 400, "idempotency_key_invalid");
    };
    let mut i = s.lock();
    let found = if m == Mutation::LookupAnyUser {
        i.debits
            .iter()
            .find(|((_, k), _)| *k == key)
            .map(|(_, b)| b.clone())
    } else {
        i.debits.get(&(user.clone(), key.clone())).cloned()
    };
    if let Some(body) = found {
        return answer(m, 200, body, false);
    }
    let scope = if m == Mutation::GlobalKeys {
        String::new()
    } else {
        user
    };
    let slot = (scope, key);
    match i.keys.get(&slot) {
        Some(Row::Running { .. }) => return problem(m, 409, "idempotency_key_in_use"),
        Some(Row::Done {
            status: 402, body, ..
        }) => return replay(m, 402, &body.clone()),
        _ => {}
    }
    let body = problem_body(404, "transfer_not_found");
    if m != Mutation::LookupNotFinal && m != Mutation::IgnoresKey {
        i.keys.entry(slot).or_insert(Row::Done {
            fp: None,
            status: 404,
            body: body.clone(),
        });
    }
    answer(m, 404, body, false)
}
