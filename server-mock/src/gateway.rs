//! The simulated payment gateway: latency, and idempotency on our key, kept on disk.
//!
//! A real gateway is a third party that remembers every authorisation it gave. This one
//! keeps its records in its own table (`gateway_authorizations`), so a retry after a
//! crash, a restart or a reaper release presents the same key and gets the same
//! authorisation back: step (2) may run more than once, the gateway authorises once.
//! Nothing per key lives in memory.
//!
//! Every authorisation ends **captured or voided**, as a customer's held funds must: the
//! debit's transaction captures the key's authorisation ([`capture`]); every other final
//! outcome of a key voids it ([`settle`]: a stored 402 or 422, a look-up's closing 404, the
//! guard's answer after an earlier debit, a failed commit that releases the key, a request
//! fenced out after the key got its outcome), and a void is recorded in `gateway_voids`,
//! once per authorisation. A key merely released keeps its authorisation for the retry
//! (the reaper finishes a retry slower than its lease with it). A key voided and then
//! claimed again gets a fresh authorisation.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::store::Store;
use sendonce_server::store::DbError;

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

/// Marks the key's authorisation captured, in the debit's transaction: the funds it held
/// moved. (A debit always follows its holder's own authorisation, so there is one.)
pub fn capture(conn: &Connection, user: &str, key: &str, now_ms: i64) -> Result<(), DbError> {
    conn.prepare_cached(
        "UPDATE OR ROLLBACK gateway_authorizations SET captured_at_ms = ?3
         WHERE user_id = ?1 AND idem_key = ?2 AND captured_at_ms IS NULL",
    )?
    .execute(params![user, key, now_ms])?;
    Ok(())
}

/// When [`settle`] voids the key's uncaptured authorisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Unless a request holds the key: the caller's transaction just gave the key its
    /// outcome without a debit (or released it after a failed commit, or found the key's
    /// debit made for another request), so no authorisation given so far will be captured.
    UnlessHeld,
    /// Only if the key has its outcome (a completed row): a request fenced out sees a key
    /// released, held by a retry, or decided; only the last one will never use the
    /// authorisation it may have written late (the retry's gateway step gets it back, and
    /// the reaper finishes a retry slower than its lease with it).
    IfDecided,
}

/// Voids the key's uncaptured authorisation when `when` says the key's outcome does not
/// use it (a key still `IN_PROGRESS` is left to its holder or the reaper, whose outcome
/// settles it). Returns whether it voided one.
pub fn settle(
    conn: &Connection,
    user: &str,
    key: &str,
    now_ms: i64,
    when: Settle,
) -> Result<bool, DbError> {
    let state: Option<String> = conn
        .prepare_cached("SELECT state FROM idempotency_keys WHERE user_id = ?1 AND idem_key = ?2")?
        .query_row(params![user, key], |r| r.get(0))
        .optional()?;
    let void = match (when, state.as_deref()) {
        (_, Some("in_progress")) => false,
        (Settle::UnlessHeld, _) => true,
        (Settle::IfDecided, state) => state == Some("completed"),
    };
    if !void {
        return Ok(false);
    }
    conn.prepare_cached(
        "INSERT OR ROLLBACK INTO gateway_voids
             (authorization_id, user_id, idem_key, calls, created_at_ms, voided_at_ms)
         SELECT authorization_id, user_id, idem_key, calls, created_at_ms, ?3
         FROM gateway_authorizations
         WHERE user_id = ?1 AND idem_key = ?2 AND captured_at_ms IS NULL
         ON CONFLICT (authorization_id) DO NOTHING",
    )?
    .execute(params![user, key, now_ms])?;
    let voided = conn
        .prepare_cached(
            "DELETE FROM gateway_authorizations
             WHERE user_id = ?1 AND idem_key = ?2 AND captured_at_ms IS NULL",
        )?
        .execute(params![user, key])?;
    if voided > 0 {
        tracing::info!(
            key,
            "gateway authorisation voided: the key's outcome does not use it"
        );
    }
    Ok(voided > 0)
}

/// The gateway's counters, from its tables: they survive restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Authorisations given (live, captured and voided).
    pub authorizations: i64,
    /// Calls, repeats included.
    pub calls: i64,
    /// Authorisations captured by a debit.
    pub captures: i64,
    /// Authorisations voided.
    pub voids: i64,
}

/// The gateway's counters.
pub fn counts(conn: &Connection) -> Result<Counts, DbError> {
    Ok(conn.query_row(
        "SELECT (SELECT COUNT(*) FROM gateway_authorizations)
                    + (SELECT COUNT(*) FROM gateway_voids),
                (SELECT COALESCE(SUM(calls), 0) FROM gateway_authorizations)
                    + (SELECT COALESCE(SUM(calls), 0) FROM gateway_voids),
                (SELECT COUNT(*) FROM gateway_authorizations WHERE captured_at_ms IS NOT NULL),
                (SELECT COUNT(*) FROM gateway_voids)",
        [],
        |r| {
            Ok(Counts {
                authorizations: r.get(0)?,
                calls: r.get(1)?,
                captures: r.get(2)?,
                voids: r.get(3)?,
            })
        },
    )?)
}

/// Forgets records older than `before_ms`, at most `limit` of each kind per call: the
/// gateway's records need only outlive the key window (after it the ledger's UNIQUE guard
/// holds). An authorisation never captured by then is voided first, never just forgotten
/// (a hold nobody releases); voids are forgotten a window after they were made. Returns the
/// most rows one step touched (the caller repeats while that is `limit`).
pub fn expire_chunk(
    conn: &Connection,
    before_ms: i64,
    now_ms: i64,
    limit: usize,
) -> Result<usize, DbError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let voided = conn
        .prepare_cached(
            "INSERT OR ROLLBACK INTO gateway_voids
                 (authorization_id, user_id, idem_key, calls, created_at_ms, voided_at_ms)
             SELECT authorization_id, user_id, idem_key, calls, created_at_ms, ?2
             FROM gateway_authorizations
             WHERE created_at_ms < ?1 AND captured_at_ms IS NULL
             ORDER BY created_at_ms LIMIT ?3
             ON CONFLICT (authorization_id) DO NOTHING",
        )?
        .execute(params![before_ms, now_ms, limit])?;
    // The expired rows left uncaptured now all have their void: forget them with the rest.
    let forgotten = conn
        .prepare_cached(
            "DELETE FROM gateway_authorizations WHERE (user_id, idem_key) IN
                (SELECT user_id, idem_key FROM gateway_authorizations
                 WHERE created_at_ms < ?1
                   AND (captured_at_ms IS NOT NULL
                        OR authorization_id IN (SELECT authorization_id FROM gateway_voids))
                 ORDER BY created_at_ms LIMIT ?2)",
        )?
        .execute(params![before_ms, limit])?;
    let old_voids = conn
        .prepare_cached(
            "DELETE FROM gateway_voids WHERE authorization_id IN
                (SELECT authorization_id FROM gateway_voids
                 WHERE voided_at_ms < ?1 ORDER BY voided_at_ms LIMIT ?2)",
        )?
        .execute(params![before_ms, limit])?;
    Ok(voided.max(forgotten).max(old_voids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{sqlite::SqliteStore, Instance};
    use sendonce_server::store::sqlite::{Db, Durability};

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
        let n = db.read(|c| counts(c)).await.unwrap();
        assert_eq!((n.authorizations, n.calls), (2, 3));
        let gone = db
            .write(Durability::Full, |c| expire_chunk(c, 2, 3, 10))
            .await;
        assert_eq!(gone.unwrap(), 2);
        let n = db.read(|c| counts(c)).await.unwrap();
        assert_eq!(
            (n.authorizations, n.voids),
            (2, 2),
            "never captured: voided, not forgotten"
        );
        let gone = db
            .write(Durability::Full, |c| expire_chunk(c, 4, 5, 10))
            .await;
        assert_eq!(gone.unwrap(), 2, "the voids are forgotten a window later");
        assert_eq!(db.read(|c| counts(c)).await.unwrap(), Counts::default());
    }

    /// A key's authorisation ends captured or voided, once; a held key is left alone.
    #[tokio::test]
    async fn settle_voids_once_and_never_a_captured_or_held_authorisation() {
        let db = Db::open(":memory:", crate::schema::create).unwrap();
        let n = db
            .call(|c| {
                record(c, "u", "captured", "auth_c", 1)?;
                capture(c, "u", "captured", 2)?;
                record(c, "u", "held", "auth_h", 1)?;
                c.execute(
                    "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state,
                         lock_id, locked_at_ms, created_at_ms, bucket)
                     VALUES ('u', 'held', x'00', 'in_progress', 'l', 0, 0, 0)",
                    [],
                )?;
                record(c, "u", "unused", "auth_u", 1)?;
                record(c, "u", "released", "auth_r", 1)?;
                let unless_held = Settle::UnlessHeld;
                assert!(!settle(c, "u", "captured", 3, unless_held)?);
                assert!(!settle(c, "u", "held", 3, unless_held)?);
                assert!(
                    !settle(c, "u", "released", 3, Settle::IfDecided)?,
                    "a released key keeps it for the retry"
                );
                assert!(settle(c, "u", "unused", 3, unless_held)?);
                assert!(
                    !settle(c, "u", "unused", 4, unless_held)?,
                    "idempotent on the key"
                );
                let again = record(c, "u", "unused", "auth_u2", 5)?;
                assert_eq!(
                    again.authorization_id, "auth_u2",
                    "a fresh one after a void"
                );
                counts(c)
            })
            .await
            .unwrap();
        assert_eq!((n.authorizations, n.captures, n.voids), (5, 1, 1));
    }
}
