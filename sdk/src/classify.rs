//! What an answer means for the transfer (DESIGN.md, "Classification of an answer").

use crate::contract::ResponseContract;
use crate::model::{Rejection, RejectionReason, RequiredAction};
use crate::transport::{HttpResponse, TransportError};

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The money moved (fresh or replayed answer).
    Succeeded {
        /// Server's transfer id, from a body that names this attempt's key.
        server_transfer_id: String,
        /// `Idempotent-Replayed: true` was set.
        replayed: bool,
    },
    /// Definitive no; a new attempt would be a new intent.
    Rejected(Rejection),
    /// A bug (key reused with another body); never retried.
    Failed(Rejection),
    /// Credentials refused; wait for a new token.
    AuthRequired(String),
    /// The server wants the customer to complete a step first; parked until the app says it is done.
    RequiresAction(RequiredAction),
    /// Outcome unknown: retry with the same key and bytes.
    Retry {
        /// Server asked for this wait (ms).
        retry_after_ms: Option<i64>,
        /// For the UI and logs.
        error: String,
    },
}

/// Classifies a transport result for the attempt sent with `expected_key`, under server-mock's contract.
pub fn classify(result: &Result<HttpResponse, TransportError>, expected_key: &str) -> Verdict {
    classify_with(&DEFAULT, result, expected_key)
}

static DEFAULT: std::sync::LazyLock<ResponseContract> =
    std::sync::LazyLock::new(ResponseContract::default);

/// Classifies a transport result for the attempt sent with `expected_key`, under `contract`.
pub fn classify_with(
    contract: &ResponseContract,
    result: &Result<HttpResponse, TransportError>,
    expected_key: &str,
) -> Verdict {
    match result {
        Err(e) => Verdict::Retry {
            retry_after_ms: None,
            error: e.to_string(),
        },
        Ok(response) => classify_response(contract, response, expected_key),
    }
}

fn classify_response(c: &ResponseContract, r: &HttpResponse, expected_key: &str) -> Verdict {
    let problem = c.problem(r);
    let retry_after_ms = r.header("retry-after").and_then(parse_retry_after);
    let rejection = |reason: RejectionReason| Rejection {
        reason,
        code: problem.code.clone(),
        detail: problem.detail.clone(),
        http_status: r.status,
    };
    let code = problem.code.as_str();
    match r.status {
        // A captive portal, a proxy or a followed redirect also answers 2xx: only an answer that
        // names this attempt's key proves the server moved the money for it.
        200..=299 => match c.success_for(r, expected_key) {
            Some(server_transfer_id) => Verdict::Succeeded {
                server_transfer_id,
                replayed: c.is_replay(r),
            },
            None => Verdict::Retry {
                retry_after_ms: None,
                error: format!(
                    "{} without a transfer for this key (intermediary?)",
                    r.status
                ),
            },
        },
        // Only the server's own error with a stable code is a definitive answer about this request
        // (or about our token); the same status from a proxy or a portal says nothing about it.
        400..=499 if problem.from_server && c.key_in_use.iter().any(|k| k == code) => {
            Verdict::Retry {
                retry_after_ms: Some(retry_after_ms.unwrap_or(1000)),
                error: format!(
                    "{} the first attempt is still running on the server",
                    r.status
                ),
            }
        }
        409 => Verdict::Retry {
            retry_after_ms: Some(retry_after_ms.unwrap_or(1000)),
            error: "409 the first attempt is still running on the server".into(),
        },
        408 | 425 | 429 | 500..=599 => Verdict::Retry {
            retry_after_ms,
            error: format!("{} {}", r.status, problem.code).trim().to_string(),
        },
        400..=499 if !problem.from_server => Verdict::Retry {
            retry_after_ms,
            error: not_from_server(r),
        },
        400..=499 => {
            if let Some(action) = c.required_action(r, &problem) {
                Verdict::RequiresAction(action)
            } else if c.lookup.not_found_codes.iter().any(|k| k == code) {
                // The server's own "no operation with this key": a look-up closed the key unexecuted
                // (its answer may have been lost), and the server answers every later request under it
                // the same. Nothing moved, nothing sent under this key ever will: a definitive no, as
                // server-mock's stored 404 always was under its contract (now with its typed reason).
                Verdict::Rejected(rejection(RejectionReason::NotExecuted))
            } else if c.key_reused.iter().any(|k| k == code) {
                Verdict::Failed(rejection(RejectionReason::KeyReused))
            } else if matches!(r.status, 401 | 403) || c.auth.iter().any(|k| k == code) {
                Verdict::AuthRequired(format!("{} {}", r.status, problem.code))
            } else if let Some(reason) = c.refusal(code) {
                Verdict::Rejected(rejection(reason))
            } else {
                Verdict::Retry {
                    retry_after_ms,
                    error: format!(
                        "{} {code} is not a definitive answer under this contract",
                        r.status
                    ),
                }
            }
        }
        // 1xx and 3xx never come from the server's operation endpoints.
        _ => Verdict::Retry {
            retry_after_ms,
            error: not_from_server(r),
        },
    }
}

/// How far an attempt got, as far as the device can tell (ordered: a later attempt only raises it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Contact {
    /// Nothing got past the device: offline, or no connection could be made.
    None = 0,
    /// Something answered, but never the server itself (a captive portal, a proxy).
    Intermediary = 1,
    /// The server answered, or may have (a timeout: the request can have arrived and committed).
    Server = 2,
}

impl Contact {
    /// From the persisted integer; an unknown value counts as the server (the give-up rule then applies as before).
    pub(crate) fn from_i64(v: i64) -> Self {
        match v {
            0 => Self::None,
            1 => Self::Intermediary,
            _ => Self::Server,
        }
    }
}

/// How far the attempt sent with `expected_key` got.
pub(crate) fn contact(
    contract: &ResponseContract,
    result: &Result<HttpResponse, TransportError>,
    expected_key: &str,
) -> Contact {
    match result {
        Err(TransportError::Offline) | Err(TransportError::Connection(_)) => Contact::None,
        Err(TransportError::Timeout) => Contact::Server,
        Ok(r)
            if contract.problem(r).from_server
                || contract.success_for(r, expected_key).is_some() =>
        {
            Contact::Server
        }
        Ok(_) => Contact::Intermediary,
    }
}

/// Why an answer counts as unknown, for the transfer's last error.
pub(crate) fn not_from_server(r: &HttpResponse) -> String {
    format!(
        "{} {} is not the server's problem+json (intermediary?)",
        r.status,
        r.header("content-type").unwrap_or("without a content type")
    )
}

/// `Retry-After` in delta-seconds; an HTTP date is treated as absent (the cap then applies).
fn parse_retry_after(value: &str) -> Option<i64> {
    value.trim().parse::<u32>().ok().map(|s| s as i64 * 1000)
}

/// The classification before only the server's own answers counted: any 2xx a success, any
/// 4xx but 401/403/409/422-reuse a definitive no. Test-only builds (feature `legacy-classify`),
/// to show that the ride's checker catches it; never used otherwise.
#[cfg(feature = "legacy-classify")]
pub fn legacy(result: &Result<HttpResponse, TransportError>) -> Verdict {
    let Ok(r) = result else {
        return classify(result, "");
    };
    let problem = DEFAULT.problem(r);
    let rejection = || Rejection {
        reason: RejectionReason::of_code(&problem.code),
        code: problem.code.clone(),
        detail: problem.detail.clone(),
        http_status: r.status,
    };
    match r.status {
        200..=299 => Verdict::Succeeded {
            server_transfer_id: serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| v.get("transfer_id")?.as_str().map(str::to_owned))
                .unwrap_or_default(),
            replayed: r
                .header("idempotent-replayed")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        },
        401 | 403 | 409 | 408 | 425 | 429 | 500..=599 => classify(result, ""),
        422 if problem.code == "idempotency_key_reused" => Verdict::Failed(rejection()),
        _ => Verdict::Rejected(rejection()),
    }
}
