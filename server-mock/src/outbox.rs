//! server-mock's events in the library's outbox (`sendonce_server::store::sqlite::outbox`):
//! the `TransferDone` written with each debit, and the in-process relay's batch on SQLite —
//! delivered to this process's consumers in the transaction that marks it published (the loop
//! that drives it: `relay/in_process.rs`).

use rusqlite::Connection;

use crate::consumers::{Consumer, TransferDone};
use crate::ledger::TransferRecord;
use sendonce_server::store::sqlite::outbox;
use sendonce_server::store::{DbError, ImportedEvent};
use sendonce_server::Event;

/// Events handled per database call, so other requests get the connection in between.
pub const BATCH: usize = 64;

/// The topic of server-mock's one kind of event.
pub const TRANSFER_DONE: &str = "TransferDone";

/// Delivers up to one batch and marks it published; returns how many events it handled.
///
/// Delivery happens before the mark, exactly like a broker publish followed by an offset
/// commit: each consumer's batch is its own (nested) transaction, so when they do not share
/// a commit with the mark (a bare connection) a crash in between publishes again, and the
/// consumers' inboxes absorb the duplicate; a replay (`outbox::replay_from`) does the same.
pub fn publish_batch(conn: &mut Connection, now_ms: i64) -> Result<usize, DbError> {
    let events = outbox::unpublished(conn, BATCH)?;
    let Some(last) = events.last().map(|(id, _)| *id) else {
        return Ok(0);
    };
    let decoded = decode(&events);
    for consumer in Consumer::ALL {
        consumer.handle_batch(conn, &decoded, now_ms)?;
    }
    // The batch is every unpublished event up to `last`, in order, so one range marks it.
    outbox::mark_through(conn, last, now_ms)?;
    Ok(events.len())
}

/// Writes the `TransferDone` event of a debit (in the debit's transaction); returns its id.
pub(crate) fn insert_transfer_done(
    conn: &Connection,
    record: &TransferRecord,
    body: &[u8],
) -> Result<i64, DbError> {
    let (user, key) = (&record.from_user_id, &record.idempotency_key);
    outbox::insert_one(conn, user, key, record.created_at_ms, TRANSFER_DONE, body)
}

/// The events of a batch that parse; a poison message must not block the stream forever,
/// so an unreadable one is logged and skipped.
pub(crate) fn decode(events: &[(i64, Event)]) -> Vec<(i64, TransferDone)> {
    events
        .iter()
        .filter_map(|(event_id, e)| match serde_json::from_slice(&e.payload) {
            Ok(event) => Some((*event_id, event)),
            Err(err) => {
                tracing::error!(event_id, %err, "unreadable outbox event skipped");
                None
            }
        })
        .collect()
}

/// An event of the outbox table server-mock had before the library's (its `kind`, JSON
/// `payload` and whether it was `published`), as the library's outbox keeps it: the key that
/// wrote it is read from the event itself. The migrations of both stores move them in.
pub(crate) fn imported(
    event_id: i64,
    kind: String,
    payload: String,
    created_at_ms: i64,
    published: bool,
) -> ImportedEvent {
    let v: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
    let field = |name: &str| v[name].as_str().unwrap_or_default().to_string();
    ImportedEvent {
        event_id,
        scope: field("from_user_id"),
        key: field("idempotency_key"),
        event: Event {
            topic: kind,
            payload: payload.into_bytes(),
        },
        created_at_ms,
        published_at_ms: published.then_some(created_at_ms),
    }
}
