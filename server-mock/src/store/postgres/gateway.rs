//! The simulated gateway's record on PostgreSQL (the types and how an authorisation ends:
//! `crate::authorization`): the idempotent authorisation, its void, and its expiry — the
//! statements SQLite's `gateway.rs` runs, with the same decisions.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;

use super::{exec, opt, PgStore};
use crate::authorization::{Authorization, Settle};
use sendonce_server::store::postgres::keys::{self, KEY_LOCK};
use sendonce_server::store::DbError;

/// The gateway's record for (user, key): the first call stores `fresh_id`, later calls
/// get the stored authorisation back (durable like a claim, see `keys::claim`).
pub(super) async fn authorize(
    store: &PgStore,
    user_id: String,
    key: String,
    fresh_id: String,
    now_ms: i64,
) -> Result<Authorization, DbError> {
    let client = store.client().await?;
    let row = opt(
        &client,
        GATEWAY_RECORD,
        &[&user_id, &key, &fresh_id, &now_ms],
    )
    .await?
    .ok_or_else(|| DbError::Task("gateway record returned no row".into()))?;
    Ok(Authorization {
        authorization_id: row.get(0),
        calls: u32::try_from(row.get::<_, i64>(1)).unwrap_or(u32::MAX),
    })
}

/// The gateway's record as one autocommit statement. `set_config(…, true)` is
/// `SET LOCAL`: it lasts until this statement's implicit commit, which it governs, and
/// never reaches the connection's next transaction (a debit's, say).
const GATEWAY_RECORD: &str = "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
     INSERT INTO gateway_authorizations
         (user_id, idem_key, authorization_id, calls, created_at_ms)
     SELECT $1, $2, $3, 1, $4 FROM async
     ON CONFLICT (user_id, idem_key) DO UPDATE SET calls = gateway_authorizations.calls + 1
     RETURNING authorization_id, calls";

/// Voids the key's uncaptured authorisation when `when` says the key's outcome does not
/// use it (the rule of SQLite's `keys::settle`), inside the caller's transaction. Under the key
/// lock, as a claim: a claim committed before it is seen `IN_PROGRESS` and keeps its
/// authorisation; one after it finds no live authorisation and gets a fresh one — never
/// one voided under it.
pub(super) async fn settle<C: GenericClient>(
    tx: &C,
    user_id: &str,
    key: &str,
    now_ms: i64,
    when: Settle,
) -> Result<(), DbError> {
    exec(tx, KEY_LOCK, &[&user_id, &key]).await?;
    let sql: &str = match when {
        Settle::UnlessHeld => &VOID_UNLESS_HELD,
        Settle::IfDecided => &VOID_IF_DECIDED,
    };
    exec(tx, sql, &[&user_id, &key, &now_ms]).await?;
    Ok(())
}

/// Moves the key's uncaptured authorisation to the voids, if the key is not held (the key's
/// state read with the library's conditions, `keys::in_progress_sql` and `completed_sql`).
static VOID_UNLESS_HELD: LazyLock<String> =
    LazyLock::new(|| void(&format!("AND NOT {}", keys::in_progress_sql("$1", "$2"))));

/// Moves the key's uncaptured authorisation to the voids, if the key has its outcome.
static VOID_IF_DECIDED: LazyLock<String> = LazyLock::new(|| {
    void(&format!(
        "AND NOT {} AND {}",
        keys::in_progress_sql("$1", "$2"),
        keys::completed_sql("$1", "$2")
    ))
});

/// A void statement: the key's uncaptured authorisation, if `also` holds, moved to the voids.
fn void(also: &str) -> String {
    format!(
        "WITH voided AS (
         DELETE FROM gateway_authorizations
         WHERE user_id = $1 AND idem_key = $2 AND captured_at_ms IS NULL
           {also}
         RETURNING authorization_id, user_id, idem_key, calls, created_at_ms)
         INSERT INTO gateway_voids
             (authorization_id, user_id, idem_key, calls, created_at_ms, voided_at_ms)
         SELECT authorization_id, user_id, idem_key, calls, created_at_ms, $3 FROM voided
         ON CONFLICT (authorization_id) DO NOTHING"
    )
}

/// Forgets gateway records older than `before_ms` (they need only outlive the window); an
/// authorisation never captured by then is voided first, never just forgotten, and voids
/// are forgotten a window after they were made.
pub(super) async fn expire_gateway<C: GenericClient>(
    c: &C,
    before_ms: i64,
    now_ms: i64,
) -> Result<(), DbError> {
    exec(
        c,
        "WITH voided AS (
             DELETE FROM gateway_authorizations
             WHERE created_at_ms < $1 AND captured_at_ms IS NULL
             RETURNING authorization_id, user_id, idem_key, calls, created_at_ms)
         INSERT INTO gateway_voids
             (authorization_id, user_id, idem_key, calls, created_at_ms, voided_at_ms)
         SELECT authorization_id, user_id, idem_key, calls, created_at_ms, $2 FROM voided
         ON CONFLICT (authorization_id) DO NOTHING",
        &[&before_ms, &now_ms],
    )
    .await?;
    exec(
        c,
        "DELETE FROM gateway_authorizations
         WHERE created_at_ms < $1 AND captured_at_ms IS NOT NULL",
        &[&before_ms],
    )
    .await?;
    exec(
        c,
        "DELETE FROM gateway_voids WHERE voided_at_ms < $1",
        &[&before_ms],
    )
    .await?;
    Ok(())
}
