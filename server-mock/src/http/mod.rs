//! HTTP surface: routing, authentication and request-reading helpers.

mod account;
pub mod guard;
mod openapi;

mod bench_api;
mod test_api;
mod transfers;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::app::App;
use crate::auth::Caller;
use sendonce_server::Problem;

/// Largest request body accepted anywhere.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Builds the full router for `app` (test endpoints only when enabled).
pub fn router(app: App) -> Router {
    let mut routes = Router::new()
        .route("/v1/wallet", get(account::wallet))
        .route("/v1/profile", put(account::put_profile))
        .route("/v1/beneficiaries", post(account::post_beneficiary))
        .route(
            "/v1/transfers",
            post(transfers::post_transfer).get(transfers::get_by_key),
        )
        .route("/v1/transfers/{transfer_id}", get(transfers::get_by_id))
        .route("/openapi.json", get(openapi::openapi));
    if app.config.test_api {
        routes = routes.merge(
            test_api::routes()
                .route_layer(middleware::from_fn_with_state(app.clone(), guard::test_api)),
        );
    }
    routes
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), fault_503))
        .layer(middleware::from_fn_with_state(app.clone(), deadline))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(on_panic))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(app)
}

async fn fallback() -> Problem {
    Problem::not_found("no such endpoint")
}

async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not support the method",
    )
}

/// A bug must cost one 500, never the process.
fn on_panic(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    Problem::internal("handler panicked").into_response()
}

/// Every request is answered within the request timeout: past it, 503 with `Retry-After`.
/// A transfer's own work runs in a task of its own and goes on; the retry gets its outcome.
async fn deadline(State(app): State<App>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(app.config.limits.request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            let mut p = Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "request_timeout",
                "the request took longer than the server's request timeout; retry with the same key",
            );
            p.retry_after = Some(1);
            p.into_response()
        }
    }
}

/// The 503 fault: answered before anything is read or written. Test endpoints are exempt
/// so a test can always switch the fault off again.
async fn fault_503(State(app): State<App>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let exempt = path.starts_with("/v1/test/") || path.starts_with("/v1/bench/");
    if !exempt && app.faults.roll_503() {
        let mut p = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "the service is temporarily unavailable (injected fault)",
        );
        p.retry_after = Some(1);
        return p.into_response();
    }
    next.run(req).await
}

/// Resolves `Authorization: Bearer TOKEN` to a user, or 401.
pub(crate) async fn authenticate(app: &App, headers: &HeaderMap) -> Result<Caller, Problem> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim().to_string())
        })
        .filter(|t| !t.is_empty())
        .ok_or_else(Problem::unauthenticated)?;
    let (hash, now) = (crate::auth::token_hash(&token), app.clock.now_ms());
    let found = app
        .store()
        .caller(hash, now)
        .await
        .map_err(crate::problem::from_db)?;
    found.ok_or_else(Problem::unauthenticated)
}

/// 415 unless the body is declared as JSON.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), Problem> {
    let ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        })
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be application/json",
        ))
    }
}

/// Reads the whole body, refusing more than [`MAX_BODY_BYTES`] with 413.
pub(crate) async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, Problem> {
    let too_large = || {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body must be at most {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large())
}

/// Parses JSON or answers 400 `invalid_request`.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    serde_json::from_slice(bytes).map_err(|e| Problem::invalid(format!("malformed JSON body: {e}")))
}

/// A JSON response with the given status.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => Problem::internal(e).into_response(),
    }
}
