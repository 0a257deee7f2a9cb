//! The answer of one request under the contract: status, exact body bytes, and the two
//! headers the contract adds (`Idempotent-Replayed`, `Retry-After`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::problem::{Problem, PROBLEM_JSON};

/// The header that marks an answer as a stored outcome answered again.
pub const REPLAYED: &str = "idempotent-replayed";

/// What the handler sends back.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Exact body bytes.
    pub body: Vec<u8>,
    /// Whether this repeats an earlier outcome (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// `Retry-After` seconds, if any.
    pub retry_after: Option<u32>,
    /// Whether this request itself executed the operation (committed its unit of work).
    pub committed: bool,
}

impl From<Problem> for Answer {
    fn from(p: Problem) -> Self {
        Self {
            status: p.status.as_u16(),
            body: p.body_bytes(),
            replayed: false,
            retry_after: p.retry_after,
            committed: false,
        }
    }
}

impl Answer {
    /// The 201 of the request that executed the operation.
    pub fn committed(body: Vec<u8>) -> Self {
        Self {
            status: 201,
            body,
            replayed: false,
            retry_after: None,
            committed: true,
        }
    }

    /// A stored outcome answered again.
    pub fn replay(status: u16, body: Vec<u8>) -> Self {
        Self {
            status,
            body,
            replayed: true,
            retry_after: None,
            committed: false,
        }
    }
}

/// A success is `application/json`, anything else the contract's problem+json; a replay
/// says so in `Idempotent-Replayed: true`, a busy answer when to come back.
impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let content_type = if status.is_success() {
            "application/json"
        } else {
            PROBLEM_JSON
        };
        let mut response = (status, self.body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if self.replayed {
            headers.insert(REPLAYED, HeaderValue::from_static("true"));
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_says_so_and_a_busy_answer_says_when() {
        let replay = Answer::replay(201, b"{}".to_vec()).into_response();
        assert_eq!(replay.headers()[REPLAYED], "true");
        assert_eq!(replay.headers()[header::CONTENT_TYPE], "application/json");
        let busy = Answer::from(Problem::key_in_use()).into_response();
        assert_eq!(busy.status(), StatusCode::CONFLICT);
        assert_eq!(busy.headers()[header::RETRY_AFTER], "1");
        assert_eq!(busy.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert!(busy.headers().get(REPLAYED).is_none());
    }
}
