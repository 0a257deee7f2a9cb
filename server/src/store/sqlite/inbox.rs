//! The inbox on SQLite: a consumer records each event it handles in the transaction of its
//! effect, so an event delivered again (the relay publishes at least once) has no effect.

use rusqlite::{params, Connection};

use crate::store::DbError;

/// The inbox table (idempotent DDL).
pub fn create(conn: &Connection) -> Result<(), DbError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS sendonce_inbox (
            consumer       TEXT NOT NULL,
            event_id       INTEGER NOT NULL,
            received_at_ms INTEGER NOT NULL,
            PRIMARY KEY (consumer, event_id)
        ) WITHOUT ROWID;",
    )?;
    Ok(())
}

/// Records `event_id` for `consumer` inside the caller's transaction; `false` when it was
/// recorded before (the effect already happened: do nothing, commit, acknowledge).
///
/// `OR ROLLBACK` spares SQLite a statement journal (see `group.rs`); a conflict is not a
/// failure here (`DO NOTHING`), so only an I/O error ends the transaction.
pub fn first_time(
    tx: &Connection,
    consumer: &str,
    event_id: i64,
    now_ms: i64,
) -> Result<bool, DbError> {
    let n = tx
        .prepare_cached(
            "INSERT OR ROLLBACK INTO sendonce_inbox (consumer, event_id, received_at_ms)
             VALUES (?1, ?2, ?3) ON CONFLICT (consumer, event_id) DO NOTHING",
        )?
        .execute(params![consumer, event_id, now_ms])?;
    Ok(n == 1)
}

/// How many events the inbox records (every consumer's).
pub fn count(conn: &Connection) -> Result<i64, DbError> {
    Ok(conn
        .prepare_cached("SELECT COUNT(*) FROM sendonce_inbox")?
        .query_row([], |r| r.get(0))?)
}

/// Removes up to `chunk` of `consumer`'s records received before `before_ms`, oldest first,
/// and only of events that left the outbox (below its smallest id: see
/// [`super::outbox::trim`]) — while an event is still in the outbox a replay can deliver it
/// again, and its record is what makes that a no-op. The caller repeats while a chunk was full.
pub fn trim(
    conn: &Connection,
    consumer: &str,
    before_ms: i64,
    chunk: i64,
) -> Result<usize, DbError> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM sendonce_inbox WHERE consumer = ?3
               AND event_id IN (SELECT event_id FROM sendonce_inbox WHERE consumer = ?3
                                ORDER BY event_id LIMIT ?2)
               AND event_id < (SELECT MIN(event_id) FROM sendonce_outbox)
               AND received_at_ms < ?1",
        )?
        .execute(params![before_ms, chunk, consumer])?)
}

/// Moves one record in from an older inbox table (an application's one-time migration).
pub fn import(
    conn: &Connection,
    consumer: &str,
    event_id: i64,
    received_at_ms: i64,
) -> Result<(), DbError> {
    first_time(conn, consumer, event_id, received_at_ms)?;
    Ok(())
}
