//! What an answer means for the transfer (DESIGN.md, "Classification of an answer").

use crate::model::Rejection;
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
    /// Outcome unknown: retry with the same key and bytes.
    Retry {
        /// Server asked for this wait (ms).
        retry_after_ms: Option<i64>,
        /// For the UI and logs.
        error: String,
    },
}

/// Classifies a transport result for the attempt sent with `expected_key`.
pub fn classify(result: &Result<HttpResponse, TransportError>, expected_key: &str) -> Verdict {
    match result {
        Err(e) => Verdict::Retry {
            retry_after_ms: None,
            error: e.to_string(),
        },
        Ok(response) => classify_response(response, expected_key),
    }
}

fn classify_response(r: &HttpResponse, expected_key: &str) -> Verdict {
    let problem = Problem::parse(r);
    let retry_after_ms = r.header("retry-after").and_then(parse_retry_after);
    let rejection = || Rejection {
        code: problem.code.clone(),
        detail: problem.detail.clone(),
        http_status: r.status,
    };
    match r.status {
        // A captive portal, a proxy or a followed redirect also answers 2xx: only a transfer that
        // names this attempt's key proves the server moved the money for it.
        200..=299 => match transfer_id_for(&r.body, expected_key) {
            Some(server_transfer_id) => Verdict::Succeeded {
                server_transfer_id,
                replayed: r
                    .header("idempotent-replayed")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            },
            None => Verdict::Retry {
                retry_after_ms: None,
                error: format!(
                    "{} without a transfer for this key (intermediary?)",
                    r.status
                ),
            },
        },
        // A proxy's block page or a portal's login is no verdict on our token: parking the transfer
        // until the app sends a new one could stall it for good.
        401 | 403 if problem.from_server => {
            Verdict::AuthRequired(format!("{} {}", r.status, problem.code))
        }
        409 => Verdict::Retry {
            retry_after_ms: Some(retry_after_ms.unwrap_or(1000)),
            error: "409 the first attempt is still running on the server".into(),
        },
        408 | 425 | 429 | 500..=599 => Verdict::Retry {
            retry_after_ms,
            error: format!("{} {}", r.status, problem.code).trim().to_string(),
        },
        // Only the server's own problem+json with a stable code is a definitive answer about this
        // request; the same status from a proxy or a portal says nothing about the transfer.
        400..=499 if !problem.from_server => Verdict::Retry {
            retry_after_ms,
            error: not_from_server(r),
        },
        422 if problem.code == "idempotency_key_reused" => Verdict::Failed(rejection()),
        // 402 and every other 4xx from the server are definitive answers about this request.
        400..=499 => Verdict::Rejected(rejection()),
        // 1xx and 3xx never come from the server's transfer endpoints.
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
    result: &Result<HttpResponse, TransportError>,
    expected_key: &str,
) -> Contact {
    match result {
        Err(TransportError::Offline) | Err(TransportError::Connection(_)) => Contact::None,
        Err(TransportError::Timeout) => Contact::Server,
        Ok(r)
            if Problem::parse(r).from_server
                || transfer_id_for(&r.body, expected_key).is_some() =>
        {
            Contact::Server
        }
        Ok(_) => Contact::Intermediary,
    }
}

/// True only for the server's own "no transfer with this key": a 404 problem+json `transfer_not_found`.
///
/// Any other 404 (an HTML page, a proxy, a server without the look-up route) says nothing about the key.
pub(crate) fn is_server_not_found(r: &HttpResponse) -> bool {
    let problem = Problem::parse(r);
    r.status == 404 && problem.from_server && problem.code == "transfer_not_found"
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

/// The server's transfer id, if `body` is a transfer JSON whose `idempotency_key` is `expected_key`.
fn transfer_id_for(body: &[u8], expected_key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    if v.get("idempotency_key")?.as_str()? != expected_key {
        return None;
    }
    let id = v.get("transfer_id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// The fields of an `application/problem+json` body the SDK uses.
#[derive(Debug, Default)]
struct Problem {
    code: String,
    detail: String,
    /// Content type `application/problem+json` and a non-empty `code`: the server's own answer.
    from_server: bool,
}

impl Problem {
    fn parse(r: &HttpResponse) -> Self {
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let text = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let code = text("code");
        let problem_json = r.header("content-type").is_some_and(|t| {
            t.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/problem+json")
        });
        Problem {
            from_server: problem_json && !code.is_empty(),
            code: if code.is_empty() {
                "unknown".into()
            } else {
                code
            },
            detail: text("detail"),
        }
    }
}

/// The classification before only the server's own answers counted: any 2xx a success, any
/// 4xx but 401/403/409/422-reuse a definitive no. Test-only builds (feature `legacy-classify`),
/// to show that the ride's checker catches it; never used otherwise.
#[cfg(feature = "legacy-classify")]
pub fn legacy(result: &Result<HttpResponse, TransportError>) -> Verdict {
    let Ok(r) = result else {
        return classify(result, "");
    };
    let problem = Problem::parse(r);
    let rejection = || Rejection {
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
