//! [`Keys`] on PostgreSQL: each phase of the engine as one statement or one READ COMMITTED
//! transaction on a pooled connection (a serialization failure or deadlock runs the
//! transaction again, a bounded number of times).

use std::future::Future;
use std::pin::Pin;

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::IsolationLevel;

use super::{exec, is_conflict, keys, outbox, schema};
use crate::answer::Answer;
use crate::decision::{Claim, KeyRow};
use crate::outcome::Outcome;
use crate::problem::Problem;
use crate::store::{DbError, Fence, Fut, Keys, NewKey};

/// The future of one run of a unit of work, borrowing its transaction.
pub type WorkFut<'t> = Pin<Box<dyn Future<Output = Result<Outcome, DbError>> + Send + 't>>;

/// The application's fenced unit of work on PostgreSQL: runs inside the transaction that
/// checked (and locked) the key row. It may run more than once (a transaction that met a
/// serialization failure runs again), so it must act on the transaction only.
pub type Work = Box<dyn for<'t> FnMut(&'t Transaction<'t>) -> WorkFut<'t> + Send>;

/// Boxes a unit of work (the closure's signature is inferred from this bound):
/// `work(move |tx| { let order = order.clone(); Box::pin(async move { … }) })`.
pub fn work<F>(f: F) -> Work
where
    F: for<'t> FnMut(&'t Transaction<'t>) -> WorkFut<'t> + Send + 'static,
{
    Box::new(f)
}

/// Transactions that keep meeting conflicts give up after this many runs (503).
const MAX_RUNS: u32 = 5;

/// The engine's store on one PostgreSQL database (several instances may share it).
#[derive(Clone)]
pub struct PgKeys {
    pool: Pool,
}

impl PgKeys {
    /// The engine's store on `pool`, creating its tables (key table, claim function,
    /// heartbeats, outbox) if they are missing.
    pub async fn open(pool: Pool) -> Result<Self, DbError> {
        let client = pool.get().await?;
        // One instance at a time creates the tables (concurrent CREATE … IF NOT EXISTS of
        // one name can fail on PostgreSQL's catalog unique index).
        client
            .batch_execute("SELECT pg_advisory_lock(hashtext('sendonce_schema'))")
            .await?;
        let created = async {
            schema::create(&client).await?;
            client.batch_execute(outbox::TABLE).await?;
            Ok::<_, DbError>(())
        }
        .await;
        client
            .batch_execute("SELECT pg_advisory_unlock(hashtext('sendonce_schema'))")
            .await?;
        created?;
        Ok(Self { pool })
    }

    /// Connects to `url` with at most `pool_size` connections (a request waits at most 5 s
    /// for one, then answers 503) and opens the store on them.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, DbError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| DbError::Task(format!("bad PostgreSQL URL: {e}")))?;
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .wait_timeout(Some(std::time::Duration::from_secs(5)))
            .create_timeout(Some(std::time::Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| DbError::Task(format!("connection pool: {e}")))?;
        Self::open(pool).await
    }

    /// The pool, for the application's own reads and writes.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl Keys for PgKeys {
    type Work = Work;

    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>> {
        Box::pin(async move { keys::read(&self.pool.get().await?, scope, key).await })
    }

    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim> {
        Box::pin(async move { keys::claim(&self.pool, &new).await })
    }

    fn commit<'a>(&'a self, fence: &'a Fence, mut work: Work) -> Fut<'a, Answer> {
        Box::pin(async move {
            let mut run = 1;
            loop {
                match commit_once(&self.pool, fence, &mut work).await {
                    Err(e) if is_conflict(&e) && run < MAX_RUNS => run += 1,
                    Err(e) if is_conflict(&e) => return Err(DbError::Conflict(run)),
                    other => return other,
                }
            }
        })
    }

    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        Box::pin(async move {
            let c = self.pool.get().await?;
            keys::release(&c, &fence.scope, &fence.key, &fence.lock_id).await
        })
    }

    fn close_unexecuted<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        now_ms: i64,
        bucket_width_ms: i64,
        not_found: Vec<u8>,
    ) -> Fut<'a, Option<KeyRow>> {
        let bucket = now_ms.div_euclid(bucket_width_ms);
        let attempt = move || {
            let not_found = not_found.clone();
            async move {
                let mut c = self.pool.get().await?;
                let tx = c.transaction().await?;
                exec(&tx, keys::KEY_LOCK, &[&scope, &key]).await?;
                let inserted = exec(
                    &tx,
                    "INSERT INTO idempotency_keys
                        (user_id, idem_key, request_hash, state, lock_id, locked_at_ms,
                         created_at_ms, bucket, response_status, response_body)
                     SELECT $1, $2, ''::bytea, 'completed', '', $3, $3, $4, 404, $5
                     WHERE NOT EXISTS
                         (SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2)",
                    &[&scope, &key, &now_ms, &bucket, &not_found],
                )
                .await?;
                let row = if inserted == 1 {
                    None
                } else {
                    keys::read(&tx, scope, key).await?
                };
                tx.commit().await?;
                Ok(row)
            }
        };
        Box::pin(async move { keys::with_partition(&self.pool, bucket, attempt).await })
    }
}

/// The fence, the application's work, its events and its stored answer: one transaction.
async fn commit_once(pool: &Pool, f: &Fence, work: &mut Work) -> Result<Answer, DbError> {
    let mut client = pool.get().await?;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await?;
    if !keys::hold(&tx, &f.scope, &f.key, &f.lock_id).await? {
        tracing::warn!(key = %f.key, "lock lost before the unit of work: nothing ran");
        return Ok(Problem::key_in_use().into());
    }
    let outcome = work(&tx).await?;
    outbox::insert(&tx, &f.scope, &f.key, f.claimed_at_ms, &outcome.events).await?;
    keys::complete(
        &tx,
        &f.scope,
        &f.key,
        &f.lock_id,
        outcome.status,
        &outcome.body,
    )
    .await?;
    tx.commit().await?;
    Ok(outcome.answer())
}
