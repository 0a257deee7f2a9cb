//! A database connection lost mid-call (a PostgreSQL connection cut, a failover): a client is
//! answered 503 `busy` with `Retry-After` (its retry with the same key finds what happened),
//! and the reaper asks about the stuck key again at once, on a fresh connection, instead of a
//! whole interval later — only once, so a database that is down does not make it spin. The
//! store is SQLite's behind a wrapper whose reaper calls first fail with a real lost
//! connection (`tokio_postgres` refused at a port nobody listens on).

mod sqlite_engine_support;

use std::sync::atomic::{AtomicU32, Ordering};

use sendonce_server::engine::Pass;
use sendonce_server::store::sqlite::{SqliteKeys, Work};
use sendonce_server::store::{Claims, DbError, Fence, Fut, NewKey, Reap, Stuck};
use sendonce_server::{Answer, Claim, Engine, Instance, KeyRow};
use sqlite_engine_support::{orphan_in, runs_in, schema, Pay, LEASE};

/// `SqliteKeys`, but the reaper's next `losses` releases or commits lose their connection
/// (or, with `busy`, find the database busy: not a lost connection, so not asked again).
struct Losing {
    inner: SqliteKeys,
    losses: AtomicU32,
    busy: bool,
}

impl Losing {
    async fn lose(&self) -> Result<(), DbError> {
        let lost = self
            .losses
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        match (lost, self.busy) {
            (false, _) => Ok(()),
            (true, true) => Err(DbError::Busy),
            (true, false) => Err(refused().await),
        }
    }
}

/// A real lost connection: PostgreSQL's client refused at a loopback port just freed.
async fn refused() -> DbError {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!("host=127.0.0.1 port={port} user=nobody connect_timeout=2");
    match tokio_postgres::connect(&config, tokio_postgres::NoTls).await {
        Ok(_) => panic!("nothing listens on {port}"),
        Err(e) => DbError::Postgres(e),
    }
}

impl Claims for Losing {
    type Work = Work;

    fn instance(&self) -> &Instance {
        self.inner.instance()
    }

    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>> {
        self.inner.read(scope, key)
    }

    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim> {
        self.inner.claim(new)
    }

    fn commit<'a>(&'a self, fence: &'a Fence, work: Work) -> Fut<'a, Answer> {
        self.inner.commit(fence, work)
    }

    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        self.inner.release(fence)
    }
}

impl Reap for Losing {
    fn stuck(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        self.inner.stuck(lock_timeout_ms)
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        self.inner.expire(now_ms, key_window_ms)
    }

    fn release_stuck<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        Box::pin(async move {
            self.lose().await?;
            self.inner.release_stuck(fence).await
        })
    }

    fn commit_stuck<'a>(&'a self, fence: &'a Fence, work: Work) -> Fut<'a, Answer> {
        Box::pin(async move {
            self.lose().await?;
            self.inner.commit_stuck(fence, work).await
        })
    }
}

/// One stuck key and one reaper pass over a store that loses `losses` calls; the pass, and
/// how many times the key's work ran.
async fn one_pass(recovery: u8, losses: u32, busy: bool) -> (Pass, i64) {
    let dir = tempfile::tempdir().unwrap();
    let keys = SqliteKeys::open(dir.path().join("r.db").to_str().unwrap(), schema).unwrap();
    let db = keys.db().clone();
    let engine = Engine::new(Losing {
        inner: keys,
        losses: AtomicU32::new(losses),
        busy,
    });
    let op = Pay::default();
    op.recovery.store(recovery, Ordering::SeqCst);
    orphan_in(&db, "k", r#"{"amount":5}"#).await;
    let pass = engine.reap(&op, LEASE).await.unwrap();
    (pass, runs_in(&db, "k").await)
}

const RELEASE: u8 = 0;
const FINISH: u8 = 1;

#[tokio::test]
async fn a_release_that_lost_its_connection_is_tried_again_in_the_same_pass() {
    let (pass, runs) = one_pass(RELEASE, 1, false).await;
    assert_eq!((pass.released, pass.held, runs), (1, 0, 0));
}

#[tokio::test]
async fn a_commit_that_lost_its_connection_is_tried_again_in_the_same_pass() {
    let (pass, runs) = one_pass(FINISH, 1, false).await;
    assert_eq!((pass.finished, pass.held, runs), (1, 0, 1), "finished once");
}

#[tokio::test]
async fn a_connection_lost_twice_holds_the_key_for_the_next_pass() {
    let (pass, runs) = one_pass(FINISH, 2, false).await;
    assert_eq!((pass.finished, pass.held, runs), (0, 1, 0));
}

#[tokio::test]
async fn a_busy_database_is_not_asked_again_in_the_same_pass() {
    let (pass, runs) = one_pass(RELEASE, 1, true).await;
    assert_eq!((pass.released, pass.held, runs), (0, 1, 0));
}

#[tokio::test]
async fn a_lost_connection_answers_503_busy_with_retry_after() {
    let lost = refused().await;
    assert!(lost.is_connection_lost(), "{lost}");
    let problem = lost.into_problem();
    assert_eq!((problem.status.as_u16(), problem.code), (503, "busy"));
    assert!(problem.retry_after.is_some(), "{problem:?}");
    assert!(!DbError::Busy.is_connection_lost());
}
