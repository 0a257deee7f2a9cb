//! RFC 9457 problem responses with a stable machine-readable `code`: the contract's own
//! (`idempotency_key_in_use`, `idempotency_key_reused`, `busy`, …) and any an application
//! defines with [`Problem::new`].

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Content type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One error answer: status, stable code and a human detail.
#[derive(Debug, Clone)]
pub struct Problem {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code clients branch on.
    pub code: &'static str,
    /// Human-readable explanation for logs and bug reports.
    pub detail: String,
    /// Seconds for a `Retry-After` header, when retrying later makes sense.
    pub retry_after: Option<u32>,
}

#[derive(Serialize)]
struct ProblemBody<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    code: &'a str,
    detail: &'a str,
}

impl Problem {
    /// A problem with the given status, code and detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", detail)
    }

    /// A JSON request body as `T`, or 400 `invalid_request` naming what is wrong with it.
    pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
        serde_json::from_slice(body).map_err(|e| Self::invalid(e.to_string()))
    }

    /// 401 `unauthenticated`.
    pub fn unauthenticated() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a valid bearer token is required",
        )
    }

    /// 404 `not_found` for unknown routes.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    /// 409 `idempotency_key_in_use`, with `Retry-After: 1`.
    pub fn key_in_use() -> Self {
        let mut p = Self::new(
            StatusCode::CONFLICT,
            "idempotency_key_in_use",
            "a request with this idempotency key is still being processed; retry later",
        );
        p.retry_after = Some(1);
        p
    }

    /// 429 `rate_limited` with `Retry-After` (a quota ran out; retry later, same key).
    pub fn rate_limited(what: &str, retry_after: u32) -> Self {
        let mut p = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("{what}; retry after {retry_after} s with the same key"),
        );
        p.retry_after = Some(retry_after);
        p
    }

    /// 422 `idempotency_key_reused`.
    pub fn key_reused() -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this idempotency key was already used with a different request",
        )
    }

    /// 503 `busy` with `Retry-After: 1`: nothing was stored, retry with the same key.
    pub fn busy() -> Self {
        let mut p = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "the server is busy; retry with the same key",
        );
        p.retry_after = Some(1);
        p
    }

    /// 500 `internal_error`; the cause is logged, never sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the server failed to process the request",
        )
    }

    /// Human title derived from the status line.
    fn title(&self) -> &'static str {
        self.status.canonical_reason().unwrap_or("Error")
    }

    /// The serialized body, exactly as sent (also what is stored for replays).
    pub fn body_bytes(&self) -> Vec<u8> {
        let body = ProblemBody {
            kind: format!(
                "https://sendonce.dev/problems/{}",
                self.code.replace('_', "-")
            ),
            title: self.title(),
            status: self.status.as_u16(),
            code: self.code,
            detail: &self.detail,
        };
        serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec())
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body_bytes()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_the_type_is_a_400_naming_why() {
        #[derive(serde::Deserialize, Debug)]
        struct Order {
            amount_minor: i64,
        }
        assert_eq!(
            Problem::parse_json::<Order>(b"{\"amount_minor\":5}")
                .unwrap()
                .amount_minor,
            5
        );
        for bad in [&b"{"[..], b"{\"amount_minor\":\"5\"}", b"{}", b"\xff"] {
            let p = Problem::parse_json::<Order>(bad).unwrap_err();
            assert_eq!(
                (p.status, p.code),
                (StatusCode::BAD_REQUEST, "invalid_request")
            );
            assert!(!p.detail.is_empty());
        }
    }

    #[test]
    fn body_has_stable_fields() {
        let p = Problem::key_in_use();
        let v: serde_json::Value = serde_json::from_slice(&p.body_bytes()).unwrap();
        assert_eq!(v["code"], "idempotency_key_in_use");
        assert_eq!(v["status"], 409);
        assert_eq!(v["title"], "Conflict");
        assert!(v["type"]
            .as_str()
            .unwrap()
            .ends_with("idempotency-key-in-use"));
    }
}
