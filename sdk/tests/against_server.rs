//! End to end against the real server-mock (real HTTP on loopback, real SQLite files on both sides).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, open, outcome, parties, request, Parties};
use sendonce::{
    ComposerState, NetsimSettings, NetworkProfile, Sdk, SdkError, SimClock, TransferState,
};

fn custom(f: impl FnOnce(&mut NetsimSettings)) -> NetworkProfile {
    let mut s = NetsimSettings::clean(7);
    s.timeout_ms = 50;
    f(&mut s);
    NetworkProfile::Custom(s)
}

#[tokio::test]
async fn send_succeeds_and_debits_once() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    let t = sdk.send_transfer(request(&bob, 2_500)).await.unwrap();
    assert_eq!(
        t.state,
        TransferState::Pending,
        "returned as persisted, before sending"
    );
    let done = outcome(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    assert!(done.server_transfer_id.is_some());
    assert_eq!(server.debits_with_key(&t.idempotency_key).await, 1);
}

#[tokio::test]
async fn lost_responses_after_commit_are_resolved_by_replay_not_by_a_second_debit() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    sdk.set_network_profile(custom(|s| s.drop_response_rate = 1.0), 1)
        .unwrap();
    let t = sdk.send_transfer(request(&bob, 700)).await.unwrap();
    // Wait until the server has committed at least once while every answer was lost.
    for _ in 0..500 {
        if server.debits_with_key(&t.idempotency_key).await == 1
            && sdk.transfer(&t.local_id).unwrap().attempts >= 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mid = sdk.transfer(&t.local_id).unwrap();
    assert!(!mid.state.is_final() && mid.attempts >= 3, "{mid:?}");
    // Every attempt but the one possibly still on the wire had its answer dropped after the commit.
    assert!(sdk.network_stats().dropped_responses >= u64::from(mid.attempts) - 1);
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    let done = outcome(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    assert!(
        done.replayed,
        "the answer came from the server's stored response"
    );
    assert_eq!(server.debits_with_key(&t.idempotency_key).await, 1);
}

#[tokio::test]
async fn load_balancer_replays_move_money_once() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(1_000_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    sdk.set_network_profile(custom(|s| s.duplicate_rate = 1.0), 3)
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(sdk.send_transfer(request(&bob, 100 + i)).await.unwrap());
    }
    for t in &ids {
        assert_eq!(
            outcome(&sdk, &t.local_id).await.state,
            TransferState::Succeeded
        );
        assert_eq!(server.debits_with_key(&t.idempotency_key).await, 1);
    }
    assert!(sdk.network_stats().duplicated >= 20);
}

#[tokio::test]
async fn composer_mints_one_key_however_many_taps() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    sdk.set_network_available(false).unwrap();
    let composer = Arc::new(sdk.composer().unwrap());
    assert!(composer.send_enabled());
    let taps: Vec<_> = (0..10)
        .map(|_| {
            let c = composer.clone();
            let r = request(&bob, 999);
            tokio::spawn(async move { c.confirm(r).await.unwrap() })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for tap in taps {
        ids.insert(tap.await.unwrap().local_id);
    }
    assert_eq!(ids.len(), 1, "ten taps, one transfer");
    assert!(!composer.send_enabled(), "disabled while unfinished");
    assert_eq!(sdk.transfers().unwrap().len(), 1);
    sdk.set_network_available(true).unwrap();
    let id = ids.into_iter().next().unwrap();
    let done = outcome(&sdk, &id).await;
    let mut rx = composer.subscribe();
    let state = tokio::time::timeout(
        Duration::from_secs(5),
        rx.wait_for(|s| matches!(s, ComposerState::Done { .. })),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert_eq!(
        state,
        ComposerState::Done {
            receipt: done.clone()
        }
    );
    assert!(
        !composer.send_enabled(),
        "a late tap on a fast success must not pay twice"
    );
    assert_eq!(
        composer.confirm(request(&bob, 999)).await.unwrap().local_id,
        id
    );
    composer.new_intent().unwrap();
    assert!(composer.send_enabled());
    assert_eq!(server.debits_with_key(&done.idempotency_key).await, 1);
}

#[tokio::test]
async fn close_and_reopen_resumes_with_the_same_key() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let db = dir.path().join("a.db");
    let sdk = Sdk::open(
        config(&server.url, &db, &alice)
            .network_profile(NetworkProfile::Offline)
            .build()
            .unwrap(),
    )
    .unwrap();
    let t = sdk.send_transfer(request(&bob, 321)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(sdk.transfer(&t.local_id).unwrap().attempts >= 1);
    sdk.close();
    assert_eq!(sdk.transfers().unwrap_err(), SdkError::Closed);
    let again = open(&server.url, &db, &alice);
    assert_eq!(again.unfinished_transfers().unwrap().len(), 1);
    let done = outcome(&again, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
    assert_eq!(done.idempotency_key, t.idempotency_key);
    assert_eq!(server.debits_with_key(&t.idempotency_key).await, 1);
}

#[tokio::test]
async fn network_return_wakes_waiting_retries_at_once() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    // A long backoff: without the wake-up the retry would wait up to a minute.
    let cfg = config(&server.url, &dir.path().join("a.db"), &alice)
        .retry_base(Duration::from_secs(30))
        .retry_cap(Duration::from_secs(60))
        .network_profile(NetworkProfile::Offline)
        .build()
        .unwrap();
    let sdk = Sdk::open(cfg).unwrap();
    let t = sdk.send_transfer(request(&bob, 10)).await.unwrap();
    for _ in 0..300 {
        if sdk.transfer(&t.local_id).unwrap().state == TransferState::Retrying {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = sdk.transfer(&t.local_id).unwrap();
    assert_eq!(waiting.state, TransferState::Retrying);
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    sdk.set_network_available(true).unwrap();
    // Bounded well below the 30 s backoff: the wake-up, not the schedule, sent it.
    let done = tokio::time::timeout(Duration::from_secs(10), sdk.wait_for_outcome(&t.local_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.state, TransferState::Succeeded);
}

#[tokio::test]
async fn past_the_horizon_the_outcome_is_resolved_by_look_up_never_by_a_new_key() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    // Simulated time 1000x: a 10-minute horizon of sending passes in under a second; every answer is lost.
    // (A clock jump would not get there faster: the horizon counts measured sending time.)
    let clock = Arc::new(SimClock::new(1_700_000_000_000, 1000.0));
    let cfg = config(&server.url, &dir.path().join("a.db"), &alice)
        .clock(clock.clone())
        .retry_base(Duration::from_secs(1))
        .retry_cap(Duration::from_secs(60))
        .give_up_after(Duration::from_secs(600))
        .network_profile(custom(|s| s.drop_response_rate = 1.0))
        .build()
        .unwrap();
    let sdk = Sdk::open(cfg).unwrap();
    let moved = sdk.send_transfer(request(&bob, 50)).await.unwrap();
    // The money moved on the first attempt; the SDK never heard, and must give up at the horizon.
    for _ in 0..500 {
        if server.debits_with_key(&moved.idempotency_key).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = outcome(&sdk, &moved.local_id).await;
    assert_eq!(t.state, TransferState::NeedsAttention);
    let keys_before: Vec<_> = server
        .ledger()
        .await
        .into_iter()
        .filter(|e| e["kind"] == "debit")
        .collect();
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    let resolved = sdk.resolve(&moved.local_id).await.unwrap();
    assert_eq!(
        resolved.state,
        TransferState::Succeeded,
        "found by key: the money did move"
    );
    assert_eq!(resolved.idempotency_key, moved.idempotency_key);
    let keys_after: Vec<_> = server
        .ledger()
        .await
        .into_iter()
        .filter(|e| e["kind"] == "debit")
        .collect();
    assert_eq!(
        keys_before.len(),
        keys_after.len(),
        "resolution sent no new transfer"
    );

    // And a transfer that never reached the server resolves to "not executed".
    sdk.set_network_profile(NetworkProfile::Offline, 0).unwrap();
    let never = sdk.send_transfer(request(&bob, 60)).await.unwrap();
    sdk.set_network_available(true).unwrap();
    let t = outcome(&sdk, &never.local_id).await;
    assert_eq!(t.state, TransferState::NeedsAttention);
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    let resolved = sdk.resolve(&never.local_id).await.unwrap();
    assert_eq!(resolved.state, TransferState::Failed);
    assert_eq!(resolved.rejection.unwrap().code, "not_executed");
    assert_eq!(server.debits_with_key(&never.idempotency_key).await, 0);
}

#[tokio::test]
async fn a_backward_clock_jump_does_not_stall_retries() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let clock = Arc::new(SimClock::new(1_700_000_000_000, 1.0));
    let cfg = config(&server.url, &dir.path().join("a.db"), &alice)
        .clock(clock.clone())
        .network_profile(NetworkProfile::Offline)
        .build()
        .unwrap();
    let sdk = Sdk::open(cfg).unwrap();
    let t = sdk.send_transfer(request(&bob, 5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    clock.jump(-3_600_000);
    sdk.set_network_profile(NetworkProfile::Off, 0).unwrap();
    // No wake-up call: only the schedule (clamped to the 200 ms cap) can send it.
    let done = outcome(&sdk, &t.local_id).await;
    assert_eq!(done.state, TransferState::Succeeded);
}

#[tokio::test]
async fn many_transfers_through_a_flaky_network_each_debit_once() {
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(10_000_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    sdk.set_network_profile(
        custom(|s| {
            s.drop_request_rate = 0.2;
            s.drop_response_rate = 0.3;
            s.duplicate_rate = 0.2;
        }),
        11,
    )
    .unwrap();
    let mut sent = Vec::new();
    for i in 0..40 {
        sent.push(sdk.send_transfer(request(&bob, 1 + i)).await.unwrap());
    }
    for t in &sent {
        assert_eq!(
            outcome(&sdk, &t.local_id).await.state,
            TransferState::Succeeded
        );
    }
    let ledger = server.ledger().await;
    for t in &sent {
        let n = ledger
            .iter()
            .filter(|e| e["kind"] == "debit" && e["idempotency_key"] == t.idempotency_key.as_str())
            .count();
        assert_eq!(n, 1, "transfer {} debited {n} times", t.local_id);
    }
}

#[tokio::test]
async fn a_panicking_listener_does_not_stop_the_sdk() {
    struct Bomb;
    impl sendonce::TransferListener for Bomb {
        fn on_transfer_changed(&self, _: sendonce::Transfer) {
            panic!("listener bug");
        }
    }
    let Parties {
        server,
        alice,
        bob,
        dir,
    } = parties(100_000).await;
    let sdk = open(&server.url, &dir.path().join("a.db"), &alice);
    sdk.add_listener(Arc::new(Bomb));
    let t = sdk.send_transfer(request(&bob, 1)).await.unwrap();
    assert_eq!(
        outcome(&sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
    let t2 = sdk.send_transfer(request(&bob, 2)).await.unwrap();
    assert_eq!(
        outcome(&sdk, &t2.local_id).await.state,
        TransferState::Succeeded
    );
}
