//! The relay: outbox events, written in the unit of work's transaction, claimed by one
//! relay (the relays of several instances take disjoint batches: `Keys::relay_round`),
//! handed to a publisher after the commit and marked published once it acknowledged them.
//! At least once: a crash between the publish and the mark publishes again, so consumers
//! record what they handled in their inbox (`store::*::inbox::first_time`, in the
//! transaction of their effect).

use std::future::Future;
use std::time::Duration;

use super::Engine;
use crate::outcome::Event;
use crate::store::{DbError, Publishing, Relay, RelayRound};

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

impl<S: Relay> Engine<S> {
    /// One round: up to [`BATCH`] unpublished events to `to`, the acknowledged ones marked.
    /// Returns how many were marked (0: nothing pending, or the publish failed).
    pub async fn relay<P: Publish>(&self, to: &P) -> Result<usize, DbError> {
        let round = self.relay_round(to).await?;
        if let Some(e) = round.failed {
            tracing::warn!(%e, claimed = round.claimed, "publish failed; the events stay unpublished");
        }
        Ok(round.marked)
    }

    /// One round, as [`Engine::relay`], answering what it did (a relay loop of its own backs
    /// off after a failed publish).
    pub async fn relay_round<P: Publish>(&self, to: &P) -> Result<RelayRound, DbError> {
        let publish: Publishing<'_> = Box::new(move |events| Box::pin(to.publish(events)));
        self.store
            .relay_round(BATCH, self.clock.now_ms(), publish)
            .await
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
