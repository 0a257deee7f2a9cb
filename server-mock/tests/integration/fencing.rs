//! A request that outlives its key lock never moves money behind the server's back.
//!
//! Every test ends with the one rule that matters: every answer ever given for a key
//! agrees with the ledger at the end (a 2xx names the key's one debit; a 402 or a by-key
//! 404 means no debit for that key, then or later; at most one debit per key; every
//! debit has its credit).

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::common::*;
use crate::recovery::{server_at, spawn_binary};

/// What an answer claims about the money under its key.
#[derive(Debug, Clone, PartialEq)]
enum Said {
    /// Moved, as this transfer.
    Moved(String),
    /// Nothing moved (402, or a by-key look-up's `transfer_not_found`).
    NotMoved(u16),
    /// Says nothing definitive (409, 5xx, a validation error).
    Nothing,
}

fn said(r: &Resp) -> Said {
    match r.status {
        200..=299 => Said::Moved(r.json()["transfer_id"].as_str().unwrap_or("?").to_string()),
        402 => Said::NotMoved(402),
        404 if r.code() == "transfer_not_found" => Said::NotMoved(404),
        _ => Said::Nothing,
    }
}

/// The rule, over every answer given for `user`'s keys and the ledger at the end.
fn assert_agrees(user: &User, answers: &[(String, Resp)], ledger: &[Value]) {
    let mut debits: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in ledger
        .iter()
        .filter(|e| e["kind"] == "debit" && e["user_id"] == user.id.as_str())
    {
        debits
            .entry(e["idempotency_key"].as_str().unwrap_or_default())
            .or_default()
            .push(e["transfer_id"].as_str().unwrap_or_default());
    }
    for (key, ids) in &debits {
        assert_eq!(ids.len(), 1, "key {key}: more than one debit {ids:?}");
    }
    for (key, r) in answers {
        let debit = debits.get(key.as_str()).map(|ids| ids[0]);
        match said(r) {
            Said::Moved(id) => assert_eq!(
                debit,
                Some(id.as_str()),
                "key {key}: answered {} {} but the ledger has {debit:?}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Said::NotMoved(status) => assert_eq!(
                debit, None,
                "key {key}: answered {status} (no money moved) but the ledger has a debit"
            ),
            Said::Nothing => {}
        }
    }
    let sum = |kind: &str| -> i64 {
        ledger
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["amount_minor"].as_i64().unwrap_or(0))
            .sum()
    };
    assert_eq!(
        sum("debit"),
        sum("credit"),
        "money conserved once the outbox drained"
    );
}

/// Every gateway authorisation ended captured by a debit or voided: no customer's funds stay
/// held for a key whose outcome does not use them (`stats` once every key has its outcome).
fn assert_gateway_settled(stats: &Value, ledger: &[Value]) {
    let debits = ledger.iter().filter(|e| e["kind"] == "debit").count() as i64;
    let n = |field: &str| stats[field].as_i64().unwrap_or(0);
    assert_eq!(
        n("gateway_authorizations"),
        debits + n("gateway_voids"),
        "every authorisation captured (a debit) or voided: {stats}"
    );
    assert_eq!(
        n("gateway_captures"),
        debits,
        "each debit captured one: {stats}"
    );
}

async fn lookup(s: &TestServer, user: &User, key: &str) -> Resp {
    s.get(
        &format!("/v1/transfers?idempotency_key={key}"),
        Some(&user.token),
    )
    .await
}

/// Waits until the reaper has taken every key out of `IN_PROGRESS`.
async fn until_no_key_in_progress(s: &TestServer) {
    for _ in 0..400 {
        if s.get("/v1/test/stats", None).await.json()["keys_in_progress"] == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("a key stayed in progress");
}

/// A slow first request loses its lease; a by-key look-up meanwhile says 404; then the
/// first request reaches its commit. Returns every answer, the ledger and the first's.
async fn lost_lease_then_lookup(fenced: bool) -> (User, Vec<(String, Resp)>, Vec<Value>, Resp) {
    let s = start_with(|c| {
        c.lock_timeout = Duration::from_secs(1);
        if !fenced {
            *c = c.clone().without_fence().expect("a test-only build");
        }
    })
    .await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 500);
    s.faults(json!({"gateway_delay_ms": 4000})).await;
    let first = s.post_in_background(&a, "K", &body);
    until_key_in_progress(&s).await;
    until_no_key_in_progress(&s).await; // the reaper released the slow request's key
    let looked = lookup(&s, &a, "K").await;
    assert_eq!(looked.code(), "transfer_not_found");
    assert!(
        !looked.replayed(),
        "the look-up that closes the key gives a first answer"
    );
    let first = first.await.unwrap();
    let late = s.transfer(&a.token, Some("K"), &body).await;
    assert_ne!(
        late.status,
        201,
        "the look-up closed the key: {:?}",
        late.json()
    );
    assert_eq!(
        (late.code(), late.replayed()),
        ("transfer_not_found".into(), true)
    );
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    // The slow request's authorisation, written after the key was closed, is voided (fenced)
    // or captured by its debit (unfenced).
    assert_gateway_settled(&stats, &ledger);
    s.stop().await;
    let answers = vec![
        ("K".into(), looked),
        ("K".into(), first.clone()),
        ("K".into(), late),
    ];
    (a, answers, ledger, first)
}

#[tokio::test]
async fn a_lookup_404_during_a_lost_lease_stays_true() {
    let (a, answers, ledger, first) = lost_lease_then_lookup(true).await;
    assert_eq!(first.status, 409, "lost its lock: moves nothing, retryable");
    assert_agrees(&a, &answers, &ledger);
    assert!(ledger.iter().all(|e| e["idempotency_key"] != "K"));
}

/// The same run without the fence (test-only build, feature `unfenced`): the slow request
/// debits after the server said "not executed" — exactly what the fence prevents.
#[cfg(feature = "unfenced")]
#[tokio::test]
async fn without_the_fence_a_lost_lease_debits_after_a_404() {
    let (a, answers, ledger, first) = lost_lease_then_lookup(false).await;
    assert_eq!(
        first.status, 201,
        "unfenced, the lost lease still moves money"
    );
    let broken = std::panic::catch_unwind(|| assert_agrees(&a, &answers, &ledger));
    assert!(broken.is_err(), "the rule must catch the unfenced design");
}

/// A slow first request loses its lease; the user spends the balance under another key;
/// the retry of the first key gets a stored 402. Returns every answer and the ledger.
async fn lost_lease_then_402() -> (User, Vec<(String, Resp)>, Vec<Value>, Resp) {
    let s = start_with(|c| c.lock_timeout = Duration::from_secs(1)).await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 800);
    s.faults(json!({"gateway_delay_ms": 3000})).await;
    let first = s.post_in_background(&a, "K", &body);
    until_key_in_progress(&s).await;
    until_no_key_in_progress(&s).await;
    s.faults(json!({"gateway_delay_ms": 0})).await;
    let other = s.transfer(&a.token, Some("K2"), &body).await;
    assert_eq!(other.status, 201, "the balance is spent under another key");
    let retry = s.transfer(&a.token, Some("K"), &body).await;
    assert_eq!(retry.status, 402);
    let first = first.await.unwrap();
    let replay = s.transfer(&a.token, Some("K"), &body).await;
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    // The slow request authorised after K's 402 was stored: that authorisation is voided.
    assert_gateway_settled(&stats, &ledger);
    s.stop().await;
    let answers = vec![
        ("K".into(), first.clone()),
        ("K".into(), retry),
        ("K".into(), replay),
        ("K2".into(), other),
    ];
    (a, answers, ledger, first)
}

#[tokio::test]
async fn a_stored_402_is_never_followed_by_the_slow_requests_debit() {
    let (a, answers, ledger, first) = lost_lease_then_402().await;
    assert_eq!(first.status, 409, "fenced: {:?}", first.json());
    let replay = &answers[2].1;
    assert_eq!((replay.status, replay.replayed()), (402, true));
    assert_agrees(&a, &answers, &ledger);
}

#[tokio::test]
async fn a_server_clock_jump_cannot_expire_a_live_lease() {
    let s = start_default().await; // 60 s lock
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 700);
    s.faults(json!({"gateway_delay_ms": 3000})).await;
    let first = s.post_in_background(&a, "K", &body);
    until_key_in_progress(&s).await;
    let jump = s
        .post_json("/v1/test/clock", &json!({"advance_ms": 120_000}))
        .await;
    assert_eq!(jump.status, 200);
    let reaped = s.post_json("/v1/test/reap", &json!({})).await.json();
    assert_eq!(
        reaped["released"], 0,
        "a live lease survives the jump: {reaped}"
    );
    let looked = lookup(&s, &a, "K").await;
    assert_eq!(looked.code(), "idempotency_key_in_use");
    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    assert_agrees(&a, &[("K".into(), looked), ("K".into(), first)], &ledger);
    assert_gateway_settled(&stats, &ledger);
    s.stop().await;
}

async fn until_key_in_progress(s: &TestServer) {
    for _ in 0..400 {
        if s.get("/v1/test/stats", None).await.json()["keys_in_progress"] == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the key was never claimed");
}

#[tokio::test]
async fn a_finished_key_replays_before_validation() {
    let s = start_default().await;
    let (a, b, c) = (
        s.user("A", 1_000).await,
        s.user("B", 0).await,
        s.user("C", 0).await,
    );
    let paid = transfer_body(&b.id, 600);
    let first = s.transfer(&a.token, Some("paid"), &paid).await;
    assert_eq!(first.status, 201);
    let refused = transfer_body(&c.id, 5_000);
    assert_eq!(
        s.transfer(&a.token, Some("refused"), &refused).await.status,
        402
    );

    let gone = s
        .client
        .delete(format!("{}/v1/test/users/{}", s.url, b.id))
        .send()
        .await;
    assert_eq!(gone.unwrap().status(), 200);
    let limits = s
        .put_json("/v1/test/limits", &json!({"max_amount_minor": 100}))
        .await;
    assert_eq!(limits.status, 200);

    let again = s.transfer(&a.token, Some("paid"), &paid).await;
    assert_eq!(
        (again.status, again.replayed()),
        (201, true),
        "{:?}",
        again.json()
    );
    assert_eq!(again.body, first.body);
    let again = s.transfer(&a.token, Some("refused"), &refused).await;
    assert_eq!(
        (again.status, again.replayed()),
        (402, true),
        "{:?}",
        again.json()
    );
    // A new key still validates against today's rules.
    let fresh = s.transfer(&a.token, Some("new"), &paid).await;
    assert_eq!(fresh.code(), "invalid_request", "over the lowered limit");
    s.stop().await;
}

#[tokio::test]
async fn killed_after_the_gateway_authorised_then_restarted_one_authorisation_one_debit() {
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "auth.db").await;
    let (mut child, url) = spawn_binary(&db, &["--lock-timeout", "1s"]);
    let s = server_at(&url).await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 4_321);
    let fault = s
        .client
        .put(format!("{url}/v1/test/faults"))
        .json(&json!({"crash_after_gateway": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(fault.status(), 200);
    assert!(
        s.send(&a, "K", &body).await.is_err(),
        "the process died mid-request"
    );
    let _ = child.0.wait();

    let (_child, url) = spawn_binary(&db, &["--lock-timeout", "1s"]);
    let s = server_at(&url).await;
    let mut answer = None;
    for _ in 0..200 {
        let r = s.send(&a, "K", &body).await.unwrap();
        if r.status != 409 {
            answer = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let answer = answer.expect("the key was resolved after the restart");
    assert_eq!(answer.status, 201, "{:?}", answer.json());
    assert_eq!(s.debits("K").await, 1);
    let stats: Value = s
        .client
        .get(format!("{url}/v1/test/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["gateway_authorizations"], 1, "{stats}");
    assert_eq!(
        stats["gateway_calls"], 1,
        "finished from the record, not re-authorised: {stats}"
    );
    let ledger = s.get_json("/v1/test/ledger", None).await;
    assert_gateway_settled(&stats, ledger.as_array().unwrap());
}

/// A 402 stored after the gateway authorised (the balance spent under another key while
/// this request was in the gateway): the authorisation is voided with the 402.
#[tokio::test]
async fn a_402_stored_after_authorisation_voids_it() {
    let s = start_default().await; // 60 s lock: nobody loses a lease here
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 800);
    s.faults(json!({"gateway_delay_ms": 1500})).await;
    let first = s.post_in_background(&a, "K", &body);
    until_key_in_progress(&s).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // K is asleep in the gateway
    s.faults(json!({"gateway_delay_ms": 0})).await;
    let other = s.transfer(&a.token, Some("K2"), &body).await;
    assert_eq!(other.status, 201, "the balance is spent under another key");
    let first = first.await.unwrap();
    assert_eq!(
        first.status,
        402,
        "authorised, then refused: {:?}",
        first.json()
    );
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    assert_eq!(stats["gateway_authorizations"], 2, "{stats}");
    assert_gateway_settled(&stats, &ledger);
    assert_agrees(&a, &[("K".into(), first), ("K2".into(), other)], &ledger);
    s.stop().await;
}

/// A commit that fails after the gateway authorised releases the key and voids the
/// authorisation; the retry gets a fresh one, which its debit captures.
#[tokio::test]
async fn a_failed_commit_voids_the_authorisation_and_the_retry_gets_a_fresh_one() {
    let s = start_default().await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 300);
    s.faults(json!({"fail_commit_rate": 1.0})).await;
    let failed = s.transfer(&a.token, Some("K"), &body).await;
    assert_eq!(failed.status, 500, "{:?}", failed.json());
    let stats = s.get("/v1/test/stats", None).await.json();
    assert_eq!(stats["keys_in_progress"], 0, "released: {stats}");
    assert_gateway_settled(&stats, &s.ledger().await);
    s.faults(json!({"fail_commit_rate": 0.0})).await;
    let retry = s.transfer(&a.token, Some("K"), &body).await;
    assert_eq!(retry.status, 201, "{:?}", retry.json());
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    assert_eq!(
        (&stats["gateway_authorizations"], &stats["gateway_voids"]),
        (&json!(2), &json!(1)),
        "{stats}"
    );
    assert_gateway_settled(&stats, &ledger);
    assert_agrees(&a, &[("K".into(), failed), ("K".into(), retry)], &ledger);
    s.stop().await;
}

/// A key reused with another body after its row expired, the process killed after the
/// gateway authorised: the reaper must not complete the new body's key with the old body's
/// debit, so the retry of the new body gets 422, never a 201 replay of money it did not move.
#[tokio::test]
async fn a_reused_key_killed_after_the_gateway_is_not_completed_with_the_old_debit() {
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "reused.db").await;
    let flags = ["--lock-timeout", "1s", "--key-window", "1h"];
    let (mut child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let old = transfer_body(&b.id, 1_000);
    assert_eq!(s.send(&a, "K", &old).await.unwrap().status, 201);
    let post = |path: &'static str, body: Value| {
        let (client, url) = (s.client.clone(), url.clone());
        async move {
            let r = client.post(format!("{url}{path}")).json(&body).send().await;
            r.unwrap().json::<Value>().await.unwrap()
        }
    };
    post("/v1/test/clock", json!({"advance_ms": 3 * 3_600_000})).await;
    // A clock step alone expires nothing: a claim stamped at the new time moves expiry on.
    let later = s.send(&a, "later", &transfer_body(&b.id, 1)).await.unwrap();
    assert_eq!(later.status, 201);
    post("/v1/test/reap", json!({})).await;
    let stats = s.get_json("/v1/test/stats", None).await;
    assert_eq!(stats["idempotency_keys"], 1, "K's row expired: {stats}");

    let fault = s
        .client
        .put(format!("{url}/v1/test/faults"))
        .json(&json!({"crash_after_gateway": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(fault.status(), 200);
    let new = transfer_body(&b.id, 2_000);
    assert!(
        s.send(&a, "K", &new).await.is_err(),
        "the process died after the gateway"
    );
    let _ = child.0.wait();

    let (_child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let mut answer = None;
    for _ in 0..200 {
        let r = s.send(&a, "K", &new).await.unwrap();
        if r.status != 409 {
            answer = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let answer = answer.expect("the key was resolved after the restart");
    assert_eq!(
        (answer.status, answer.code()),
        (422, "idempotency_key_reused".to_string()),
        "the old body's debit is not this body's: {:?}",
        answer.json()
    );
    assert_eq!(s.debits("K").await, 1, "only the old body's debit");
    let again = s.send(&a, "K", &old).await.unwrap();
    assert_eq!(
        (again.status, again.replayed()),
        (201, true),
        "the old body still replays"
    );
    // The old body's authorisation was captured and has expired with its window; each one
    // taken since is voided, since no outcome after the expiry moved money.
    let stats = s.get_json("/v1/test/stats", None).await;
    assert_eq!(
        stats["gateway_authorizations"].as_i64(),
        Some(
            stats["gateway_captures"].as_i64().unwrap_or(0)
                + stats["gateway_voids"].as_i64().unwrap_or(0)
        ),
        "{stats}"
    );
}

/// One step of a random run.
#[derive(Debug, Clone)]
enum Step {
    /// POST key `k`, its gateway step taking `gateway` (0–3× the lock timeout).
    Post { k: usize, amount: i64, gateway: u64 },
    /// A by-key look-up.
    Lookup { k: usize },
    /// A reaper pass.
    Reap,
    /// The server's wall clock jumps (either way).
    Jump { ms: i64 },
    /// Time passes.
    Pause { ms: u64 },
}

const LOCK_MS: u64 = 150;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, 1..5i64, 0..=3 * LOCK_MS)
            .prop_map(|(k, amount, gateway)| Step::Post { k, amount: amount * 100, gateway }),
        2 => (0..3usize).prop_map(|k| Step::Lookup { k }),
        2 => Just(Step::Reap),
        1 => prop_oneof![Just(-3_600_000i64), Just(-1_000), Just(1_000), Just(3_600_000)]
            .prop_map(|ms| Step::Jump { ms }),
        2 => (0..2 * LOCK_MS).prop_map(|ms| Step::Pause { ms }),
    ]
}

async fn random_run(steps: Vec<Step>) {
    let s = start_with(|c| c.lock_timeout = Duration::from_millis(LOCK_MS)).await;
    let (a, b) = (s.user("A", 1_000).await, s.user("B", 0).await);
    let mut pending = Vec::new();
    let mut answers = Vec::new();
    let body =
        |k: usize, amount: i64| (format!("key-{k}"), transfer_body(&b.id, amount + k as i64));
    // One body per key (the same request retried), fixed by its first POST.
    let mut bodies: HashMap<usize, (String, String)> = HashMap::new();
    for st in steps {
        match st {
            Step::Post { k, amount, gateway } => {
                s.faults(json!({"gateway_delay_ms": gateway})).await;
                let (key, text) = bodies.entry(k).or_insert_with(|| body(k, amount)).clone();
                pending.push((key.clone(), s.post_in_background(&a, &key, &text)));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Step::Lookup { k } => {
                let key = format!("key-{k}");
                answers.push((key.clone(), lookup(&s, &a, &key).await));
            }
            Step::Reap => {
                assert_eq!(s.post_json("/v1/test/reap", &json!({})).await.status, 200);
            }
            Step::Jump { ms } => {
                let r = s
                    .post_json("/v1/test/clock", &json!({"advance_ms": ms}))
                    .await;
                assert_eq!(r.status, 200);
            }
            Step::Pause { ms } => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }
    for (key, task) in pending {
        answers.push((key, task.await.unwrap()));
    }
    // Retries until each key is decided, then a look-up of every key.
    s.faults(json!({"gateway_delay_ms": 0})).await;
    for (key, text) in bodies.values() {
        answers.push((
            key.clone(),
            s.transfer_until_done(&a.token, key, text).await,
        ));
        answers.push((key.clone(), lookup(&s, &a, key).await));
    }
    let stats = s.settle().await;
    let ledger = s.ledger().await;
    assert_agrees(&a, &answers, &ledger);
    assert_gateway_settled(&stats, &ledger);
    s.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn every_answer_agrees_with_the_ledger(steps in proptest::collection::vec(step(), 4..14)) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(random_run(steps));
    }
}
