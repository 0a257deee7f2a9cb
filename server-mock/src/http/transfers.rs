//! `POST /v1/transfers` and the status look-ups that resolve an unknown outcome.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{authenticate, read_body, require_json};
use crate::app::App;
use crate::faults::FailingBody;
use crate::ledger;
use crate::serve::ConnKill;
use crate::transfer;
use sendonce_server::expiry::bucket_width_ms;
use sendonce_server::fingerprint::request_hash;
use sendonce_server::key::{self, KeyError};
use sendonce_server::Answer;
use sendonce_server::Problem;

/// One request from the caller's quota, or 429.
fn take_request(app: &App, caller: &transfer::Caller) -> Result<(), Problem> {
    app.quotas
        .request(&caller.user_id)
        .map_err(|wait| Problem::rate_limited("too many requests from this user", wait))
}

/// `POST /v1/transfers`.
pub async fn post_transfer(State(app): State<App>, req: Request) -> Result<Response, Problem> {
    let (parts, body) = req.into_parts();
    let kill = parts.extensions.get::<ConnKill>().cloned();
    let caller = authenticate(&app, &parts.headers).await?;
    take_request(&app, &caller)?;
    require_json(&parts.headers)?;
    let key = key::from_headers(&parts.headers)?;
    let bytes = read_body(&parts.headers, body).await?.to_vec();
    // Validation runs inside `execute`, after a known key has answered from its row and
    // before a new key is claimed, so a validation failure stores nothing.
    let req = sendonce_server::Request {
        scope: caller.user_id.clone(),
        hash: request_hash("POST", parts.uri.path(), &bytes),
        key,
        body: bytes,
    };

    // Spawned: a client hanging up must not abandon a half-done transfer.
    let spawn = || tokio::spawn(transfer::execute(app.clone(), caller.clone(), req.clone()));
    let answer = if app.faults.roll_duplicate() {
        // A load balancer replaying the request: two concurrent executions, one answer.
        let (a, b) = tokio::join!(spawn(), spawn());
        let (a, b) = (joined(a), joined(b));
        tracing::info!(a = a.status, b = b.status, "duplicate delivery fault");
        if app.faults.coin() {
            a
        } else {
            b
        }
    } else {
        joined(spawn().await)
    };

    if answer.committed && app.faults.roll_drop_response() {
        tracing::info!(
            key = req.key,
            "fault: dropping the response of a committed transfer"
        );
        return Ok(match kill {
            Some(kill) => {
                kill.kill();
                // The connection task drops this future together with the socket.
                std::future::pending::<()>().await;
                Problem::internal("unreachable after connection drop").into_response()
            }
            // Served through a plain router: a body that fails aborts the connection.
            None => Response::new(Body::new(FailingBody)),
        });
    }
    Ok(answer.into_response())
}

fn joined(r: Result<Answer, tokio::task::JoinError>) -> Answer {
    r.unwrap_or_else(|e| Problem::internal(e).into())
}

fn transfer_not_found() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "transfer_not_found",
        "no transfer of yours matches",
    )
}

fn transfer_response(record: &ledger::TransferRecord) -> Response {
    Answer {
        status: 200,
        body: record.to_json(),
        replayed: false,
        retry_after: None,
        committed: false,
    }
    .into_response()
}

/// `GET /v1/transfers/{transfer_id}` (the caller's own only).
pub async fn get_by_id(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = authenticate(&app, &headers).await?;
    take_request(&app, &caller)?;
    let Path(transfer_id) = path.map_err(|e| Problem::invalid(e.body_text()))?;
    let record = app
        .store()
        .debit_by_transfer(caller.user_id, transfer_id)
        .await
        .map_err(crate::problem::from_db)?;
    record
        .map(|r| transfer_response(&r))
        .ok_or_else(transfer_not_found)
}

/// `GET /v1/transfers?idempotency_key=K`: what happened to the request sent with K.
pub async fn get_by_key(
    State(app): State<App>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = authenticate(&app, &headers).await?;
    take_request(&app, &caller)?;
    let Query(query) = query.map_err(|e| Problem::invalid(e.body_text()))?;
    let raw = query
        .get("idempotency_key")
        .ok_or_else(|| key::problem(KeyError::Missing))?;
    let key = key::parse_key(raw.as_bytes()).map_err(key::problem)?;
    let mut found = app
        .store()
        .lookup(caller.user_id.clone(), key.clone())
        .await
        .map_err(crate::problem::from_db)?;
    if matches!(found, Err(None)) {
        // Closing writes a key row, so it counts against the keys per hour like a POST.
        app.quotas.new_key(&caller.user_id).map_err(|wait| {
            Problem::rate_limited("too many new keys from this user this hour", wait)
        })?;
        // "Not executed" must stay true: close the key in the same write that checks the
        // ledger again, so no late duplicate of the request can move money after this 404.
        let now = app.clock.now_ms();
        let width = bucket_width_ms(app.key_window_ms());
        let body = transfer_not_found().body_bytes();
        found = app
            .store()
            .close_unexecuted(caller.user_id, key, now, width, body)
            .await
            .map_err(crate::problem::from_db)?;
    }
    match found {
        Ok(record) => Ok(transfer_response(&record)),
        Err(Some(row)) if row.completed => {
            let status = row.status.unwrap_or(500);
            Ok(Answer {
                status,
                body: row.body.unwrap_or_default(),
                replayed: true,
                retry_after: None,
                committed: false,
            }
            .into_response())
        }
        Err(Some(_)) => Err(Problem::key_in_use()),
        Err(None) => Err(transfer_not_found()),
    }
}
