//! The outbox on PostgreSQL: events written in the unit of work's transaction, read and
//! marked by a relay after the commit (at least once).

use deadpool_postgres::GenericClient;

use super::{exec, rows};
use crate::outcome::Event;
use crate::store::{DbError, ImportedEvent};

/// The outbox table (idempotent DDL).
pub const TABLE: &str = "
CREATE TABLE IF NOT EXISTS sendonce_outbox (
    event_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope           TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    topic           TEXT NOT NULL,
    payload         BYTEA NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    published_at_ms BIGINT
);
CREATE INDEX IF NOT EXISTS sendonce_outbox_unpublished
    ON sendonce_outbox (event_id) WHERE published_at_ms IS NULL;
";

/// The head of an `INSERT … SELECT` that writes an event inside an application's own
/// statement (its `SELECT` gives scope, key, topic, payload as `bytea`, and the time, in that
/// order): for a unit of work written as one statement, whose event must be written by that
/// statement too (server-mock's debit). The table and its columns stay this module's.
pub const INSERT_INTO: &str =
    "INSERT INTO sendonce_outbox (scope, idem_key, topic, payload, created_at_ms)";

/// A claim of the oldest unpublished events, as an application's relay batch takes them when
/// it delivers to its consumers inside the claim's transaction: `SELECT o.event_id, o.topic,
/// o.payload` and then `columns` (each `, expr`), of events that also satisfy `also` (an
/// `AND …` over the event row `o`: server-mock skips events whose recipient another session
/// holds), oldest first, at most `$1`, locked with `SKIP LOCKED` so relays in N instances take
/// disjoint batches. The application runs it in its transaction, with its own `$2`… if any.
pub fn claim_sql(columns: &str, also: &str) -> String {
    format!(
        "SELECT o.event_id, o.topic, o.payload{columns} FROM sendonce_outbox o
         WHERE o.published_at_ms IS NULL {also}
         ORDER BY o.event_id LIMIT $1 FOR UPDATE OF o SKIP LOCKED"
    )
}

/// An `UPDATE` marking the events whose ids are the array `ids` published at `now` (both SQL
/// expressions, e.g. `$11` and `$2`), returning a row per event marked: a CTE of an
/// application's delivery statement, which marks its batch in the same statement as the
/// consumers' effects.
pub fn mark_sql(ids: &str, now: &str) -> String {
    format!(
        "UPDATE sendonce_outbox SET published_at_ms = {now}
         WHERE event_id = ANY({ids}) AND published_at_ms IS NULL RETURNING 1"
    )
}

/// Writes `events` of the key (scope, key) (inside the caller's transaction).
pub async fn insert<C: GenericClient>(
    c: &C,
    scope: &str,
    key: &str,
    now_ms: i64,
    events: &[Event],
) -> Result<(), DbError> {
    for e in events {
        exec(
            c,
            "INSERT INTO sendonce_outbox (scope, idem_key, topic, payload, created_at_ms)
             VALUES ($1, $2, $3, $4, $5)",
            &[&scope, &key, &e.topic, &e.payload, &now_ms],
        )
        .await?;
    }
    Ok(())
}

/// Up to `limit` unpublished events, oldest first, as `(event_id, event)`, locked for the
/// caller's transaction; events another relay holds are skipped, never waited for.
pub async fn claim<C: GenericClient>(c: &C, limit: usize) -> Result<Vec<(i64, Event)>, DbError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    Ok(rows(
        c,
        "SELECT event_id, topic, payload FROM sendonce_outbox
         WHERE published_at_ms IS NULL ORDER BY event_id LIMIT $1
         FOR UPDATE SKIP LOCKED",
        &[&limit],
    )
    .await?
    .iter()
    .map(claimed)
    .collect())
}

/// The event of a row read by [`claim`] or by a [`claim_sql`] statement (its first three
/// columns), as `(event_id, event)`.
pub fn claimed(r: &tokio_postgres::Row) -> (i64, Event) {
    let event = Event {
        topic: r.get(1),
        payload: r.get(2),
    };
    (r.get(0), event)
}

/// Marks these events published.
pub async fn mark_published<C: GenericClient>(
    c: &C,
    ids: &[i64],
    now_ms: i64,
) -> Result<(), DbError> {
    exec(
        c,
        "UPDATE sendonce_outbox SET published_at_ms = $2
         WHERE event_id = ANY($1) AND published_at_ms IS NULL",
        &[&ids, &now_ms],
    )
    .await?;
    Ok(())
}

/// Whether any event waits to be published (a read).
pub async fn any_unpublished<C: GenericClient>(c: &C) -> Result<bool, DbError> {
    let sql = "SELECT EXISTS (SELECT 1 FROM sendonce_outbox WHERE published_at_ms IS NULL)";
    Ok(rows(c, sql, &[]).await?[0].get(0))
}

/// Marks every event from `from_event` on unpublished, as a broker replay from an old
/// offset would; returns how many will be delivered again (their consumers' inboxes make the
/// second delivery a no-op).
pub async fn replay_from<C: GenericClient>(c: &C, from_event: i64) -> Result<usize, DbError> {
    let sql = "UPDATE sendonce_outbox SET published_at_ms = NULL WHERE event_id >= $1";
    Ok(usize::try_from(exec(c, sql, &[&from_event]).await?).unwrap_or(usize::MAX))
}

/// How many events the outbox holds, and how many of them wait to be published.
pub async fn counts<C: GenericClient>(c: &C) -> Result<(i64, i64), DbError> {
    let sql =
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE published_at_ms IS NULL) FROM sendonce_outbox";
    let row = &rows(c, sql, &[]).await?[0];
    Ok((row.get(0), row.get(1)))
}

/// Removes up to `chunk` published events written before `before_ms`, oldest first (the
/// caller repeats while a chunk was full); rows another session holds are skipped. Only the
/// oldest ids are looked at, so a trim costs the same however large the table is; an
/// unpublished event is never removed, and the newest event always stays, so "its event left
/// the outbox" can be read as "its id is below the smallest id still there"
/// (see [`super::inbox::trim`]).
pub async fn trim<C: GenericClient>(c: &C, before_ms: i64, chunk: i64) -> Result<usize, DbError> {
    let sql = "DELETE FROM sendonce_outbox WHERE event_id IN (
             SELECT event_id FROM sendonce_outbox ORDER BY event_id LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND published_at_ms IS NOT NULL AND created_at_ms < $1
           AND event_id < (SELECT MAX(event_id) FROM sendonce_outbox)";
    Ok(usize::try_from(exec(c, sql, &[&before_ms, &chunk]).await?).unwrap_or(usize::MAX))
}

/// Moves events in from an older outbox table, each keeping its id and whether it was
/// published; an id already present is left alone. The identity is then moved past them
/// once, so a new event never takes an id an inbox already holds. For an application's
/// one-time migration, in its transaction.
pub async fn import<C: GenericClient>(c: &C, events: &[ImportedEvent]) -> Result<(), DbError> {
    let Some(last) = events.iter().map(|e| e.event_id).max() else {
        return Ok(());
    };
    for e in events {
        exec(
            c,
            "INSERT INTO sendonce_outbox (event_id, scope, idem_key, topic, payload,
                                          created_at_ms, published_at_ms)
             OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (event_id) DO NOTHING",
            &[
                &e.event_id,
                &e.scope,
                &e.key,
                &e.event.topic,
                &e.event.payload,
                &e.created_at_ms,
                &e.published_at_ms,
            ],
        )
        .await?;
    }
    exec(
        c,
        "SELECT setval(pg_get_serial_sequence('sendonce_outbox', 'event_id'),
                       GREATEST($1, (SELECT COALESCE(MAX(event_id), 1) FROM sendonce_outbox)))",
        &[&last],
    )
    .await?;
    Ok(())
}
