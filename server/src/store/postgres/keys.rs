//! The key table on PostgreSQL: the statements every request and every reaper share — the
//! per-key lock across day partitions, the claim, the fence, completion, release, the read —
//! and a claim's second try once its day's partition exists. An application may fuse the
//! claim with reads of its own in one statement around `sendonce_claim_key` (server-mock
//! reads the balance that way).

use std::time::{Duration, Instant};

use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::error::SqlState;
use tokio_postgres::Row;

use super::{exec, heartbeat, lease, opt, partitions, sqlstate};
use crate::decision::{Claim, Existing, KeyRow};
use crate::lease::Instance;
use crate::store::{DbError, Fence, NewKey, Stuck};

/// Serialises every insert of one (user, key) across partitions: a key retried across
/// midnight lands in another day's partition, where the primary key cannot see the first
/// row. Held until commit; the NOT EXISTS of the insert then runs on a fresh snapshot.
pub const KEY_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 0))";

/// The key row for (user, key), if any (the newest bucket's: a key retried across midnight
/// has one row, serialised by [`KEY_LOCK`]).
pub async fn read<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
) -> Result<Option<KeyRow>, DbError> {
    Ok(opt(
        c,
        "SELECT request_hash, state, response_status, response_body FROM idempotency_keys
         WHERE user_id = $1 AND idem_key = $2 ORDER BY bucket DESC LIMIT 1",
        &[&user_id, &key],
    )
    .await?
    .and_then(|r| key_row(&r)))
}

/// A key row from the first four columns of `r` (`request_hash, state, response_status,
/// response_body`); `None` when `state` is NULL (an outer join found no row).
pub fn key_row(r: &Row) -> Option<KeyRow> {
    r.get::<_, Option<String>>(1).map(|state| KeyRow {
        hash: r.get(0),
        completed: state == "completed",
        status: r
            .get::<_, Option<i32>>(2)
            .and_then(|s| u16::try_from(s).ok()),
        body: r.get(3),
    })
}

/// The fence's statement (see [`hold`]).
pub const HOLD: &str = "SELECT 1 FROM idempotency_keys
     WHERE user_id = $1 AND idem_key = $2 AND lock_id = $3 AND state = 'in_progress'
     FOR UPDATE";

/// The fence: locks the key row if it is still `IN_PROGRESS` under `lock_id`.
pub async fn hold<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
    lock_id: &str,
) -> Result<bool, DbError> {
    Ok(opt(c, HOLD, &[&user_id, &key, &lock_id]).await?.is_some())
}

/// Completes the row we hold with its response.
pub async fn complete<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
    lock_id: &str,
    status: u16,
    body: &[u8],
) -> Result<(), DbError> {
    exec(
        c,
        "UPDATE idempotency_keys SET state = 'completed', response_status = $4, response_body = $5
         WHERE user_id = $1 AND idem_key = $2 AND lock_id = $3 AND state = 'in_progress'",
        &[&user_id, &key, &lock_id, &i32::from(status), &body],
    )
    .await?;
    Ok(())
}

/// Releases (deletes) the row we hold, so a retry executes from scratch.
pub async fn release<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
    lock_id: &str,
) -> Result<(), DbError> {
    exec(
        c,
        "DELETE FROM idempotency_keys
         WHERE user_id = $1 AND idem_key = $2 AND lock_id = $3 AND state = 'in_progress'",
        &[&user_id, &key, &lock_id],
    )
    .await?;
    Ok(())
}

/// Runs `insert`; when the bucket has no partition yet (a fresh database, a clock jump
/// past the ones made ahead), creates it and the next one (the reaper makes the rest) and
/// runs `insert` once more. A creation that cannot get its lock in time, or that another
/// instance is making right now, answers [`DbError::Busy`] (503, retry): never a wait
/// behind a long transaction on the key table.
pub async fn with_partition<T, F, Fut>(pool: &Pool, bucket: i64, insert: F) -> Result<T, DbError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    let no_partition = |e: &DbError| sqlstate(e) == Some(&SqlState::CHECK_VIOLATION);
    match insert().await {
        Err(e) if no_partition(&e) => {
            partitions::ensure(pool, bucket, bucket + 1).await?;
            match insert().await {
                Err(e) if no_partition(&e) => Err(DbError::Busy),
                other => other,
            }
        }
        other => other,
    }
}

/// Phase 1: inserts the key row `IN_PROGRESS` under `k.lease`, or finds the row that is
/// there. One autocommit statement (`sendonce_claim_key`: the per-key lock, then the insert
/// if no partition holds the key); the day's partition is made if it is missing.
pub async fn claim(pool: &Pool, k: &NewKey<'_>) -> Result<Claim, DbError> {
    let bucket = k.now_ms.div_euclid(k.bucket_width_ms);
    let attempt = || async {
        let client = pool.get().await?;
        let claimed = opt(
            &client,
            "SELECT sendonce_claim_key($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &k.user_id,
                &k.key,
                &k.hash,
                &k.lock_id,
                &k.now_ms,
                &bucket,
                &k.lease.instance,
                &k.lease.mono_ms,
                &k.body,
            ],
        )
        .await?
        .is_some_and(|r| r.get::<_, bool>(0));
        if claimed {
            return Ok(Claim::Acquired);
        }
        // Committed before our key lock was granted, so this read sees it.
        Ok(Claim::Exists(
            match read(&client, k.user_id, k.key).await? {
                Some(row) => row.into_existing(k.hash),
                None => Existing::InProgress { same_request: true },
            },
        ))
    };
    with_partition(pool, bucket, attempt).await
}

/// Closes a key nothing ran under (inside the caller's transaction, after [`KEY_LOCK`]): a
/// completed row with an empty fingerprint and the stored `not_found` answer (status 404),
/// so "not executed" stays true. `None` when this call closed it, else the row there.
pub async fn close<C: GenericClient>(
    tx: &C,
    scope: &str,
    key: &str,
    now_ms: i64,
    bucket: i64,
    not_found: &[u8],
) -> Result<Option<KeyRow>, DbError> {
    let inserted = exec(
        tx,
        "INSERT INTO idempotency_keys
            (user_id, idem_key, request_hash, state, lock_id, locked_at_ms,
             created_at_ms, bucket, response_status, response_body)
         SELECT $1, $2, ''::bytea, 'completed', '', $3, $3, $4, 404, $5
         WHERE NOT EXISTS
             (SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2)
         ON CONFLICT (user_id, idem_key, bucket) DO NOTHING",
        &[&scope, &key, &now_ms, &bucket, &not_found],
    )
    .await?;
    Ok(if inserted == 1 {
        None
    } else {
        read(tx, scope, key).await?
    })
}

/// Keys `IN_PROGRESS` whose lease ran out, as `me` judges it: by their holder's monotonic
/// time (`lock_timeout_ms` of it) or a holder whose heartbeat `observer` saw stop. What
/// [`crate::store::Reap::stuck`] answers on PostgreSQL, for the library's store and an
/// application's own alike.
pub async fn stuck<C: GenericClient>(
    c: &C,
    me: &Instance,
    observer: &lease::Observer,
    lock_timeout_ms: i64,
) -> Result<Vec<Stuck>, DbError> {
    let timeout = Duration::from_millis(u64::try_from(lock_timeout_ms).unwrap_or(0));
    let holders = heartbeat::holders(c, (observer, &*me.id), Instant::now(), timeout).await?;
    let my_mono = me.mono_ms();
    Ok(in_progress(c)
        .await?
        .into_iter()
        .filter(|(holder, lock_mono, _)| {
            lease::expired(
                holder,
                *lock_mono,
                &me.id,
                my_mono,
                &holders,
                lock_timeout_ms,
            )
        })
        .map(|(_, _, stuck)| stuck)
        .collect())
}

/// Every key `IN_PROGRESS` with its holder's instance and lease, for the reaper to judge
/// (`lease::expired`).
pub async fn in_progress<C: GenericClient>(c: &C) -> Result<Vec<(String, i64, Stuck)>, DbError> {
    Ok(super::rows(
        c,
        "SELECT user_id, idem_key, lock_id, request_hash, request_body, lock_instance,
                lock_mono_ms, locked_at_ms
         FROM idempotency_keys WHERE state = 'in_progress'",
        &[],
    )
    .await?
    .iter()
    .map(|r| {
        let stuck = Stuck {
            fence: Fence {
                scope: r.get(0),
                key: r.get(1),
                lock_id: r.get(2),
                hash: r.get(3),
                claimed_at_ms: r.get(7),
            },
            body: r.get::<_, Option<Vec<u8>>>(4).unwrap_or_default(),
        };
        (r.get(5), r.get(6), stuck)
    })
    .collect())
}

/// The fence as a CTE body of an application's own statement: the key row (`user`, `key`, as
/// SQL expressions) locked if it is still `IN_PROGRESS` under `lock` — [`HOLD`] with the
/// statement's own parameters (server-mock's one-statement debit).
pub fn hold_sql(user: &str, key: &str, lock: &str) -> String {
    format!(
        "SELECT 1 FROM idempotency_keys
         WHERE user_id = {user} AND idem_key = {key} AND lock_id = {lock} AND state = 'in_progress'
         FOR UPDATE"
    )
}

/// [`complete`] as a CTE body of an application's own statement: the key row held under `lock`
/// completed with `status` and `body` (SQL expressions), only if `also` holds too (an `AND …`,
/// or empty) — so the answer is stored by the statement that did the work, or not at all.
pub fn complete_sql(
    user: &str,
    key: &str,
    lock: &str,
    status: &str,
    body: &str,
    also: &str,
) -> String {
    format!(
        "UPDATE idempotency_keys SET state = 'completed', response_status = {status},
                                     response_body = {body}
         WHERE user_id = {user} AND idem_key = {key} AND lock_id = {lock} AND state = 'in_progress'
           {also}"
    )
}

/// A condition for an application's own statement: the key (`user`, `key`) is `IN_PROGRESS`
/// (someone holds it: its outcome is not decided).
pub fn in_progress_sql(user: &str, key: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM idempotency_keys
                 WHERE user_id = {user} AND idem_key = {key} AND state = 'in_progress')"
    )
}

/// A condition for an application's own statement: the key (`user`, `key`) is completed (its
/// answer is stored).
pub fn completed_sql(user: &str, key: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM idempotency_keys
                 WHERE user_id = {user} AND idem_key = {key} AND state = 'completed')"
    )
}

/// The key row of (`user`, `key`) with the application's `beside` columns (each `, expr`) in
/// one statement that always returns one row: columns 0–3 are the key row's ([`key_row`] reads
/// them; NULL without a row), the rest `beside`'s — phase 0's read and the application's own
/// look-up in one visit (server-mock reads the recipient's currency so).
pub fn read_beside_sql(user: &str, key: &str, beside: &str) -> String {
    format!(
        "SELECT k.request_hash, k.state, k.response_status, k.response_body{beside}
         FROM (SELECT 1) AS one LEFT JOIN LATERAL
             (SELECT request_hash, state, response_status, response_body FROM idempotency_keys
              WHERE user_id = {user} AND idem_key = {key} ORDER BY bucket DESC LIMIT 1) AS k ON true"
    )
}

/// How many key rows there are, and how many of them are `IN_PROGRESS`.
pub async fn counts<C: GenericClient>(c: &C) -> Result<(i64, i64), DbError> {
    let sql =
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE state = 'in_progress') FROM idempotency_keys";
    let r = &super::rows(c, sql, &[]).await?[0];
    Ok((r.get(0), r.get(1)))
}
