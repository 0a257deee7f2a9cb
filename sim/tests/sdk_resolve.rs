//! Found by `sendonce-sim ride --impatient-rate 0.5`: `Sdk::resolve` on a transfer that is not in
//! NeedsAttention runs a status look-up next to the sender's own attempt, and its answer overwrites
//! whatever the sender recorded (the store's `record` has no guard on the current state).
//!
//! Regression tests (fixed in the SDK: guarded `record`, `resolve` only on transfers it owns). Each is
//! deterministic and takes about two seconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sendonce::{
    NetsimSettings, NetworkProfile, Sdk, Transfer, TransferListener, TransferRequest, TransferState,
};
use server_mock::{RunningServer, ServerConfig};

mod phone;

struct States(Mutex<Vec<TransferState>>);

impl TransferListener for States {
    fn on_transfer_changed(&self, t: Transfer) {
        self.0.lock().unwrap().push(t.state);
    }
}

async fn setup(dir: &std::path::Path) -> (RunningServer, Sdk, String, Arc<States>) {
    let retry = (Duration::from_millis(200), Duration::from_secs(1));
    let phone = phone::start(dir, ServerConfig::default(), retry).await;
    let states = Arc::new(States(Mutex::new(Vec::new())));
    phone.sdk.add_listener(states.clone());
    (phone.server, phone.sdk, phone.to, states)
}

fn request(to: &str) -> TransferRequest {
    TransferRequest {
        to_user_id: to.into(),
        amount_minor: 5_000,
        currency: "BDT".into(),
        note: None,
    }
}

/// "Check status" tapped inside a tunnel turns a Retrying transfer into NeedsAttention; from then on it is
/// only looked up, never sent, so when the network is back the look-up answers 404 and the transfer the
/// user confirmed ends Failed without ever reaching the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_status_in_a_tunnel_does_not_abandon_the_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let (server, sdk, to, _) = setup(dir.path()).await;
    sdk.set_network_profile(NetworkProfile::Offline, 1).unwrap();
    let t = sdk.send_transfer(request(&to)).await.unwrap();
    // The first attempt fails in the tunnel (however long a loaded machine takes to try it).
    let state = settle(&sdk, &t.local_id, |s| {
        !matches!(s, TransferState::Pending | TransferState::Sending)
    })
    .await;
    assert_eq!(state, TransferState::Retrying);
    let _ = sdk.resolve(&t.local_id).await; // the user taps "check status" in the tunnel
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    sdk.set_network_available(true).unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), sdk.wait_for_outcome(&t.local_id))
        .await
        .unwrap()
        .unwrap();
    let end = if end.state == TransferState::NeedsAttention {
        // Not final: the SDK resolves it by itself once the network is back.
        settle(&sdk, &t.local_id, |s| s != TransferState::NeedsAttention).await
    } else {
        end.state
    };
    sdk.close();
    server.shutdown().await;
    assert_eq!(
        end,
        TransferState::Succeeded,
        "confirmed, network back, never sent"
    );
}

/// The transfer's state once `done` holds for it, polled; a state that never gets there within a generous
/// bound is returned as it is, for the caller's assertion to name.
async fn settle(sdk: &Sdk, id: &str, done: impl Fn(TransferState) -> bool) -> TransferState {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let state = sdk.transfer(id).unwrap().state;
        if done(state) || tokio::time::Instant::now() > give_up {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A look-up that overtakes the request in flight answers 404, the SDK records Failed ("no money moved"),
/// then the request lands and the same transfer turns Succeeded: a final state changed, and the UI told the
/// user nothing moved while it did. (Had the request's answer been lost, the phone would stay Failed with a
/// debit on the server: the ride saw exactly that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_state_never_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (server, sdk, to, states) = setup(dir.path()).await;
    let slow = NetsimSettings {
        latency_ms: 2_000,
        ..NetsimSettings::clean(1)
    };
    sdk.set_network_profile(NetworkProfile::Custom(slow), 1)
        .unwrap();
    let t = sdk.send_transfer(request(&to)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // the POST is 1 s from the server
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    let looked_up = sdk.resolve(&t.local_id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let end = sdk.transfer(&t.local_id).unwrap();
    sdk.close();
    server.shutdown().await;
    let seen = states.0.lock().unwrap().clone();
    let first_final = seen.iter().position(|s| s.is_final());
    let changed = first_final.is_some_and(|i| seen[i..].iter().any(|s| *s != seen[i]));
    assert!(
        !changed && looked_up.state != TransferState::Failed,
        "look-up said {:?} while the request was in flight; states seen {seen:?}; end {:?}",
        looked_up.state,
        end.state
    );
}
