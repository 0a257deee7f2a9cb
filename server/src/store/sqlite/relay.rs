//! The relay's round on SQLite: the oldest unpublished events read, handed to the publisher
//! after their commit, and what it acknowledged marked published. One process owns a file, so
//! a round held under one lock is the only one in the whole database: two relays of one
//! process never publish the same batch. At least once: a crash between the publish and the
//! mark publishes again, and the consumers' inboxes absorb it.

use tokio::sync::Mutex;

use super::{outbox, Db, Durability};
use crate::store::{DbError, Publishing, RelayRound};

/// One round under `one_at_a_time` (held from the read to the mark): up to `limit` events to
/// `publish`, the acknowledged ones marked at `now_ms`.
///
/// The mark is a `NORMAL` commit: a power loss that forgets it publishes the events again,
/// which the at-least-once contract allows.
pub async fn round(
    db: &Db,
    one_at_a_time: &Mutex<()>,
    limit: usize,
    now_ms: i64,
    publish: Publishing<'_>,
) -> Result<RelayRound, DbError> {
    let _claimed = one_at_a_time.lock().await;
    let events = db.read(move |c| outbox::unpublished(c, limit)).await?;
    let claimed = events.len();
    let acked = match RelayRound::hand_over(events, publish).await {
        Ok(acked) => acked,
        Err(round) => return Ok(round),
    };
    let marked = acked.len();
    db.write(Durability::Normal, move |c| {
        outbox::mark_published(c, &acked, now_ms)
    })
    .await?;
    Ok(RelayRound::marked(claimed, marked))
}
