//! Events tell the app what the sender did; no log line or event names a recipient, a note or a token
//! unless the app opts in.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::scripted::{created, problem, req, rig_with, wait};
use common::{config, parties};
use sendonce::transport::BoxFuture;
use sendonce::{
    AccessTokenProvider, EventListener, NetworkProfile, Sdk, SdkEvent, TransferRequest,
    TransferState,
};

#[derive(Default)]
struct Events(Mutex<Vec<SdkEvent>>);

impl EventListener for Events {
    fn on_event(&self, event: SdkEvent) {
        self.0.lock().unwrap().push(event);
    }
}

struct Fresh(String);

impl AccessTokenProvider for Fresh {
    fn token(&self, _: bool) -> BoxFuture<'_, Result<Option<String>, String>> {
        Box::pin(async move { Ok(Some(self.0.clone())) })
    }
}

#[tokio::test]
async fn events_follow_every_attempt_answer_retry_and_outcome() {
    let events = Arc::new(Events::default());
    let rig = rig_with(
        vec![
            problem(503, r#"{"code":"unavailable"}"#),
            problem(401, r#"{"code":"unauthenticated"}"#),
            created(),
        ],
        |c| c.token_provider(Arc::new(Fresh("tok-2".into()))),
    )
    .await;
    rig.sdk.add_event_listener(events.clone());
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    assert_eq!(
        wait(&rig.sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
    let id = t.local_id.clone();
    common::scripted::until("the Resolved event", || {
        events
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SdkEvent::Resolved { .. }))
    })
    .await;
    let seen = events.0.lock().unwrap().clone();
    let statuses: Vec<Option<u16>> = seen
        .iter()
        .filter_map(|e| match e {
            SdkEvent::AttemptAnswered { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, vec![Some(503), Some(401), Some(201)], "{seen:?}");
    let started: Vec<u32> = seen
        .iter()
        .filter_map(|e| match e {
            SdkEvent::AttemptStarted { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![1, 2, 3]);
    assert!(
        seen.iter()
            .filter(|e| matches!(e, SdkEvent::RetryScheduled { .. }))
            .count()
            >= 2
    );
    assert_eq!(
        seen.last(),
        Some(&SdkEvent::Resolved {
            local_id: id,
            state: TransferState::Succeeded
        })
    );
    rig.sdk.sign_out(false).unwrap();
    common::scripted::until("the Wiped event", || {
        events.0.lock().unwrap().iter().any(|e| {
            matches!(
                e,
                SdkEvent::Wiped {
                    discarded_unfinished: 0,
                    deleted_finished: 1
                }
            )
        })
    })
    .await;
}

/// Every log line of the test binary, at every level and target.
fn capture() -> Arc<Mutex<Vec<u8>>> {
    common::logs::capture_at(tracing::Level::TRACE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ride_logs_no_recipient_note_or_token() {
    let lines = capture();
    let p = parties(10_000_000).await;
    const NOTE: &str = "note-pii-marker-7f3";
    let sdk = Sdk::open(
        config(&p.server.url, &p.dir.path().join("d.db"), &p.alice)
            .account_id("acct-pii-marker-9c1")
            .token_provider(Arc::new(Fresh(p.alice.token.clone())))
            .request_timeout(Duration::from_millis(400))
            .build()
            .unwrap(),
    )
    .unwrap();
    // A ride: lost answers, replays, timeouts, a wrong token refreshed, double taps, look-ups.
    sdk.set_network_profile(NetworkProfile::Flaky, 7).unwrap();
    sdk.set_access_token(Some("tok-pii-wrong-1a2".into()))
        .unwrap();
    let composer = sdk.composer().unwrap();
    let mut ids = Vec::new();
    for amount in [101, 102, 103] {
        let request = TransferRequest {
            to_user_id: p.bob.id.clone(),
            amount_minor: amount,
            currency: "BDT".into(),
            note: Some(NOTE.into()),
        };
        ids.push(sdk.send_transfer(request.clone()).await.unwrap().local_id);
        if amount == 101 {
            composer.confirm(request.clone()).await.unwrap();
            composer.confirm(request).await.unwrap();
        }
    }
    sdk.set_network_profile(NetworkProfile::LbReplay, 8)
        .unwrap();
    for id in &ids {
        let _ = sdk.resolve(id).await;
    }
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    for id in &ids {
        tokio::time::timeout(Duration::from_secs(60), sdk.wait_for_outcome(id))
            .await
            .expect("settled")
            .unwrap();
    }
    sdk.sign_out(true).unwrap();
    sdk.close();

    let text = String::from_utf8_lossy(&lines.lock().unwrap()).into_owned();
    assert!(text.contains("attempt answered"), "the capture works");
    assert!(text.contains("token refresh"), "the ride had a 401");
    for secret in [
        p.bob.id.as_str(),
        NOTE,
        p.alice.token.as_str(),
        "tok-pii-wrong-1a2",
        "acct-pii-marker-9c1",
    ] {
        let hits: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(secret))
            .take(3)
            .collect();
        assert!(hits.is_empty(), "{secret} logged: {hits:#?}");
    }
}

#[tokio::test]
async fn an_app_that_opts_in_sees_recipient_and_note_never_the_token() {
    let lines = capture();
    let p = parties(1_000_000).await;
    let carol = p.server.user("carol-optin", 0).await;
    let sdk = Sdk::open(
        config(&p.server.url, &p.dir.path().join("d.db"), &p.alice)
            .log_personal_data(true)
            .build()
            .unwrap(),
    )
    .unwrap();
    let request = TransferRequest {
        to_user_id: carol.id.clone(),
        amount_minor: 5,
        currency: "BDT".into(),
        note: Some("note-optin-4e8".into()),
    };
    let t = sdk.send_transfer(request).await.unwrap();
    common::outcome(&sdk, &t.local_id).await;
    let text = String::from_utf8_lossy(&lines.lock().unwrap()).into_owned();
    assert!(
        text.contains(&carol.id),
        "the grep sees a recipient when one is logged"
    );
    assert!(text.contains("note-optin-4e8"));
    assert!(!text.contains(&p.alice.token), "never the token");
}
