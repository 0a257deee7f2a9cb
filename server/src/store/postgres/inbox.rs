//! The inbox on PostgreSQL: a consumer records each event it handles in the transaction of
//! its effect, so an event delivered again (the relay publishes at least once) has no effect.

use deadpool_postgres::GenericClient;

use super::{exec, rows};
use crate::store::DbError;

/// The inbox table (idempotent DDL).
pub const TABLE: &str = "
CREATE TABLE IF NOT EXISTS sendonce_inbox (
    consumer       TEXT NOT NULL,
    event_id       BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL,
    PRIMARY KEY (consumer, event_id)
);";

/// An `INSERT … SELECT` recording for `consumer` (a SQL expression) the `event_id`s of the
/// query `events` (its rows' `event_id` column, in the order it gives: the order rows are
/// locked) received at `now`, returning the `event_id` of each one recorded now — not of those
/// recorded before, whose effect already happened. A CTE of an application's delivery
/// statement, whose effects join it, so an effect never commits without its record or twice.
pub fn record_sql(consumer: &str, events: &str, now: &str) -> String {
    format!(
        "INSERT INTO sendonce_inbox (consumer, event_id, received_at_ms)
         SELECT {consumer}, event_id, {now} FROM {events}
         ON CONFLICT (consumer, event_id) DO NOTHING RETURNING event_id"
    )
}

/// Records `event_id` for `consumer` inside the caller's transaction; `false` when it was
/// recorded before (the effect already happened: do nothing, commit, acknowledge).
pub async fn first_time<C: GenericClient>(
    tx: &C,
    consumer: &str,
    event_id: i64,
    now_ms: i64,
) -> Result<bool, DbError> {
    let n = exec(
        tx,
        "INSERT INTO sendonce_inbox (consumer, event_id, received_at_ms) VALUES ($1, $2, $3)
         ON CONFLICT (consumer, event_id) DO NOTHING",
        &[&consumer, &event_id, &now_ms],
    )
    .await?;
    Ok(n == 1)
}

/// How many events the inbox records (every consumer's).
pub async fn count<C: GenericClient>(c: &C) -> Result<i64, DbError> {
    Ok(rows(c, "SELECT COUNT(*) FROM sendonce_inbox", &[]).await?[0].get(0))
}

/// Removes up to `chunk` of `consumer`'s records received before `before_ms`, oldest first,
/// and only of events that left the outbox (below its smallest id: see
/// [`super::outbox::trim`]) — while an event is still in the outbox a replay can deliver it
/// again, and its record is what makes that a no-op. The caller repeats while a chunk was
/// full; rows another session holds are skipped.
pub async fn trim<C: GenericClient>(
    c: &C,
    consumer: &str,
    before_ms: i64,
    chunk: i64,
) -> Result<usize, DbError> {
    let sql = "DELETE FROM sendonce_inbox WHERE consumer = $3 AND event_id IN (
                 SELECT event_id FROM sendonce_inbox WHERE consumer = $3
                 ORDER BY event_id LIMIT $2 FOR UPDATE SKIP LOCKED)
               AND event_id < (SELECT MIN(event_id) FROM sendonce_outbox)
               AND received_at_ms < $1";
    let n = exec(c, sql, &[&before_ms, &chunk, &consumer]).await?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Moves one record in from an older inbox table (an application's one-time migration).
pub async fn import<C: GenericClient>(
    c: &C,
    consumer: &str,
    event_id: i64,
    received_at_ms: i64,
) -> Result<(), DbError> {
    first_time(c, consumer, event_id, received_at_ms).await?;
    Ok(())
}
