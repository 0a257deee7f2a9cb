//! The axum side of the engine: an extractor that turns an HTTP request into the engine's
//! [`Request`] — the principal your authentication layer put in the request's extensions, the
//! `Idempotency-Key`, the fingerprint of method, path and the exact body bytes.
//!
//! ```ignore
//! async fn create(State(app): State<App>, Idempotent(req): Idempotent) -> Answer {
//!     app.engine.run_detached(&app.operation, req).await
//! }
//! ```

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request as HttpRequest};
use axum::http::request::Parts;
use axum::http::{Extensions, StatusCode};

use super::Request;
use crate::problem::Problem;

/// Who is calling, as your authentication layer decided (insert it into the request's
/// extensions, e.g. in a `middleware::from_fn`): keys are scoped per principal. As an
/// extractor it rejects with 401 `unauthenticated` when none was set (a route your
/// authentication layer does not cover).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal(pub String);

impl Principal {
    /// The principal in `extensions`, or 401 `unauthenticated`.
    fn of(extensions: &Extensions) -> Result<Self, Problem> {
        extensions
            .get::<Self>()
            .cloned()
            .ok_or_else(Problem::unauthenticated)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        Self::of(&parts.extensions)
    }
}

/// The request as the engine runs it. Rejects with the contract's 400 for a missing or invalid
/// key, and 401 `unauthenticated` when no [`Principal`] was set (a route your authentication
/// layer does not cover).
#[derive(Debug, Clone)]
pub struct Idempotent(pub Request);

impl<S: Send + Sync> FromRequest<S> for Idempotent {
    type Rejection = Problem;

    async fn from_request(req: HttpRequest, state: &S) -> Result<Self, Problem> {
        let Principal(scope) = Principal::of(req.extensions())?;
        let (method, path) = (req.method().clone(), req.uri().path().to_string());
        let headers = req.headers().clone();
        let body = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Problem::new(e.status(), "payload_too_large", e.body_text())
            } else {
                Problem::invalid(e.body_text())
            }
        })?;
        let request = Request::new(scope, method.as_str(), &path, &headers, body)?;
        Ok(Self(request))
    }
}

/// The key of a by-key look-up, `GET …?idempotency_key=K`, checked as an `Idempotency-Key`
/// header is (400 `idempotency_key_missing` / `idempotency_key_invalid`): hand it to
/// [`super::Engine::lookup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for LookupKey {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let query = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map_err(|e| Problem::invalid(e.body_text()))?;
        let raw = query
            .get("idempotency_key")
            .ok_or(crate::key::KeyError::Missing);
        let key = raw.and_then(|raw| crate::key::parse_key(raw.as_bytes()));
        Ok(Self(key.map_err(crate::key::problem)?))
    }
}
