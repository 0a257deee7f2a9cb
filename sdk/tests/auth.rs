//! Transfers waiting for a token resume: on open with a token, and when a token arrives mid-request.

mod common;

use std::sync::{Arc, Mutex};

use common::scripted::{arrivals, base_config, created, problem, req, rig, until, wait};
use sendonce::{Sdk, Transfer, TransferListener, TransferState};
use tokio::sync::Semaphore;

fn unauthenticated() -> common::scripted::Answer {
    problem(401, r#"{"code":"unauthenticated"}"#)
}

#[tokio::test]
async fn open_with_a_token_resumes_transfers_waiting_for_one() {
    let rig = rig(vec![unauthenticated(), created()]).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("AuthRequired", || {
        rig.sdk.transfer(&t.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;
    rig.sdk.close();

    // The app starts again, logged in: the parked transfer must not wait for a set_access_token call.
    let config = base_config(&rig.url, &rig.db)
        .access_token("tok-2")
        .build()
        .unwrap();
    let sdk = Sdk::open(config).unwrap();
    let done = wait(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    let seen = arrivals(&rig);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].key, seen[0].key, "resumed with the same key");
    assert_eq!(seen[1].auth, "Bearer tok-2");
}

#[tokio::test]
async fn open_without_a_token_leaves_them_waiting() {
    let rig = rig(vec![unauthenticated(), created()]).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("AuthRequired", || {
        rig.sdk.transfer(&t.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;
    rig.sdk.close();
    let config = sendonce::SdkConfig::builder(rig.url.clone(), &rig.db)
        .build()
        .unwrap();
    let sdk = Sdk::open(config).unwrap();
    assert_eq!(
        sdk.transfer(&t.local_id).unwrap().state,
        TransferState::AuthRequired
    );
    sdk.set_access_token(Some("tok-3".into())).unwrap();
    assert_eq!(
        wait(&sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
    assert_eq!(arrivals(&rig)[1].auth, "Bearer tok-3");
}

#[derive(Default)]
struct States(Mutex<Vec<TransferState>>);

impl TransferListener for States {
    fn on_transfer_changed(&self, transfer: Transfer) {
        self.0.lock().unwrap().push(transfer.state);
    }
}

#[tokio::test]
async fn a_token_set_while_the_request_is_out_never_parks_the_transfer() {
    let rig = rig(vec![unauthenticated(), created()]).await;
    let gate = Arc::new(Semaphore::new(0));
    rig.script.lock().unwrap().gate = Some(gate.clone());
    let states = Arc::new(States::default());
    rig.sdk.add_listener(states.clone());
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    // The first request is at the server, its 401 not yet answered: the app refreshes the token now.
    until("the first request is out", || arrivals(&rig).len() == 1).await;
    rig.sdk.set_access_token(Some("tok-2".into())).unwrap();
    gate.add_permits(100);
    let done = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    assert_eq!(arrivals(&rig)[1].auth, "Bearer tok-2");
    until("the listener saw Succeeded", || {
        states.0.lock().unwrap().contains(&TransferState::Succeeded)
    })
    .await;
    assert!(
        !states
            .0
            .lock()
            .unwrap()
            .contains(&TransferState::AuthRequired),
        "{:?}",
        states.0.lock().unwrap()
    );
}
