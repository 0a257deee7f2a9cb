//! What the SQLite engine tests share: an operation whose unit of work counts its runs in a table
//! of its own (the money moved is that count), with switches for the faults the tests make, and a
//! fixture around a fresh file.

// Each test file uses only some of these.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use rusqlite::Connection;
use sendonce_server::engine::Recovery;
use sendonce_server::store::sqlite::{Db, SqliteKeys, Work};
use sendonce_server::store::{Claims, DbError, Fence, Stuck};
use sendonce_server::{Engine, Operation, Outcome, Problem, Request};
use tokio::sync::Notify;

pub fn schema(c: &Connection) -> Result<(), DbError> {
    c.execute_batch("CREATE TABLE runs (idem_key TEXT NOT NULL, amount INTEGER NOT NULL)")?;
    Ok(())
}

/// `{"amount": N}`: the unit of work records one run of N.
#[derive(Default)]
pub struct Pay {
    /// The next step pauses (tells `paused`, waits for `go`), as a step slower than its lease.
    pub pause_next: AtomicBool,
    pub paused: Notify,
    pub go: Notify,
    /// Steps that fail before this many have run (then they succeed).
    pub failing_steps: AtomicU32,
    /// What the reaper's question answers: 0 release, 1 finish, 2 hold.
    pub recovery: AtomicU8,
}

// Any store whose unit of work is SQLite's (the tests' wrappers of `SqliteKeys` too).
impl<S: Claims<Work = Work>> Operation<S> for Pay {
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
            1 => Recovery::Finish(
                <Self as Operation<S>>::validate(self, &stuck.fence.scope, &stuck.body).await?,
                (),
            ),
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

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub db: Db,
    pub engine: Arc<Engine<SqliteKeys>>,
    pub op: Arc<Pay>,
}

pub fn fixture() -> Fixture {
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

pub fn request(key: &str, body: &str) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert("idempotency-key", HeaderValue::from_str(key).unwrap());
    Request::new("u1", "POST", "/pay", &headers, body.as_bytes().to_vec()).unwrap()
}

impl Fixture {
    pub async fn runs(&self, key: &str) -> i64 {
        runs_in(&self.db, key).await
    }

    pub async fn events(&self) -> i64 {
        self.db
            .read(|c| Ok(c.query_row("SELECT count(*) FROM sendonce_outbox", [], |r| r.get(0))?))
            .await
            .unwrap()
    }

    /// One payment of 1 under each key, each answered 201 (and so one outbox event each).
    pub async fn pay_each(&self, keys: &[&str]) {
        for k in keys {
            let answer = self
                .engine
                .run(&*self.op, &request(k, r#"{"amount":1}"#))
                .await;
            assert_eq!(answer.status, 201, "{k}");
        }
    }

    pub fn spawn(&self, key: &str, body: &str) -> tokio::task::JoinHandle<sendonce_server::Answer> {
        let (engine, op, req) = (self.engine.clone(), self.op.clone(), request(key, body));
        tokio::spawn(async move { engine.run(&*op, &req).await })
    }
}

pub const LEASE: Duration = Duration::from_millis(50);

impl Fixture {
    /// A key left `IN_PROGRESS` by a process that died (another instance id) after its
    /// external step: the reaper's case.
    pub async fn orphan(&self, key: &str, body: &str) {
        orphan_in(&self.db, key, body).await
    }
}

/// How many times the unit of work ran under `key` in `db`.
pub async fn runs_in(db: &Db, key: &str) -> i64 {
    let key = key.to_string();
    db.read(move |c| {
        Ok(c.query_row(
            "SELECT count(*) FROM runs WHERE idem_key = ?1",
            [&key],
            |r| r.get(0),
        )?)
    })
    .await
    .unwrap()
}

/// [`Fixture::orphan`] in any file with the key table.
pub async fn orphan_in(db: &Db, key: &str, body: &str) {
    let (key, body) = (key.to_string(), body.to_string());
    let hash = request(&key, &body).hash;
    let now = sendonce_server::clock::Clock::default().now_ms();
    let bucket = now / 86_400_000;
    db.call(move |c| {
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
