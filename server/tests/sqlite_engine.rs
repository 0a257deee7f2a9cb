//! The engine on SQLite, with the faults that break an idempotency layer: concurrent
//! duplicates, a step slower than its lease (the key taken over meanwhile), a failing
//! step, a refusal that must not be stored, a look-up's 404 that must stay true, and two
//! bodies racing for one key. The unit of work counts its runs in a table of its own: the
//! money moved is that count.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use rusqlite::Connection;
use sendonce_server::engine::{Pass, Publish, Recovery};
use sendonce_server::store::sqlite::inbox;
use sendonce_server::store::sqlite::{Db, SqliteKeys, Work};
use sendonce_server::store::{DbError, Fence, Stuck};
use sendonce_server::{Engine, Event, Operation, Outcome, Problem, Request};
use tokio::sync::Notify;

fn schema(c: &Connection) -> Result<(), DbError> {
    c.execute_batch("CREATE TABLE runs (idem_key TEXT NOT NULL, amount INTEGER NOT NULL)")?;
    Ok(())
}

/// `{"amount": N}`: the unit of work records one run of N.
#[derive(Default)]
struct Pay {
    /// The next step pauses (tells `paused`, waits for `go`), as a step slower than its lease.
    pause_next: AtomicBool,
    paused: Notify,
    go: Notify,
    /// Steps that fail before this many have run (then they succeed).
    failing_steps: AtomicU32,
    /// What the reaper's question answers: 0 release, 1 finish, 2 hold.
    recovery: AtomicU8,
}

impl Operation<SqliteKeys> for Pay {
    type Input = i64;
    type Step = ();

    async fn validate(&self, _: &str, body: &[u8]) -> Result<i64, Problem> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| Problem::invalid(e.to_string()))?;
        match v["amount"].as_i64() {
            Some(n) if n > 0 => Ok(n),
            _ => Err(Problem::invalid("amount must be positive")),
        }
    }

    async fn step(&self, _: &Fence, _: &i64) -> Result<(), Problem> {
        if self.pause_next.swap(false, Ordering::SeqCst) {
            self.paused.notify_one();
            self.go.notified().await;
        }
        let failing = self.failing_steps.load(Ordering::SeqCst);
        if failing > 0 {
            self.failing_steps.store(failing - 1, Ordering::SeqCst);
            return Err(Problem::busy());
        }
        Ok(())
    }

    async fn recover(&self, stuck: &Stuck) -> Result<Recovery<i64, ()>, Problem> {
        Ok(match self.recovery.load(Ordering::SeqCst) {
            0 => Recovery::Release,
            1 => Recovery::Finish(self.validate(&stuck.fence.scope, &stuck.body).await?, ()),
            _ => Recovery::Hold,
        })
    }

    fn work(&self, fence: &Fence, amount: i64, _: ()) -> Work {
        let key = fence.key.clone();
        Box::new(move |tx| {
            tx.execute(
                "INSERT INTO runs (idem_key, amount) VALUES (?1, ?2)",
                (&key, amount),
            )?;
            Ok(
                Outcome::created(format!("{{\"key\":\"{key}\",\"amount\":{amount}}}").into_bytes())
                    .with_event("paid", key.clone().into_bytes()),
            )
        })
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: Db,
    engine: Arc<Engine<SqliteKeys>>,
    op: Arc<Pay>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let keys = SqliteKeys::open(path.to_str().unwrap(), schema).unwrap();
    Fixture {
        db: keys.db().clone(),
        engine: Arc::new(Engine::new(keys)),
        op: Arc::new(Pay::default()),
        _dir: dir,
    }
}

fn request(key: &str, body: &str) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert("idempotency-key", HeaderValue::from_str(key).unwrap());
    Request::new("u1", "POST", "/pay", &headers, body.as_bytes().to_vec()).unwrap()
}

impl Fixture {
    async fn runs(&self, key: &str) -> i64 {
        let key = key.to_string();
        self.db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM runs WHERE idem_key = ?1",
                    [&key],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap()
    }

    async fn events(&self) -> i64 {
        self.db
            .read(|c| Ok(c.query_row("SELECT count(*) FROM sendonce_outbox", [], |r| r.get(0))?))
            .await
            .unwrap()
    }

    fn spawn(&self, key: &str, body: &str) -> tokio::task::JoinHandle<sendonce_server::Answer> {
        let (engine, op, req) = (self.engine.clone(), self.op.clone(), request(key, body));
        tokio::spawn(async move { engine.run(&*op, &req).await })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_duplicates_run_the_work_once() {
    let f = fixture();
    let all: Vec<_> = (0..16).map(|_| f.spawn("k", r#"{"amount":5}"#)).collect();
    let mut statuses = Vec::new();
    for h in all {
        let a = h.await.unwrap();
        statuses.push((a.status, a.replayed));
    }
    assert_eq!(f.runs("k").await, 1, "{statuses:?}");
    assert_eq!(f.events().await, 1);
    let fresh = statuses.iter().filter(|s| **s == (201, false)).count();
    assert_eq!(fresh, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| s.0 == 201 || s.0 == 409),
        "{statuses:?}"
    );
    let again = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((again.status, again.replayed), (201, true));
}

/// A request asleep in its step past its lease loses the key (here: released, as a reaper
/// would, and taken and finished by a retry). When it wakes, the fence finds the key not
/// its own: its work never runs. Without the fence the work runs twice (shown by removing
/// the `holds` check in store/sqlite/contract.rs: this test then fails with 2 runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_slower_than_its_lease_moves_nothing_after_losing_the_key() {
    let f = fixture();
    f.op.pause_next.store(true, Ordering::SeqCst);
    let slow = f.spawn("k", r#"{"amount":5}"#);
    f.op.paused.notified().await;
    // The lease ran out: the key row is released from under the sleeping request.
    f.db.call(|c| Ok(c.execute("DELETE FROM idempotency_keys WHERE idem_key = 'k'", [])?))
        .await
        .unwrap();
    let retry = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((retry.status, retry.replayed), (201, false));
    f.op.go.notify_one();
    let woke = slow.await.unwrap();
    assert_eq!(
        woke.status, 409,
        "the request that lost its lock answers retry"
    );
    assert_eq!(f.runs("k").await, 1, "the work ran once");
    let after = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(
        (after.status, after.replayed, after.body),
        (201, true, retry.body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_frees_the_key_and_a_refusal_is_not_stored() {
    let f = fixture();
    f.op.failing_steps.store(1, Ordering::SeqCst);
    let failed = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!(failed.status, 503);
    let refused = f
        .engine
        .run(&*f.op, &request("k2", r#"{"amount":0}"#))
        .await;
    assert_eq!(refused.status, 400);
    // Both keys are free: the same keys run now (the second with a valid body).
    let k = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    let k2 = f
        .engine
        .run(&*f.op, &request("k2", r#"{"amount":7}"#))
        .await;
    assert_eq!((k.status, k2.status), (201, 201));
    assert_eq!((f.runs("k").await, f.runs("k2").await), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_ups_404_stays_true() {
    let f = fixture();
    let nf = || {
        Problem::new(
            axum::http::StatusCode::NOT_FOUND,
            "not_found",
            "nothing ran",
        )
    };
    assert_eq!(f.engine.lookup("u1", "k", nf()).await.status, 404);
    // The late request under that key replays the 404 and runs nothing.
    let late = f.engine.run(&*f.op, &request("k", r#"{"amount":5}"#)).await;
    assert_eq!((late.status, late.replayed), (404, true));
    assert_eq!(f.runs("k").await, 0);
    // A key that ran looks up as 200 with the bytes of its 201.
    let ran = f
        .engine
        .run(&*f.op, &request("k3", r#"{"amount":5}"#))
        .await;
    let found = f.engine.lookup("u1", "k3", nf()).await;
    assert_eq!((found.status, &found.body), (200, &ran.body));
    // Another principal's key is not ours to see.
    assert_eq!(f.engine.lookup("u2", "k3", nf()).await.status, 404);
}

/// Two bodies race for one key: one runs, the other gets 422 (or 409 while the first
/// runs) — on the path where its claim lost the race too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bodies_racing_for_one_key_run_one() {
    for round in 0..20 {
        let f = fixture();
        let a = f.spawn("k", r#"{"amount":5}"#);
        let b = f.spawn("k", r#"{"amount":6}"#);
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let mut got = [a.status, b.status];
        got.sort_unstable();
        assert!(
            got == [201, 409] || got == [201, 422],
            "round {round}: {got:?}"
        );
        assert_eq!(f.runs("k").await, 1);
    }
}

const LEASE: Duration = Duration::from_millis(50);

impl Fixture {
    /// A key left `IN_PROGRESS` by a process that died (another instance id) after its
    /// external step: the reaper's case.
    async fn orphan(&self, key: &str, body: &str) {
        let (key, body) = (key.to_string(), body.to_string());
        let hash = request(&key, &body).hash;
        let now = sendonce_server::clock::Clock::default().now_ms();
        let bucket = now / 86_400_000;
        self.db
            .call(move |c| {
                c.execute(
                    "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                         locked_at_ms, created_at_ms, bucket, lock_instance, lock_mono_ms, request_body)
                     VALUES ('u1', ?1, ?2, 'in_progress', 'dead-lock', ?3, ?3, ?4, 'dead', 0, ?5)",
                    (&key, &hash, now, bucket, body.as_bytes()),
                )?;
                Ok(())
            })
            .await
            .unwrap();
    }
}

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
    for k in ["a", "b", "c"] {
        assert_eq!(
            f.engine
                .run(&*f.op, &request(k, r#"{"amount":1}"#))
                .await
                .status,
            201
        );
    }
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
