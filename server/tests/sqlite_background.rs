//! The engine's background jobs on SQLite: the reaper asking the application before it releases,
//! finishes or holds a stuck key (and fencing out a holder asleep past its lease), the relay with an
//! inbox absorbing a redelivery, and expiry by bucket that a clock step alone cannot trigger.

mod sqlite_engine_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use relay_support::Meeting;
use sendonce_server::engine::{Pass, Publish};
use sendonce_server::store::sqlite::{inbox, Db, SqliteKeys};
use sendonce_server::{Engine, Event};
use sqlite_engine_support::{fixture, request, schema, Pay, LEASE};

mod relay_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_asks_before_it_releases_finishes_or_holds() {
    let f = fixture();
    f.orphan("released", r#"{"amount":1}"#).await;
    f.op.recovery.store(0, Ordering::SeqCst);
    let pass = f.engine.reap(&*f.op, LEASE).await.unwrap();
    assert_eq!((pass.released, pass.finished), (1, 0));
    assert_eq!(f.runs("released").await, 0, "released: nothing ran");
    let retry = f
        .engine
        .run(&*f.op, &request("released", r#"{"amount":1}"#))
        .await;
    assert_eq!(
        (retry.status, retry.replayed),
        (201, false),
        "the retry runs it once"
    );

    f.orphan("finished", r#"{"amount":2}"#).await;
    f.op.recovery.store(1, Ordering::SeqCst);
    let pass = f.engine.reap(&*f.op, LEASE).await.unwrap();
    assert_eq!(pass.finished, 1);
    assert_eq!(f.runs("finished").await, 1, "finished from the stored body");
    let retry = f
        .engine
        .run(&*f.op, &request("finished", r#"{"amount":2}"#))
        .await;
    assert_eq!(
        (retry.status, retry.replayed),
        (201, true),
        "the retry gets its answer"
    );

    f.orphan("held", r#"{"amount":3}"#).await;
    f.op.recovery.store(2, Ordering::SeqCst);
    let pass = f.engine.reap(&*f.op, LEASE).await.unwrap();
    assert_eq!(
        pass,
        Pass {
            held: 1,
            ..Pass::default()
        }
    );
    let busy = f
        .engine
        .run(&*f.op, &request("held", r#"{"amount":3}"#))
        .await;
    assert_eq!(busy.status, 409, "held: the client waits");
}

/// The reaper finishes a key whose holder is alive but asleep past its lease; the holder
/// wakes to a lost fence. The work runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_asleep_past_its_lease_is_finished_by_the_reaper_once() {
    let f = fixture();
    f.op.recovery.store(1, Ordering::SeqCst);
    f.op.pause_next.store(true, Ordering::SeqCst);
    let slow = f.spawn("k", r#"{"amount":5}"#);
    f.op.paused.notified().await;
    let fresh = f
        .engine
        .reap(&*f.op, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(fresh, Pass::default(), "a live lease is left alone");
    tokio::time::sleep(LEASE * 2).await;
    let pass = f.engine.reap(&*f.op, LEASE).await.unwrap();
    assert_eq!(pass.finished, 1);
    f.op.go.notify_one();
    assert_eq!(slow.await.unwrap().status, 409, "the holder lost its fence");
    assert_eq!(f.runs("k").await, 1);
}

/// Acknowledges what it is given, and applies each event through the inbox in the same
/// transaction as its effect; `twice` delivers every batch again (a relay crash between
/// publish and mark).
struct Consumer {
    db: Db,
    twice: bool,
}

impl Publish for Consumer {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
        let rounds = if self.twice { 2 } else { 1 };
        for _ in 0..rounds {
            let events = events.clone();
            self.db
                .call(move |c| {
                    let tx = c.transaction()?;
                    for (id, e) in &events {
                        if inbox::first_time(&tx, "effects", *id, 0)? {
                            tx.execute(
                                "INSERT INTO runs (idem_key, amount) VALUES (?1, -1)",
                                [String::from_utf8_lossy(&e.payload).into_owned()],
                            )?;
                        }
                    }
                    tx.commit()?;
                    Ok(())
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(ids)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_publishes_each_event_and_the_inbox_applies_it_once() {
    let f = fixture();
    f.pay_each(&["a", "b", "c"]).await;
    let consumer = Consumer {
        db: f.db.clone(),
        twice: true,
    };
    assert_eq!(f.engine.relay(&consumer).await.unwrap(), 3);
    assert_eq!(
        f.engine.relay(&consumer).await.unwrap(),
        0,
        "all marked published"
    );
    for k in ["a", "b", "c"] {
        // One run of the work and one effect of its event, though delivered twice.
        assert_eq!(f.runs(k).await, 2, "{k}");
    }
}

/// Two relays of one store (one process per SQLite file) never publish the same batch: a
/// round holds its claim until its mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_of_one_store_take_disjoint_batches() {
    let f = fixture();
    f.pay_each(&["a", "b", "c"]).await;
    let to = Meeting::of(2);
    let (a, b) = tokio::join!(f.engine.relay(&to), f.engine.relay(&to));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        to.seen().len(),
        3,
        "each event published once ({a} + {b} marked)"
    );
    assert_eq!(a + b, 3);
}

/// Whole buckets past the key window go; a wall clock stepped forward alone expires
/// nothing (only claims stamped by the new time move expiry on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_by_bucket_and_not_by_a_clock_step_alone() {
    let dir = tempfile::tempdir().unwrap();
    let keys = SqliteKeys::open(dir.path().join("e.db").to_str().unwrap(), schema).unwrap();
    let clock = Arc::new(sendonce_server::clock::Clock::default());
    let engine = Engine::new(keys)
        .key_window(Duration::from_secs(2))
        .clock(clock.clone());
    let op = Pay::default();
    assert_eq!(
        engine
            .run(&op, &request("old", r#"{"amount":1}"#))
            .await
            .status,
        201
    );
    clock.advance(10_000);
    assert_eq!(
        engine.reap(&op, LEASE).await.unwrap().expired,
        0,
        "a step alone"
    );
    assert_eq!(
        engine
            .run(&op, &request("new", r#"{"amount":1}"#))
            .await
            .status,
        201
    );
    assert_eq!(
        engine.reap(&op, LEASE).await.unwrap().expired,
        1,
        "the old bucket went"
    );
    let seen = engine.run(&op, &request("new", r#"{"amount":1}"#)).await;
    assert_eq!(
        (seen.status, seen.replayed),
        (201, true),
        "the new key is kept"
    );
}
