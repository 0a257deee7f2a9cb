//! Crashes, restarts, outbox replays and key expiry.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::*;

/// A server-mock child process, killed if a test fails before it ends it.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server binary on `db`, with the port it printed.
pub(crate) fn spawn_binary(db: &str, extra: &[&str]) -> (Proc, String) {
    // Through sh only to switch core dumps off: the crash test aborts on purpose.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -c 0; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_server-mock"))
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server-mock");
    let stdout = child.stdout.take().expect("stdout");
    let child = Proc(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, format!("http://{addr}"))
}

pub(crate) async fn server_at(url: &str) -> TestServerRef {
    TestServerRef {
        url: url.to_string(),
        client: client(),
    }
}

/// A client for a server running in another process.
pub(crate) struct TestServerRef {
    url: String,
    pub(crate) client: reqwest::Client,
}

impl TestServerRef {
    pub(crate) async fn user(&self, name: &str, balance: i64) -> User {
        let r = self
            .client
            .post(format!("{}/v1/test/users", self.url))
            .json(&json!({"display_name": name, "balance_minor": balance, "currency": "BDT"}))
            .send()
            .await
            .unwrap();
        let j: serde_json::Value = r.json().await.unwrap();
        User {
            id: j["user_id"].as_str().unwrap().into(),
            token: j["token"].as_str().unwrap().into(),
        }
    }

    pub(crate) async fn send(
        &self,
        user: &User,
        key: &str,
        body: &str,
    ) -> Result<Resp, reqwest::Error> {
        let r = self
            .client
            .post(format!("{}/v1/transfers", self.url))
            .bearer_auth(&user.token)
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await?;
        Ok(to_resp(r).await)
    }

    /// GET `path` as JSON, with the bearer `token` if given.
    pub(crate) async fn get_json(&self, path: &str, token: Option<&str>) -> serde_json::Value {
        let mut req = self.client.get(format!("{}{path}", self.url));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        req.send().await.unwrap().json().await.unwrap()
    }

    pub(crate) async fn debits(&self, key: &str) -> usize {
        let r = self
            .client
            .get(format!("{}/v1/test/ledger", self.url))
            .send()
            .await
            .unwrap();
        let v: Vec<serde_json::Value> = r.json().await.unwrap();
        v.iter()
            .filter(|e| e["kind"] == "debit" && e["idempotency_key"] == key)
            .count()
    }
}

#[tokio::test]
async fn crash_between_key_insert_and_ledger_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "crash.db").await;
    let flags = ["--lock-timeout", "2s"];
    let (mut child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 4_200);
    let r = s
        .client
        .put(format!("{url}/v1/test/faults"))
        .json(&json!({"crash_after_key_insert": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        s.send(&a, "crash-key", &body).await.is_err(),
        "the process must die mid-request"
    );
    let status = child.0.wait().expect("wait");
    assert!(!status.success(), "aborted, not exited: {status:?}");

    // Restart on the same file; the key row is still IN_PROGRESS from the dead process.
    let (mut child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let first = s.send(&a, "crash-key", &body).await.unwrap();
    assert_eq!(first.status, 409, "still locked until the lock timeout");
    let mut done = None;
    for _ in 0..200 {
        let r = s.send(&a, "crash-key", &body).await.unwrap();
        if r.status == 201 {
            done = Some(r);
            break;
        }
        assert_eq!(r.status, 409);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = done.expect("the reaper released the key and the retry executed");
    assert!(
        !done.replayed(),
        "no money had moved, so the retry executes"
    );
    assert_eq!(s.debits("crash-key").await, 1);
    let replay = s.send(&a, "crash-key", &body).await.unwrap();
    assert_eq!(replay.body, done.body);

    // SIGTERM shuts the binary down cleanly.
    let term = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert!(child.0.wait().unwrap().success(), "clean exit on SIGTERM");
}

#[tokio::test]
async fn sigkill_during_gateway_step_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "kill.db").await;
    let (mut child, url) = spawn_binary(&db, &["--lock-timeout", "1s", "--gateway-delay", "3s"]);
    let s = server_at(&url).await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 1_234);
    let in_flight = {
        let (url, a, body) = (url.clone(), a.clone(), body.clone());
        tokio::spawn(async move { server_at(&url).await.send(&a, "kill-key", &body).await })
    };
    // The key row is committed at once; the gateway step then sleeps for 3 s.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kill = Command::new("kill")
        .args(["-KILL", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let _ = child.0.wait();
    assert!(
        in_flight.await.unwrap().is_err(),
        "the client lost its answer"
    );

    let (_child, url) = spawn_binary(&db, &["--lock-timeout", "1s"]);
    let s = server_at(&url).await;
    let mut done = None;
    for _ in 0..200 {
        let r = s.send(&a, "kill-key", &body).await.unwrap();
        if r.status == 201 {
            done = Some(r);
            break;
        }
        assert_eq!(r.status, 409, "{:?}", r.json());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        done.is_some(),
        "released after the lock timeout, then executed"
    );
    assert_eq!(s.debits("kill-key").await, 1);
}

#[tokio::test]
async fn outbox_replay_from_zero_changes_nothing() {
    let s = start_with(|c| c.gateway_delay = Duration::ZERO).await;
    let users = [
        s.user("A", 1_000_000).await,
        s.user("B", 1_000_000).await,
        s.user("C", 1_000_000).await,
        s.user("D", 0).await,
    ];
    for i in 0..100 {
        let to = if (i + 1) % 4 == i % 3 { 3 } else { (i + 1) % 4 };
        let (from, to) = (&users[i % 3], &users[to]);
        let r = s
            .transfer(
                &from.token,
                Some(&format!("t-{i}")),
                &transfer_body(&to.id, 100 + i as i64),
            )
            .await;
        assert_eq!(r.status, 201);
    }
    let before = s.settle().await;
    let mut balances = Vec::new();
    for u in &users {
        balances.push(s.balance(u).await);
    }
    let sms_before = s.get("/v1/test/sms", None).await.json();

    let r = s
        .post_json("/v1/test/outbox/replay", &json!({"from_event": 0}))
        .await;
    assert_eq!(r.json()["republished"], 100);
    let after = s.settle().await;
    assert_eq!(before, after);
    for (u, bal) in users.iter().zip(balances) {
        assert_eq!(s.balance(u).await, bal);
    }
    assert_eq!(s.get("/v1/test/sms", None).await.json(), sms_before);
    assert_eq!(after["credits"], 100);
    assert_eq!(after["sms_sent"], 100);
    let total: i64 = {
        let mut t = 0;
        for u in &users {
            t += s.balance(u).await;
        }
        t
    };
    assert_eq!(total, 3_000_000);
    s.stop().await;
}

#[tokio::test]
async fn key_reused_after_window_expiry_never_debits_twice() {
    let s = start_with(|c| {
        c.key_window = Duration::from_secs(2);
        c.lock_timeout = Duration::from_secs(1);
    })
    .await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 500);
    let first = s.transfer(&a.token, Some("old"), &body).await;
    assert_eq!(first.status, 201);

    // Move the server clock past the window and expire buckets now. A clock step alone
    // expires nothing (a step is not elapsed time): a claim stamped at the new time is what
    // moves expiry on, as traffic does.
    s.post_json("/v1/test/clock", &json!({"advance_ms": 10_000}))
        .await;
    let later = s
        .transfer(&a.token, Some("later"), &transfer_body(&b.id, 1))
        .await;
    assert_eq!(later.status, 201);
    // The advance wakes the reaper; an explicit pass makes the expiry certain.
    let reaped = s.post_json("/v1/test/reap", &json!({})).await;
    assert_eq!(reaped.status, 200);
    assert_eq!(
        s.get("/v1/test/stats", None).await.json()["idempotency_keys"],
        1,
        "only the key claimed after the step is left"
    );

    // The key row is gone, the ledger guard is not.
    let again = s.transfer(&a.token, Some("old"), &body).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(s.debits_for(&a, "old").await, 1);
    // A different body under the expired key is still refused.
    let other = s
        .transfer(&a.token, Some("old"), &transfer_body(&b.id, 9))
        .await;
    assert_eq!(other.status, 422);
    // The look-up works after expiry too.
    let look = s
        .get("/v1/transfers?idempotency_key=old", Some(&a.token))
        .await;
    assert_eq!(look.status, 200);
    s.settle().await;
    assert_eq!(s.balance(&a).await, 9_499);
    s.stop().await;
}

#[tokio::test]
async fn real_seconds_long_window_expires_by_bucket() {
    let s = start_with(|c| {
        c.key_window = Duration::from_secs(1);
        c.lock_timeout = Duration::from_millis(200);
    })
    .await;
    let (a, b) = (s.user("A", 10_000).await, s.user("B", 0).await);
    let body = transfer_body(&b.id, 500);
    assert_eq!(s.transfer(&a.token, Some("k"), &body).await.status, 201);
    let mut expired = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if s.get("/v1/test/stats", None).await.json()["idempotency_keys"] == 0 {
            expired = true;
            break;
        }
    }
    assert!(
        expired,
        "the reaper expires the bucket within a few seconds"
    );
    let again = s.transfer(&a.token, Some("k"), &body).await;
    assert_eq!(again.status, 201);
    assert_eq!(s.debits_for(&a, "k").await, 1);
    s.stop().await;
}

/// The relay commits its batches without an fsync of their own (`SqliteStore::publish_batch`):
/// a SIGKILL while transfers and relay batches are in flight must still leave every debit
/// credited and texted exactly once after the restart, and the money conserved.
#[tokio::test]
async fn sigkill_after_relay_batch_keeps_the_credit_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = fresh_db(dir.path(), "relay-kill.db").await;
    let flags = ["--gateway-delay", "0ms"];
    let (mut child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let (a, b) = (s.user("A", 1_000_000).await, s.user("B", 0).await);
    // Eight senders in flight; the process dies while the last ones (and their relay
    // batches) are still running, right after the 24th answer.
    let (tx, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for w in 0..8 {
        let (url, a, b, tx) = (url.clone(), a.clone(), b.clone(), tx.clone());
        tokio::spawn(async move {
            let s = server_at(&url).await;
            for i in 0..10 {
                let key = format!("relay-kill-{w}-{i}");
                let Ok(r) = s.send(&a, &key, &transfer_body(&b.id, 7)).await else {
                    return;
                };
                if tx.send((key, r.status)).is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let mut ok = Vec::new();
    while let Some((key, status)) = answered.recv().await {
        assert_eq!(status, 201);
        ok.push(key);
        if ok.len() == 24 {
            break;
        }
    }
    let kill = Command::new("kill")
        .args(["-KILL", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let _ = child.0.wait();
    while let Some((key, status)) = answered.recv().await {
        if status == 201 {
            ok.push(key);
        }
    }

    let (_child, url) = spawn_binary(&db, &flags);
    let s = server_at(&url).await;
    let r = s
        .client
        .post(format!("{url}/v1/test/settle"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let stats: serde_json::Value = r.json().await.unwrap();
    assert_eq!(stats["outbox_pending"], 0, "{stats}");
    for key in &ok {
        assert_eq!(s.debits(key).await, 1, "{key}");
    }
    let ledger = s.get_json("/v1/test/ledger", None).await;
    let ledger = ledger.as_array().unwrap();
    let count = |kind: &str| ledger.iter().filter(|e| e["kind"] == kind).count();
    let debits = count("debit");
    assert!(debits >= ok.len(), "every answered 201 is a debit");
    assert_eq!(count("credit"), debits, "each debit credited once");
    assert_eq!(stats["credits"], debits);
    assert_eq!(stats["sms_sent"], debits, "each debit texted once");
    let wallet = |u: &User| {
        let token = u.token.clone();
        let s = &s;
        async move {
            s.get_json("/v1/wallet", Some(&token)).await["balance_minor"]
                .as_i64()
                .unwrap()
        }
    };
    let (from, to) = (wallet(&a).await, wallet(&b).await);
    assert_eq!(to, 7 * debits as i64);
    assert_eq!(from + to, 1_000_000, "money conserved");
}
