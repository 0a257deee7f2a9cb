//! The fraud check: reads `transfers.done`, writes each event to `transfers.approved` or
//! `transfers.flagged` (and, when large, to `transfers.large` for the payer's SMS), and
//! commits its input offsets in the same Kafka transaction (stable `transactional.id`: a
//! restarted instance fences its zombie; the group's generation fences a slot that lost
//! its partitions while paused).
//!
//! It has no effect outside Kafka: the "large transfer" SMS is sent by the SMS consumer,
//! whose database remembers it, so two slots (each its own process and host) cannot both
//! send it, and nothing here grows with the events handled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};

use crate::broker::{Broker, BrokerError, Isolation};
use crate::event::{self, Envelope};

/// Messages handled per Kafka transaction at most.
const BATCH: usize = 200;
/// Longest a transaction call may block.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// How the fraud check runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The broker and namespace.
    pub broker: Broker,
    /// Stable across restarts: the restarted process fences the one it replaces.
    pub transactional_id: String,
    /// Transfers above this are flagged (held), the rest approved.
    pub flag_above_minor: i64,
    /// Transfers from this amount on get the payer a "large transfer" SMS.
    pub large_minor: i64,
    /// A member that stops polling this long leaves the group (a paused zombie does).
    pub max_poll_interval: Duration,
}

/// Why the fraud check stopped.
#[derive(Debug, thiserror::Error)]
pub enum FraudError {
    /// Another instance with the same `transactional.id` took over: this one must stop.
    #[error("fenced: another fraud check with transactional.id {0} took over ({1})")]
    Fenced(String, KafkaError),
    /// The broker failed; the open transaction was aborted, nothing of it is visible.
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

impl From<KafkaError> for FraudError {
    fn from(e: KafkaError) -> Self {
        FraudError::Broker(e.into())
    }
}

/// Counts the rebalances the consumer's polls serve, so a batch knows it straddled one.
#[derive(Default)]
pub struct Rebalances(AtomicU64);

impl Rebalances {
    fn seen(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        tracing::info!(?rebalance, "rebalance");
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs until killed, fenced, or a transaction fails (crash-only: the open transaction
/// is aborted and the process exits; the next start resumes from the committed offsets).
pub fn run(settings: &Settings) -> Result<(), FraudError> {
    let broker = &settings.broker;
    let txn_id = broker.name(&settings.transactional_id);
    let span = tracing::info_span!("fraud_check", transactional_id = %txn_id);
    let _guard = span.enter();
    broker.ensure_topics()?;
    let producer: BaseProducer = broker
        .idempotent_producer()
        .set("transactional.id", &txn_id)
        .set("transaction.timeout.ms", "60000")
        .create()?;
    // Fences every earlier producer with this id and aborts its open transaction.
    producer.init_transactions(TXN_TIMEOUT)?;
    let interval = settings.max_poll_interval.as_millis().to_string();
    let consumer: BaseConsumer<Rebalances> = broker
        .consumer(&broker.name("fraud-check"), Isolation::ReadCommitted)
        .set("max.poll.interval.ms", &interval)
        // Eager rebalancing: a rebalance revokes every partition and the next assignment
        // starts from the committed offsets, so a batch dropped at a rebalance is read
        // again (a cooperative protocol would keep positions past the dropped messages).
        .set("partition.assignment.strategy", "range,roundrobin")
        .create_with_context(Rebalances::default())?;
    consumer.subscribe(&[&broker.name(event::DONE)])?;
    tracing::info!("fraud check running");
    loop {
        let batch = poll_batch(&consumer);
        if batch.is_empty() {
            continue;
        }
        if let Err(e) = transaction(settings, &producer, &consumer, &batch) {
            return Err(match e {
                FraudError::Broker(BrokerError::Kafka(k)) if fenced(&k) => {
                    FraudError::Fenced(txn_id, k)
                }
                other => {
                    let _ = producer.abort_transaction(TXN_TIMEOUT);
                    other
                }
            });
        }
    }
}

/// One input message, detached from the consumer's buffer.
struct Input {
    event: Option<Envelope>,
    topic: String,
    partition: i32,
    offset: i64,
}

/// Up to [`BATCH`] messages: waits for the first, then takes what is already there. A
/// rebalance served by one of these polls drops what the batch held before it: those
/// messages were read under the old assignment, their partitions start again from the
/// committed offsets (or belong to another member now), and committing outputs for them
/// without their offsets is how approvals come twice.
fn poll_batch(consumer: &BaseConsumer<Rebalances>) -> Vec<Input> {
    let mut batch = Vec::new();
    let mut wait = Duration::from_millis(200);
    let mut generation = consumer.context().seen();
    while batch.len() < BATCH {
        let polled = consumer.poll(wait);
        if consumer.context().seen() != generation {
            if !batch.is_empty() {
                tracing::info!(dropped = batch.len(), "rebalance in a batch: batch dropped");
            }
            batch.clear();
            generation = consumer.context().seen();
        }
        match polled {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(%e, "poll failed");
                break;
            }
            Some(Ok(msg)) => batch.push(Input {
                event: Envelope::from_message(&msg)
                    .inspect_err(|e| tracing::error!(offset = msg.offset(), %e, "unreadable message skipped"))
                    .ok(),
                topic: msg.topic().to_string(),
                partition: msg.partition(),
                offset: msg.offset(),
            }),
        }
        if batch.len() == 1 {
            crate::crash::point(crate::crash::FRAUD_MID_BATCH);
        }
        wait = Duration::from_millis(5);
    }
    batch
}

/// The offsets after the batch's messages, per partition: what the transaction consumed.
fn consumed(batch: &[Input]) -> Result<TopicPartitionList, KafkaError> {
    let mut next: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for i in batch {
        let at = next.entry((i.topic.as_str(), i.partition)).or_insert(0);
        *at = (*at).max(i.offset + 1);
    }
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    }
    Ok(tpl)
}

/// Output records and input offsets in one Kafka transaction.
fn transaction(
    settings: &Settings,
    producer: &BaseProducer,
    consumer: &BaseConsumer<Rebalances>,
    batch: &[Input],
) -> Result<(), FraudError> {
    producer.begin_transaction()?;
    for event in batch.iter().filter_map(|i| i.event.as_ref()) {
        let topic = match event.transfer.amount_minor > settings.flag_above_minor {
            true => event::FLAGGED,
            false => event::APPROVED,
        };
        send(producer, &settings.broker.name(topic), event)?;
        if event.transfer.amount_minor >= settings.large_minor {
            let large = Envelope {
                kind: event::LARGE_TRANSFER.to_string(),
                ..event.clone()
            };
            send(producer, &settings.broker.name(event::LARGE), &large)?;
        }
    }
    crate::crash::point(crate::crash::FRAUD_BEFORE_COMMIT);
    let offsets = consumed(batch)?;
    let cgm = consumer.group_metadata().ok_or(BrokerError::NoGroup)?;
    producer.send_offsets_to_transaction(&offsets, &cgm, TXN_TIMEOUT)?;
    producer.commit_transaction(TXN_TIMEOUT)?;
    tracing::debug!(
        events = batch.len(),
        last_offset = batch.last().map(|i| i.offset),
        "transaction committed"
    );
    Ok(())
}

/// Queues one record in the open transaction (waits while the local queue is full).
fn send(producer: &BaseProducer, topic: &str, event: &Envelope) -> Result<(), KafkaError> {
    let payload = event.to_bytes();
    let mut record = BaseRecord::to(topic)
        .key(event.key())
        .payload(&payload)
        .headers(event.headers());
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                producer.poll(Timeout::After(Duration::from_millis(50)));
                record = r;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Whether `e` means a newer producer with our `transactional.id` exists.
fn fenced(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
        )
    )
}
