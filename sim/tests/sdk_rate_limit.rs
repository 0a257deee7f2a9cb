//! The server's per-user quota answers 429 with `Retry-After`; the SDK backs off and every
//! transfer still ends once (issue 21, quotas).

mod phone;

use std::time::Duration;

use sendonce::{TransferRequest, TransferState};
use server_mock::quota::QuotaLimits;
use server_mock::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_backs_off_on_429_and_every_transfer_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        quotas: QuotaLimits {
            requests_per_second: 4.0,
            burst: 2.0,
            keys_per_hour: 1_000,
        },
        ..Default::default()
    };
    let retry = (Duration::from_millis(50), Duration::from_secs(2));
    let phone::Phone {
        server,
        api,
        sdk,
        to,
    } = phone::start(dir.path(), config, retry).await;
    let mut ids = Vec::new();
    for i in 0..8 {
        let t = sdk
            .send_transfer(TransferRequest {
                to_user_id: to.clone(),
                amount_minor: 100 + i,
                currency: "BDT".into(),
                note: None,
            })
            .await
            .unwrap();
        ids.push(t.local_id);
    }
    let mut attempts = 0;
    for id in &ids {
        let t = tokio::time::timeout(Duration::from_secs(60), sdk.wait_for_outcome(id))
            .await
            .expect("every transfer ends")
            .unwrap();
        assert_eq!(t.state, TransferState::Succeeded, "{t:?}");
        attempts += t.attempts;
    }
    assert!(
        attempts > 8,
        "the quota refused some attempts ({attempts} for 8 transfers)"
    );
    // Retry-After (1 s) is honoured: a few seconds of 4 requests/s cannot carry a storm.
    assert!(
        attempts < 8 * 6,
        "the SDK hammered the server: {attempts} attempts"
    );
    let ledger = api.ledger().await.unwrap();
    assert_eq!(
        ledger.iter().filter(|e| e.kind == "debit").count(),
        8,
        "one debit each"
    );
    sdk.close();
    server.shutdown().await;
}
