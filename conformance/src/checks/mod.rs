//! The checks: one function per contract rule, each with a stable id, and what they
//! share (request helpers, the money plan).

mod chaos;
mod concurrency;
mod keys;
mod lookup;
mod replay;
pub mod soak;

use std::time::Duration;

use crate::client::{error_chain, Answer, Api, Call, Route};
use crate::fixtures::{self, Accounts, User};
use crate::operation::Operation;

/// What a check concluded, with its one-line evidence.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The backend did what the contract says.
    Pass(String),
    /// It did not.
    Fail(String),
    /// The check could not be made here (no test API, no broke user, ...).
    Skip(String),
}

/// A check's result; an `Err` (a request that got no answer where one was needed) is a
/// failure too.
pub type Outcome = anyhow::Result<Verdict>;

/// Fails the check with the evidence unless `cond` holds.
macro_rules! ensure_or_fail {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Ok($crate::checks::Verdict::Fail(format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure_or_fail;

/// How many transfers of `--amount-minor` a check moves from A and B: what it should
/// move, and the most it could move if the backend executed every request it sends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    /// Expected transfers out of A.
    pub a: u64,
    /// Worst case out of A.
    pub a_worst: u64,
    /// Expected transfers out of B.
    pub b: u64,
    /// Worst case out of B.
    pub b_worst: u64,
}

const fn cost(a: u64, a_worst: u64, b: u64, b_worst: u64) -> Cost {
    Cost {
        a,
        a_worst,
        b,
        b_worst,
    }
}

/// One check of the catalogue.
pub struct Check {
    /// Stable id, printed on every line and named in the README.
    pub id: &'static str,
    /// What it checks, in one line.
    pub what: &'static str,
    /// The money it moves (the soak's is computed from its size).
    pub cost: Cost,
}

/// Requests with a fresh valid body the retry loops may send, at most, per transfer.
pub const MAX_ATTEMPTS: u64 = 8;
/// Parallel requests on one key in the concurrency and in-flight checks.
pub const PARALLEL: u64 = 16;

/// Every check, in the order they run.
pub const CHECKS: &[Check] = &[
    Check { id: "auth.missing", what: "no bearer token: 401 unauthenticated", cost: cost(0, 1, 0, 0) },
    Check { id: "auth.invalid", what: "unknown bearer token: 401 unauthenticated", cost: cost(0, 1, 0, 0) },
    Check { id: "key.missing", what: "no Idempotency-Key: 400 idempotency_key_missing", cost: cost(0, 1, 0, 0) },
    Check { id: "key.empty", what: "empty key: 400 idempotency_key_invalid", cost: cost(0, 1, 0, 0) },
    Check { id: "key.too-long", what: "256-character key: 400 idempotency_key_invalid", cost: cost(0, 1, 0, 0) },
    Check { id: "key.not-visible-ascii", what: "key with a space / non-ASCII bytes: 400 idempotency_key_invalid", cost: cost(0, 2, 0, 0) },
    Check { id: "key.malformed-quotes", what: "key `\"abc` (unbalanced sf-string): 400 idempotency_key_invalid", cost: cost(0, 1, 0, 0) },
    Check { id: "key.max-length", what: "255-character key: accepted (201)", cost: cost(1, MAX_ATTEMPTS, 0, 0) },
    Check { id: "key.sf-string", what: "quoted sf-string key accepted; the bare key is the same key (replay)", cost: cost(1, MAX_ATTEMPTS + 1, 0, 0) },
    Check { id: "problem.shape", what: "errors are application/problem+json with type, title, status, code", cost: cost(0, 1, 0, 0) },
    Check { id: "create.first", what: "first request with a key: 201 with the transfer, balance down by the amount", cost: cost(1, 1, 0, 0) },
    Check { id: "replay.identical", what: "same key and body: same status, byte-identical body, Idempotent-Replayed: true, nothing moved", cost: cost(1, MAX_ATTEMPTS + 1, 0, 0) },
    Check { id: "replay.other-body", what: "same key, other body: 422 idempotency_key_reused, nothing moved or stored", cost: cost(1, MAX_ATTEMPTS + 2, 0, 0) },
    Check { id: "replay.in-flight", what: "same key while the first is running: 409 idempotency_key_in_use with Retry-After", cost: cost(1, 1 + PARALLEL + MAX_ATTEMPTS, 0, 0) },
    Check { id: "scope.per-user", what: "another user, same key: an independent transfer", cost: cost(1, MAX_ATTEMPTS, 1, MAX_ATTEMPTS) },
    Check { id: "funds.402-stored", what: "not enough money: 402 insufficient_funds, replayed byte-identical", cost: cost(0, 0, 0, 0) },
    Check { id: "validation.amount", what: "amount 0: 400 invalid_request, not stored (the key stays free)", cost: cost(1, MAX_ATTEMPTS + 1, 0, 0) },
    Check { id: "validation.malformed-json", what: "malformed JSON: 400 invalid_request, not stored", cost: cost(1, MAX_ATTEMPTS + 1, 0, 0) },
    Check { id: "validation.unknown-recipient", what: "unknown recipient: 404 problem, not stored", cost: cost(1, MAX_ATTEMPTS + 1, 0, 0) },
    Check { id: "concurrency.one-key", what: "16 parallel requests on one key: one transfer (look-up + balance)", cost: cost(1, PARALLEL + MAX_ATTEMPTS, 0, 0) },
    Check { id: "lookup.found", what: "look-up by key: 200, byte-identical to the 201", cost: cost(1, MAX_ATTEMPTS, 0, 0) },
    Check { id: "lookup.unknown", what: "look-up of an unknown key: 404 transfer_not_found problem", cost: cost(0, 0, 0, 0) },
    Check { id: "lookup.404-final", what: "after a look-up's 404, a POST with that key moves no money", cost: cost(0, 1, 0, 0) },
    Check { id: "lookup.own-only", what: "look-up finds the caller's own transfers only", cost: cost(1, MAX_ATTEMPTS, 0, 0) },
    Check { id: "chaos.answer-dropped", what: "answer dropped after the backend replied, retried: money moved once", cost: cost(1, 1 + MAX_ATTEMPTS, 0, 0) },
    Check { id: "chaos.delivered-twice", what: "request delivered twice (LB replay), retried: money moved once", cost: cost(1, 2 + MAX_ATTEMPTS, 0, 0) },
    Check { id: "chaos.answer-late", what: "answer delayed past the client's timeout, retried: money moved once", cost: cost(1, 1 + MAX_ATTEMPTS, 0, 0) },
    Check { id: soak::ID, what: "a few hundred transfers with mixed faults: balance delta equals the look-ups", cost: cost(0, 0, 0, 0) },
];

/// What the checks run against and with.
#[derive(Clone)]
pub struct Ctx {
    /// The client (and its log).
    pub api: Api,
    /// The users.
    pub acc: Accounts,
    /// Smallest amount to move.
    pub amount: i64,
    /// The backend has server-mock's test API.
    pub test_api: bool,
    /// Soak size (0: skipped).
    pub soak_transfers: u64,
    /// Soak time bound.
    pub soak_time: Duration,
    /// Client timeout of the late-answer check (the proxy holds the answer longer).
    pub late_timeout: Duration,
    /// The operation sent (server-mock's transfer unless a profile says otherwise).
    pub op: std::sync::Arc<Operation>,
}

/// Runs the check `id`.
pub async fn run(id: &str, ctx: &Ctx) -> Outcome {
    match id {
        "auth.missing" => keys::auth_missing(ctx).await,
        "auth.invalid" => keys::auth_invalid(ctx).await,
        "key.missing" => keys::missing(ctx).await,
        "key.empty" => keys::invalid(ctx, "empty", &[b""]).await,
        "key.too-long" => keys::invalid(ctx, "256 chars", &["k".repeat(256).as_bytes()]).await,
        "key.not-visible-ascii" => {
            keys::invalid(ctx, "space / UTF-8", &[b"a b", "cl\u{e9}".as_bytes()]).await
        }
        "key.malformed-quotes" => keys::invalid(ctx, "\"abc", &[b"\"abc"]).await,
        "key.max-length" => keys::max_length(ctx).await,
        "key.sf-string" => keys::sf_string(ctx).await,
        "problem.shape" => keys::problem_shape(ctx).await,
        "create.first" => replay::first(ctx).await,
        "replay.identical" => replay::identical(ctx).await,
        "replay.other-body" => replay::other_body(ctx).await,
        "replay.in-flight" => concurrency::in_flight(ctx).await,
        "scope.per-user" => replay::per_user(ctx).await,
        "funds.402-stored" => replay::payment_required(ctx).await,
        "validation.amount" => {
            replay::not_stored(ctx, "amount 0", 400, "invalid_request", Bad::Amount).await
        }
        "validation.malformed-json" => {
            replay::not_stored(ctx, "malformed JSON", 400, "invalid_request", Bad::Json).await
        }
        "validation.unknown-recipient" => {
            let want = &ctx.op.unknown_target;
            replay::not_stored(
                ctx,
                "unknown target",
                want.status,
                &want.code,
                Bad::Recipient,
            )
            .await
        }
        "concurrency.one-key" => concurrency::one_key(ctx).await,
        "lookup.found" => lookup::found(ctx).await,
        "lookup.unknown" => lookup::unknown(ctx).await,
        "lookup.404-final" => lookup::not_found_is_final(ctx).await,
        "lookup.own-only" => lookup::own_only(ctx).await,
        "chaos.answer-dropped" => chaos::answer_dropped(ctx).await,
        "chaos.delivered-twice" => chaos::delivered_twice(ctx).await,
        "chaos.answer-late" => chaos::answer_late(ctx).await,
        soak::ID => soak::run(ctx).await,
        other => Ok(Verdict::Skip(format!("unknown check {other}"))),
    }
}

/// The soak's worst case in transfers: every attempt executed, duplicates too.
pub fn soak_worst(transfers: u64) -> u64 {
    transfers * MAX_ATTEMPTS * 2
}

/// Ways a body can be invalid.
#[derive(Debug, Clone, Copy)]
pub enum Bad {
    /// `amount_minor: 0`.
    Amount,
    /// Not JSON.
    Json,
    /// A recipient nobody has.
    Recipient,
}

/// A fresh key no backend has seen.
pub fn fresh_key() -> String {
    format!("conf-{}", uuid::Uuid::new_v4())
}

impl Ctx {
    /// The exact body bytes of a valid operation of `user` (to the recipient).
    pub fn body(&self, user: &User, note: &str) -> Vec<u8> {
        self.op
            .body(user, &self.acc.recipient_id, self.amount, note)
    }

    /// An invalid body of the given kind.
    pub fn bad_body(&self, user: &User, bad: Bad) -> Vec<u8> {
        let target = &self.acc.recipient_id;
        match bad {
            Bad::Amount => self.op.body(user, target, 0, "conformance amount 0"),
            // A valid body cut in half: never JSON.
            Bad::Json => {
                let mut body = self.body(user, "conformance malformed");
                body.truncate(body.len() / 2);
                body
            }
            Bad::Recipient => {
                let nobody = format!("nobody-{}", uuid::Uuid::new_v4());
                self.op
                    .body(user, &nobody, self.amount, "conformance unknown target")
            }
        }
    }

    /// The operation's POST as `user` with `key` and `body`.
    pub async fn post(
        &self,
        user: &User,
        key: &str,
        body: &[u8],
        route: Route,
    ) -> reqwest::Result<Answer> {
        self.post_raw(Some(&user.token), Some(key.as_bytes()), body, route, None)
            .await
    }

    /// The operation's POST with every part chosen by the caller.
    pub async fn post_raw(
        &self,
        token: Option<&str>,
        key: Option<&[u8]>,
        body: &[u8],
        route: Route,
        timeout: Option<Duration>,
    ) -> reqwest::Result<Answer> {
        let mut call = Call::post(self.op.path.clone(), token, body);
        call.key = key;
        call.route = route;
        call.timeout = timeout;
        self.api.send(call).await
    }

    /// The by-key look-up (`GET /v1/transfers?idempotency_key=K`) as `user`.
    pub async fn lookup(&self, user: &User, key: &str) -> reqwest::Result<Answer> {
        let path = self.op.lookup_path(&query_escape(key));
        self.api.send(Call::get(path, Some(&user.token))).await
    }

    /// The user's balance now.
    pub async fn balance(&self, user: &User) -> anyhow::Result<i64> {
        Ok(fixtures::balance(&self.api, user).await?)
    }

    /// A request whose answer the check builds on (not the one it judges): sent until
    /// definitive, because a healthy backend may answer a retryable 409 or 503 first.
    pub async fn settle(&self, user: &User, key: &str, body: &[u8]) -> anyhow::Result<Answer> {
        let (answer, _) = self
            .until_definitive(user, key, body, Route::Direct, None)
            .await;
        answer.ok_or_else(|| {
            anyhow::anyhow!("POST key {key}: no definitive answer in {MAX_ATTEMPTS} attempts")
        })
    }

    /// Sends the same key and bytes (over `route` first, then directly) until a
    /// definitive answer, honouring `Retry-After` (at most 1 s); `None` after
    /// [`MAX_ATTEMPTS`]. Returns the answer and how many attempts had no answer.
    pub async fn until_definitive(
        &self,
        user: &User,
        key: &str,
        body: &[u8],
        first: Route,
        timeout: Option<Duration>,
    ) -> (Option<Answer>, u32) {
        let mut lost = 0;
        for attempt in 0..MAX_ATTEMPTS {
            let route = if attempt == 0 { first } else { Route::Direct };
            let t = if attempt == 0 { timeout } else { None };
            let wait = match self
                .post_raw(Some(&user.token), Some(key.as_bytes()), body, route, t)
                .await
            {
                Ok(a) if a.definitive() => return (Some(a), lost),
                Ok(a) => a
                    .header("retry-after")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map_or(Duration::from_millis(200), |s| {
                        Duration::from_secs(s.min(1))
                    }),
                Err(_) => {
                    lost += 1;
                    Duration::from_millis(100)
                }
            };
            tokio::time::sleep(wait).await;
        }
        (None, lost)
    }
}

/// Checks an error answer: status, problem+json content type, `code`, `status` field.
pub fn problem(answer: &Answer, status: u16, code: &str) -> Result<(), String> {
    let ct = answer.header("content-type").unwrap_or("");
    let got = answer.summary();
    if answer.status != status || answer.code().as_deref() != Some(code) {
        return Err(format!("-> {got}, expected {status} {code}"));
    }
    if !ct
        .trim()
        .to_ascii_lowercase()
        .starts_with("application/problem+json")
    {
        return Err(format!(
            "-> {got} with content-type {ct:?}, expected application/problem+json"
        ));
    }
    Ok(())
}

/// A transport error as evidence.
pub fn no_answer(e: &reqwest::Error) -> String {
    format!("no answer ({})", error_chain(e))
}

fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::query_escape;

    #[test]
    fn keys_are_escaped_in_the_query() {
        assert_eq!(query_escape("conf-1_a.b~"), "conf-1_a.b~");
        assert_eq!(query_escape("a b&c=\""), "a%20b%26c%3D%22");
    }
}
