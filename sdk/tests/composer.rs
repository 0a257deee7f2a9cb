//! The composer never mints a second key while the outcome of the first is unknown.

mod common;

use std::time::Duration;

use common::scripted::{arrivals, problem, req, rig_with, until, wait};
use sendonce::{ComposerState, SdkError, TransferState};

#[tokio::test]
async fn new_intent_is_refused_while_the_outcome_is_unknown() {
    // Every attempt answers 503: the SDK gives up sending and the outcome stays unknown.
    let rig = rig_with(
        vec![problem(503, r#"{"code":"service_unavailable"}"#)],
        |c| c.give_up_after(Duration::from_millis(300)),
    )
    .await;
    // The server's look-up answers "in progress" forever: nothing resolves it.
    rig.script.lock().unwrap().lookup = Some(problem(409, r#"{"code":"idempotency_key_in_use"}"#));
    let composer = rig.sdk.composer().unwrap();
    let first = composer.confirm(req()).await.unwrap();
    assert!(!composer.send_enabled(), "off from the first confirm");
    assert_eq!(
        composer.new_intent(),
        Err(SdkError::TransferUnfinished),
        "refused while sending"
    );
    assert_eq!(
        wait(&rig.sdk, &first.local_id).await.state,
        TransferState::NeedsAttention
    );
    until("the composer shows NeedsAttention", || {
        matches!(composer.state(), ComposerState::NeedsAttention { .. })
    })
    .await;
    assert!(!composer.send_enabled(), "off while the outcome is unknown");
    assert_eq!(
        composer.new_intent(),
        Err(SdkError::TransferUnfinished),
        "a new intent would mint a second key for money that may have moved"
    );
    let again = composer.confirm(req()).await.unwrap();
    assert_eq!(
        again.idempotency_key, first.idempotency_key,
        "the same transfer, no new key"
    );
    assert_eq!(rig.sdk.transfers().unwrap().len(), 1);
    assert!(arrivals(&rig)
        .iter()
        .all(|a| a.key == first.idempotency_key));
}

#[tokio::test]
async fn new_intent_is_allowed_after_done_and_after_a_definitive_no() {
    let rig = rig_with(
        vec![
            common::scripted::created(),
            problem(402, r#"{"code":"insufficient_funds"}"#),
        ],
        |c| c,
    )
    .await;
    let composer = rig.sdk.composer().unwrap();
    let paid = composer.confirm(req()).await.unwrap();
    until("Done", || {
        matches!(composer.state(), ComposerState::Done { .. })
    })
    .await;
    assert!(
        !composer.send_enabled(),
        "after Done, off until new_intent()"
    );
    assert_eq!(
        composer.confirm(req()).await.unwrap().local_id,
        paid.local_id
    );
    composer.new_intent().unwrap();
    assert!(composer.send_enabled());
    let refused = composer.confirm(req()).await.unwrap();
    assert_ne!(refused.idempotency_key, paid.idempotency_key);
    until("Rejected", || {
        matches!(composer.state(), ComposerState::Rejected { .. })
    })
    .await;
    assert!(
        composer.send_enabled(),
        "a definitive no lets the user try again"
    );
    composer.new_intent().unwrap();
    assert_eq!(composer.state(), ComposerState::Editing);
}
