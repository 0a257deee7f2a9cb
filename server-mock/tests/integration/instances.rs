//! Several server-mock processes on one PostgreSQL database (the production topology):
//! concurrent duplicates spread over instances, an instance SIGKILLed mid-request, every
//! background job running in every process. PostgreSQL only (`SENDONCE_TEST_POSTGRES`).

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::recovery::{server_at, spawn_binary, Proc};

/// One server-mock process.
pub(crate) struct Instance {
    pub(crate) proc: Proc,
    pub(crate) url: String,
}

/// `n` server processes on one fresh database.
pub(crate) async fn instances(n: usize, extra: &[&str]) -> Option<(String, Vec<Instance>)> {
    postgres().or_else(|| {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        None
    })?;
    let db = fresh_db(std::path::Path::new("."), "unused").await;
    let all = (0..n)
        .map(|_| {
            let (proc, url) = spawn_binary(&db, extra);
            Instance { proc, url }
        })
        .collect();
    Some((db, all))
}

pub(crate) async fn post(url: &str, path: &str, body: Value) -> Value {
    let r = client()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap_or(Value::Null)
}

pub(crate) async fn get(url: &str, path: &str) -> Value {
    client()
        .get(format!("{url}{path}"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json")
}

pub(crate) async fn user(url: &str, name: &str, balance: i64) -> User {
    server_at(url).await.user(name, balance).await
}

pub(crate) async fn send(
    url: &str,
    user: &User,
    key: &str,
    body: &str,
) -> Result<Resp, reqwest::Error> {
    server_at(url).await.send(user, key, body).await
}

/// Retries like the SDK (same key, same bytes), each time on the next instance.
pub(crate) async fn until_done(urls: &[String], user: &User, key: &str, body: &str) -> Resp {
    for attempt in 0..600 {
        match send(&urls[attempt % urls.len()], user, key, body).await {
            Ok(r) if r.status == 409 || r.status >= 500 => {}
            Ok(r) => return r,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("key {key} never finished");
}

/// Every ledger entry, all pages.
pub(crate) async fn ledger(url: &str) -> Vec<Value> {
    let mut all: Vec<Value> = Vec::new();
    loop {
        let after = all.last().map_or(0, |e| e["entry_id"].as_i64().unwrap());
        let page = get(url, &format!("/v1/test/ledger?after={after}&limit=10000")).await;
        let page = page.as_array().cloned().unwrap_or_default();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

pub(crate) fn count(entries: &[Value], kind: &str, key: Option<&str>) -> usize {
    entries
        .iter()
        .filter(|e| e["kind"] == kind && key.is_none_or(|k| e["idempotency_key"] == k))
        .count()
}

/// Settles the outbox through every instance's relay; returns the counters.
pub(crate) async fn settle(urls: &[String]) -> Value {
    let mut stats = Value::Null;
    for url in urls {
        stats = post(url, "/v1/test/settle", json!({})).await;
    }
    assert_eq!(stats["outbox_pending"], 0, "outbox did not drain: {stats}");
    stats
}

#[tokio::test]
async fn sixty_four_concurrent_duplicates_over_three_instances_debit_once() {
    let Some((_db, all)) = instances(3, &["--gateway-delay", "50ms"]).await else {
        return;
    };
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let (a, b) = (
        user(&urls[0], "A", 100_000).await,
        user(&urls[1], "B", 0).await,
    );
    let body = transfer_body(&b.id, 777);
    let sends = (0..64).map(|i| {
        let (url, a, body) = (urls[i % 3].clone(), a.clone(), body.clone());
        tokio::spawn(async move { send(&url, &a, "one-key", &body).await.expect("answer") })
    });
    let mut answers = Vec::new();
    for s in sends {
        answers.push(s.await.unwrap());
    }
    let fresh = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .count();
    assert!(fresh <= 1, "{fresh} fresh 201s for one key");
    for r in &answers {
        assert!(
            r.status == 201 || r.status == 409,
            "only 201 (fresh or replayed) or 409 in use: {} {:?}",
            r.status,
            r.json()
        );
    }
    let done = until_done(&urls, &a, "one-key", &body).await;
    assert_eq!(done.status, 201);
    let stats = settle(&urls).await;
    let entries = ledger(&urls[2]).await;
    assert_eq!(count(&entries, "debit", Some("one-key")), 1, "one debit");
    assert_eq!(count(&entries, "credit", Some("one-key")), 1, "one credit");
    assert_eq!(stats["sms_sent"], 1, "one SMS");
    assert_eq!(stats["gateway_authorizations"], 1, "one authorisation");
    drop(all);
}

#[tokio::test]
async fn an_instance_killed_between_claim_and_commit_costs_one_lock_timeout_and_one_debit() {
    // Instance 0 is slow at the gateway, so its request sits between claim and commit.
    let Some((db, mut all)) =
        instances(1, &["--lock-timeout", "3s", "--gateway-delay", "10s"]).await
    else {
        return;
    };
    for _ in 0..2 {
        let (proc, url) = spawn_binary(&db, &["--lock-timeout", "3s"]);
        all.push(Instance { proc, url });
    }
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let (a, b) = (
        user(&urls[1], "A", 10_000).await,
        user(&urls[2], "B", 0).await,
    );
    let body = transfer_body(&b.id, 1_500);
    let in_flight = {
        let (url, a, body) = (urls[0].clone(), a.clone(), body.clone());
        tokio::spawn(async move { send(&url, &a, "killed-key", &body).await })
    };
    // Wait until the claim is visible from another instance, then kill its holder.
    for _ in 0..200 {
        if get(&urls[1], "/v1/test/stats").await["keys_in_progress"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(get(&urls[1], "/v1/test/stats").await["keys_in_progress"], 1);
    let pid = all[0].proc.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap()
        .success());
    assert!(
        in_flight.await.unwrap().is_err(),
        "the holder died mid-request"
    );
    let _ = all[0].proc.0.wait();

    // The others keep serving while the dead holder's lock runs out.
    let other = send(&urls[1], &a, "other-key", &transfer_body(&b.id, 10))
        .await
        .unwrap();
    assert_eq!(other.status, 201, "{:?}", other.json());
    let early = send(&urls[2], &a, "killed-key", &body).await.unwrap();
    assert_eq!(early.status, 409, "still held until the lease runs out");

    let survivors = urls[1..].to_vec();
    let done = until_done(&survivors, &a, "killed-key", &body).await;
    assert_eq!(done.status, 201, "{:?}", done.json());
    settle(&survivors).await;
    let entries = ledger(&urls[1]).await;
    assert_eq!(count(&entries, "debit", Some("killed-key")), 1, "one debit");
    assert_eq!(
        count(&entries, "credit", Some("killed-key")),
        1,
        "one credit"
    );
}

#[tokio::test]
async fn reapers_and_relays_in_three_instances_credit_and_notify_once() {
    let Some((_db, all)) = instances(3, &["--lock-timeout", "1s"]).await else {
        return;
    };
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let senders = [
        user(&urls[0], "A", 1_000_000).await,
        user(&urls[1], "C", 1_000_000).await,
    ];
    let b = user(&urls[2], "B", 0).await;
    let d = user(&urls[0], "D", 0).await;
    let sends = (0..60).map(|i| {
        let url = urls[i % 3].clone();
        let from = senders[i % 2].clone();
        let to = if i % 4 < 2 {
            b.id.clone()
        } else {
            d.id.clone()
        };
        let all_urls = urls.clone();
        tokio::spawn(async move {
            let body = transfer_body(&to, 100 + i as i64);
            let key = format!("k{i}");
            // The first attempt on one instance, a load-balancer replay on another.
            let _ = send(&url, &from, &key, &body).await;
            until_done(&all_urls, &from, &key, &body).await.status
        })
    });
    for s in sends {
        assert_eq!(s.await.unwrap(), 201);
    }
    // Every relay replays the whole outbox at once, as a broker replay would.
    let replays = urls
        .iter()
        .map(|u| post(u, "/v1/test/outbox/replay", json!({"from_event": 0})));
    for r in replays {
        r.await;
    }
    let stats = settle(&urls).await;
    let entries = ledger(&urls[0]).await;
    assert_eq!(count(&entries, "debit", None), 60);
    assert_eq!(count(&entries, "credit", None), 60, "no double credit");
    assert_eq!(stats["sms_sent"], 60, "no double SMS");
    assert_eq!(stats["keys_in_progress"], 0);
    let b_balance = client()
        .get(format!("{}/v1/wallet", urls[1]))
        .bearer_auth(&b.token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["balance_minor"]
        .as_i64()
        .unwrap();
    let expected: i64 = (0..60).filter(|i| i % 4 < 2).map(|i| 100 + i).sum();
    assert_eq!(b_balance, expected, "the balance is the ledger's sum");
}

#[tokio::test]
async fn a_clock_jump_on_another_instance_cannot_expire_a_live_request() {
    let Some((db, mut all)) = instances(1, &["--gateway-delay", "2s"]).await else {
        return;
    };
    let (proc, url) = spawn_binary(&db, &[]);
    all.push(Instance { proc, url });
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let (a, b) = (
        user(&urls[0], "A", 10_000).await,
        user(&urls[0], "B", 0).await,
    );
    let body = transfer_body(&b.id, 700);
    let first = {
        let (url, a, body) = (urls[0].clone(), a.clone(), body.clone());
        tokio::spawn(async move { send(&url, &a, "K", &body).await.expect("answer") })
    };
    for _ in 0..200 {
        if get(&urls[1], "/v1/test/stats").await["keys_in_progress"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The observer's clock jumps 2 h; its reaper judges the holder by heartbeats only.
    post(&urls[1], "/v1/test/clock", json!({"advance_ms": 7_200_000})).await;
    let reaped = post(&urls[1], "/v1/test/reap", json!({})).await;
    assert_eq!(
        (reaped["released"].as_i64(), reaped["finished"].as_i64()),
        (Some(0), Some(0)),
        "a live holder keeps its lock: {reaped}"
    );
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{:?}", first.json());
    assert!(!first.replayed(), "the holder itself committed");
    settle(&urls).await;
    assert_eq!(count(&ledger(&urls[1]).await, "debit", Some("K")), 1);
}
