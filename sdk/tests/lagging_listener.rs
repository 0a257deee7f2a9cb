//! A listener that falls behind the SDK's broadcast (1,024 items) still ends with every transfer's newest
//! state (issue 31, "also fix": the Kotlin and Swift lists are built from these deliveries).
//!
//! Without the resync, a listener held up while 1,500 transfers were confirmed never got those past the
//! buffer: its view stayed short of the store's and this test timed out (seen by disabling the resync).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use sendonce::{Sdk, SdkConfig, Transfer, TransferListener, TransferState};

/// Builds a view from deliveries, as the Kotlin and Swift layers do; blocks while `held`.
struct View {
    rows: Mutex<HashMap<String, Transfer>>,
    held: Mutex<bool>,
    go: Condvar,
}

impl TransferListener for View {
    fn on_transfer_changed(&self, transfer: Transfer) {
        let mut held = self.held.lock().unwrap();
        while *held {
            held = self.go.wait(held).unwrap();
        }
        drop(held);
        self.rows
            .lock()
            .unwrap()
            .insert(transfer.local_id.clone(), transfer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_fell_behind_ends_with_every_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let sdk = Sdk::open(
        SdkConfig::builder("http://127.0.0.1:9", dir.path().join("device.db"))
            .build()
            .unwrap(),
    )
    .unwrap();
    // Nothing is sent: each transfer changes once (confirmed, Pending).
    sdk.set_network_available(false).unwrap();
    let view = Arc::new(View {
        rows: Mutex::new(HashMap::new()),
        held: Mutex::new(true),
        go: Condvar::new(),
    });
    sdk.add_listener(view.clone());
    const N: usize = 1_500;
    for i in 0..N {
        let req = sendonce::TransferRequest {
            to_user_id: "u_bob".into(),
            amount_minor: 1 + i as i64,
            currency: "BDT".into(),
            note: None,
        };
        sdk.send_transfer(req).await.unwrap();
    }
    *view.held.lock().unwrap() = false;
    view.go.notify_all();
    let stored = sdk.transfers().unwrap();
    assert_eq!(stored.len(), N);
    common::scripted::until("the listener caught up", || {
        view.rows.lock().unwrap().len() == N
    })
    .await;
    let rows = view.rows.lock().unwrap();
    for t in &stored {
        assert_eq!(rows[&t.local_id].state, TransferState::Pending);
    }
    drop(rows);
    sdk.close();
}
