//! The simulated gateway's record on SQLite (the types and how an authorisation ends:
//! `crate::authorization`): the idempotent authorisation, its capture by the debit, its void,
//! the counters and expiry. PostgreSQL's `gateway.rs` makes the same decisions.

use rusqlite::{params, Connection, OptionalExtension};

use crate::authorization::{Authorization, Counts, Settle};
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::DbError;

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
    let void = match (when, keys::completed(conn, user, key)?) {
        (_, Some(false)) => false,
        (Settle::UnlessHeld, _) => true,
        (Settle::IfDecided, completed) => completed == Some(true),
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
    use sendonce_server::store::sqlite::Db;

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
