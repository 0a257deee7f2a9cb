//! The Kafka publisher: each outbox event as one `TransferDone` message on
//! `transfers.done`, keyed by the payer, event id in the payload and a header; an
//! idempotent producer (`enable.idempotence`, `acks=all`), so its own retries never
//! duplicate or reorder a partition. An event is marked published on the ack, so the ack
//! must mean copies on several brokers: the topic needs a replication factor of 3 and
//! `min.insync.replicas` 2, or the relay refuses to start (unless told this is the
//! single-broker development setup).

use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use sendonce_streams::{event, Broker, Envelope};

use sendonce_server::engine::Publish;
use sendonce_server::Event;

/// Why the Kafka relay does not start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The broker failed or refused.
    #[error(transparent)]
    Broker(#[from] sendonce_streams::BrokerError),
    /// The topic's acks are not durable.
    #[error("{0}; on a single-broker development setup start with --kafka-single-broker-dev")]
    NotDurable(#[from] sendonce_streams::topics::NotDurable),
}

/// How long the producer keeps retrying one message before the batch fails.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Publishes to one broker's `transfers.done`.
pub struct KafkaPublisher {
    producer: FutureProducer,
    topic: String,
}

impl KafkaPublisher {
    /// Connects (blocking: creates the topics if missing) and checks that the topic's
    /// acks are durable, unless `single_broker_dev` (then it only warns).
    pub fn connect(url: &str, single_broker_dev: bool) -> Result<Self, ConnectError> {
        Self::connect_with(url, single_broker_dev, DELIVERY_TIMEOUT)
    }

    /// [`KafkaPublisher::connect`] with the producer giving up on a message after
    /// `delivery_timeout` (test-only builds shorten it to show what a relay that marks
    /// unacknowledged events loses in a broker outage).
    pub fn connect_with(
        url: &str,
        single_broker_dev: bool,
        delivery_timeout: Duration,
    ) -> Result<Self, ConnectError> {
        let broker = Broker::parse(url)?;
        broker.ensure_topics()?;
        let topic = broker.name(event::DONE);
        match broker.topic_config(&topic)?.check_durable() {
            Ok(()) => {}
            Err(e) if single_broker_dev => {
                tracing::warn!(%e, "single-broker development setup: relaying anyway")
            }
            Err(e) => return Err(e.into()),
        }
        let producer = broker
            .idempotent_producer()
            .set(
                "message.timeout.ms",
                delivery_timeout.as_millis().to_string(),
            )
            .create()
            .map_err(sendonce_streams::BrokerError::from)?;
        Ok(Self { producer, topic })
    }
}

impl Publish for KafkaPublisher {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        let mut acked = Vec::with_capacity(events.len());
        let mut deliveries = Vec::with_capacity(events.len());
        for (event_id, event) in events {
            let read = std::str::from_utf8(&event.payload)
                .map_err(|e| e.to_string())
                .and_then(|payload| {
                    Envelope::from_outbox(event_id, payload).map_err(|e| e.to_string())
                });
            let envelope = match read {
                Ok(envelope) => envelope,
                Err(e) => {
                    tracing::error!(event_id, %e, "unreadable outbox event skipped");
                    acked.push(event_id);
                    continue;
                }
            };
            let bytes = envelope.to_bytes();
            let record = FutureRecord::to(&self.topic)
                .key(envelope.key())
                .payload(&bytes)
                .headers(envelope.headers());
            // Queued in order; the producer pipelines them, the acks are awaited below.
            let delivery = self
                .producer
                .send_result(record)
                .map_err(|(e, _)| e.to_string())?;
            deliveries.push((event_id, delivery));
        }
        let mut failure = None;
        for (event_id, delivery) in deliveries {
            match delivery.await {
                Ok(Ok(_)) => acked.push(event_id),
                Ok(Err((e, _))) => failure = Some(e.to_string()),
                Err(_) => failure = Some("delivery cancelled".to_string()),
            }
        }
        // What was acknowledged is marked even when a later message failed: it is in the
        // log already, and publishing it again would only be absorbed downstream.
        match failure {
            Some(e) if acked.is_empty() => Err(e),
            Some(e) => {
                tracing::warn!(%e, acked = acked.len(), "part of a batch failed");
                Ok(acked)
            }
            None => Ok(acked),
        }
    }
}
