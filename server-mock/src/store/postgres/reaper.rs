//! The reaper's calls on PostgreSQL: which keys are stuck (by their holders' leases and
//! heartbeats), the reaper's question (a debit or a live authorisation under the key), its
//! commit and its release — each bounded by a brief lock wait, so a session frozen while
//! holding a row (a cut connection the server has not noticed yet) delays that key to the
//! next pass instead of holding the whole pass up — and expiry.

use super::{commit, gateway, in_transaction, keys, PgStore};
use crate::ledger::decide::Rules;
use crate::ledger::TransferRecord;
use crate::store::Stuck;
use sendonce_server::store::postgres::{heartbeat, keys as lib_keys, partitions};
use sendonce_server::store::DbError;
use sendonce_server::Answer;

/// The reaper's lock wait per stuck key (`SET LOCAL`: this transaction only).
const RESOLVE_LOCK_WAIT: &str = "SET LOCAL lock_timeout = '200ms'";

/// The reaper's question ([`crate::store::Store::traces`]): a debit under the key, a live
/// authorisation.
const TRACES: &str = "SELECT
    EXISTS (SELECT 1 FROM ledger WHERE kind = 'debit' AND user_id = $1 AND idem_key = $2),
    EXISTS (SELECT 1 FROM gateway_authorizations WHERE user_id = $1 AND idem_key = $2)";

/// [`in_transaction!`] for the reaper: waits at most [`RESOLVE_LOCK_WAIT`] for any lock.
macro_rules! briefly {
    ($store:expr, |$tx:ident| $body:expr) => {
        in_transaction!($store, |$tx| {
            $tx.batch_execute(RESOLVE_LOCK_WAIT).await?;
            $body
        })
    };
}

/// Keys `IN_PROGRESS` whose lease ran out, as this process judges it (their holder's
/// monotonic time, or a holder that stopped beating).
pub(super) async fn stuck_keys(
    store: &PgStore,
    lock_timeout_ms: i64,
) -> Result<Vec<Stuck>, DbError> {
    let client = store.client().await?;
    lib_keys::stuck(&client, &store.instance, &store.observer, lock_timeout_ms).await
}

/// Whether the stuck key left a trace: a debit under it, or a live authorisation (voided
/// ones are moved out of their table: any row there is live).
pub(super) async fn traces(store: &PgStore, user_id: String, key: String) -> Result<bool, DbError> {
    let row = store
        .client()
        .await?
        .query_one(TRACES, &[&user_id, &key])
        .await?;
    Ok(row.get::<_, bool>(0) || row.get::<_, bool>(1))
}

/// The reaper's fenced commit of a stuck key (the request path's `commit_in`, briefly).
pub(super) async fn finish(
    store: &PgStore,
    record: TransferRecord,
    hash: Vec<u8>,
    lock_id: String,
    rules: Rules,
) -> Result<Answer, DbError> {
    briefly!(store, |tx| {
        commit::commit_in(&tx, &record, &hash, &lock_id, rules).await?
    })
}

/// The reaper's release of a stuck key (the request path's `release_in`, briefly).
pub(super) async fn release_stuck(
    store: &PgStore,
    user_id: String,
    key: String,
    lock_id: String,
    now_ms: i64,
) -> Result<(), DbError> {
    briefly!(store, |tx| {
        keys::release_in(&tx, &user_id, &key, &lock_id, now_ms).await?
    })
}

/// Drops whole expired key partitions (by the instances' agreed time, with the partitions
/// ahead made first) and the gateway's old records; one pass at a time in this process.
pub(super) async fn expire(
    store: &PgStore,
    now_ms: i64,
    key_window_ms: i64,
) -> Result<usize, DbError> {
    let _one_pass = store.expiring.lock().await;
    let now_ms = heartbeat::agreed_now(&store.client().await?, &store.instance, now_ms).await?;
    partitions::ensure_ahead(&store.pool, now_ms, key_window_ms, &store.create_retry).await?;
    let expired = partitions::expire(&store.pool, now_ms, key_window_ms).await?;
    gateway::expire_gateway(&store.client().await?, now_ms - key_window_ms, now_ms).await?;
    Ok(expired)
}
