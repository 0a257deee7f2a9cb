//! The bench's endpoints, mounted with the test API: the baseline (`plain`: no idempotency),
//! the contract's `floor` and the `peer` (a Powertools-style layer). Each takes a transfer's
//! body with the same authentication, parsing and validation as `POST /v1/transfers`, so
//! only what follows differs.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Serialize;

use super::{authenticate, json, read_body, require_json};
use crate::app::App;
use crate::store::{self, Fixtures, Fut, PlainRow};
use crate::transfer;
use sendonce_server::Problem;

/// The bench routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/v1/bench/plain", post(bench_plain))
        .route("/v1/bench/floor", post(bench_floor))
        .route("/v1/bench/peer", post(bench_peer))
}

#[derive(Serialize)]
struct PlainCreated {
    id: i64,
}

/// The baseline: one plain INSERT with no idempotency (same connection, same `synchronous`).
async fn bench_plain(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let row = bench_row(&app, req).await?;
    let id = app
        .fixtures
        .bench_plain(row)
        .await
        .map_err(crate::problem::from_db)?;
    Ok(json(StatusCode::CREATED, &PlainCreated { id }))
}

/// The floor: the least a first request honouring the contract does (see
/// `Fixtures::bench_floor`); its outbox event goes through the relay like a transfer's.
async fn bench_floor(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let id = other_path(&app, req, "floor", |f, row| f.bench_floor(row)).await?;
    app.relay_wake.notify_one();
    Ok(json(StatusCode::CREATED, &PlainCreated { id }))
}

/// The peer: what a Powertools-style idempotency layer does for a first request (see
/// `Fixtures::bench_peer`).
async fn bench_peer(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let id = other_path(&app, req, "peer", |f, row| f.bench_peer(row)).await?;
    Ok(json(StatusCode::CREATED, &PlainCreated { id }))
}

/// Runs the bench path `pick` chooses on the request's row; 404 on a backend without it.
async fn other_path(
    app: &App,
    req: Request,
    name: &str,
    pick: impl for<'a> FnOnce(&'a dyn Fixtures, PlainRow) -> Option<Fut<'a, i64>>,
) -> Result<i64, Problem> {
    let row = bench_row(app, req).await?;
    let path = pick(&*app.fixtures, row).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no bench {name} on this backend"),
        )
    })?;
    path.await.map_err(crate::problem::from_db)
}

/// A bench request's row: authenticated, parsed and validated like a transfer.
async fn bench_row(app: &App, req: Request) -> Result<store::PlainRow, Problem> {
    let (parts, body) = req.into_parts();
    let headers: &HeaderMap = &parts.headers;
    let caller = authenticate(app, headers).await?;
    require_json(headers)?;
    let bytes = read_body(headers, body).await?;
    let valid = transfer::validate(app, &caller, &bytes).await?;
    let now_ms = app.clock.now_ms();
    Ok(store::PlainRow {
        user_id: caller.user_id,
        to_user_id: valid.to_user_id,
        amount_minor: valid.amount_minor,
        currency: valid.currency,
        note: valid.note,
        now_ms,
        bucket: sendonce_server::expiry::bucket(now_ms, app.key_window_ms()),
        bucket_width_ms: sendonce_server::expiry::bucket_width_ms(app.key_window_ms()),
    })
}
