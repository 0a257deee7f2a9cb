//! The inbox on PostgreSQL: a consumer records each event it handles in the transaction of
//! its effect, so an event delivered again (the relay publishes at least once) has no effect.

use deadpool_postgres::GenericClient;

use super::exec;
use crate::store::DbError;

/// The inbox table (idempotent DDL).
pub const TABLE: &str = "
CREATE TABLE IF NOT EXISTS sendonce_inbox (
    consumer       TEXT NOT NULL,
    event_id       BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL,
    PRIMARY KEY (consumer, event_id)
);";

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
