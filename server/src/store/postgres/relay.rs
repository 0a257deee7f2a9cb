//! The relay's round on PostgreSQL: a batch claimed with `FOR UPDATE SKIP LOCKED` in a
//! transaction held while the publisher acknowledges it, then marked in it, so relays in N
//! instances publish disjoint batches (each event once when nothing fails) instead of every
//! instance publishing every event. A relay that dies or loses its connection mid-batch rolls
//! back: its events are free again for the next round anywhere, and go out again (the
//! at-least-once edge the consumers' inboxes absorb). The claim lives under the pool's
//! `idle_in_transaction_session_timeout` like every transaction: a frozen relay holds its
//! batch that long at most, and a publisher slower than that loses the claim (the mark fails,
//! the batch goes out again: a duplicate, never a loss).

use deadpool_postgres::Client;

use super::outbox;
use crate::store::{DbError, Publishing, RelayRound};

/// One round on `client`: up to `limit` events claimed and handed to `publish`, the
/// acknowledged ones marked at `now_ms`, in one transaction.
pub async fn round(
    client: &mut Client,
    limit: usize,
    now_ms: i64,
    publish: Publishing<'_>,
) -> Result<RelayRound, DbError> {
    // A failed publish returns with the transaction dropped: rolled back, the batch free.
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await?;
    let events = outbox::claim(&tx, limit).await?;
    let claimed = events.len();
    let acked = match RelayRound::hand_over(events, publish).await {
        Ok(acked) => acked,
        Err(round) => return Ok(round),
    };
    outbox::mark_published(&tx, &acked, now_ms).await?;
    tx.commit().await?;
    Ok(RelayRound::marked(claimed, acked.len()))
}
