//! The broker relay's batches on PostgreSQL: claimed with `FOR UPDATE SKIP LOCKED` in a
//! transaction held while the broker acknowledges them, then marked in it, so relays in N
//! instances publish disjoint batches (each event once when nothing fails) instead of
//! every instance publishing every event. A relay that dies or loses its connection
//! mid-batch rolls back: its events are free again for the next round anywhere, and go
//! out again (the at-least-once edge the consumers absorb). The claim lives under the
//! pool's `idle_in_transaction_session_timeout` like every transaction: a frozen relay
//! holds its batch that long at most, and a broker slower than that to acknowledge loses
//! the claim (the mark fails, the batch goes out again: a duplicate, never a loss).

use super::PgStore;
use crate::store::{outbox_events, Publishing, RelayRound};
use sendonce_server::store::DbError;

/// The oldest free events, locked against every other relay until this one commits.
const CLAIM: &str = "SELECT event_id, payload FROM outbox WHERE NOT published
     ORDER BY event_id LIMIT $1 FOR UPDATE SKIP LOCKED";

/// Claims up to `limit` events, publishes them, marks what was acknowledged.
pub(super) async fn relay_claimed(
    store: &PgStore,
    limit: usize,
    publish: Publishing<'_>,
) -> Result<RelayRound, DbError> {
    let mut client = store.client().await?;
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = tx.query(CLAIM, &[&limit]).await?;
    let events: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let claimed = events.len();
    if claimed == 0 {
        return Ok(RelayRound::default());
    }
    let acked = match publish(outbox_events(events)).await {
        Ok(acked) => acked,
        Err(e) => return Ok(RelayRound::failed(claimed, e)),
    };
    tx.execute(
        "UPDATE outbox SET published = TRUE WHERE event_id = ANY($1)",
        &[&acked],
    )
    .await?;
    tx.commit().await?;
    Ok(RelayRound::marked(claimed, acked.len()))
}
