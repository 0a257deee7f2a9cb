//! The phone's clock cannot end a transfer: the give-up horizon counts time the SDK measured while
//! sending, not the distance between two wall-clock readings the user can move.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::scripted::{arrivals, created, problem, req, rig_with, until, wait};
use sendonce::{SimClock, TransferState};

const HOUR_MS: i64 = 3_600_000;

#[tokio::test]
async fn a_forward_jump_before_the_first_attempt_does_not_give_up() {
    let clock = Arc::new(SimClock::new(1_800_000_000_000, 1.0));
    let rig = rig_with(vec![created()], |c| c.clock(clock.clone())).await;
    // The phone is offline when the user confirms, so nothing is sent yet.
    rig.sdk.set_network_available(false).unwrap();
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    // The user (or the network time) moves the clock a day and more forward.
    clock.jump(25 * HOUR_MS);
    rig.sdk.set_network_available(true).unwrap();
    let done = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(
        done.state,
        TransferState::Succeeded,
        "the first attempt is sent, not skipped: {done:?}"
    );
    assert_eq!(done.attempts, 1);
    assert_eq!(arrivals(&rig).len(), 1);
}

#[tokio::test]
async fn a_backward_jump_does_not_extend_the_window() {
    // 1000x: the 10-minute horizon passes in about 0.6 s of real time.
    let clock = Arc::new(SimClock::new(1_800_000_000_000, 1000.0));
    let rig = rig_with(
        vec![problem(503, r#"{"code":"service_unavailable"}"#)],
        |c| {
            c.clock(clock.clone())
                .retry_base(Duration::from_secs(1))
                .retry_cap(Duration::from_secs(60))
                .give_up_after(Duration::from_secs(600))
        },
    )
    .await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("the first attempt", || !arrivals(&rig).is_empty()).await;
    // Set back a day: measured by the wall clock, the horizon would now be a day and ten minutes away.
    clock.jump(-24 * HOUR_MS);
    let ended = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(ended.state, TransferState::NeedsAttention, "{ended:?}");
    assert!(ended.attempts >= 2, "{ended:?}");
}

#[tokio::test]
async fn jumps_back_and_forth_while_sending_neither_end_nor_extend_it() {
    let clock = Arc::new(SimClock::new(1_800_000_000_000, 1000.0));
    let rig = rig_with(
        vec![problem(503, r#"{"code":"service_unavailable"}"#)],
        |c| {
            c.clock(clock.clone())
                .retry_base(Duration::from_secs(1))
                .retry_cap(Duration::from_secs(60))
                .give_up_after(Duration::from_secs(600))
        },
    )
    .await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("the first attempt", || !arrivals(&rig).is_empty()).await;
    clock.jump(48 * HOUR_MS);
    until("a retry after the forward jump", || {
        arrivals(&rig).len() >= 2
    })
    .await;
    let after_forward = rig.sdk.transfer(&t.local_id).unwrap();
    assert_ne!(
        after_forward.state,
        TransferState::NeedsAttention,
        "a forward jump is not time spent sending: {after_forward:?}"
    );
    clock.jump(-72 * HOUR_MS);
    let ended = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(ended.state, TransferState::NeedsAttention, "{ended:?}");
}

#[tokio::test]
async fn sending_time_is_persisted_across_a_restart() {
    let clock = Arc::new(SimClock::new(1_800_000_000_000, 1000.0));
    let adjust = |c: sendonce::SdkConfigBuilder| {
        c.clock(clock.clone())
            .retry_base(Duration::from_secs(1))
            .retry_cap(Duration::from_secs(60))
            .give_up_after(Duration::from_secs(600))
    };
    let rig = rig_with(
        vec![problem(503, r#"{"code":"service_unavailable"}"#)],
        adjust,
    )
    .await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("a few attempts", || arrivals(&rig).len() >= 3).await;
    rig.sdk.close();
    let sent_before = arrivals(&rig).len();
    let persisted: i64 = rusqlite::Connection::open(&rig.db)
        .unwrap()
        .query_row(
            "SELECT elapsed_ms FROM transfers WHERE local_id = ?1",
            [&t.local_id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(persisted > 0, "the measured sending time is on disk");
    // Reopened on the same file: the horizon goes on from what was measured, it does not restart.
    let config = adjust(common::scripted::base_config(&rig.url, &rig.db))
        .build()
        .unwrap();
    let sdk = sendonce::Sdk::open(config).unwrap();
    let ended = wait(&sdk, &t.local_id).await;
    assert_eq!(ended.state, TransferState::NeedsAttention, "{ended:?}");
    assert!(arrivals(&rig).len() > sent_before, "sending resumed first");
}

#[tokio::test]
async fn it_never_gives_up_while_only_an_intermediary_answered() {
    let clock = Arc::new(SimClock::new(1_800_000_000_000, 1000.0));
    let portal = common::scripted::Answer(
        200,
        vec![common::scripted::HTML],
        "<html>Sign in to Station Wi-Fi</html>",
    );
    // A captive portal answers for longer than the whole horizon, then lets the phone through.
    let mut answers = vec![portal; 40];
    answers.push(created());
    let rig = rig_with(answers, |c| {
        c.clock(clock.clone())
            .retry_base(Duration::from_secs(1))
            .retry_cap(Duration::from_secs(60))
            .give_up_after(Duration::from_secs(600))
    })
    .await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    let done = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(
        done.state,
        TransferState::Succeeded,
        "no attempt reached the server and the phone was not offline: {done:?}"
    );
    assert_eq!(done.attempts, 41);
}
