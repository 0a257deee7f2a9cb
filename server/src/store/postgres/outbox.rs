//! The outbox on PostgreSQL: events written in the unit of work's transaction, read and
//! marked by a relay after the commit (at least once).

use deadpool_postgres::GenericClient;

use super::{exec, rows};
use crate::outcome::Event;
use crate::store::DbError;

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
    .map(|r| {
        (
            r.get(0),
            Event {
                topic: r.get(1),
                payload: r.get(2),
            },
        )
    })
    .collect())
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
