//! The SDK's HTTP never follows a redirect, speaks plain http:// only to loopback, keeps its file
//! private to the app and never prints the token (issue 21 points 6 and 7).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::any;
use axum::Router;
use common::scripted::{arrivals, rig, until, Answer, HTML, OK};
use sendonce::{NetworkProfile, Sdk, SdkConfig, SdkError, TransferState};

/// Another origin on loopback that counts every request: a POST gets 201 for its key (what a
/// followed 307 would turn into a false success), anything else a portal's HTML page.
async fn other_origin() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = Router::new().fallback(any(move |method: Method, headers: HeaderMap| {
        let hits = counted.clone();
        async move {
            hits.fetch_add(1, Ordering::SeqCst);
            let key = headers
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            if method != Method::POST || key.is_empty() {
                (
                    StatusCode::OK,
                    [("content-type", "text/html")],
                    "<html>Welcome to the train Wi-Fi</html>".to_string(),
                )
            } else {
                (
                    StatusCode::CREATED,
                    [("content-type", "application/json")],
                    OK.replace("{key}", &key),
                )
            }
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Sends one transfer through a server that answers every POST with `status` to `location` on the
/// other origin; returns the transfer after three attempts (or once it ended) and the other's hits.
async fn redirected(status: u16, path: &str) -> (sendonce::Transfer, usize) {
    let (other, hits) = other_origin().await;
    let location = leak(format!("{other}{path}"));
    let rig = rig(vec![Answer(status, vec![("location", location), HTML], "")]).await;
    let t = rig
        .sdk
        .send_transfer(common::scripted::req())
        .await
        .unwrap();
    until("three attempts, or an end", || {
        arrivals(&rig).len() >= 3 || rig.sdk.transfer(&t.local_id).unwrap().state.is_final()
    })
    .await;
    (
        rig.sdk.transfer(&t.local_id).unwrap(),
        hits.load(Ordering::SeqCst),
    )
}

#[tokio::test]
async fn a_307_to_another_origin_is_never_followed_and_is_an_unknown_outcome() {
    let (t, hits) = redirected(307, "/v1/transfers").await;
    assert_eq!(
        hits, 0,
        "the key and the body went to another origin: {t:?}"
    );
    assert!(!t.state.is_final(), "{t:?}");
    assert!(t.attempts >= 3, "retried with the same key: {t:?}");
    assert!(
        t.last_error.as_deref().unwrap_or("").contains("307"),
        "{t:?}"
    );
}

#[tokio::test]
async fn a_302_to_a_captive_portal_is_not_followed_and_not_a_success() {
    let (t, hits) = redirected(302, "/portal").await;
    assert_eq!(hits, 0, "the portal was asked: {t:?}");
    assert_ne!(t.state, TransferState::Succeeded);
    assert!(!t.state.is_final(), "{t:?}");
    assert!(
        t.last_error.as_deref().unwrap_or("").contains("302"),
        "{t:?}"
    );
}

#[test]
fn plain_http_is_only_for_loopback() {
    for url in [
        "http://example.com",
        "http://10.0.2.2:8080",
        "http://192.168.1.10",
        "http://127.0.0.1.example.com",
        "http://localhost.example.com",
        "http://[::2]",
    ] {
        let err = SdkConfig::builder(url, "/tmp/x.db").build().unwrap_err();
        assert!(matches!(err, SdkError::InvalidConfig(_)), "{url}: {err:?}");
    }
    for url in [
        "http://127.0.0.1",
        "http://127.0.0.1:8080",
        "http://127.9.9.9:1/",
        "http://localhost:3000",
        "http://LOCALHOST",
        "http://[::1]:8080",
        "https://example.com",
        "https://10.0.2.2:8443",
    ] {
        SdkConfig::builder(url, "/tmp/x.db")
            .build()
            .unwrap_or_else(|e| panic!("{url}: {e:?}"));
    }
}

#[cfg(unix)]
#[tokio::test]
async fn the_database_and_its_wal_and_shm_are_private_to_the_app() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let sdk = Sdk::open(
        SdkConfig::builder("http://127.0.0.1:9", &db)
            .network_profile(NetworkProfile::Offline)
            .build()
            .unwrap(),
    )
    .unwrap();
    sdk.send_transfer(common::scripted::req()).await.unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path} has mode {mode:o}");
    }
}

#[test]
fn no_debug_of_the_config_shows_the_token() {
    let secret = "tok-very-secret-4711";
    let builder = SdkConfig::builder("https://api.example.com", "/tmp/x.db").access_token(secret);
    let config = builder.clone().build().unwrap();
    for text in [
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{builder:?}"),
        format!("{builder:#?}"),
    ] {
        assert!(!text.contains(secret), "token printed: {text}");
        assert!(
            text.contains("access_token") && text.contains("<redacted>"),
            "says a token is set: {text}"
        );
    }
    let none = SdkConfig::builder("https://api.example.com", "/tmp/x.db")
        .build()
        .unwrap();
    assert!(format!("{none:?}").contains("access_token: None"));
}
