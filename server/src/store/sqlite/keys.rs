//! The key table on SQLite: its DDL and every statement on it — claim, fence, complete,
//! release, close, expire. What a key and a fingerprint are, and what a row already there
//! answers, is decided once for every store ([`crate::decision`]).

use super::atomically;
use crate::decision::{Claim, Existing, KeyRow};
use crate::expiry::first_kept_bucket;
use crate::store::{DbError, Fence, NewKey, Stuck};
use rusqlite::{params, Connection, OptionalExtension};

/// Phase 1: insert the key row `IN_PROGRESS`; the primary key decides a race.
///
/// One transaction ([`atomically`]): its own on a bare connection, or the group job's.
pub fn claim(conn: &mut Connection, k: &NewKey<'_>) -> Result<Claim, DbError> {
    atomically(conn, |tx| claim_in(tx, k))
}

fn claim_in(tx: &Connection, k: &NewKey<'_>) -> Result<Claim, DbError> {
    let inserted = tx
        .prepare_cached(
            "INSERT OR ROLLBACK INTO idempotency_keys
            (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, created_at_ms, bucket,
             lock_instance, lock_mono_ms, request_body)
         VALUES (?1, ?2, ?3, 'in_progress', ?4, ?5, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (user_id, idem_key) DO NOTHING",
        )?
        .execute(params![
            k.user_id,
            k.key,
            k.hash,
            k.lock_id,
            k.now_ms,
            k.now_ms.div_euclid(k.bucket_width_ms),
            k.lease.instance,
            k.lease.mono_ms,
            k.body
        ])?;
    if inserted == 1 {
        return Ok(Claim::Acquired);
    }
    match read(tx, k.user_id, k.key)? {
        Some(row) => Ok(Claim::Exists(row.into_existing(k.hash))),
        // Unreachable inside one IMMEDIATE transaction; answer "busy" rather than guess.
        None => Ok(Claim::Exists(Existing::InProgress { same_request: true })),
    }
}

/// Reads the key row for (user, key), if any.
pub fn read(conn: &Connection, user_id: &str, key: &str) -> Result<Option<KeyRow>, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT request_hash, state, response_status, response_body
             FROM idempotency_keys WHERE user_id = ?1 AND idem_key = ?2",
        )?
        .query_row(params![user_id, key], |r| {
            Ok(KeyRow {
                hash: r.get(0)?,
                completed: r.get::<_, String>(1)? == "completed",
                status: r.get(2)?,
                body: r.get(3)?,
            })
        })
        .optional()?)
}

/// The statement of [`read_beside`]: the key row and, in the same statement, one text value
/// of the application's. Built once (keep it in a `static LazyLock` or beside your store), so
/// a request's read neither formats nor allocates its text before the statement cache finds it.
#[derive(Debug, Clone)]
pub struct ReadBeside(String);

impl ReadBeside {
    /// `beside` is a scalar query over the application's own tables taking its one parameter
    /// as `?3`, e.g. `SELECT currency FROM users WHERE user_id = ?3`.
    pub fn new(beside: &str) -> Self {
        // One row always: the key row LEFT JOINed (its columns NULL when there is none).
        Self(format!(
            "SELECT k.request_hash, k.state, k.response_status, k.response_body, ({beside})
             FROM (SELECT 1) LEFT JOIN idempotency_keys AS k ON k.user_id = ?1 AND k.idem_key = ?2"
        ))
    }
}

/// Reads the key row for (user, key) and the value `beside` selects for `param`, e.g. what
/// validating a new request needs. On a reader connection, the first statement after a write
/// pays for refilling the page cache the write invalidated; a first request that looks up its
/// key and then the application's value would pay two statements' setup where this pays one.
pub fn read_beside(
    conn: &Connection,
    user_id: &str,
    key: &str,
    beside: &ReadBeside,
    param: &str,
) -> Result<(Option<KeyRow>, Option<String>), DbError> {
    Ok(conn
        .prepare_cached(&beside.0)?
        .query_row(params![user_id, key, param], |r| {
            let row = match r.get::<_, Option<String>>(1)? {
                None => None,
                Some(state) => Some(KeyRow {
                    hash: r.get(0)?,
                    completed: state == "completed",
                    status: r.get(2)?,
                    body: r.get(3)?,
                }),
            };
            Ok((row, r.get(4)?))
        })?)
}

/// The fence: whether the key row is still `IN_PROGRESS` under `lock_id`. Checked inside
/// the transaction that moves money, so a request whose lock was lost (reaped, expired,
/// finished by the reaper) moves nothing.
pub fn holds(conn: &Connection, user_id: &str, key: &str, lock_id: &str) -> Result<bool, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM idempotency_keys
             WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
        )?
        .query_row(params![user_id, key, lock_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Completes the row we own with its response; a no-op if the reaper took it from us.
pub fn complete(
    conn: &Connection,
    user_id: &str,
    key: &str,
    lock_id: &str,
    status: u16,
    body: &[u8],
) -> Result<bool, DbError> {
    let n = conn
        .prepare_cached(
            "UPDATE OR ROLLBACK idempotency_keys
         SET state = 'completed', response_status = ?4, response_body = ?5
         WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
        )?
        .execute(params![user_id, key, lock_id, status, body])?;
    Ok(n == 1)
}

/// Closes a key nothing ran under (no row, no debit): a completed row with an empty
/// fingerprint and the given 404 answer, so the "not executed" a status look-up just said
/// stays true — a late duplicate of the request replays it instead of moving money.
/// Returns `None` when this call closed the key, or the row a concurrent request wrote first.
pub fn close_unexecuted(
    conn: &mut Connection,
    user_id: &str,
    key: &str,
    now_ms: i64,
    bucket_width_ms: i64,
    body: &[u8],
) -> Result<Option<KeyRow>, DbError> {
    atomically(conn, |tx| {
        let inserted = tx
            .prepare_cached(
                "INSERT INTO idempotency_keys
            (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, created_at_ms, bucket,
             response_status, response_body)
         VALUES (?1, ?2, x'', 'completed', '', ?3, ?3, ?4, 404, ?5)
         ON CONFLICT (user_id, idem_key) DO NOTHING",
            )?
            .execute(params![
                user_id,
                key,
                now_ms,
                now_ms.div_euclid(bucket_width_ms),
                body
            ])?;
        Ok(if inserted == 1 {
            None
        } else {
            read(tx, user_id, key)?
        })
    })
}

/// Releases (deletes) the row we own, so a retry executes from scratch; `false` if it was
/// no longer ours (a fence for the caller's transaction, like [`complete`]'s).
pub fn release(
    conn: &Connection,
    user_id: &str,
    key: &str,
    lock_id: &str,
) -> Result<bool, DbError> {
    let n = conn
        .prepare_cached(
            "DELETE FROM idempotency_keys
             WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
        )?
        .execute(params![user_id, key, lock_id])?;
    Ok(n == 1)
}

/// Keys `IN_PROGRESS` under a lease that ran out: taken by another process (one process
/// per SQLite file: a dead one's), or by this one (`me`) before `mono_cutoff`.
pub fn stuck(conn: &Connection, me: &str, mono_cutoff: i64) -> Result<Vec<Stuck>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT user_id, idem_key, lock_id, request_hash, request_body, locked_at_ms
         FROM idempotency_keys
         WHERE state = 'in_progress' AND (lock_instance <> ?1 OR lock_mono_ms < ?2)",
    )?;
    let rows = stmt.query_map(params![me, mono_cutoff], |r| {
        Ok(Stuck {
            fence: Fence {
                scope: r.get(0)?,
                key: r.get(1)?,
                lock_id: r.get(2)?,
                hash: r.get(3)?,
                claimed_at_ms: r.get(5)?,
            },
            body: r.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Drops every bucket that is entirely older than the key window: one range delete,
/// never row by row. Returns the number of rows removed.
pub fn expire(conn: &Connection, now_ms: i64, key_window_ms: i64) -> Result<usize, DbError> {
    let first_kept = first_kept_bucket(now_ms, key_window_ms);
    Ok(conn.execute(
        "DELETE FROM idempotency_keys WHERE bucket < ?1",
        params![first_kept],
    )?)
}

/// Like [`expire`], but removes at most `limit` rows of the expired buckets (in bucket
/// order, through the expiry index): the reaper calls it in a loop, one transaction per
/// chunk, so expiring a big bucket never holds the writer for long. Returns the rows removed.
pub fn expire_chunk(
    conn: &Connection,
    now_ms: i64,
    key_window_ms: i64,
    limit: usize,
) -> Result<usize, DbError> {
    let first_kept = first_kept_bucket(now_ms, key_window_ms);
    Ok(conn
        .prepare_cached(
            "DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN
                (SELECT user_id, idem_key FROM idempotency_keys
                 WHERE bucket < ?1 ORDER BY bucket, created_at_ms LIMIT ?2)",
        )?
        .execute(params![
            first_kept,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ])?)
}

/// The key table and its indexes (idempotent), after adding to a table made by an older
/// version the columns it lacks.
pub fn create(conn: &Connection) -> Result<(), DbError> {
    migrate_key_lease(conn)?;
    conn.execute_batch(TABLE)?;
    Ok(())
}

const TABLE: &str = r#"
-- The primary key decides races between concurrent first requests.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id         TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    request_hash    BLOB NOT NULL,
    -- CHECKs with `=`/`OR`, not `IN (…)`: SQLite builds a temporary table for an IN list on
    -- every insert or update that checks it (files made before keep the IN form).
    state           TEXT NOT NULL CHECK (state = 'in_progress' OR state = 'completed'),
    lock_id         TEXT NOT NULL,
    locked_at_ms    INTEGER NOT NULL,
    -- The lease, in the holder's monotonic time: which server process holds the lock and
    -- when (ms since that process started), so a wall-clock jump cannot expire it.
    lock_instance   TEXT NOT NULL DEFAULT '',
    lock_mono_ms    INTEGER NOT NULL DEFAULT 0,
    -- The exact request body, so the reaper can finish a transfer the gateway authorised.
    request_body    BLOB,
    created_at_ms   INTEGER NOT NULL,
    bucket          INTEGER NOT NULL,
    response_status INTEGER,
    response_body   BLOB,
    PRIMARY KEY (user_id, idem_key)
) WITHOUT ROWID;
-- Expiry deletes whole buckets; the reaper scans stuck keys.
-- (bucket, created_at_ms): new keys append at the index's right end instead of landing on a
-- random leaf (keys are random UUIDs), one page written per group commit instead of one per
-- request. The stuck-key index holds only IN_PROGRESS rows, so it stays a few pages.
DROP INDEX IF EXISTS idempotency_keys_bucket;
DROP INDEX IF EXISTS idempotency_keys_stuck;
CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys (bucket, created_at_ms);
CREATE INDEX IF NOT EXISTS idempotency_keys_in_progress
    ON idempotency_keys (locked_at_ms) WHERE state = 'in_progress';
"#;

/// Adds the lease and body columns to a key table made before them. Old rows get an
/// empty `lock_instance`: no live process holds them, so the reaper resolves them.
fn migrate_key_lease(conn: &Connection) -> Result<(), DbError> {
    let has = |col: &str| -> Result<Option<bool>, DbError> {
        let mut st = conn.prepare("SELECT name FROM pragma_table_info('idempotency_keys')")?;
        let cols: Vec<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok((!cols.is_empty()).then(|| cols.iter().any(|c| c == col)))
    };
    for (col, ddl) in [
        ("lock_instance", "lock_instance TEXT NOT NULL DEFAULT ''"),
        ("lock_mono_ms", "lock_mono_ms INTEGER NOT NULL DEFAULT 0"),
        ("request_body", "request_body BLOB"),
    ] {
        if has(col)? == Some(false) {
            conn.execute_batch(&format!("ALTER TABLE idempotency_keys ADD COLUMN {ddl}"))?;
        }
    }
    Ok(())
}

/// Whether the key row of (user, key) is completed: `None` without a row, `Some(false)` while
/// it is `IN_PROGRESS` (someone holds it), `Some(true)` once its answer is stored.
pub fn completed(conn: &Connection, user_id: &str, key: &str) -> Result<Option<bool>, DbError> {
    Ok(conn
        .prepare_cached("SELECT state FROM idempotency_keys WHERE user_id = ?1 AND idem_key = ?2")?
        .query_row(params![user_id, key], |r| r.get::<_, String>(0))
        .optional()?
        .map(|state| state == "completed"))
}

/// How many key rows there are, and how many of them are `IN_PROGRESS`.
pub fn counts(conn: &Connection) -> Result<(i64, i64), DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE state = 'in_progress') FROM idempotency_keys",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
}
