//! Long transactions on the shared database (PostgreSQL only): a session frozen inside a
//! transaction — a SIGSTOPped instance, a VM pause, an idle `psql` — holds its row locks,
//! and nothing else may stall behind it for longer than the lock timeout.
//!
//! The frozen session is played by a plain connection of the test (what `psql` would do),
//! so its locks are exactly those of an instance stopped between two statements.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::timeout;

use crate::common::*;
use crate::instances::{count, get, instances, ledger, post, send, settle, until_done, user};

/// "Answers within 5 s" (the issue's bound: a hang, not a latency target).
const ANSWERS_WITHIN: Duration = Duration::from_secs(5);

/// A connection of its own, as `psql` would open.
pub(crate) async fn session(db: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

fn retryable(r: &Resp) -> bool {
    (r.status == 409 || r.status == 503) && r.headers.contains_key("retry-after")
}

#[tokio::test]
async fn a_transaction_frozen_on_a_balance_row_stalls_nobody_else() {
    let Some((db, all)) = instances(2, &["--lock-timeout", "1s"]).await else {
        return;
    };
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let r = user(&urls[0], "R", 100_000).await;
    let s = user(&urls[1], "S", 100_000).await;
    let t = user(&urls[0], "T", 0).await;

    // BEGIN; UPDATE balances SET balance_minor = balance_minor WHERE user_id = 'R'; (held)
    let frozen = session(&db).await;
    frozen.batch_execute("BEGIN").await.unwrap();
    let locked = frozen
        .execute(
            "UPDATE balances SET balance_minor = balance_minor WHERE user_id = $1",
            &[&r.id],
        )
        .await
        .unwrap();
    assert_eq!(locked, 1, "R's balance row is held");

    // A transfer from R answers, retryably, instead of queueing behind the frozen session.
    let r_body = transfer_body(&t.id, 1_000);
    let first = timeout(ANSWERS_WITHIN, send(&urls[1], &r, "r-key", &r_body))
        .await
        .expect("a transfer from R answers within 5 s")
        .expect("answer");
    assert!(
        retryable(&first),
        "retryable with Retry-After, nothing stored: {} {:?}",
        first.status,
        first.json()
    );

    // Its key does not stay in progress: reaps on both instances bring the count to 0.
    let mut in_progress = Value::Null;
    for _ in 0..40 {
        for url in &urls {
            timeout(ANSWERS_WITHIN, post(url, "/v1/test/reap", json!({})))
                .await
                .expect("a reaper pass returns within 5 s");
        }
        in_progress = get(&urls[0], "/v1/test/stats").await["keys_in_progress"].clone();
        if in_progress == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(in_progress, 0, "R's key was left in progress");

    // Other users keep transferring on both instances, also to R (a credit that must wait).
    for (i, url) in urls.iter().enumerate() {
        let key = format!("s-key-{i}");
        let done = timeout(
            ANSWERS_WITHIN,
            send(url, &s, &key, &transfer_body(&t.id, 10)),
        )
        .await
        .expect("another user's transfer answers within 5 s")
        .expect("answer");
        assert_eq!(done.status, 201, "{key}: {:?}", done.json());
    }
    let to_r = timeout(
        ANSWERS_WITHIN,
        send(&urls[0], &s, "s-to-r", &transfer_body(&r.id, 5)),
    )
    .await
    .expect("a transfer to R answers within 5 s")
    .expect("answer");
    assert_eq!(to_r.status, 201, "{:?}", to_r.json());

    // The outbox keeps draining for the others while R's credit waits for its row.
    let mut credited = 0;
    for _ in 0..100 {
        let entries = ledger(&urls[1]).await;
        credited =
            count(&entries, "credit", Some("s-key-0")) + count(&entries, "credit", Some("s-key-1"));
        if credited == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(credited, 2, "T's credits were held up behind R's row");

    // After ROLLBACK, R's retry (same key, same bytes) succeeds, once.
    frozen.batch_execute("ROLLBACK").await.unwrap();
    let done = until_done(&urls, &r, "r-key", &r_body).await;
    assert_eq!(done.status, 201, "{:?}", done.json());
    settle(&urls).await;
    let entries = ledger(&urls[0]).await;
    assert_eq!(count(&entries, "debit", Some("r-key")), 1, "one debit");
    assert_eq!(count(&entries, "credit", Some("r-key")), 1, "one credit");
    assert_eq!(
        count(&entries, "credit", Some("s-to-r")),
        1,
        "R credited once"
    );
    drop(all);
}

const DAY_MS: i64 = 86_400_000;
/// `partitions::EXPIRE_LOCK`: the expiry's advisory lock, as another instance holds it.
const EXPIRE_LOCK: i64 = 0x5345_4e44_0003;

/// The key table's partitions' buckets, oldest first.
async fn buckets(db: &str) -> Vec<i64> {
    let c = session(db).await;
    let mut b: Vec<i64> = c
        .query(
            "SELECT substring(c.relname from 'idempotency_keys_b([0-9]+)$')::bigint
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'idempotency_keys'::regclass",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .filter_map(|r| r.get::<_, Option<i64>>(0))
        .collect();
    b.sort();
    b
}

#[tokio::test]
async fn partition_ddl_and_expiry_do_not_stall_behind_a_long_transaction() {
    let lease = 2; // --lock-timeout, seconds
    let lease_arg = format!("{lease}s");
    let Some((db, mut all)) = instances(2, &["--lock-timeout", &lease_arg]).await else {
        return;
    };
    // A third instance, slow at the gateway: its key will be in progress when it is killed.
    let (proc, url) = crate::recovery::spawn_binary(
        &db,
        &["--lock-timeout", &lease_arg, "--gateway-delay", "30s"],
    );
    all.push(crate::instances::Instance { proc, url });
    let urls: Vec<String> = all.iter().map(|i| i.url.clone()).collect();
    let a = user(&urls[0], "A", 100_000).await;
    let b = user(&urls[1], "B", 0).await;
    // Today's partitions exist (a first claim makes them; a reaper pass makes those ahead).
    let warm = send(&urls[0], &a, "warm", &transfer_body(&b.id, 1))
        .await
        .unwrap();
    assert_eq!(warm.status, 201);
    post(&urls[0], "/v1/test/reap", json!({})).await;
    // An expired day's partition, so every reaper wants the expiry's lock.
    let oldest = *buckets(&db).await.first().expect("partitions");
    let c = session(&db).await;
    c.batch_execute(&format!(
        "CREATE TABLE idempotency_keys_b{old} PARTITION OF idempotency_keys
             FOR VALUES FROM ({old}) TO ({next})",
        old = oldest - 5,
        next = oldest - 4
    ))
    .await
    .unwrap();
    drop(c);

    // Elsewhere: the expiry's lock held (another instance's DETACH waiting), and a long
    // transaction reading the key table: BEGIN; SELECT count(*) FROM idempotency_keys;
    let elsewhere = session(&db).await;
    elsewhere
        .execute("SELECT pg_advisory_lock($1)", &[&EXPIRE_LOCK])
        .await
        .unwrap();
    let long = session(&db).await;
    long.batch_execute("BEGIN; SELECT count(*) FROM idempotency_keys")
        .await
        .unwrap();

    // One instance's day turns: its reaper wants the next partition (ACCESS EXCLUSIVE).
    post(&urls[0], "/v1/test/clock", json!({"advance_ms": DAY_MS})).await;
    let reap = {
        let url = urls[0].clone();
        tokio::spawn(async move { post(&url, "/v1/test/reap", json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A fresh key on another instance answers, not queued behind the DDL.
    let fresh = timeout(
        ANSWERS_WITHIN,
        send(&urls[1], &a, "fresh", &transfer_body(&b.id, 10)),
    )
    .await
    .expect("a fresh key answers within 5 s")
    .expect("answer");
    assert_eq!(fresh.status, 201, "{:?}", fresh.json());
    timeout(ANSWERS_WITHIN, reap)
        .await
        .expect("the reaper pass returns within 5 s")
        .unwrap();

    // A key whose holder is SIGKILLed resolves within 3x the lease, the expiry's lock
    // held elsewhere all along.
    let in_flight = {
        let (url, a, body) = (urls[2].clone(), a.clone(), transfer_body(&b.id, 20));
        tokio::spawn(async move { send(&url, &a, "killed", &body).await })
    };
    for _ in 0..500 {
        if get(&urls[1], "/v1/test/stats").await["keys_in_progress"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(get(&urls[1], "/v1/test/stats").await["keys_in_progress"], 1);
    let pid = all[2].proc.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap()
        .success());
    let killed_at = tokio::time::Instant::now();
    assert!(in_flight.await.unwrap().is_err(), "the holder died");
    let resolved = timeout(Duration::from_secs(3 * lease), async {
        while get(&urls[1], "/v1/test/stats").await["keys_in_progress"] != 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        resolved.is_ok(),
        "the dead holder's key was still in progress {:?} after the kill",
        killed_at.elapsed()
    );

    // Once the long transaction and the lock are gone, the next passes catch up: the
    // partitions ahead are made and the expired day is dropped.
    long.batch_execute("ROLLBACK").await.unwrap();
    elsewhere
        .execute("SELECT pg_advisory_unlock($1)", &[&EXPIRE_LOCK])
        .await
        .unwrap();
    let mut left = Vec::new();
    for _ in 0..40 {
        // A pass that finds another instance's reaper expiring skips; the next one looks again.
        post(&urls[1], "/v1/test/reap", json!({})).await;
        left = buckets(&db).await;
        if !left.contains(&(oldest - 5)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !left.contains(&(oldest - 5)),
        "the expired day is dropped: {left:?}"
    );
    let done = until_done(&urls[..2], &a, "killed", &transfer_body(&b.id, 20)).await;
    assert_eq!(done.status, 201);
    drop(all);
}
