//! The PostgreSQL backend: several server instances on one database.
//!
//! Isolation: every transaction runs at READ COMMITTED, and each decision rests on rows it
//! locks or on a constraint, never on a snapshot: the key row (`FOR UPDATE`, the fence),
//! the sender's balance row (`FOR UPDATE`: one sender's debits run one at a time), the
//! primary keys and the ledger's one-debit-per-key index. SERIALIZABLE would add
//! predicate-lock aborts under load and no safety these locks do not already give.
//! Deadlocks (40P01) are still possible between relays, and 40001 from any future change;
//! `in_transaction!` retries both a bounded number of times, then answers 503.
//!
//! Connections come from a bounded pool (`deadpool-postgres`): when every connection is
//! busy for [`POOL_WAIT`], the request gets 503 `busy` with `Retry-After`, never a hang.
//! Every pooled session runs under [`DbTimeouts`] (`lock_timeout`, `statement_timeout`,
//! `idle_in_transaction_session_timeout`), so a session frozen inside a transaction holds
//! nobody for longer than a lock timeout: the waiter's statement fails, its transaction
//! rolls back, and the request answers 503 with `Retry-After` ([`is_transient`](sendonce_server::store::postgres::is_transient)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::{BeneficiaryOutcome, Fut, Instance, Lookup, NewBeneficiary, NewClaim, Store, Stuck};
use crate::auth::Caller;
use crate::authorization::Authorization;
use crate::config::DbTimeouts;
use crate::ledger::decide::Rules;
use crate::ledger::TransferRecord;
use sendonce_server::store::postgres::{
    exec, heartbeat, is_conflict, lease, opt, outbox as lib_outbox, partitions, relay as lib_relay,
    rows, sqlstate,
};
use sendonce_server::store::DbError;
use sendonce_server::Answer;
use sendonce_server::{Claim, KeyRow};

mod accounts;
mod commit;
mod fixtures;
mod floor;
mod gateway;
mod keys;
mod ledger;
mod migrate;
mod peer;
mod reaper;
mod relay;
mod retention;
mod schema;
mod transaction;

/// How long a request waits for a free connection before it is answered 503.
pub const POOL_WAIT: Duration = Duration::from_secs(2);
/// Attempts of one transaction that hits serialization failures or deadlocks.
pub const MAX_ATTEMPTS: u32 = 5;

/// Runs `$body` (an expression using the transaction `$tx`) in one READ COMMITTED
/// transaction and commits; a serialization failure (40001) or deadlock (40P01) anywhere
/// in it rolls back and runs it again, at most [`MAX_ATTEMPTS`] times, then
/// [`DbError::Conflict`] (503).
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let store: &$crate::store::postgres::PgStore = $store;
        $crate::store::postgres::retrying(store, || async {
            let mut client = store.pool.get().await?;
            let $tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
                .start()
                .await?;
            let out = $body;
            $tx.commit().await?;
            Ok::<_, ::sendonce_server::store::DbError>(out)
        })
        .await
    }};
}
pub(crate) use in_transaction;

/// Runs `attempt` again after a serialization failure or deadlock, a bounded number of
/// times ([`in_transaction!`] and the transactions that open and close themselves).
pub(crate) async fn retrying<T, F, Fut>(store: &PgStore, attempt: F) -> Result<T, DbError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    let mut n: u32 = 1;
    loop {
        match attempt().await {
            Err(e) if is_conflict(&e) => {
                if n >= MAX_ATTEMPTS {
                    return Err(DbError::Conflict(n));
                }
                store.note_retry();
                tracing::debug!(attempt = n, %e, "transaction conflict; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(u64::from(n) * 3)).await;
                n += 1;
            }
            other => return other,
        }
    }
}

pub use relay::batch_sizes;
pub use sendonce_server::store::postgres::schema::fresh_database;

/// The PostgreSQL store of one server instance.
pub struct PgStore {
    /// The bounded connection pool.
    pub pool: Pool,
    instance: Instance,
    observer: lease::Observer,
    retries: AtomicU64,
    heartbeat: tokio::task::JoinHandle<()>,
    /// When partitions ahead may be tried again after a creation gave up.
    create_retry: partitions::Retry,
    /// One expiry pass at a time in this process (the reaper's and the test API's): across
    /// instances the advisory lock is only tried, so a second pass here would skip instead
    /// of finishing what the first one found.
    expiring: tokio::sync::Mutex<()>,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// A pool of at most `size` connections to `url`, as the store's own (no schema, no
/// heartbeat), its sessions under the default [`DbTimeouts`].
pub fn pool(url: &str, size: usize) -> Result<Pool, DbError> {
    pool_with(&session_config(url, &DbTimeouts::default())?, size)
}

/// The connection settings for `url`, every session under `timeouts` (set at connection
/// start, no round trip of their own; after the URL's own `options`, so they win).
pub fn session_config(url: &str, timeouts: &DbTimeouts) -> Result<tokio_postgres::Config, DbError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| DbError::Task(format!("bad PostgreSQL URL: {e}")))?;
    let ms = |d: std::time::Duration| d.as_millis().min(i32::MAX as u128);
    let limits = format!(
        "-c lock_timeout={} -c statement_timeout={} -c idle_in_transaction_session_timeout={}",
        ms(timeouts.lock),
        ms(timeouts.statement),
        ms(timeouts.idle_in_transaction)
    );
    let options = match config.get_options() {
        Some(own) if !own.trim().is_empty() => format!("{own} {limits}"),
        _ => limits,
    };
    config.options(&options);
    Ok(config)
}

/// A pool of at most `size` connections with `config`.
fn pool_with(config: &tokio_postgres::Config, size: usize) -> Result<Pool, DbError> {
    let config = config.clone();
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size.max(1))
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(Duration::from_secs(10)))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(|e| DbError::Task(format!("connection pool: {e}")))
}

impl PgStore {
    /// Connects to `url` (`postgres://`, `postgresql://`, a unix socket as a
    /// percent-encoded host or `?host=/dir`, or the key-value form), with `pool_size`
    /// connections at most, each session under `timeouts`; creates the schema; starts this
    /// instance's heartbeat (its monotonic time and its wall `clock`) on a connection of its own.
    pub async fn open(
        url: &str,
        pool_size: usize,
        timeouts: DbTimeouts,
        instance: Instance,
        clock: std::sync::Arc<sendonce_server::clock::Clock>,
    ) -> Result<Self, DbError> {
        let config = session_config(url, &timeouts)?;
        let pool = pool_with(&config, pool_size)?;
        schema::create(&mut pool.get().await?).await?;
        heartbeat::beat(&pool.get().await?, &instance, clock.now_ms()).await?;
        // Not from the pool: requests that pin every pooled connection (each waiting out a
        // lock) must not silence the heartbeat, or peers would judge a live instance dead.
        let heartbeat = tokio::spawn(heartbeat::run(config, instance.clone(), clock));
        Ok(Self {
            pool,
            instance,
            observer: lease::Observer::default(),
            retries: AtomicU64::new(0),
            heartbeat,
            create_retry: partitions::Retry::default(),
            expiring: tokio::sync::Mutex::new(()),
        })
    }

    /// Transactions run again after a conflict, since this store opened.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub(crate) fn note_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// A pooled connection (waits at most [`POOL_WAIT`], then [`DbError::Busy`]).
    pub async fn client(&self) -> Result<deadpool_postgres::Client, DbError> {
        Ok(self.pool.get().await?)
    }
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn caller(&self, token_hash: String, now_ms: i64) -> Fut<'_, Option<Caller>> {
        Box::pin(accounts::caller(self, token_hash, now_ms))
    }

    fn user_currency(&self, user_id: String) -> Fut<'_, Option<String>> {
        Box::pin(accounts::user_currency(self, user_id))
    }

    fn balance(&self, user_id: String) -> Fut<'_, i64> {
        Box::pin(async move { accounts::balance(&self.client().await?, &user_id).await })
    }

    fn set_display_name(&self, user_id: String, name: String) -> Fut<'_, ()> {
        Box::pin(accounts::set_display_name(self, user_id, name))
    }

    fn add_beneficiary(&self, b: NewBeneficiary) -> Fut<'_, BeneficiaryOutcome> {
        Box::pin(
            async move { in_transaction!(self, |tx| accounts::add_beneficiary(&tx, &b).await?) },
        )
    }

    fn key_row(&self, user_id: String, key: String) -> Fut<'_, Option<KeyRow>> {
        Box::pin(async move {
            sendonce_server::store::postgres::keys::read(&self.client().await?, &user_id, &key)
                .await
        })
    }

    fn key_row_and_currency(
        &self,
        user_id: String,
        key: String,
        recipient: Option<String>,
    ) -> Fut<'_, (Option<KeyRow>, Option<String>)> {
        Box::pin(async move {
            let c = self.client().await?;
            keys::read_with_currency(&c, &user_id, &key, recipient.as_deref()).await
        })
    }

    fn claim(&self, claim: NewClaim) -> Fut<'_, Claim> {
        Box::pin(async move { Ok(self.claim_with_balance(claim).await?.0) })
    }

    fn claim_with_balance(&self, claim: NewClaim) -> Fut<'_, (Claim, i64)> {
        Box::pin(keys::claim(self, claim, self.instance.clone()))
    }

    fn authorize(
        &self,
        user_id: String,
        key: String,
        fresh_id: String,
        now_ms: i64,
    ) -> Fut<'_, Authorization> {
        Box::pin(gateway::authorize(self, user_id, key, fresh_id, now_ms))
    }

    fn commit(
        &self,
        record: TransferRecord,
        hash: Vec<u8>,
        lock_id: String,
        rules: Rules,
    ) -> Fut<'_, Answer> {
        Box::pin(async move { commit::commit(self, &record, &hash, &lock_id, rules).await })
    }

    fn release(&self, user_id: String, key: String, lock_id: String, now_ms: i64) -> Fut<'_, ()> {
        Box::pin(keys::release_unused(self, user_id, key, lock_id, now_ms))
    }

    fn release_stuck(
        &self,
        user_id: String,
        key: String,
        lock_id: String,
        now_ms: i64,
    ) -> Fut<'_, ()> {
        Box::pin(reaper::release_stuck(self, user_id, key, lock_id, now_ms))
    }

    fn lookup(&self, user_id: String, key: String) -> Fut<'_, Lookup> {
        Box::pin(async move { keys::lookup(&self.client().await?, &user_id, &key).await })
    }

    fn close_unexecuted(
        &self,
        user_id: String,
        key: String,
        now_ms: i64,
        bucket_width_ms: i64,
        body: Vec<u8>,
    ) -> Fut<'_, Lookup> {
        Box::pin(keys::close_unexecuted(
            self,
            user_id,
            key,
            now_ms,
            bucket_width_ms,
            body,
        ))
    }

    fn debit_by_transfer(
        &self,
        user_id: String,
        transfer_id: String,
    ) -> Fut<'_, Option<TransferRecord>> {
        Box::pin(async move {
            ledger::debit_by_transfer(&self.client().await?, &user_id, &transfer_id).await
        })
    }

    fn stuck_keys(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        Box::pin(reaper::stuck_keys(self, lock_timeout_ms))
    }

    fn traces(&self, user_id: String, key: String) -> Fut<'_, bool> {
        Box::pin(reaper::traces(self, user_id, key))
    }

    fn finish(
        &self,
        record: TransferRecord,
        hash: Vec<u8>,
        lock_id: String,
        rules: Rules,
    ) -> Fut<'_, Answer> {
        Box::pin(reaper::finish(self, record, hash, lock_id, rules))
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        Box::pin(reaper::expire(self, now_ms, key_window_ms))
    }

    fn trim(&self, cut: crate::retention::Cutoffs) -> Fut<'_, crate::retention::Trimmed> {
        Box::pin(async move { retention::trim_chunk(&self.client().await?, cut).await })
    }

    fn outbox_pending(&self) -> Fut<'_, bool> {
        Box::pin(async move { lib_outbox::any_unpublished(&self.client().await?).await })
    }

    fn publish_batch(&self, now_ms: i64) -> Fut<'_, usize> {
        Box::pin(
            async move { in_transaction!(self, |tx| relay::publish_batch(&tx, now_ms).await?) },
        )
    }

    fn replay_outbox(&self, from_event: i64) -> Fut<'_, usize> {
        Box::pin(async move { lib_outbox::replay_from(&self.client().await?, from_event).await })
    }

    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: crate::store::Publishing<'a>,
    ) -> Fut<'a, crate::store::RelayRound> {
        Box::pin(async move {
            let mut client = self.client().await?;
            lib_relay::round(&mut client, limit, now_ms, publish).await
        })
    }
}

#[cfg(test)]
mod fast_path_tests;
#[cfg(test)]
mod tests;
