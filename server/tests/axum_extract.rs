//! The `Idempotent` extractor in a router, as an application wires it: its authentication layer
//! puts the `Principal` in the request; the extractor reads the key and fingerprints method, path
//! and the exact body bytes — or answers the contract's problem before any handler runs.

use axum::body::{to_bytes, Body};
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use sendonce_server::engine::{Idempotent, Principal};
use tower::ServiceExt;

/// The stand-in authentication: the `x-user` header, if any, is the principal.
async fn authenticate(mut req: Request, next: Next) -> Response {
    if let Some(user) = req.headers().get("x-user").and_then(|v| v.to_str().ok()) {
        let principal = Principal(user.to_string());
        req.extensions_mut().insert(principal);
    }
    next.run(req).await
}

async fn echo(Idempotent(req): Idempotent) -> String {
    let hash: String = req
        .hash
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{} {} {hash}", req.scope, req.key)
}

fn app() -> Router {
    Router::new()
        .route("/a", post(echo))
        .route("/b", post(echo))
        .layer(middleware::from_fn(authenticate))
        .layer(DefaultBodyLimit::max(64))
}

async fn call(
    path: &str,
    user: Option<&str>,
    key: Option<&str>,
    body: &str,
) -> (StatusCode, String) {
    let mut req = Request::post(path);
    if let Some(u) = user {
        req = req.header("x-user", u);
    }
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let res = app()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let text =
        String::from_utf8(to_bytes(res.into_body(), 1 << 16).await.unwrap().to_vec()).unwrap();
    (status, text)
}

#[tokio::test]
async fn the_extractor_reads_principal_key_and_fingerprint_or_answers_the_problem() {
    let (status, a) = call("/a", Some("u1"), Some("k1"), "{}").await;
    assert_eq!(status, StatusCode::OK);
    assert!(a.starts_with("u1 k1 "), "{a}");
    // The same key and body on another path, or with another body, is another fingerprint.
    let b = call("/b", Some("u1"), Some("k1"), "{}").await.1;
    let other = call("/a", Some("u1"), Some("k1"), "{ }").await.1;
    assert_ne!(a, b);
    assert_ne!(a, other);
    assert_eq!(
        a,
        call("/a", Some("u1"), Some("k1"), "{}").await.1,
        "stable"
    );
    // Before any handler: no principal, no key, a bad key, a body past the limit.
    let (status, body) = call("/a", None, Some("k1"), "{}").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("unauthenticated"), "{body}");
    let (status, body) = call("/a", Some("u1"), None, "{}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("idempotency_key_missing"), "{body}");
    assert!(call("/a", Some("u1"), Some("a b"), "{}")
        .await
        .1
        .contains("idempotency_key_invalid"));
    let (status, body) = call("/a", Some("u1"), Some("k1"), &"x".repeat(100)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body.contains("payload_too_large"), "{body}");
}

/// The look-up's key, from the query string, checked as the header is.
#[tokio::test]
async fn the_lookup_key_is_checked_as_the_header_is() {
    use sendonce_server::engine::LookupKey;
    let app: Router = Router::new().route(
        "/l",
        axum::routing::get(|LookupKey(key): LookupKey| async move { key }),
    );
    for (query, status, body) in [
        ("?idempotency_key=k-1", StatusCode::OK, "k-1"),
        ("?idempotency_key=%22k-2%22", StatusCode::OK, "k-2"),
        ("", StatusCode::BAD_REQUEST, "idempotency_key_missing"),
        (
            "?idempotency_key=",
            StatusCode::BAD_REQUEST,
            "idempotency_key_invalid",
        ),
        (
            "?idempotency_key=a%20b",
            StatusCode::BAD_REQUEST,
            "idempotency_key_invalid",
        ),
    ] {
        let req = Request::get(format!("/l{query}"))
            .body(Body::empty())
            .unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        let got = res.status();
        let text =
            String::from_utf8(to_bytes(res.into_body(), 1 << 16).await.unwrap().to_vec()).unwrap();
        assert_eq!(got, status, "{query}: {text}");
        assert!(text.contains(body), "{query}: {text}");
    }
}
