//! The engine on PostgreSQL (`SENDONCE_TEST_POSTGRES`, set by the `postgres` stage of
//! scripts/test-all; without it these tests say so and pass): duplicates across pooled
//! connections run the work once, and the reaper — judging leases by heartbeats — finishes
//! a key whose holder died and fences out one that slept past its lease; the relays of two
//! instances take disjoint batches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use relay_support::Meeting;
use sendonce_server::engine::Recovery;
use sendonce_server::store::postgres::{schema, work, PgKeys, Work};
use sendonce_server::store::{DbError, Fence, Stuck};
use sendonce_server::{Engine, Operation, Outcome, Problem, Request};
use tokio::sync::Notify;

mod relay_support;

#[derive(Default)]
struct Pay {
    pause_next: AtomicBool,
    paused: Notify,
    go: Notify,
}

impl Operation<PgKeys> for Pay {
    type Input = i64;
    type Step = ();

    async fn validate(&self, _: &str, body: &[u8]) -> Result<i64, Problem> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| Problem::invalid(e.to_string()))?;
        v["amount"]
            .as_i64()
            .filter(|n| *n > 0)
            .ok_or_else(|| Problem::invalid("amount"))
    }

    async fn step(&self, _: &Fence, _: &i64) -> Result<(), Problem> {
        if self.pause_next.swap(false, Ordering::SeqCst) {
            self.paused.notify_one();
            self.go.notified().await;
        }
        Ok(())
    }

    async fn recover(&self, stuck: &Stuck) -> Result<Recovery<i64, ()>, Problem> {
        Ok(Recovery::Finish(
            self.validate(&stuck.fence.scope, &stuck.body).await?,
            (),
        ))
    }

    fn work(&self, fence: &Fence, amount: i64, _: ()) -> Work {
        let key = fence.key.clone();
        work(move |tx| {
            let key = key.clone();
            Box::pin(async move {
                tx.execute(
                    "INSERT INTO runs (idem_key, amount) VALUES ($1, $2)",
                    &[&key, &amount],
                )
                .await?;
                Ok::<_, DbError>(Outcome::created(
                    format!("{{\"key\":\"{key}\"}}").into_bytes(),
                ))
            })
        })
    }
}

async fn engine() -> Option<(Arc<Engine<PgKeys>>, Arc<Pay>)> {
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("SENDONCE_TEST_POSTGRES unset: the PostgreSQL engine tests did not run");
        return None;
    };
    let url = schema::fresh_database(&url, "engine").await.unwrap();
    let keys = PgKeys::connect(&url, 8).await.unwrap();
    let c = keys.pool().get().await.unwrap();
    c.batch_execute("CREATE TABLE runs (idem_key TEXT NOT NULL, amount BIGINT NOT NULL)")
        .await
        .unwrap();
    Some((Arc::new(Engine::new(keys)), Arc::new(Pay::default())))
}

fn request(key: &str, body: &str) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert("idempotency-key", HeaderValue::from_str(key).unwrap());
    Request::new("u1", "POST", "/pay", &headers, body.as_bytes().to_vec()).unwrap()
}

async fn runs(engine: &Engine<PgKeys>, key: &str) -> i64 {
    let c = engine.store().pool().get().await.unwrap();
    c.query_one("SELECT count(*) FROM runs WHERE idem_key = $1", &[&key])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_duplicates_run_the_work_once() {
    let Some((engine, op)) = engine().await else {
        return;
    };
    let all: Vec<_> = (0..16)
        .map(|_| {
            let (engine, op) = (engine.clone(), op.clone());
            tokio::spawn(async move { engine.run(&*op, &request("k", r#"{"amount":5}"#)).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for h in all {
        statuses.push(h.await.unwrap().status);
    }
    assert_eq!(runs(&engine, "k").await, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 409),
        "{statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_finishes_a_dead_holders_key_and_fences_out_a_sleeping_one() {
    let Some((engine, op)) = engine().await else {
        return;
    };
    // Today's partition, as any first request makes it.
    assert_eq!(
        engine
            .run(&*op, &request("warm", r#"{"amount":1}"#))
            .await
            .status,
        201
    );
    // A holder that died: its instance never beat (no heartbeat row), so its lease is out.
    let orphan = request("dead", r#"{"amount":2}"#);
    let c = engine.store().pool().get().await.unwrap();
    let now = sendonce_server::clock::Clock::default().now_ms();
    c.execute(
        "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
             locked_at_ms, created_at_ms, bucket, lock_instance, lock_mono_ms, request_body)
         VALUES ('u1', 'dead', $1, 'in_progress', 'dead-lock', $2, $2, $3, 'gone', 0, $4)",
        &[&orphan.hash, &now, &(now / 86_400_000), &orphan.body],
    )
    .await
    .unwrap();
    // A holder alive but asleep in its step.
    op.pause_next.store(true, Ordering::SeqCst);
    let slow = {
        let (engine, op) = (engine.clone(), op.clone());
        tokio::spawn(async move { engine.run(&*op, &request("slow", r#"{"amount":3}"#)).await })
    };
    op.paused.notified().await;
    let pass = engine.reap(&*op, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(pass.finished, 1, "only the dead holder's key: {pass:?}");
    assert_eq!(
        (runs(&engine, "dead").await, runs(&engine, "slow").await),
        (1, 0)
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pass = engine.reap(&*op, Duration::from_millis(50)).await.unwrap();
    assert_eq!(pass.finished, 1, "the sleeper's lease ran out: {pass:?}");
    op.go.notify_one();
    assert_eq!(
        slow.await.unwrap().status,
        409,
        "the sleeper lost its fence"
    );
    assert_eq!(runs(&engine, "slow").await, 1);
    let retry = engine.run(&*op, &request("dead", r#"{"amount":2}"#)).await;
    assert_eq!((retry.status, retry.replayed), (201, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_of_two_instances_take_disjoint_batches() {
    let Ok(url) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("SENDONCE_TEST_POSTGRES unset: the PostgreSQL relay test did not run");
        return;
    };
    let url = schema::fresh_database(&url, "relay").await.unwrap();
    // Two instances on one database.
    let engine = Engine::new(PgKeys::connect(&url, 8).await.unwrap());
    let other = Engine::new(PgKeys::connect(&url, 8).await.unwrap());
    let c = engine.store().pool().get().await.unwrap();
    c.batch_execute(
        "INSERT INTO sendonce_outbox (scope, idem_key, topic, payload, created_at_ms)
         SELECT 'u1', 'k' || n, 'paid', '\\x00', 0 FROM generate_series(1, 5) n",
    )
    .await
    .unwrap();
    let to = Meeting::of(2);
    let (a, b) = tokio::join!(engine.relay(&to), other.relay(&to));
    let (a, b) = (a.unwrap(), b.unwrap());
    let seen = to.seen();
    assert_eq!(
        seen,
        [1, 2, 3, 4, 5],
        "each event published once ({a} + {b} marked)"
    );
    assert_eq!(a + b, 5);
    assert_eq!(
        engine.relay(&Meeting::of(1)).await.unwrap(),
        0,
        "all marked"
    );
}
