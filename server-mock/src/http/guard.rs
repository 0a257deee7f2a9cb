//! Who may use the test API: requests addressed to a loopback host (or one allowed by
//! `--allow-host`), POSTs declared as JSON, and, when configured, a bearer token.
//!
//! The test API can mint money and crash the process, so a web page a developer happens to
//! visit must not reach it: a cross-origin page can only send "simple" requests without a
//! preflight (GET, or a POST of a form or text/plain), and no CORS is ever granted, so
//! requiring `application/json` on POST stops CSRF; checking `Host` stops DNS rebinding
//! (the attacker's page talks to 127.0.0.1 under the attacker's own host name).

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::require_json;
use crate::app::App;
use sendonce_server::Problem;

/// Middleware on every `/v1/test/*` and `/v1/bench/*` route.
pub async fn test_api(State(app): State<App>, req: Request, next: Next) -> Response {
    match check(&app, &req) {
        Ok(()) => next.run(req).await,
        Err(p) => p.into_response(),
    }
}

fn check(app: &App, req: &Request) -> Result<(), Problem> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(host, &app.config.allow_hosts) {
        return Err(forbidden(format!(
            "the test API answers only requests for a loopback host (or --allow-host), not {host:?}"
        )));
    }
    if req.method() == Method::POST {
        require_json(req.headers())?;
    }
    if let Some(expected) = &app.config.test_api_token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !constant_time_eq(given.as_bytes(), expected.expose().as_bytes()) {
            return Err(forbidden(
                "the test API needs its bearer token (--test-api-token)".into(),
            ));
        }
    }
    Ok(())
}

fn forbidden(detail: String) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "test_api_forbidden", detail)
}

/// Whether `host` (a `Host` header: name or address, optional port) is loopback or allowed.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = strip_port(host.trim()).to_ascii_lowercase();
    if name.is_empty() {
        return false;
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    if name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
    {
        return true;
    }
    allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        // One colon: name:port. More: a bare IPv6 address.
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// Compares without an early exit, so the token cannot be guessed byte by byte by timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_only() {
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "::1",
            "127.9.9.9",
            "a.localhost:3",
        ] {
            assert!(host_allowed(ok, &[]), "{ok}");
        }
        for bad in [
            "",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "10.0.0.1",
            "[::2]:1",
            "localhost.evil",
        ] {
            assert!(!host_allowed(bad, &[]), "{bad}");
        }
        assert!(host_allowed(
            "mock.internal:8080",
            &["mock.internal".into()]
        ));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
