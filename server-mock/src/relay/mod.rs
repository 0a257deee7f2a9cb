//! Where the relay sends outbox events: to the in-process consumers (the embedded
//! default, `in_process::run`) or to a Kafka broker (`--broker kafka://…`).
//!
//! A publisher delivers a batch and says which events the far side acknowledged; only
//! then are they marked published. A crash in between publishes them again: the
//! at-least-once edge every consumer's inbox absorbs. On PostgreSQL the batch is claimed
//! while it is published, so the relays of several instances take disjoint batches.

#[cfg(feature = "kafka")]
mod in_process;
pub mod kafka;

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::{App, ServerError};
use crate::config::Destination;

/// Events read and published per round.
const BATCH: usize = 256;
/// Poll interval when nobody wakes the relay.
const POLL: Duration = Duration::from_millis(50);
/// Pause after a failed publish before trying again.
const BACKOFF: Duration = Duration::from_millis(500);

/// Delivers outbox events somewhere outside this database.
pub trait Publisher: Send + Sync + 'static {
    /// Publishes `(event_id, payload)` rows; returns the ids the far side acknowledged
    /// (unreadable payloads included: they are logged and never block the outbox).
    fn publish(
        &self,
        events: &[(i64, String)],
    ) -> impl Future<Output = Result<Vec<i64>, PublishError>> + Send;
}

/// A publish that failed; the events stay unpublished and are tried again.
#[derive(Debug, thiserror::Error)]
#[error("publish failed: {0}")]
pub struct PublishError(pub String);

/// Starts the relay task for the configured destination.
pub async fn spawn(
    app: App,
    shutdown: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, ServerError> {
    match app.config.broker.clone() {
        Destination::InProcess => Ok(tokio::spawn(in_process::run(app, shutdown))),
        #[cfg(feature = "kafka")]
        Destination::Kafka(url) => {
            let dev = app.config.kafka_single_broker_dev;
            // A test-only relay that marks unacknowledged events also gives up on them quickly,
            // so a broker outage makes it lose some (what the Kafka crash ride must catch).
            let timeout = if app.config.relay_marks_unacked() {
                Duration::from_millis(500)
            } else {
                kafka::DELIVERY_TIMEOUT
            };
            let publisher = tokio::task::spawn_blocking(move || {
                kafka::KafkaPublisher::connect_with(&url, dev, timeout)
            })
            .await
            .map_err(|e| ServerError::Refused(format!("kafka relay: {e}")))?
            .map_err(|e| ServerError::Refused(format!("kafka relay: {e}")))?;
            Ok(tokio::spawn(run(app, publisher, shutdown)))
        }
        #[cfg(not(feature = "kafka"))]
        Destination::Kafka(_) => Err(ServerError::Refused(
            "--broker kafka://… needs server-mock built with the `kafka` feature".into(),
        )),
    }
}

/// Runs until shutdown: read unpublished events, publish, mark what was acknowledged.
pub async fn run<P: Publisher>(app: App, publisher: P, mut shutdown: watch::Receiver<bool>) {
    loop {
        while let Some(published) = round(&app, &publisher).await {
            if published == 0 {
                break;
            }
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = app.relay_wake.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One batch, claimed so that no other instance's relay publishes it meanwhile (see
/// [`crate::store::Store::relay_claimed`]): returns how many events were marked, or
/// `None` after a failure.
async fn round<P: Publisher>(app: &App, publisher: &P) -> Option<usize> {
    let marks_unacked = app.config.relay_marks_unacked();
    let publish: crate::store::Publish<'_> = Box::new(move |events| {
        Box::pin(async move {
            let published = publisher.publish(&events).await;
            if marks_unacked {
                // Test-only builds: the whole batch counts as published, acknowledged or not.
                return Ok(events.iter().map(|(id, _)| *id).collect());
            }
            let acked = published.map_err(|e| e.to_string())?;
            crash_point_after_ack().await;
            Ok(acked)
        })
    });
    match app.store.relay_claimed(BATCH, publish).await {
        Ok(crate::store::RelayRound {
            failed: Some(e), ..
        }) => {
            tracing::warn!(%e, "relay publish failed; trying again");
            tokio::time::sleep(BACKOFF).await;
            None
        }
        Ok(round) => Some(round.marked),
        Err(e) => {
            tracing::warn!(%e, "relay could not claim or mark events; they go out again");
            None
        }
    }
}

/// Test kill point between the broker's ack and the mark (see `sendonce_streams::crash`).
async fn crash_point_after_ack() {
    #[cfg(feature = "kafka")]
    {
        let _ = tokio::task::spawn_blocking(|| {
            sendonce_streams::crash::point(sendonce_streams::crash::RELAY_AFTER_ACK)
        })
        .await;
    }
}
