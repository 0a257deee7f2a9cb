//! Outbox events to Kafka (feature `kafka`): the relay's [`Publish`] over an idempotent producer.
//!
//! Each event is one message on the event's topic, keyed and headed by its outbox id, so the
//! consumer's inbox (`store::*::inbox::first_time`, in the transaction of its effect) drops the
//! copies an at-least-once relay makes. The producer is idempotent (`enable.idempotence`,
//! `acks=all`): its own retries never duplicate or reorder a partition. An event counts as
//! published only once the broker acknowledged it — a relay that marked events before the
//! acknowledgement loses the ones in flight when the broker goes down.

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::time::Duration;

use crate::engine::Publish;
use crate::outcome::Event;

/// The header that carries the outbox event id: the key a consumer's inbox records.
pub const EVENT_ID_HEADER: &str = "sendonce-event-id";

/// Publishes outbox events to a Kafka cluster.
pub struct KafkaPublish {
    producer: FutureProducer,
}

impl KafkaPublish {
    /// An idempotent producer (`enable.idempotence`, `acks=all`) to `bootstrap`
    /// (`host:port[,host:port…]`) that gives up on a message after `delivery_timeout` — the
    /// event then stays unpublished and the next relay round sends it again.
    pub fn connect(bootstrap: &str, delivery_timeout: Duration) -> Result<Self, KafkaError> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "2")
            .set(
                "message.timeout.ms",
                delivery_timeout.as_millis().to_string(),
            )
            .create()?;
        Ok(Self { producer })
    }

    /// A publisher over the application's own producer (its TLS, SASL, client id…). Give it
    /// `enable.idempotence=true` and `acks=all`: anything weaker can lose or reorder events.
    pub fn with_producer(producer: FutureProducer) -> Self {
        Self { producer }
    }
}

impl Publish for KafkaPublish {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        // All sent at once (the producer batches them), then each acknowledgement awaited.
        let mut deliveries = Vec::with_capacity(events.len());
        for (id, event) in &events {
            let id_text = id.to_string();
            let record = FutureRecord::to(&event.topic)
                .key(&id_text)
                .payload(&event.payload)
                .headers(OwnedHeaders::new().insert(Header {
                    key: EVENT_ID_HEADER,
                    value: Some(&id_text),
                }));
            match self.producer.send_result(record) {
                Ok(delivery) => deliveries.push((*id, delivery)),
                Err((e, _)) => {
                    tracing::warn!(%e, event = id, "not queued; sent again next round");
                    break;
                }
            }
        }
        let mut acked = Vec::with_capacity(deliveries.len());
        for (id, delivery) in deliveries {
            match delivery.await {
                Ok(Ok(_)) => acked.push(id),
                Ok(Err((e, _))) => tracing::warn!(%e, event = id, "not acknowledged"),
                Err(_) => tracing::warn!(event = id, "producer dropped the delivery"),
            }
        }
        if acked.is_empty() && !events.is_empty() {
            return Err("the broker acknowledged none of the events".into());
        }
        Ok(acked)
    }
}

/// The outbox event id a consumed message carries ([`EVENT_ID_HEADER`]), for the inbox.
pub fn event_id<M: Message>(message: &M) -> Option<i64> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == EVENT_ID_HEADER)
        .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse().ok())
}
