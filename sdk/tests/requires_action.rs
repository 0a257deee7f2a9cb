//! `RequiresAction`: the bank answers "the customer must complete a step first" (SCA). The operation
//! parks — no attempt, no new key, no give-up while parked, across a SIGKILL — and resumes with the
//! same key and bytes when the app says the step is done.
//!
//! The child process is this same test binary re-run with `--ignored --exact child_parks_an_order`.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::bank::{bank, bank_with, config, executed, order, sca, settled};
use sendonce::{ComposerState, EventListener, Sdk, SdkEvent, TransferState};

#[derive(Default)]
struct Events(std::sync::Mutex<Vec<SdkEvent>>);

impl EventListener for Events {
    fn on_event(&self, event: SdkEvent) {
        self.0.lock().unwrap().push(event);
    }
}

#[tokio::test]
async fn an_action_required_answer_parks_the_operation_until_the_app_says_it_is_done() {
    let rig = bank(vec![sca(), executed()]).await;
    let events = std::sync::Arc::new(Events::default());
    rig.sdk.add_event_listener(events.clone());
    let t = rig.sdk.send_operation(order("12.50")).await.unwrap();
    let parked = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(parked.state, TransferState::RequiresAction);
    let action = parked
        .required_action
        .clone()
        .expect("the payload of the answer");
    assert_eq!(action.code, "SCA_REQUIRED");
    assert_eq!(action.url.as_deref(), Some("https://bank.example/sca/ch_1"));
    assert_eq!(action.challenge_id.as_deref(), Some("ch_1"));
    assert_eq!(parked.operation_type, "payment_order");
    // Parked: nothing is sent however long it waits (the sender would have retried within 100 ms).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.arrivals().len(), 1, "no attempt while parked");
    assert_eq!(
        rig.sdk.transfer(&t.local_id).unwrap().state,
        TransferState::RequiresAction
    );
    // Unfinished: a sign-out without force refuses to discard it.
    assert_eq!(rig.sdk.unfinished_transfers().unwrap().len(), 1);
    let resumed = rig.sdk.action_completed(&t.local_id).unwrap();
    assert_eq!(resumed.idempotency_key, t.idempotency_key);
    let done = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    assert!(done.required_action.is_none());
    let seen = rig.arrivals();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].key, seen[1].key, "the same key after the action");
    assert_eq!(
        seen[0].body, seen[1].body,
        "the same bytes after the action"
    );
    // A second call is harmless.
    assert_eq!(
        rig.sdk.action_completed(&t.local_id).unwrap().state,
        TransferState::Succeeded
    );
    let names: Vec<SdkEvent> = events.0.lock().unwrap().clone();
    assert!(names.iter().any(|e| matches!(e, SdkEvent::Confirmed { operation_type, .. } if operation_type == "payment_order")));
    assert!(names.iter().any(|e| matches!(e, SdkEvent::ActionRequired { operation_type, .. } if operation_type == "payment_order")));
}

#[tokio::test]
async fn the_composer_shows_the_action_and_a_second_tap_returns_the_same_operation() {
    let rig = bank(vec![sca(), executed()]).await;
    let composer = rig.sdk.composer().unwrap();
    let first = composer.confirm_operation(order("7.00")).await.unwrap();
    let mut states = composer.subscribe();
    let state = tokio::time::timeout(
        Duration::from_secs(20),
        states.wait_for(|s| matches!(s, ComposerState::RequiresAction { .. })),
    )
    .await
    .expect("the composer shows the action")
    .unwrap()
    .clone();
    let ComposerState::RequiresAction { transfer, action } = state else {
        unreachable!()
    };
    assert_eq!(transfer.local_id, first.local_id);
    assert_eq!(action.challenge_id.as_deref(), Some("ch_1"));
    assert!(!composer.send_enabled());
    assert!(
        composer.new_intent().is_err(),
        "money may still move: no new intent"
    );
    let again = composer.confirm_operation(order("7.00")).await.unwrap();
    assert_eq!(again.local_id, first.local_id);
    assert_eq!(again.idempotency_key, first.idempotency_key);
    assert_eq!(
        rig.sdk.transfers().unwrap().len(),
        1,
        "no second operation, no second key"
    );
    rig.sdk.action_completed(&first.local_id).unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        states.wait_for(|s| matches!(s, ComposerState::Done { .. })),
    )
    .await
    .expect("done after the action")
    .unwrap();
}

#[tokio::test]
async fn the_give_up_horizon_does_not_run_while_parked() {
    // Horizon 300 ms of sending time. Parked for 1.5 s; after the action the order is sent again
    // (not handed to NeedsAttention) and succeeds.
    let rig = bank_with(vec![sca(), executed()], |c| {
        c.give_up_after(Duration::from_millis(300))
    })
    .await;
    let t = rig.sdk.send_operation(order("8.00")).await.unwrap();
    assert_eq!(
        settled(&rig.sdk, &t.local_id).await.state,
        TransferState::RequiresAction
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        rig.sdk.transfer(&t.local_id).unwrap().state,
        TransferState::RequiresAction
    );
    rig.sdk.action_completed(&t.local_id).unwrap();
    let done = settled(&rig.sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    assert_eq!(rig.arrivals().len(), 2);
}

#[tokio::test]
async fn a_parked_operation_gives_a_background_worker_nothing_to_wake_for() {
    // Only the customer can move it on: a drain that asked the worker to run again at once (a next
    // attempt "now") would have WorkManager / BGTaskScheduler run it in a loop while it stays parked.
    let rig = bank(vec![sca()]).await;
    let t = rig.sdk.send_operation(order("3.00")).await.unwrap();
    assert_eq!(
        settled(&rig.sdk, &t.local_id).await.state,
        TransferState::RequiresAction
    );
    let summary = rig.sdk.drain(Duration::from_millis(200)).await.unwrap();
    assert_eq!(summary.unfinished.len(), 1, "still unfinished: parked");
    assert_eq!(summary.next_attempt_at_ms, None, "{summary:?}");
    assert_eq!(summary.next_attempt_in_ms, None);
    assert_eq!(rig.arrivals().len(), 1, "the drain sent nothing");
}

#[tokio::test]
async fn a_look_up_that_finds_the_order_done_ends_the_parked_operation() {
    // The customer completed the step in the bank's own app; this one was never told.
    let rig = bank(vec![sca()]).await;
    let t = rig.sdk.send_operation(order("9.00")).await.unwrap();
    assert_eq!(
        settled(&rig.sdk, &t.local_id).await.state,
        TransferState::RequiresAction
    );
    // The bank's not-found does not end a parked order (the customer may still complete it).
    assert_eq!(
        rig.sdk.resolve(&t.local_id).await.unwrap().state,
        TransferState::RequiresAction
    );
    rig.set_lookups(vec![executed()]);
    let end = rig.sdk.resolve(&t.local_id).await.unwrap();
    assert_eq!(end.state, TransferState::Succeeded);
    assert_eq!(rig.arrivals().len(), 1, "never sent again");
}

#[test]
#[ignore = "runs only as the child of a_sigkill_while_parked_loses_nothing_and_mints_no_key"]
fn child_parks_an_order() {
    let Ok(url) = std::env::var("SENDONCE_PARK_URL") else {
        return;
    };
    let db = std::env::var("SENDONCE_PARK_DB").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sdk = Sdk::open(config(&url, std::path::Path::new(&db)).build().unwrap()).unwrap();
        let t = sdk.send_operation(order("10.00")).await.unwrap();
        let parked = settled(&sdk, &t.local_id).await;
        println!("PARKED {} {:?}", t.local_id, parked.state);
        // Waits to be killed.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_while_parked_loses_nothing_and_mints_no_key() {
    let script = std::sync::Arc::new(std::sync::Mutex::new(common::bank::Script {
        answers: vec![sca(), executed()],
        ..Default::default()
    }));
    let url = common::bank::serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_parks_an_order",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SENDONCE_PARK_URL", &url)
        .env("SENDONCE_PARK_DB", &db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Watches the child's file through a read-only connection, as another process would.
    let parked = || -> Option<String> {
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        conn.query_row(
            "SELECT local_id FROM transfers WHERE state = 'requires_action'",
            [],
            |r| r.get::<_, String>(0),
        )
        .ok()
    };
    let mut local_id = None;
    for _ in 0..2000 {
        local_id = parked();
        if local_id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let local_id = local_id.expect("the child parked its order within 20 s");

    let sdk = Sdk::open(config(&url, &db).build().unwrap()).unwrap();
    let t = sdk.transfer(&local_id).unwrap();
    assert_eq!(
        t.state,
        TransferState::RequiresAction,
        "still parked after the kill: {t:?}"
    );
    assert_eq!(
        t.required_action.unwrap().challenge_id.as_deref(),
        Some("ch_1")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        script.lock().unwrap().arrivals.len(),
        1,
        "a reopen sends nothing while parked"
    );
    sdk.action_completed(&local_id).unwrap();
    let done = settled(&sdk, &local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    let arrivals = script.lock().unwrap().arrivals.clone();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(
        arrivals[0].key, arrivals[1].key,
        "no key minted by the restart"
    );
    assert_eq!(arrivals[0].body, arrivals[1].body);
    assert_eq!(sdk.transfers().unwrap().len(), 1);
    sdk.close();
}
