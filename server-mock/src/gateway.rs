//! The simulated payment gateway: latency, and idempotency on our key, kept on disk.
//!
//! A real gateway is a third party that remembers every authorisation it gave. This one
//! keeps its records in its own table (`gateway_authorizations`), so a retry after a
//! crash, a restart or a reaper release presents the same key and gets the same
//! authorisation back: step (2) may run more than once, the gateway authorises once.
//! Nothing per key lives in memory.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::db::DbError;
use crate::store::Store;

/// What the gateway returned for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// Gateway-side id, the same for every call with the key.
    pub authorization_id: String,
    /// How many times the key was presented.
    pub calls: u32,
}

/// Waits `delay`, then authorises (user, key), idempotently, through the store.
pub async fn authorize(
    store: &dyn Store,
    delay: Duration,
    user_id: &str,
    key: &str,
    now_ms: i64,
) -> Result<Authorization, DbError> {
    // tokio's timer rounds a deadline up to its next millisecond tick, so even a zero sleep
    // waits for the timer wheel (~0.5 ms on average): a gateway configured with no latency
    // must not add one.
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let fresh = format!("auth_{}", uuid::Uuid::new_v4().simple());
    store
        .authorize(user_id.to_string(), key.to_string(), fresh, now_ms)
        .await
}

/// The gateway's record for (user, key): the first call stores `fresh`, every later call
/// gets the stored authorisation back and counts the call.
pub fn record(
    c: &Connection,
    user: &str,
    key: &str,
    fresh: &str,
    now_ms: i64,
) -> Result<Authorization, DbError> {
    // The first call (every first request's) is one insert: no upsert DO UPDATE, no
    // RETURNING — either would make SQLite keep a statement journal or a temporary table
    // for the statement (see db/group.rs). A repeated step (after a crash, a reaper release)
    // counts the call and reads the stored id.
    let inserted = c
        .prepare_cached(
            "INSERT OR ROLLBACK INTO gateway_authorizations
                 (user_id, idem_key, authorization_id, calls, created_at_ms)
             VALUES (?1, ?2, ?3, 1, ?4)
             ON CONFLICT (user_id, idem_key) DO NOTHING",
        )?
        .execute(params![user, key, fresh, now_ms])?;
    let (authorization_id, calls): (String, i64) = if inserted == 1 {
        (fresh.to_string(), 1)
    } else {
        c.prepare_cached(
            "UPDATE gateway_authorizations SET calls = calls + 1
             WHERE user_id = ?1 AND idem_key = ?2
             RETURNING authorization_id, calls",
        )?
        .query_row(params![user, key], |r| Ok((r.get(0)?, r.get(1)?)))?
    };
    Ok(Authorization {
        authorization_id,
        calls: u32::try_from(calls).unwrap_or(u32::MAX),
    })
}

/// The authorisation given for (user, key), if any (the reaper asks before it releases).
pub fn lookup(conn: &Connection, user_id: &str, key: &str) -> Result<Option<String>, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT authorization_id FROM gateway_authorizations
             WHERE user_id = ?1 AND idem_key = ?2",
        )?
        .query_row(params![user_id, key], |r| r.get(0))
        .optional()?)
}

/// (distinct authorisations, total calls), from the table: they survive restarts.
pub fn counts(conn: &Connection) -> Result<(i64, i64), DbError> {
    Ok(conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(calls), 0) FROM gateway_authorizations",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// Forgets authorisations older than `before_ms`, at most `limit` of them: the gateway's
/// records need only outlive the key window (after it the ledger's UNIQUE guard holds).
pub fn expire_chunk(conn: &Connection, before_ms: i64, limit: usize) -> Result<usize, DbError> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM gateway_authorizations WHERE (user_id, idem_key) IN
                (SELECT user_id, idem_key FROM gateway_authorizations
                 WHERE created_at_ms < ?1 ORDER BY created_at_ms LIMIT ?2)",
        )?
        .execute(params![before_ms, i64::try_from(limit).unwrap_or(i64::MAX)])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{Db, Durability};
    use crate::store::{sqlite::SqliteStore, Instance};

    #[tokio::test]
    async fn same_key_same_authorization_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db").display().to_string();
        let store = SqliteStore::open(&path, Instance::new()).unwrap();
        let a = authorize(&store, Duration::ZERO, "u", "k", 1)
            .await
            .unwrap();
        let c = authorize(&store, Duration::ZERO, "v", "k", 1)
            .await
            .unwrap();
        drop(store);
        let store = SqliteStore::open(&path, Instance::new()).unwrap();
        let b = authorize(&store, Duration::ZERO, "u", "k", 2)
            .await
            .unwrap();
        let db: &Db = &store.db;
        assert_eq!(a.authorization_id, b.authorization_id, "a restart keeps it");
        assert_ne!(a.authorization_id, c.authorization_id);
        assert_eq!(b.calls, 2);
        assert_eq!(db.read(|c| counts(c)).await.unwrap(), (2, 3));
        let gone = db.write(Durability::Full, |c| expire_chunk(c, 2, 10)).await;
        assert_eq!(gone.unwrap(), 2);
    }
}
