//! The outbox on SQLite: events written in the unit of work's transaction, read and marked
//! by a relay after the commit (at least once).

use rusqlite::{params, Connection};

use crate::outcome::Event;
use crate::store::DbError;

/// The outbox table (idempotent DDL).
pub fn create(conn: &Connection) -> Result<(), DbError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS sendonce_outbox (
            event_id        INTEGER PRIMARY KEY AUTOINCREMENT,
            scope           TEXT NOT NULL,
            idem_key        TEXT NOT NULL,
            topic           TEXT NOT NULL,
            payload         BLOB NOT NULL,
            created_at_ms   INTEGER NOT NULL,
            published_at_ms INTEGER
        );
        CREATE INDEX IF NOT EXISTS sendonce_outbox_unpublished
            ON sendonce_outbox (event_id) WHERE published_at_ms IS NULL;",
    )?;
    Ok(())
}

/// Writes `events` of the key (scope, key) (inside the caller's transaction).
pub fn insert(
    tx: &Connection,
    scope: &str,
    key: &str,
    now_ms: i64,
    events: &[Event],
) -> Result<(), DbError> {
    let mut st = tx.prepare_cached(
        "INSERT INTO sendonce_outbox (scope, idem_key, topic, payload, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for e in events {
        st.execute(params![scope, key, e.topic, e.payload, now_ms])?;
    }
    Ok(())
}

/// Up to `limit` unpublished events, oldest first, as `(event_id, event)`.
pub fn unpublished(conn: &Connection, limit: usize) -> Result<Vec<(i64, Event)>, DbError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut st = conn.prepare_cached(
        "SELECT event_id, topic, payload FROM sendonce_outbox
         WHERE published_at_ms IS NULL ORDER BY event_id LIMIT ?1",
    )?;
    let rows = st.query_map(params![limit], |r| {
        Ok((
            r.get(0)?,
            Event {
                topic: r.get(1)?,
                payload: r.get(2)?,
            },
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Marks these events published.
pub fn mark_published(conn: &Connection, ids: &[i64], now_ms: i64) -> Result<(), DbError> {
    let mut st = conn.prepare_cached(
        "UPDATE sendonce_outbox SET published_at_ms = ?2
         WHERE event_id = ?1 AND published_at_ms IS NULL",
    )?;
    for id in ids {
        st.execute(params![id, now_ms])?;
    }
    Ok(())
}
