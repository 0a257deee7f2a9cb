//! Sending beyond the open screen: one shared instance per process, `Busy` across processes, and
//! `drain(deadline)` against server-mock and a gated server.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::scripted::{base_config, created, req, serve, Script, Shared};
use common::{config, parties, request};
use sendonce::{Clock, Sdk, SdkError, TransferState};
use tokio::sync::Semaphore;

#[test]
#[ignore = "runs only as the child of another_process_on_the_file_is_busy_not_already_open"]
fn child_holds_the_file() {
    let Ok(db) = std::env::var("SENDONCE_HOLD_DB") else {
        return;
    };
    let config = sendonce::SdkConfig::builder("http://127.0.0.1:9", db)
        .build()
        .unwrap();
    let _sdk = Sdk::shared(config).unwrap();
    println!("holding");
    // Until the parent closes our stdin (or kills us).
    let _ = std::io::stdin().lines().count();
}

#[tokio::test]
async fn the_same_process_gets_the_same_instance_never_already_open() {
    let p = parties(1_000_000).await;
    let db = p.dir.path().join("shared.db");
    let ui = Sdk::shared(config(&p.server.url, &db, &p.alice).build().unwrap()).unwrap();
    // A worker and a push handler open "again": the same instance, and it sends.
    let worker = Sdk::shared(config(&p.server.url, &db, &p.alice).build().unwrap()).unwrap();
    let relative = std::env::set_current_dir(p.dir.path()).map(|_| {
        Sdk::shared(
            config(&p.server.url, "./shared.db".as_ref(), &p.alice)
                .build()
                .unwrap(),
        )
    });
    assert!(Arc::ptr_eq(&ui, &worker));
    assert!(
        Arc::ptr_eq(&ui, &relative.unwrap().unwrap()),
        "same file by another path"
    );
    let t = worker.send_transfer(request(&p.bob, 700)).await.unwrap();
    assert_eq!(
        common::outcome(&ui, &t.local_id).await.state,
        TransferState::Succeeded
    );
    // Another server on the same file is a configuration bug, not a second instance.
    let other = Sdk::shared(
        config("https://api.example.com", &db, &p.alice)
            .build()
            .unwrap(),
    );
    assert!(
        matches!(other, Err(SdkError::InvalidConfig(_))),
        "{other:?}"
    );
    // A plain open beside the shared instance still says AlreadyOpen.
    let plain = Sdk::open(config(&p.server.url, &db, &p.alice).build().unwrap());
    assert!(matches!(plain, Err(SdkError::AlreadyOpen(_))), "{plain:?}");
    // Three claims (ui, worker, the relative path): each close() releases one; the last one closes.
    ui.close();
    worker.close();
    assert!(
        !ui.is_closed(),
        "one holder's close() closed it for the others"
    );
    ui.close();
    assert!(ui.is_closed());
    let again = Sdk::shared(config(&p.server.url, &db, &p.alice).build().unwrap()).unwrap();
    assert!(!Arc::ptr_eq(&ui, &again));
    assert_eq!(
        again.transfer(&t.local_id).unwrap().state,
        TransferState::Succeeded
    );
}

struct Fixed;

impl sendonce::AccessTokenProvider for Fixed {
    fn token(&self, _: bool) -> sendonce::transport::BoxFuture<'_, Result<Option<String>, String>> {
        Box::pin(async { Ok(Some("tok".to_string())) })
    }
}

/// Before: a second `shared()` with another transport or token provider (or timeout, account, retry
/// policy) got the first instance and its settings were dropped without a word; a UI's close() closed
/// a worker's instance mid-send.
#[tokio::test]
async fn shared_refuses_a_differing_configuration_and_close_releases_one_claim() {
    let p = parties(1_000_000).await;
    let db = p.dir.path().join("shared.db");
    let http = || {
        Arc::new(
            sendonce::transport::HttpTransport::new(Duration::from_secs(5), Duration::from_secs(5))
                .unwrap(),
        ) as Arc<dyn sendonce::transport::Transport>
    };
    let pinned = http();
    let provider: Arc<dyn sendonce::AccessTokenProvider> = Arc::new(Fixed);
    let cfg = || {
        config(&p.server.url, &db, &p.alice)
            .token_provider(provider.clone())
            .build()
            .unwrap()
    };
    let ui = Sdk::shared_with_transport(cfg(), pinned.clone()).unwrap();
    let refused = |r: sendonce::Result<Arc<Sdk>>, what: &str| match r {
        Err(SdkError::InvalidConfig(m)) => assert!(m.contains(what), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    // A worker that does not know the UI's pinned transport, or brings its own.
    refused(Sdk::shared(cfg()), "transport");
    refused(Sdk::shared_with_transport(cfg(), http()), "transport");
    // Another token provider, or none.
    let other: Arc<dyn sendonce::AccessTokenProvider> = Arc::new(Fixed);
    refused(
        Sdk::shared_with_transport(
            config(&p.server.url, &db, &p.alice)
                .token_provider(other)
                .build()
                .unwrap(),
            pinned.clone(),
        ),
        "token provider",
    );
    refused(
        Sdk::shared_with_transport(
            config(&p.server.url, &db, &p.alice).build().unwrap(),
            pinned.clone(),
        ),
        "token provider",
    );
    let mut slow = cfg();
    slow.request_timeout = Duration::from_secs(60);
    refused(
        Sdk::shared_with_transport(slow, pinned.clone()),
        "request timeout",
    );
    let mut bound = cfg();
    bound.account_id = Some("someone-else".into());
    refused(Sdk::shared_with_transport(bound, pinned.clone()), "account");
    // The same configuration and objects: the same instance (the access token may be fresher).
    let mut fresher = cfg();
    fresher.access_token = Some("newer".into());
    let worker = Sdk::shared_with_transport(fresher, pinned.clone()).unwrap();
    assert!(Arc::ptr_eq(&ui, &worker));
    // The UI closes its screen while the worker sends: the worker's instance stays open and sends.
    ui.close();
    assert!(
        !worker.is_closed(),
        "the UI's close() closed the worker's instance"
    );
    let t = worker.send_transfer(request(&p.bob, 700)).await.unwrap();
    assert_eq!(
        common::outcome(&worker, &t.local_id).await.state,
        TransferState::Succeeded
    );
    worker.close();
    assert!(worker.is_closed(), "the last holder's close() closes it");
}

#[test]
fn another_process_on_the_file_is_busy_not_already_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_holds_the_file",
            "--nocapture",
        ])
        .env("SENDONCE_HOLD_DB", &db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
    }
    let config = || {
        sendonce::SdkConfig::builder("http://127.0.0.1:9", &db)
            .build()
            .unwrap()
    };
    let busy = Sdk::shared(config());
    assert!(matches!(busy, Err(SdkError::Busy(_))), "{busy:?}");
    drop(child.stdin.take()); // the worker process ends
    child.wait().unwrap();
    let sdk = Sdk::shared(config()).expect("free once the other process is gone");
    sdk.close();
}

#[tokio::test]
async fn confirmed_offline_then_drained_in_the_background_succeeds() {
    let p = parties(1_000_000).await;
    let db = p.dir.path().join("device.db");
    let sdk = Sdk::shared(
        config(&p.server.url, &db, &p.alice)
            .background_wake_window(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
    .unwrap();
    sdk.set_network_available(false).unwrap();
    let t = sdk.send_transfer(request(&p.bob, 1_500)).await.unwrap();
    // The app goes to the background: no screen, no composer, only the instance.
    sdk.set_in_foreground(false).unwrap();
    assert_eq!(
        sdk.transfer(&t.local_id).unwrap().state,
        TransferState::Pending
    );
    assert_eq!(p.server.debits_with_key(&t.idempotency_key).await, 0);

    let summary = sdk.drain(Duration::from_secs(20)).await.unwrap();
    assert!(!summary.deadline_reached, "{summary:?}");
    assert!(summary.unfinished.is_empty(), "{summary:?}");
    assert_eq!(summary.next_attempt_at_ms, None);
    assert_eq!(summary.finished.len(), 1);
    assert_eq!(summary.finished[0].state, TransferState::Succeeded);
    assert_eq!(summary.finished[0].idempotency_key, t.idempotency_key);
    assert_eq!(p.server.debits_with_key(&t.idempotency_key).await, 1);
}

#[tokio::test]
async fn a_deadline_shorter_than_the_request_returns_loses_nothing_and_keeps_the_key() {
    let gate = Arc::new(Semaphore::new(0));
    let script: Shared = Arc::new(std::sync::Mutex::new(Script {
        answers: vec![created()],
        gate: Some(gate.clone()),
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let open = || {
        Sdk::open(
            base_config(&url, &db)
                .background_wake_window(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .unwrap()
    };
    let sdk = open();
    sdk.set_network_available(false).unwrap();
    let t = sdk.send_transfer(req()).await.unwrap();

    let summary = sdk.drain(Duration::from_millis(300)).await.unwrap();
    // The request is still held by the server (no permit was ever given): drain returned before it.
    assert_eq!(gate.available_permits(), 0);
    assert_eq!(script.lock().unwrap().arrivals.len(), 1, "the request left");
    assert!(summary.deadline_reached, "{summary:?}");
    assert!(summary.finished.is_empty());
    assert_eq!(summary.unfinished.len(), 1);
    assert_eq!(summary.unfinished[0].local_id, t.local_id);
    assert_eq!(summary.unfinished[0].state, TransferState::Sending);

    // The OS ends the background time: the process is gone with the request out.
    sdk.close();
    drop(sdk);
    gate.add_permits(100);
    let sdk = open();
    let summary = sdk.drain(Duration::from_secs(20)).await.unwrap();
    assert_eq!(summary.finished.len(), 1, "{summary:?}");
    assert_eq!(summary.finished[0].state, TransferState::Succeeded);
    let seen = script.lock().unwrap().arrivals.clone();
    assert_eq!(seen.len(), 2, "sent again after the cut-off");
    assert_eq!(seen[1].key, t.idempotency_key, "with the same key");
    assert_eq!(seen[0].body, seen[1].body, "and the same bytes");
}

#[tokio::test]
async fn a_background_wake_up_spreads_a_foreground_one_does_not() {
    let p = parties(1_000_000).await;
    let sdk = Sdk::open(
        config(&p.server.url, &p.dir.path().join("d.db"), &p.alice)
            .retry_cap(Duration::from_secs(3600))
            .background_wake_window(Duration::from_secs(3000))
            .build()
            .unwrap(),
    )
    .unwrap();
    sdk.set_network_available(false).unwrap();
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(sdk.send_transfer(request(&p.bob, 100 + i)).await.unwrap());
    }
    sdk.set_in_foreground(false).unwrap();
    sdk.set_network_available(true).unwrap();
    let now = sendonce::SystemClock.now_ms();
    let times: Vec<i64> = ids
        .iter()
        .map(|t| {
            sdk.transfer(&t.local_id)
                .unwrap()
                .next_attempt_at_ms
                .unwrap()
        })
        .collect();
    // Spread over the window (50 min here), each by its own key: not all at once, none past the window.
    assert!(times.iter().all(|&at| at <= now + 3_000_000), "{times:?}");
    let distinct: std::collections::HashSet<_> = times.iter().map(|at| at / 1000).collect();
    assert!(distinct.len() >= 6, "spread: {times:?}");
    assert!(
        times.iter().filter(|&&at| at > now + 1000).count() >= 6,
        "{times:?}"
    );

    // Back in the foreground, the user is looking: everything is woken at once.
    sdk.set_network_available(false).unwrap();
    sdk.set_in_foreground(true).unwrap();
    sdk.set_network_available(true).unwrap();
    for t in &ids {
        assert_eq!(
            common::outcome(&sdk, &t.local_id).await.state,
            TransferState::Succeeded
        );
    }
}
