//! A foreign transport (here a Rust implementation of the exported trait, as Kotlin's OkHttp and
//! Swift's URLSession adapters implement it) carries every request, and train mode wraps it exactly as
//! it wraps the built-in one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::config;
use sendonce_ffi::foreign::TransportFailure;
use sendonce_ffi::{
    HttpHeader, HttpRequest, HttpResponse, HttpTransport, NetworkProfile, RequestHeaders,
    SendOnceCore, TransferRequest, TransferState,
};

#[derive(Default)]
struct Recorder {
    calls: AtomicUsize,
    keys: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl HttpTransport for Recorder {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let key = request
            .headers
            .iter()
            .find(|h| h.name == "idempotency-key")
            .map(|h| h.value.clone())
            .unwrap_or_default();
        self.keys.lock().unwrap().push(key.clone());
        Ok(HttpResponse {
            status: 201,
            headers: vec![HttpHeader {
                name: "Content-Type".into(),
                value: "application/json".into(),
            }],
            body: format!(
                r#"{{"transfer_id":"t_1","status":"completed","idempotency_key":"{key}"}}"#
            )
            .into_bytes(),
        })
    }
}

#[tokio::test]
async fn train_mode_wraps_a_foreign_transport_like_the_built_in_one() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let core = SendOnceCore::open_with(
        config(dir.path().join("d.db").display().to_string()),
        None,
        Some(recorder.clone()),
    )
    .unwrap();
    core.set_network_profile(NetworkProfile::Offline, 1)
        .unwrap();
    let t = core
        .send_transfer(TransferRequest {
            to_user_id: "u_bob".into(),
            amount_minor: 10,
            currency: "BDT".into(),
            note: None,
        })
        .await
        .unwrap();
    while core.network_stats().unwrap().offline == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        recorder.calls.load(Ordering::SeqCst),
        0,
        "the tunnel is in front of it"
    );

    core.set_network_profile(NetworkProfile::Off, 0).unwrap();
    let summary = core.drain(Duration::from_secs(20), None).await.unwrap();
    assert_eq!(summary.finished.len(), 1, "{summary:?}");
    assert_eq!(summary.finished[0].state, TransferState::Succeeded);
    assert_eq!(
        *recorder.keys.lock().unwrap(),
        vec![t.idempotency_key.clone()]
    );
    core.shutdown().unwrap();
}

/// Before: `HttpRequest`'s Debug (and the Kotlin/Swift records' printed forms) showed the bearer token.
#[test]
fn a_printed_request_never_shows_the_bearer_token() {
    let request = HttpRequest {
        method: "POST".into(),
        url: "https://api.example.com/v1/transfers".into(),
        headers: RequestHeaders(vec![
            HttpHeader {
                name: "Authorization".into(),
                value: "Bearer s3cret-token".into(),
            },
            HttpHeader {
                name: "idempotency-key".into(),
                value: "k-1".into(),
            },
        ]),
        body: vec![],
    };
    let printed = format!("{request:?}");
    assert!(!printed.contains("s3cret-token"), "{printed}");
    assert!(
        printed.contains("k-1") && printed.contains("<redacted>"),
        "{printed}"
    );
    assert_eq!(
        request.headers[0].value, "Bearer s3cret-token",
        "sent as it is"
    );
}
