//! The outbox on SQLite: events written in the unit of work's transaction, read and marked
//! by a relay after the commit (at least once).

use rusqlite::{params, Connection};

use crate::outcome::Event;
use crate::store::{DbError, ImportedEvent};

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
    for e in events {
        insert_one(tx, scope, key, now_ms, &e.topic, &e.payload)?;
    }
    Ok(())
}

/// Writes one event of the key (scope, key) inside the caller's transaction; its id.
///
/// `OR ROLLBACK`, like the key table's hot writes (see `group.rs`): the insert writes two
/// b-trees (the table, `sqlite_sequence`), and with the default `ABORT` SQLite would keep a
/// statement journal for it. Nothing in the row can violate a constraint, so the only way it
/// fails is an I/O error, which ends the transaction either way.
pub fn insert_one(
    tx: &Connection,
    scope: &str,
    key: &str,
    now_ms: i64,
    topic: &str,
    payload: &[u8],
) -> Result<i64, DbError> {
    tx.prepare_cached(
        "INSERT OR ROLLBACK INTO sendonce_outbox (scope, idem_key, topic, payload, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![scope, key, topic, payload, now_ms])?;
    Ok(tx.last_insert_rowid())
}

/// Whether any event waits to be published (a read: an idle relay's poll opens no write).
pub fn any_unpublished(conn: &Connection) -> Result<bool, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sendonce_outbox WHERE published_at_ms IS NULL)",
        )?
        .query_row([], |r| r.get(0))?)
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

/// Marks every unpublished event up to `last` published: one range for a batch read with
/// [`unpublished`] and delivered in the same transaction (it holds every unpublished event up
/// to `last`, in order).
pub fn mark_through(conn: &Connection, last: i64, now_ms: i64) -> Result<usize, DbError> {
    Ok(conn
        .prepare_cached(
            "UPDATE sendonce_outbox SET published_at_ms = ?2
             WHERE published_at_ms IS NULL AND event_id <= ?1",
        )?
        .execute(params![last, now_ms])?)
}

/// Marks every event from `from_event` on unpublished, as a broker replay from an old
/// offset would; returns how many will be delivered again (their consumers' inboxes make the
/// second delivery a no-op).
pub fn replay_from(conn: &Connection, from_event: i64) -> Result<usize, DbError> {
    Ok(conn.execute(
        "UPDATE sendonce_outbox SET published_at_ms = NULL WHERE event_id >= ?1",
        params![from_event],
    )?)
}

/// How many events the outbox holds, and how many of them wait to be published.
pub fn counts(conn: &Connection) -> Result<(i64, i64), DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE published_at_ms IS NULL) FROM sendonce_outbox",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// Removes up to `chunk` published events written before `before_ms`, oldest first (the caller
/// repeats while a chunk was full). Only the oldest ids are looked at (a primary-key range,
/// never a scan), so a trim costs the same however large the table is; an unpublished event
/// is never removed, and the newest event always stays, so "its event left the outbox" can be
/// read as "its id is below the smallest id still there" (see [`super::inbox::trim`]).
pub fn trim(conn: &Connection, before_ms: i64, chunk: i64) -> Result<usize, DbError> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM sendonce_outbox
             WHERE event_id IN (SELECT event_id FROM sendonce_outbox ORDER BY event_id LIMIT ?2)
               AND published_at_ms IS NOT NULL AND created_at_ms < ?1
               AND event_id < (SELECT MAX(event_id) FROM sendonce_outbox)",
        )?
        .execute(params![before_ms, chunk])?)
}

/// Moves events in from an older outbox table, each keeping its id and whether it was
/// published (`AUTOINCREMENT` moves past them, so a new event never takes an id an inbox
/// already holds); an id already present is left alone. For an application's one-time
/// migration, in its transaction.
pub fn import(conn: &Connection, events: &[ImportedEvent]) -> Result<(), DbError> {
    let mut insert = conn.prepare(
        "INSERT INTO sendonce_outbox (event_id, scope, idem_key, topic, payload, created_at_ms,
                                      published_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (event_id) DO NOTHING",
    )?;
    for e in events {
        insert.execute(params![
            e.event_id,
            e.scope,
            e.key,
            e.event.topic,
            e.event.payload,
            e.created_at_ms,
            e.published_at_ms
        ])?;
    }
    Ok(())
}
