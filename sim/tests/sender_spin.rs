//! Regression: the SDK's sender must not busy-loop while due transfers wait for a send slot.

use std::sync::Arc;
use std::time::Duration;

use sendonce::{Sdk, SdkConfig, SystemClock, TransferRequest};
use server_mock::ServerConfig;

fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

/// Found by the rides: with more due transfers than `max_concurrent_sends`, the ones waiting for a slot
/// stay due, `next_due_at` is in the past, and the sender loop re-queries SQLite every timer tick
/// (~1000 times a second, ~11% of a core per SDK instance; 50 phones saturate 2 cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_transfers_do_not_spin_the_sender() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        db: dir.path().join("s.db").display().to_string(),
        gateway_delay: Duration::from_secs(2),
        ..Default::default()
    };
    let server = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = sendonce_sim::testapi::TestApi::http(server.base_url()).unwrap();
    let a = api.create_user("a", 10_000_000, "BDT").await.unwrap();
    let b = api.create_user("b", 0, "BDT").await.unwrap();
    let cfg = SdkConfig::builder(server.base_url(), dir.path().join("p.db"))
        .access_token(a.token)
        .clock(Arc::new(SystemClock))
        .build()
        .unwrap();
    let sdk = Sdk::open(cfg).unwrap();
    for i in 0..12 {
        let r = TransferRequest {
            to_user_id: b.user_id.clone(),
            amount_minor: 100 + i,
            currency: "BDT".into(),
            note: None,
        };
        sdk.send_transfer(r).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = cpu_ticks();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_ticks() - before;
    sdk.close();
    server.shutdown().await;
    // 4 sends in flight, 8 due transfers waiting for a slot: an idle wait uses ~0 ticks of 100 per second.
    assert!(
        used < 5,
        "the process burned {used}/100 CPU ticks in 1 s while 12 transfers waited on a slow server"
    );
}
