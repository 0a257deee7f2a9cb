//! A confirm whose caller goes away half way (Kotlin drops the Rust future when the coroutine is
//! cancelled) still lands in the composer: the next tap gets the same transfer, never a second key.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
mod common;

use sendonce_ffi::{NetworkProfile, SendOnceConfig, SendOnceCore, TransferRequest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_dropped_half_way_still_lands_and_the_next_tap_gets_the_same_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let core = SendOnceCore::open(SendOnceConfig {
        network_profile: Some(NetworkProfile::Offline),
        ..common::config(dir.path().join("d.db").display().to_string())
    })
    .unwrap();
    let composer = core.composer().unwrap();
    let request = TransferRequest {
        to_user_id: "u_bob".into(),
        amount_minor: 10,
        currency: "BDT".into(),
        note: None,
    };
    {
        // Polled once (the commit is handed to the store thread), then dropped: the caller is gone.
        let mut tap = pin!(composer.confirm(request.clone()));
        let first =
            std::future::poll_fn(|cx| Poll::Ready(tap.as_mut().poll(cx).is_pending())).await;
        assert!(
            first,
            "the commit takes a store transaction, so the first poll waits"
        );
    }
    let again = composer.confirm(request.clone()).await.unwrap();
    let all = core.transfers().unwrap();
    assert_eq!(
        all.iter().map(|t| &t.local_id).collect::<Vec<_>>(),
        vec![&again.local_id],
        "one intent, one transfer, one key"
    );
    core.shutdown().unwrap();
}
