//! Invariant 7: only the server's own definitive answers end a transfer; what an intermediary (captive
//! portal, proxy, a redirect followed as GET) says is "unknown", and the SDK retries with the same key.

mod common;

use common::scripted::{arrivals, created, rig, settle, Answer, HTML, JSON};
use sendonce::TransferState;

#[tokio::test]
async fn a_2xx_without_a_transfer_for_this_key_is_not_a_success() {
    let rig = rig(vec![
        // A captive portal's login page.
        Answer(200, vec![HTML], "<html><body>Sign in to Station Wi-Fi</body></html>"),
        // A proxy's empty 204.
        Answer(204, vec![], ""),
        // Valid JSON, but some other request's transfer (a cache, a redirect to another resource).
        Answer(
            200,
            vec![JSON],
            r#"{"transfer_id":"t_other","status":"completed","idempotency_key":"someone-elses-key"}"#,
        ),
        // JSON without any key at all.
        Answer(201, vec![JSON], r#"{"transfer_id":"t_2","status":"completed"}"#),
        created(),
    ])
    .await;
    let t = settle(&rig).await;
    assert_eq!(t.state, TransferState::Succeeded);
    assert_eq!(
        t.attempts, 5,
        "every 2xx that is not a transfer for this key is retried: {t:?}"
    );
    assert_eq!(t.server_transfer_id.as_deref(), Some("t_1"));
    let seen = arrivals(&rig);
    assert!(
        seen.iter().all(|a| a.key == t.idempotency_key),
        "same key on every retry"
    );
}
