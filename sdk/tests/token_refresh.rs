//! On a 401 the SDK asks the app's token provider once, retries with the same key, and parks in
//! AuthRequired only when that does not help; a failing or hanging provider holds up no other transfer.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::scripted::{arrivals, created, problem, req, rig_with, until, wait, Answer};
use sendonce::transport::BoxFuture;
use sendonce::{AccessTokenProvider, TransferState};

fn unauthenticated() -> Answer {
    problem(401, r#"{"code":"unauthenticated"}"#)
}

/// What the provider does when asked.
#[derive(Clone, Copy)]
enum Behaviour {
    Fresh,
    Fail,
    Hang,
}

struct Provider {
    behaviour: Behaviour,
    asked: Mutex<Vec<bool>>,
    answered: AtomicUsize,
}

impl Provider {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            behaviour,
            asked: Mutex::new(Vec::new()),
            answered: AtomicUsize::new(0),
        })
    }
    fn asked(&self) -> Vec<bool> {
        self.asked.lock().unwrap().clone()
    }
}

impl AccessTokenProvider for Provider {
    fn token(&self, force_refresh: bool) -> BoxFuture<'_, Result<Option<String>, String>> {
        self.asked.lock().unwrap().push(force_refresh);
        Box::pin(async move {
            let answer = match self.behaviour {
                Behaviour::Fresh => Ok(Some("tok-fresh".to_string())),
                Behaviour::Fail => Err("keychain locked".to_string()),
                Behaviour::Hang => std::future::pending().await,
            };
            self.answered.fetch_add(1, Ordering::SeqCst);
            answer
        })
    }
}

#[tokio::test]
async fn a_401_asks_once_for_a_fresh_token_and_retries_with_the_same_key() {
    let provider = Provider::new(Behaviour::Fresh);
    let p = provider.clone();
    let rig = rig_with(vec![unauthenticated(), created()], |c| c.token_provider(p)).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    let done = wait(&rig.sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    assert_eq!(
        provider.asked(),
        vec![true],
        "asked once, forcing a refresh"
    );
    let seen = arrivals(&rig);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].auth, "Bearer tok-1");
    assert_eq!(seen[1].auth, "Bearer tok-fresh");
    assert_eq!(seen[1].key, seen[0].key, "same key");
    assert_eq!(seen[1].body, seen[0].body, "same bytes");
}

#[tokio::test]
async fn a_second_401_after_the_refresh_parks_without_asking_again() {
    let provider = Provider::new(Behaviour::Fresh);
    let p = provider.clone();
    let rig = rig_with(vec![unauthenticated()], |c| c.token_provider(p)).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("AuthRequired", || {
        rig.sdk.transfer(&t.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;
    assert_eq!(provider.asked(), vec![true]);
    assert_eq!(
        arrivals(&rig).len(),
        2,
        "one retry with the refreshed token, no more"
    );
    // The app signs in again by hand: the transfer resumes, and a later 401 may ask again.
    rig.script.lock().unwrap().answers = vec![created()];
    rig.sdk
        .set_access_token(Some("tok-by-hand".into()))
        .unwrap();
    assert_eq!(
        wait(&rig.sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
}

#[tokio::test]
async fn a_failing_provider_parks_the_transfer_in_auth_required() {
    let provider = Provider::new(Behaviour::Fail);
    let p = provider.clone();
    let rig = rig_with(vec![unauthenticated(), created()], |c| c.token_provider(p)).await;
    let t = rig.sdk.send_transfer(req()).await.unwrap();
    until("AuthRequired", || {
        rig.sdk.transfer(&t.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;
    assert_eq!(provider.asked(), vec![true]);
    assert_eq!(arrivals(&rig).len(), 1, "no retry with the refused token");
    let parked = rig.sdk.transfer(&t.local_id).unwrap();
    let error = parked.last_error.unwrap_or_default();
    assert!(error.contains("token provider failed"), "{error}");
    assert!(
        !error.contains("keychain"),
        "the provider's own text stays out: {error}"
    );
}

#[tokio::test]
async fn a_hanging_provider_holds_up_no_other_transfer() {
    let provider = Provider::new(Behaviour::Hang);
    let p = provider.clone();
    let rig = rig_with(vec![unauthenticated(), created()], |c| {
        c.token_provider(p)
            .token_timeout(Duration::from_secs(3))
            .retry_cap(Duration::from_secs(10))
    })
    .await;
    let first = rig.sdk.send_transfer(req()).await.unwrap();
    until("the provider is asked", || provider.asked().len() == 1).await;
    // The provider has not answered, and will not: another transfer is sent and succeeds meanwhile.
    let second = rig.sdk.send_transfer(req()).await.unwrap();
    let done = wait(&rig.sdk, &second.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    assert_eq!(provider.answered.load(Ordering::SeqCst), 0, "still hanging");
    assert_eq!(
        rig.sdk.transfer(&first.local_id).unwrap().state,
        TransferState::Retrying,
        "waiting for its refresh"
    );
    // Past the provider's timeout the first one parks, having been sent only once.
    until("AuthRequired", || {
        rig.sdk.transfer(&first.local_id).unwrap().state == TransferState::AuthRequired
    })
    .await;
    let first_key = rig.sdk.transfer(&first.local_id).unwrap().idempotency_key;
    assert_eq!(
        arrivals(&rig).iter().filter(|a| a.key == first_key).count(),
        1
    );
}

#[tokio::test]
async fn opened_without_a_token_the_provider_gives_the_first_one() {
    let provider = Provider::new(Behaviour::Fresh);
    let script = Arc::new(Mutex::new(common::scripted::Script {
        answers: vec![created()],
        ..Default::default()
    }));
    let url = common::scripted::serve(script).await;
    let dir = tempfile::tempdir().unwrap();
    let config = sendonce::SdkConfig::builder(url, dir.path().join("d.db"))
        .token_provider(provider.clone())
        .build()
        .unwrap();
    let sdk = sendonce::Sdk::open(config).unwrap();
    until("the provider is asked", || !provider.asked().is_empty()).await;
    assert_eq!(
        provider.asked(),
        vec![false],
        "no refresh forced for the first token"
    );
    let t = sdk.send_transfer(req()).await.unwrap();
    assert_eq!(
        wait(&sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
}
