//! The relay: outbox events, written in the unit of work's transaction, handed to a
//! publisher after the commit and marked published once it acknowledged them. At least
//! once: a crash between the publish and the mark (or two instances relaying the same
//! events) publishes again, so consumers record what they handled in their inbox
//! (`store::*::inbox::first_time`, in the transaction of their effect).

use std::future::Future;
use std::time::Duration;

use super::Engine;
use crate::outcome::Event;
use crate::store::{DbError, Keys};

/// Where the relay hands events: a Kafka producer, an in-process consumer.
pub trait Publish: Send + Sync {
    /// Publishes these `(event_id, event)`s, oldest first; returns the ids it acknowledges
    /// (the others are tried again), or why none.
    fn publish(
        &self,
        events: Vec<(i64, Event)>,
    ) -> impl Future<Output = Result<Vec<i64>, String>> + Send;
}

/// Events read per relay round.
pub const BATCH: usize = 256;

impl<S: Keys> Engine<S> {
    /// One round: up to [`BATCH`] unpublished events to `to`, the acknowledged ones marked.
    /// Returns how many were marked (0: nothing pending, or the publish failed).
    pub async fn relay<P: Publish>(&self, to: &P) -> Result<usize, DbError> {
        let events = self.store.unpublished(BATCH).await?;
        if events.is_empty() {
            return Ok(0);
        }
        let acked = match to.publish(events).await {
            Ok(acked) => acked,
            Err(e) => {
                tracing::warn!(%e, "publish failed; the events stay unpublished");
                return Ok(0);
            }
        };
        let marked = acked.len();
        self.store
            .mark_published(acked, self.clock.now_ms())
            .await?;
        Ok(marked)
    }

    /// Runs [`Engine::relay`] until the task is dropped or aborted: again at once after a
    /// full batch, else after `idle`.
    pub async fn relay_forever<P: Publish>(&self, to: &P, idle: Duration) {
        loop {
            match self.relay(to).await {
                Ok(n) if n >= BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(%e, "relay round failed"),
            }
            tokio::time::sleep(idle).await;
        }
    }
}
