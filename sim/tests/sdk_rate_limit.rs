//! The server's per-user quota answers 429 with `Retry-After`; the SDK backs off and every
//! transfer still ends once (issue 21, quotas).

use std::sync::Arc;
use std::time::Duration;

use sendonce::{Sdk, SdkConfig, SystemClock, TransferRequest, TransferState};
use sendonce_sim::testapi::TestApi;
use server_mock::quota::QuotaLimits;
use server_mock::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_backs_off_on_429_and_every_transfer_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        db: dir.path().join("s.db").display().to_string(),
        quotas: QuotaLimits {
            requests_per_second: 4.0,
            burst: 2.0,
            keys_per_hour: 1_000,
        },
        ..Default::default()
    };
    let server = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = TestApi::http(server.base_url()).unwrap();
    let a = api.create_user("a", 1_000_000, "BDT").await.unwrap();
    let b = api.create_user("b", 0, "BDT").await.unwrap();
    let config = SdkConfig::builder(server.base_url(), dir.path().join("phone.db"))
        .access_token(a.token.clone())
        .clock(Arc::new(SystemClock))
        .retry_base(Duration::from_millis(50))
        .retry_cap(Duration::from_secs(2))
        .build()
        .unwrap();
    let sdk = Sdk::open(config).unwrap();
    let mut ids = Vec::new();
    for i in 0..8 {
        let t = sdk
            .send_transfer(TransferRequest {
                to_user_id: b.user_id.clone(),
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
