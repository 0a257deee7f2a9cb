//! Idempotency keys on PostgreSQL as server-mock uses them: the claim fused with the
//! balance read, look-ups, the release of an unused key (the debit itself is `commit`, the
//! gateway's record `gateway`; the key table's shared statements are sendonce-server's
//! `store::postgres::keys`). A stuck key is resolved by the engine's reaper
//! (`transfer::Transfer::recover`).

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::gateway::settle;
use super::ledger::debit_by_key;
use super::{exec, in_transaction, opt, retrying, sqlstate, PgStore};
use crate::authorization::Settle;
use crate::store::{Instance, Lookup, NewClaim};
use sendonce_server::store::postgres::keys::{
    self as lib_keys, key_row, read, release, with_partition, KEY_LOCK,
};
use sendonce_server::store::DbError;
use sendonce_server::{Claim, Existing, KeyRow};

/// Phase 1: the key row `IN_PROGRESS` under this instance's lease, and the sender's
/// balance for the advisory pre-check (0 when the key was taken).
///
/// One statement, one round trip: `sendonce_claim` (schema.rs) is the claim's whole
/// transaction — key lock, insert, balance read — in autocommit. Its commit does not wait
/// for the disk (`synchronous_commit = off` for it only): a claim moves no money, so it
/// need only be durable before money moves, and the debit's commit flushes the WAL up to
/// itself, this claim included. A database crash before that may forget the claim; the
/// client's retry then claims again and repeats the idempotent gateway step. A key that
/// exists already is read after the commit (its row was committed before our lock was
/// granted).
pub(super) async fn claim(
    store: &PgStore,
    k: NewClaim,
    instance: Instance,
) -> Result<(Claim, i64), DbError> {
    let bucket = k.now_ms.div_euclid(k.bucket_width_ms);
    let attempt = || {
        retrying(store, || async {
            let client = store.client().await?;
            // Taken just before the insert: the lease starts no later than the row.
            let lock_mono_ms = instance.mono_ms();
            let row = match opt(
                &client,
                CLAIM,
                &[
                    &k.user_id,
                    &k.key,
                    &k.hash,
                    &k.lock_id,
                    &k.now_ms,
                    &bucket,
                    &&*instance.id,
                    &lock_mono_ms,
                    &k.body,
                ],
            )
            .await
            {
                Ok(row) => row,
                // Only an insert that bypassed the key lock can hold the row: the key is taken.
                Err(e) if sqlstate(&e) == Some(&SqlState::UNIQUE_VIOLATION) => None,
                Err(e) => return Err(e),
            };
            if let Some(row) = row.filter(|r| r.get::<_, bool>(0)) {
                return Ok((Claim::Acquired, row.get(1)));
            }
            let existing = match read(&client, &k.user_id, &k.key).await? {
                Some(row) => row.into_existing(&k.hash),
                None => Existing::InProgress { same_request: true },
            };
            Ok((Claim::Exists(existing), 0))
        })
    };
    with_partition(&store.pool, bucket, attempt).await
}

const CLAIM: &str =
    "SELECT claimed, balance FROM sendonce_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// Phase 0's read: the key row (the library's `keys::read_beside_sql`) with the recipient's
/// currency (`$3`) beside it.
static READ_WITH_CURRENCY: LazyLock<String> = LazyLock::new(|| {
    lib_keys::read_beside_sql(
        "$1",
        "$2",
        ", (SELECT currency FROM users WHERE user_id = $3)",
    )
});

/// The key row for (user, key) and the wallet currency of `recipient`, in one statement
/// (one row always: the row's columns are NULL without a key row).
pub(super) async fn read_with_currency<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
    recipient: Option<&str>,
) -> Result<(Option<KeyRow>, Option<String>), DbError> {
    let r = opt(c, &READ_WITH_CURRENCY, &[&user_id, &key, &recipient])
        .await?
        .ok_or_else(|| DbError::Task("key look-up returned no row".into()))?;
    let row = key_row(&r);
    Ok((row, r.get(4)))
}

/// The ledger first (it outlives the key row), then the key row.
pub(super) async fn lookup<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
) -> Result<Lookup, DbError> {
    if let Some((record, _)) = debit_by_key(c, user_id, key).await? {
        return Ok(Ok(record));
    }
    Ok(Err(read(c, user_id, key).await?))
}

/// Closes a key nothing ran under (see `sendonce_server::store::sqlite::keys::close_unexecuted`), after checking
/// the ledger again in the same transaction.
pub(super) async fn close_unexecuted(
    store: &PgStore,
    user_id: String,
    key: String,
    now_ms: i64,
    bucket_width_ms: i64,
    body: Vec<u8>,
) -> Result<Lookup, DbError> {
    let bucket = now_ms.div_euclid(bucket_width_ms);
    let attempt = || async {
        in_transaction!(store, |tx| {
            exec(&tx, KEY_LOCK, &[&user_id, &key]).await?;
            if let Some((record, _)) = debit_by_key(&tx, &user_id, &key).await? {
                Ok(record)
            } else {
                let closed = lib_keys::close(&tx, &user_id, &key, now_ms, bucket, &body).await?;
                // "Not executed" is final: an authorisation a lost request left is voided.
                settle(&tx, &user_id, &key, now_ms, Settle::UnlessHeld).await?;
                Err(closed)
            }
        })
    };
    with_partition(&store.pool, bucket, attempt).await
}

/// Releases a key we hold after a failed commit and voids its authorisation, in one
/// transaction (the pipeline's error path).
pub(super) async fn release_unused(
    store: &PgStore,
    user_id: String,
    key: String,
    lock_id: String,
    now_ms: i64,
) -> Result<(), DbError> {
    in_transaction!(store, |tx| release_in(
        &tx, &user_id, &key, &lock_id, now_ms
    )
    .await?)
}

/// [`release_unused`] inside the caller's transaction (the reaper's, under its brief lock
/// wait): the key row freed and its authorisation voided together.
pub(super) async fn release_in<C: GenericClient>(
    tx: &C,
    user_id: &str,
    key: &str,
    lock_id: &str,
    now_ms: i64,
) -> Result<(), DbError> {
    release(tx, user_id, key, lock_id).await?;
    settle(tx, user_id, key, now_ms, Settle::UnlessHeld).await?;
    Ok(())
}
