//! Test-only endpoints: users, faults, inspection, replay, clock, and the bench's
//! (`bench_api.rs`).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{delete, get, post, put};
use axum::Router;
use serde::{Deserialize, Serialize};

use super::{json, parse_json, read_body};
use crate::app::App;
use crate::faults::FaultPatch;
use crate::store::{self, Stats, UserChange};
use crate::{reaper, transfer};
use sendonce_server::Problem;

/// Largest clock jump the test API makes, either way.
const MAX_CLOCK_JUMP_MS: u64 = 10 * 366 * 86_400_000;

/// How long `POST /v1/test/settle` waits at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// The test API routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/v1/test/users", post(create_user))
        .route("/v1/test/users/{user_id}", delete(remove_user))
        .route("/v1/test/users/{user_id}/revoke", post(revoke_token))
        .route("/v1/test/limits", put(put_limits))
        .route(
            "/v1/test/faults",
            put(put_faults).delete(delete_faults).get(get_faults),
        )
        .route("/v1/test/ledger", get(get_ledger))
        .route("/v1/test/sms", get(get_sms))
        .route("/v1/test/outbox/replay", post(replay_outbox))
        .route("/v1/test/stats", get(get_stats))
        .route("/v1/test/settle", post(settle))
        .route("/v1/test/clock", post(advance_clock))
        .route("/v1/test/reap", post(reap))
        .merge(super::bench_api::routes())
}

/// Test bodies may be empty (all defaults) and need no content type, for curl's sake.
fn parse_optional<T: for<'de> Deserialize<'de> + Default>(bytes: &Bytes) -> Result<T, Problem> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse_json(bytes)
    }
}

async fn body_of(req: Request) -> Result<Bytes, Problem> {
    let (parts, body) = req.into_parts();
    read_body(&parts.headers, body).await
}

#[derive(Deserialize)]
struct NewUser {
    display_name: String,
    balance_minor: i64,
    currency: String,
    /// How long the token lives (default 30 days of server time).
    #[serde(default)]
    token_ttl_ms: Option<i64>,
}

#[derive(Serialize)]
struct CreatedUser {
    user_id: String,
    token: String,
}

async fn create_user(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let body: NewUser = parse_json(&body_of(req).await?)?;
    let display_name = crate::text::clean("display_name", &body.display_name, 100)?;
    if !(0..=transfer::MAX_AMOUNT_MINOR * 1000).contains(&body.balance_minor) {
        return Err(Problem::invalid(
            "balance_minor must be between 0 and 10^15",
        ));
    }
    if body.currency.len() != 3 || !body.currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Problem::invalid(
            "currency must be a 3-letter ISO 4217 code",
        ));
    }
    let user_id = format!("usr_{}", uuid::Uuid::new_v4().simple());
    let token = format!("tok_{}", uuid::Uuid::new_v4().simple());
    let now = app.clock.now_ms();
    let ttl = body
        .token_ttl_ms
        .unwrap_or(crate::auth::DEFAULT_TOKEN_TTL_MS);
    if !(1..=10 * crate::auth::DEFAULT_TOKEN_TTL_MS * 12).contains(&ttl) {
        return Err(Problem::invalid(
            "token_ttl_ms must be between 1 ms and ten years",
        ));
    }
    app.fixtures
        .create_user(store::NewUser {
            user_id: user_id.clone(),
            token_hash: crate::auth::token_hash(&token),
            display_name,
            currency: body.currency,
            balance_minor: body.balance_minor,
            now_ms: now,
            token_expires_at_ms: now.saturating_add(ttl),
        })
        .await
        .map_err(crate::problem::from_db)?;
    Ok(json(StatusCode::CREATED, &CreatedUser { user_id, token }))
}

/// Makes a user unknown (as a recipient and as a caller); their ledger stays, so
/// answers already given for their keys still agree with it.
async fn remove_user(
    State(app): State<App>,
    Path(user_id): Path<String>,
) -> Result<Response, Problem> {
    change_user(&app, UserChange::Remove, user_id, "removed").await
}

/// Revokes a user's token: every request with it is 401 from now on.
async fn revoke_token(
    State(app): State<App>,
    Path(user_id): Path<String>,
) -> Result<Response, Problem> {
    change_user(&app, UserChange::Revoke, user_id, "revoked").await
}

/// Makes `change` to one user's row; 404 when there is no such user.
async fn change_user(
    app: &App,
    change: UserChange,
    user_id: String,
    done: &str,
) -> Result<Response, Problem> {
    let changed = app
        .fixtures
        .change_user(change, user_id)
        .await
        .map_err(crate::problem::from_db)?;
    if changed == 0 {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "user_not_found",
            "no such user",
        ));
    }
    Ok(json(StatusCode::OK, &serde_json::json!({ done: true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    max_amount_minor: i64,
}

/// Lowers (or restores) the largest amount a transfer may move.
async fn put_limits(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let body: Limits = parse_json(&body_of(req).await?)?;
    let max = app.set_max_amount_minor(body.max_amount_minor);
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "max_amount_minor": max }),
    ))
}

async fn put_faults(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let patch: FaultPatch = parse_optional(&body_of(req).await?)?;
    let settings = app.faults.apply(patch).map_err(Problem::invalid)?;
    tracing::info!(?settings, "faults changed");
    Ok(json(StatusCode::OK, &settings))
}

async fn delete_faults(State(app): State<App>) -> Response {
    json(StatusCode::OK, &app.faults.clear())
}

async fn get_faults(State(app): State<App>) -> Response {
    json(StatusCode::OK, &app.faults.settings())
}

/// `?after=ID&limit=N`: one page of a listing, so no read holds the reader (or the
/// server's memory) for long. Ask again with the last id until a page comes back short.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    after: i64,
    #[serde(default = "Page::default_limit")]
    limit: i64,
}

impl Page {
    const MAX: i64 = 10_000;

    fn default_limit() -> i64 {
        1_000
    }

    fn parse(query: Result<Query<Page>, QueryRejection>) -> Result<(i64, i64), Problem> {
        let Query(p) = query.map_err(|e| Problem::invalid(e.body_text()))?;
        if !(1..=Self::MAX).contains(&p.limit) {
            return Err(Problem::invalid(format!(
                "limit must be 1 to {}",
                Self::MAX
            )));
        }
        Ok((p.after, p.limit))
    }
}

async fn get_ledger(
    State(app): State<App>,
    query: Result<Query<Page>, QueryRejection>,
) -> Result<Response, Problem> {
    let (after, limit) = Page::parse(query)?;
    let entries = app
        .fixtures
        .ledger_page(after, limit)
        .await
        .map_err(crate::problem::from_db)?;
    Ok(json(StatusCode::OK, &entries))
}

async fn get_sms(
    State(app): State<App>,
    query: Result<Query<Page>, QueryRejection>,
) -> Result<Response, Problem> {
    let (after, limit) = Page::parse(query)?;
    let sms = app
        .fixtures
        .sms_page(after, limit)
        .await
        .map_err(crate::problem::from_db)?;
    Ok(json(StatusCode::OK, &sms))
}

#[derive(Deserialize, Default)]
struct ReplayBody {
    #[serde(default)]
    from_event: i64,
}

#[derive(Serialize)]
struct Replayed {
    republished: usize,
}

async fn replay_outbox(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let body: ReplayBody = parse_optional(&body_of(req).await?)?;
    let republished = app
        .store()
        .replay_outbox(body.from_event)
        .await
        .map_err(crate::problem::from_db)?;
    app.relay_wake.notify_one();
    Ok(json(StatusCode::OK, &Replayed { republished }))
}

/// Database counters, the gateway's included (its records survive restarts).
async fn all_stats(app: &App) -> Result<Stats, Problem> {
    app.fixtures.stats().await.map_err(crate::problem::from_db)
}

async fn get_stats(State(app): State<App>) -> Result<Response, Problem> {
    let s = all_stats(&app).await?;
    Ok(json(StatusCode::OK, &s))
}

async fn settle(State(app): State<App>) -> Result<Response, Problem> {
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    loop {
        app.relay_wake.notify_one();
        let s = all_stats(&app).await?;
        // The relay marks an event published only after every consumer handled it.
        if s.outbox_pending == 0 || tokio::time::Instant::now() >= deadline {
            return Ok(json(StatusCode::OK, &s));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[derive(Deserialize, Default)]
struct ClockBody {
    #[serde(default)]
    advance_ms: i64,
}

#[derive(Serialize)]
struct ClockNow {
    now: String,
    offset_ms: i64,
}

async fn advance_clock(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let body: ClockBody = parse_optional(&body_of(req).await?)?;
    // Both ways (a phone's or a server's clock jumps back too), within ten years.
    if body.advance_ms.unsigned_abs() > MAX_CLOCK_JUMP_MS {
        return Err(Problem::invalid(
            "advance_ms must be within ten years either way",
        ));
    }
    let offset_ms = app.clock.advance(body.advance_ms);
    // Let the reaper see the new time at once (lock timeouts, key expiry).
    app.reaper_wake.notify_one();
    Ok(json(
        StatusCode::OK,
        &ClockNow {
            now: sendonce_server::clock::rfc3339(app.clock.now_ms()),
            offset_ms,
        },
    ))
}

#[derive(Serialize)]
struct ReapResult {
    completed: usize,
    finished: usize,
    released: usize,
    /// Stuck keys kept for the next pass (the question could not be answered now, or their
    /// rows are locked by a stalled session).
    held: usize,
    expired: usize,
    /// Rows past their retention removed (outbox, inbox, SMS).
    trimmed: usize,
}

async fn reap(State(app): State<App>) -> Result<Response, Problem> {
    let p = reaper::pass(&app).await.map_err(crate::problem::from_db)?;
    let trimmed = reaper::trim(&app).await.map_err(crate::problem::from_db)?;
    Ok(json(
        StatusCode::OK,
        &ReapResult {
            completed: p.completed,
            finished: p.finished,
            released: p.released,
            held: p.held,
            expired: p.expired,
            trimmed: trimmed.total(),
        },
    ))
}
