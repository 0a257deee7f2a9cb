//! The outbox on SQLite: events written with the debit, delivered to the in-process
//! consumers at least once (the loop that drives it: `relay/in_process.rs`).

use rusqlite::{params, Connection};

use crate::consumers::{Consumer, TransferDone};
use sendonce_server::store::DbError;

/// Events handled per database call, so other requests get the connection in between.
pub const BATCH: usize = 64;

/// Delivers up to one batch and marks it published; returns how many events it handled.
///
/// Delivery happens before the mark, exactly like a broker publish followed by an offset
/// commit: each consumer's batch is its own (nested) transaction, so when they do not share
/// a commit with the mark (a bare connection) a crash in between publishes again, and the
/// consumers' inboxes absorb the duplicate; a replay (`replay_from`) does the same.
pub fn publish_batch(conn: &mut Connection, now_ms: i64) -> Result<usize, DbError> {
    let events = pending(conn, BATCH)?;
    let Some(last) = events.last().map(|(id, _)| *id) else {
        return Ok(0);
    };
    let decoded = decode(&events);
    for consumer in Consumer::ALL {
        consumer.handle_batch(conn, &decoded, now_ms)?;
    }
    // The batch is every unpublished event up to `last`, in order, so one range marks it.
    conn.prepare_cached("UPDATE outbox SET published = 1 WHERE published = 0 AND event_id <= ?1")?
        .execute(params![last])?;
    Ok(events.len())
}

/// Up to `limit` unpublished events, oldest first: `(event_id, payload)`.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<(i64, String)>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT event_id, payload FROM outbox WHERE published = 0 ORDER BY event_id LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Writes the `TransferDone` event of a debit (in the debit's transaction); returns its id.
pub(crate) fn insert_transfer_done(
    conn: &Connection,
    record: &crate::ledger::TransferRecord,
    body: &[u8],
) -> Result<i64, DbError> {
    conn.prepare_cached(
        "INSERT OR ROLLBACK INTO outbox (kind, transfer_id, payload, created_at_ms)
         VALUES ('TransferDone', ?1, ?2, ?3)",
    )?
    .execute(params![
        record.transfer_id,
        String::from_utf8_lossy(body),
        record.created_at_ms
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Marks these events published (a broker acknowledged them).
pub fn mark_published(conn: &Connection, event_ids: &[i64]) -> Result<(), DbError> {
    let mut stmt = conn.prepare_cached("UPDATE outbox SET published = 1 WHERE event_id = ?1")?;
    for id in event_ids {
        stmt.execute(params![id])?;
    }
    Ok(())
}

/// The events of a batch that parse; a poison message must not block the stream forever,
/// so an unreadable one is logged and skipped.
pub(crate) fn decode(events: &[(i64, String)]) -> Vec<(i64, TransferDone)> {
    events
        .iter()
        .filter_map(|(event_id, payload)| match serde_json::from_str(payload) {
            Ok(event) => Some((*event_id, event)),
            Err(e) => {
                tracing::error!(event_id, %e, "unreadable outbox event skipped");
                None
            }
        })
        .collect()
}

/// Marks every event from `from_event` on as unpublished, as a broker replay from an old
/// offset would; returns how many will be delivered again.
pub fn replay_from(conn: &Connection, from_event: i64) -> Result<usize, DbError> {
    Ok(conn.execute(
        "UPDATE outbox SET published = 0 WHERE event_id >= ?1",
        params![from_event],
    )?)
}
