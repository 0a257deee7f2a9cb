//! [`Claims`] and [`Keys`] on PostgreSQL: each phase of the engine as one statement or one READ COMMITTED
//! transaction on a pooled connection (a serialization failure or deadlock runs the
//! transaction again, a bounded number of times).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::IsolationLevel;

use super::{exec, heartbeat, inbox, is_conflict, keys, lease, outbox, partitions, relay, schema};
use crate::answer::Answer;
use crate::clock::Clock;
use crate::decision::{Claim, KeyRow};
use crate::lease::Instance;
use crate::outcome::Outcome;
use crate::problem::Problem;
use crate::store::{
    Claims, DbError, Fence, Fut, Keys, NewKey, Publishing, Reap, Relay, RelayRound, Stuck,
};

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

/// The engine's store on one PostgreSQL database (several instances may share it: each
/// publishes a heartbeat, by which the others judge its leases).
#[derive(Clone)]
pub struct PgKeys {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    instance: Instance,
    observer: lease::Observer,
    heartbeat: tokio::task::JoinHandle<()>,
    create_retry: partitions::Retry,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

impl PgKeys {
    /// Connects to `url` with at most `pool_size` connections (a request waits at most 5 s
    /// for one, then answers 503) and opens the store on them.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Self, DbError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| DbError::Task(format!("bad PostgreSQL URL: {e}")))?;
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .wait_timeout(Some(Duration::from_secs(5)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| DbError::Task(format!("connection pool: {e}")))?;
        Self::open(pool, config, Arc::new(Clock::default())).await
    }

    /// The engine's store on `pool`, creating its tables (key table, claim function,
    /// heartbeats, outbox, inbox) if they are missing, and starting this instance's
    /// heartbeat on a connection of its own (`config`: never from the pool, which requests
    /// waiting out locks can pin) with its wall `clock`.
    pub async fn open(
        pool: Pool,
        config: tokio_postgres::Config,
        clock: Arc<Clock>,
    ) -> Result<Self, DbError> {
        let client = pool.get().await?;
        // One instance at a time creates the tables (concurrent CREATE … IF NOT EXISTS of
        // one name can fail on PostgreSQL's catalog unique index).
        client
            .batch_execute("SELECT pg_advisory_lock(hashtext('sendonce_schema'))")
            .await?;
        let created = async {
            schema::create(&client).await?;
            client.batch_execute(outbox::TABLE).await?;
            client.batch_execute(inbox::TABLE).await?;
            Ok::<_, DbError>(())
        }
        .await;
        client
            .batch_execute("SELECT pg_advisory_unlock(hashtext('sendonce_schema'))")
            .await?;
        created?;
        let instance = Instance::new();
        heartbeat::beat(&client, &instance, clock.now_ms()).await?;
        let heartbeat = tokio::spawn(heartbeat::run(config, instance.clone(), clock));
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                instance,
                observer: lease::Observer::default(),
                heartbeat,
                create_retry: partitions::Retry::default(),
            }),
        })
    }

    /// The pool, for the application's own reads and writes.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }
}

impl Claims for PgKeys {
    type Work = Work;

    fn instance(&self) -> &Instance {
        &self.inner.instance
    }

    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>> {
        Box::pin(async move { keys::read(&self.pool().get().await?, scope, key).await })
    }

    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim> {
        Box::pin(async move { keys::claim(self.pool(), &new).await })
    }

    fn commit<'a>(&'a self, fence: &'a Fence, mut work: Work) -> Fut<'a, Answer> {
        Box::pin(async move {
            let mut run = 1;
            loop {
                match commit_once(self.pool(), fence, &mut work).await {
                    Err(e) if is_conflict(&e) && run < MAX_RUNS => run += 1,
                    Err(e) if is_conflict(&e) => return Err(DbError::Conflict(run)),
                    other => return other,
                }
            }
        })
    }

    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        Box::pin(async move {
            let c = self.pool().get().await?;
            keys::release(&c, &fence.scope, &fence.key, &fence.lock_id).await
        })
    }
}

impl Reap for PgKeys {
    fn stuck(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        Box::pin(async move {
            let client = self.pool().get().await?;
            let (me, observer) = (&self.inner.instance, &self.inner.observer);
            keys::stuck(&client, me, observer, lock_timeout_ms).await
        })
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        Box::pin(async move {
            let client = self.pool().get().await?;
            // By the earliest instance clock: one clock stepped forward expires nothing early.
            let now = heartbeat::agreed_now(&client, &self.inner.instance, now_ms).await?;
            drop(client);
            // The days ahead get their partitions before the first claim needs one.
            let retry = &self.inner.create_retry;
            partitions::ensure_ahead(self.pool(), now_ms, key_window_ms, retry).await?;
            partitions::expire(self.pool(), now, key_window_ms).await
        })
    }
}

impl Relay for PgKeys {
    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: Publishing<'a>,
    ) -> Fut<'a, RelayRound> {
        Box::pin(async move {
            let mut client = self.pool().get().await?;
            relay::round(&mut client, limit, now_ms, publish).await
        })
    }
}

impl Keys for PgKeys {
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
                let mut c = self.pool().get().await?;
                let tx = c.transaction().await?;
                exec(&tx, keys::KEY_LOCK, &[&scope, &key]).await?;
                let row = keys::close(&tx, scope, key, now_ms, bucket, &not_found).await?;
                tx.commit().await?;
                Ok(row)
            }
        };
        Box::pin(async move { keys::with_partition(self.pool(), bucket, attempt).await })
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
