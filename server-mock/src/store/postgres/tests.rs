//! The PostgreSQL store against a real cluster (`SENDONCE_TEST_POSTGRES`, what
//! `scripts/pg start` prints; the `postgres` stage of scripts/test-all sets it). Without
//! it these tests say so and pass: the `test` stage has no cluster.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::store::{Fixtures, NewUser};

/// A store on a fresh database of the test cluster, or `None` without one.
pub(super) async fn fresh(pool_size: usize) -> Option<PgStore> {
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("skipped: SENDONCE_TEST_POSTGRES is not set (scripts/pg start prints it)");
        return None;
    };
    let url = fresh_database(&url, "u").await.expect("a fresh database");
    Some(
        PgStore::open(
            &url,
            pool_size,
            crate::config::DbTimeouts::default(),
            Instance::new(),
            std::sync::Arc::default(),
        )
        .await
        .expect("open"),
    )
}

#[tokio::test]
async fn a_forced_serialization_failure_is_retried_and_then_given_up() {
    let Some(store) = fresh(4).await else { return };
    let runs = AtomicU32::new(0);
    let out: Result<u32, DbError> = in_transaction!(&store, |tx| {
        let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            tx.batch_execute(
                "DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'serialization_failure'; END $$",
            )
            .await?;
        }
        n
    });
    assert_eq!(out.unwrap(), 2, "the second attempt commits");
    assert_eq!(store.retries(), 1);

    let always: Result<(), DbError> = in_transaction!(&store, |tx| {
        tx.batch_execute(
            "DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'deadlock_detected'; END $$",
        )
        .await?
    });
    let e = always.unwrap_err();
    assert!(matches!(e, DbError::Conflict(MAX_ATTEMPTS)), "{e}");
    assert_eq!(
        crate::problem::from_db(e).status.as_u16(),
        503,
        "a bounded 503, not a 500"
    );

    let other: Result<(), DbError> =
        in_transaction!(&store, |tx| tx.batch_execute("SELECT 1/0").await?);
    assert!(
        !is_conflict(&other.unwrap_err()),
        "other errors are not retried"
    );
    assert_eq!(store.retries(), 1 + u64::from(MAX_ATTEMPTS - 1));
}

#[tokio::test]
async fn a_real_deadlock_between_two_transactions_is_retried_until_both_commit() {
    let Some(store) = fresh(4).await else { return };
    let store = Arc::new(store);
    let c = store.client().await.unwrap();
    c.batch_execute(
        "CREATE TABLE pair (id INT PRIMARY KEY, v INT); INSERT INTO pair VALUES (1, 0), (2, 0)",
    )
    .await
    .unwrap();
    drop(c);
    // Both lock their first row, meet at the barrier, then want the other's: a cycle.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let run = |first: i32, second: i32| {
        let (store, barrier) = (store.clone(), barrier.clone());
        tokio::spawn(async move {
            let met = std::sync::atomic::AtomicBool::new(false);
            let out: Result<(), DbError> = in_transaction!(&store, |tx| {
                tx.execute("UPDATE pair SET v = v + 1 WHERE id = $1", &[&first])
                    .await?;
                if !met.swap(true, Ordering::SeqCst) {
                    barrier.wait().await;
                }
                tx.execute("UPDATE pair SET v = v + 1 WHERE id = $1", &[&second])
                    .await?;
            });
            out
        })
    };
    let (a, b) = tokio::join!(run(1, 2), run(2, 1));
    a.unwrap().unwrap();
    b.unwrap().unwrap();
    assert!(
        store.retries() >= 1,
        "PostgreSQL broke the cycle with 40P01"
    );
    let c = store.client().await.unwrap();
    let sum: i64 = c
        .query_one("SELECT SUM(v)::BIGINT FROM pair", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sum, 4, "each transaction applied exactly once");
}

/// The heartbeat beats on a connection of its own: requests that pin every pooled
/// connection (each waiting out a lock held by a frozen session) must not silence it, or
/// the peers would judge a live instance dead and take its keys.
#[tokio::test]
async fn the_heartbeat_beats_while_every_pooled_connection_is_taken() {
    let Some(store) = fresh(1).await else { return };
    let pinned = store.client().await.unwrap();
    let id = store.instance.id.to_string();
    let before = mono_of(&pinned, &id).await;
    let mut beat = false;
    // Well below the pool's wait (POOL_WAIT, 2 s): a heartbeat queued for the pool stays silent.
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if mono_of(&pinned, &id).await > before {
            beat = true;
            break;
        }
    }
    assert!(beat, "no heartbeat while the pool was taken");
}

/// The heartbeat value of instance `id`.
async fn mono_of(c: &tokio_postgres::Client, id: &str) -> i64 {
    c.query_one(
        "SELECT mono_ms FROM server_instances WHERE instance_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn an_exhausted_pool_answers_busy_not_a_hang() {
    let Some(store) = fresh(1).await else { return };
    let held = store.client().await.unwrap();
    let e = store.balance("u".into()).await.unwrap_err();
    assert!(matches!(e, DbError::Busy), "{e}");
    let p = crate::problem::from_db(e);
    assert_eq!((p.status.as_u16(), p.retry_after), (503, Some(1)));
    drop(held);
    assert_eq!(store.balance("u".into()).await.unwrap(), 0, "usable again");
}

#[tokio::test]
async fn a_long_dead_instances_heartbeat_row_is_removed_but_not_one_that_beat_again() {
    let Some(store) = fresh(4).await else { return };
    let client = store.client().await.unwrap();
    client
        .batch_execute("INSERT INTO server_instances VALUES ('ghost', 5), ('revived', 9)")
        .await
        .unwrap();
    let lock = Duration::from_millis(300);
    let observer = lease::Observer::default();
    let t0 = Instant::now();
    let h = heartbeat::holders(&client, (&observer, &store.instance.id), t0, lock)
        .await
        .unwrap();
    assert!(h.contains_key("ghost") && h.contains_key("revived"));
    let forget = lease::forget_after(lock);
    assert_eq!(
        heartbeat::forget_silent(
            &client,
            (&observer, &store.instance.id),
            t0 + forget / 2,
            forget
        )
        .await
        .unwrap(),
        0,
        "dead, but not for long enough"
    );
    // 'revived' beats after this observer last read it and before it removes.
    client
        .batch_execute("UPDATE server_instances SET mono_ms = 10 WHERE instance_id = 'revived'")
        .await
        .unwrap();
    let later = t0 + forget;
    let removed = heartbeat::forget_silent(&client, (&observer, &store.instance.id), later, forget)
        .await
        .unwrap();
    let left: Vec<String> = client
        .query(
            "SELECT instance_id FROM server_instances WHERE instance_id <> $1",
            &[&&*store.instance.id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(removed, 1, "{left:?}");
    assert_eq!(left, vec!["revived".to_string()]);
    // The next read forgets it, and its locks stay expired (no row means dead).
    let h = heartbeat::holders(&client, (&observer, &store.instance.id), later, lock)
        .await
        .unwrap();
    assert!(!h.contains_key("ghost"));
    assert!(lease::expired("ghost", 5, "me", 0, &h, 300));
    // The observer never removes its own row, silent or not.
    assert!(h.contains_key(&*store.instance.id));
}

/// The claim and the gateway's record commit with `synchronous_commit = off`; the debit
/// must never inherit it. A trigger in the debit's own transaction refuses every debit
/// that would commit without waiting for the disk, and one pooled connection carries the
/// claim, the gateway record and the debit of two transfers one after the other.
#[tokio::test]
async fn the_debit_commits_synchronously_after_an_async_claim_and_gateway_record() {
    let Some(store) = fresh(1).await else { return };
    store
        .client()
        .await
        .unwrap()
        .batch_execute(
            "CREATE FUNCTION debit_must_be_synchronous() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_setting('synchronous_commit') <> 'on' THEN
                     RAISE EXCEPTION 'debit with synchronous_commit = %',
                         current_setting('synchronous_commit');
                 END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER debit_must_be_synchronous BEFORE INSERT ON ledger FOR EACH ROW
                 WHEN (NEW.kind = 'debit') EXECUTE FUNCTION debit_must_be_synchronous();",
        )
        .await
        .unwrap();
    for user in ["alice", "bob"] {
        store
            .create_user(NewUser {
                user_id: user.into(),
                token_hash: format!("sha256:{user}"),
                display_name: user.into(),
                currency: "BDT".into(),
                balance_minor: 1_000,
                now_ms: 0,
                token_expires_at_ms: i64::MAX,
            })
            .await
            .unwrap();
    }
    let now_ms = 1_000;
    for n in 0..2 {
        let (key, lock_id) = (format!("k{n}"), format!("lock{n}"));
        let claim = store
            .claim(NewClaim {
                user_id: "alice".into(),
                key: key.clone(),
                hash: vec![n],
                lock_id: lock_id.clone(),
                body: b"{}".to_vec(),
                now_ms,
                bucket_width_ms: 86_400_000,
            })
            .await
            .unwrap();
        assert!(matches!(claim, Claim::Acquired), "{claim:?}");
        store
            .authorize("alice".into(), key.clone(), format!("auth{n}"), now_ms)
            .await
            .unwrap();
        let record = TransferRecord {
            transfer_id: format!("tr{n}"),
            from_user_id: "alice".into(),
            to_user_id: "bob".into(),
            amount_minor: 10,
            currency: "BDT".into(),
            note: None,
            created_at_ms: now_ms,
            idempotency_key: key,
        };
        let rules = Rules {
            fenced: true,
            authorised: crate::ledger::decide::Authorised::Yes,
            max_balance: i64::MAX / 4,
        };
        let answer = store
            .commit(record, vec![n], lock_id, rules)
            .await
            .expect("the debit commits synchronously");
        assert_eq!(answer.status, 201);
    }
    assert_eq!(store.balance("alice".into()).await.unwrap(), 980);
}

/// A key retried across midnight lands in the next day's partition, where the primary key
/// cannot see the first row: only the claim's key lock and its fresh snapshot after the
/// lock keep the claim single. Claims of one key, half stamped just before midnight and
/// half just after, race on separate connections: one wins each round.
#[tokio::test]
async fn concurrent_claims_of_one_key_across_midnight_acquire_it_once() {
    let Some(store) = fresh(16).await else { return };
    let store = Arc::new(store);
    one_claim_wins_each_round(|round, n, now_ms| {
        let store = store.clone();
        async move {
            let claim = NewClaim {
                user_id: "alice".into(),
                key: format!("k{round}"),
                hash: b"h".to_vec(),
                lock_id: format!("lock{n}"),
                body: b"{}".to_vec(),
                now_ms,
                bucket_width_ms: DAY_MS,
            };
            matches!(store.claim(claim).await.unwrap(), Claim::Acquired)
        }
    })
    .await;
}

/// The bench floor's claim (`sendonce_claim_key`, the real claim minus its balance read) keeps
/// a key single across midnight too: a floor that claimed twice would not honour the contract
/// it is the floor of.
#[tokio::test]
async fn the_floor_claim_acquires_a_key_once_across_midnight() {
    let Some(store) = fresh(16).await else { return };
    partitions::ensure(&store.pool, 0, 1).await.unwrap();
    let store = Arc::new(store);
    one_claim_wins_each_round(|round, n, now_ms| {
        let store = store.clone();
        async move {
            let c = store.client().await.unwrap();
            let (key, lock, bucket) = (format!("k{round}"), format!("lock{n}"), now_ms / DAY_MS);
            let won = c
                .query_one(
                    "SELECT sendonce_claim_key('alice', $1, '\\x00', $2, $3, $4, 'i', 0, '\\x00')",
                    &[&key, &lock, &now_ms, &bucket],
                )
                .await
                .unwrap();
            won.get::<_, bool>(0)
        }
    })
    .await;
}

const DAY_MS: i64 = 86_400_000;

/// 20 rounds of 16 concurrent `claim(round, n, now_ms)` of one key per round, half stamped
/// a millisecond before midnight and half at it: exactly one wins each round.
async fn one_claim_wins_each_round<F, Fut>(claim: F)
where
    F: Fn(usize, usize, i64) -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    for round in 0..20 {
        let mut claims = tokio::task::JoinSet::new();
        for n in 0..16 {
            claims.spawn(claim(
                round,
                n,
                if n % 2 == 0 { DAY_MS - 1 } else { DAY_MS },
            ));
        }
        let won = claims.join_all().await.into_iter().filter(|&w| w).count();
        assert_eq!(won, 1, "round {round}: one claim of the key, whichever day");
    }
}
