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
pub fn first_time(
    tx: &Connection,
    consumer: &str,
    event_id: i64,
    now_ms: i64,
) -> Result<bool, DbError> {
    let n = tx
        .prepare_cached(
            "INSERT INTO sendonce_inbox (consumer, event_id, received_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (consumer, event_id) DO NOTHING",
        )?
        .execute(params![consumer, event_id, now_ms])?;
    Ok(n == 1)
}
