//! Where the relay sends outbox events: to the in-process consumers (the embedded
//! default, `in_process::run`) or to a Kafka broker (`--broker kafka://…`).
//!
//! A publisher delivers a batch and says which events the far side acknowledged; only
//! then are they marked published. A crash in between publishes them again: the
//! at-least-once edge every consumer's inbox absorbs. On PostgreSQL the batch is claimed
//! while it is published, so the relays of several instances take disjoint batches.

mod in_process;
#[cfg(feature = "kafka")]
pub mod kafka;

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::{App, ServerError};
use crate::config::Destination;
use crate::store::RelayRound;
use sendonce_server::engine::Publish;
use sendonce_server::Event;

/// Poll interval when nobody wakes the relay.
const POLL: Duration = Duration::from_millis(50);
/// Pause after a failed publish before trying again.
const BACKOFF: Duration = Duration::from_millis(500);

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

/// Runs until shutdown: the engine's relay rounds ([`sendonce_server::Engine::relay_round`]
/// over server-mock's outbox: claim a batch, publish, mark what was acknowledged), again at
/// once after a full batch, else when a commit wakes it or every poll interval.
pub async fn run<P: Publish>(app: App, publisher: P, mut shutdown: watch::Receiver<bool>) {
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
async fn round<P: Publish>(app: &App, publisher: &P) -> Option<usize> {
    let to = Acks {
        publisher,
        marks_unacked: app.config.relay_marks_unacked(),
    };
    match app.engine.relay_round(&to).await {
        Ok(RelayRound {
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

/// The publisher as the relay's round sees it: what it acknowledged, after the test kill
/// point between the ack and the mark — or, in a test-only build that marks unacknowledged
/// events, the whole batch.
struct Acks<'a, P> {
    publisher: &'a P,
    marks_unacked: bool,
}

impl<P: Publish> Publish for Acks<'_, P> {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
        let published = self.publisher.publish(events).await;
        if self.marks_unacked {
            return Ok(ids);
        }
        let acked = published?;
        crash_point_after_ack().await;
        Ok(acked)
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
