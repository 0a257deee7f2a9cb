//! The fraud check: reads `transfers.done`, writes each event to `transfers.approved` or
//! `transfers.flagged`, and commits its input offsets in the same Kafka transaction
//! (stable `transactional.id`: a restarted instance fences its zombie). Its "large
//! transfer" SMS is outside Kafka, so it is made idempotent here, by its own inbox.

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::util::Timeout;
use rusqlite::Connection;

use crate::broker::{Broker, BrokerError, Isolation};
use crate::event::{self, Envelope};
use crate::inbox::{self, Clock, InboxError};

/// Messages handled per Kafka transaction at most.
const BATCH: usize = 200;
/// Longest a transaction call may block.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// How the fraud check runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The broker and namespace.
    pub broker: Broker,
    /// Its SQLite database (the SMS inbox and the sent SMS).
    pub db: PathBuf,
    /// Stable across restarts: the restarted process fences the one it replaces.
    pub transactional_id: String,
    /// Transfers above this are flagged (held), the rest approved.
    pub flag_above_minor: i64,
    /// Transfers from this amount on get the payer a "large transfer" SMS.
    pub large_minor: i64,
    /// A member that stops polling this long leaves the group (a paused zombie does).
    pub max_poll_interval: Duration,
    /// The clock.
    pub clock: Clock,
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
    /// The local database failed.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

impl From<KafkaError> for FraudError {
    fn from(e: KafkaError) -> Self {
        FraudError::Broker(e.into())
    }
}

/// The SMS inbox: the send and its inbox row share one local transaction.
const SCHEMA: &str = crate::sms::SCHEMA;

/// Runs until killed, fenced, or a transaction fails (crash-only: the open transaction
/// is aborted and the process exits; the next start resumes from the committed offsets).
pub fn run(settings: &Settings) -> Result<(), FraudError> {
    let broker = &settings.broker;
    let txn_id = broker.name(&settings.transactional_id);
    let span = tracing::info_span!("fraud_check", transactional_id = %txn_id);
    let _guard = span.enter();
    let mut conn = inbox::open(&settings.db, SCHEMA)?;
    broker.ensure_topics()?;
    let producer: BaseProducer = broker
        .idempotent_producer()
        .set("transactional.id", &txn_id)
        .set("transaction.timeout.ms", "60000")
        .create()?;
    // Fences every earlier producer with this id and aborts its open transaction.
    producer.init_transactions(TXN_TIMEOUT)?;
    let interval = settings.max_poll_interval.as_millis().to_string();
    let consumer: BaseConsumer = broker
        .consumer(&broker.name("fraud-check"), Isolation::ReadCommitted)
        .set("max.poll.interval.ms", &interval)
        .create()?;
    consumer.subscribe(&[&broker.name(event::DONE)])?;
    tracing::info!("fraud check running");
    loop {
        let batch = poll_batch(&consumer);
        if batch.is_empty() {
            continue;
        }
        if let Err(e) = transaction(settings, &mut conn, &producer, &consumer, &batch) {
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
    offset: i64,
}

/// Up to [`BATCH`] messages: waits for the first, then takes what is already there.
fn poll_batch(consumer: &BaseConsumer) -> Vec<Input> {
    let mut batch = Vec::new();
    let mut wait = Duration::from_millis(200);
    while batch.len() < BATCH {
        match consumer.poll(wait) {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(%e, "poll failed");
                break;
            }
            Some(Ok(msg)) => batch.push(Input {
                event: Envelope::from_message(&msg)
                    .inspect_err(|e| tracing::error!(offset = msg.offset(), %e, "unreadable message skipped"))
                    .ok(),
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

/// Output records and input offsets in one Kafka transaction; the large-transfer SMS
/// before it, each behind the local inbox.
fn transaction(
    settings: &Settings,
    conn: &mut Connection,
    producer: &BaseProducer,
    consumer: &BaseConsumer,
    batch: &[Input],
) -> Result<(), FraudError> {
    producer.begin_transaction()?;
    for event in batch.iter().filter_map(|i| i.event.as_ref()) {
        if event.transfer.amount_minor >= settings.large_minor {
            large_transfer_sms(conn, event, settings.clock.now_ms())?;
        }
        let topic = match event.transfer.amount_minor > settings.flag_above_minor {
            true => event::FLAGGED,
            false => event::APPROVED,
        };
        send(producer, &settings.broker.name(topic), event)?;
    }
    crate::crash::point(crate::crash::FRAUD_AFTER_SMS);
    let offsets = crate::consume::positions(consumer)?;
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

/// Sends the payer's "large transfer" SMS unless the inbox says it was sent already (a
/// batch redelivered after a crash or a fencing before its commit).
fn large_transfer_sms(
    conn: &mut Connection,
    event: &Envelope,
    now_ms: i64,
) -> Result<(), InboxError> {
    let tx = conn.transaction()?;
    if inbox::claim(&tx, event.event_id, now_ms)? {
        let t = &event.transfer;
        let text = format!(
            "sendonce: a large transfer of {} {} left your account (ref {})",
            crate::sms::format_minor(t.amount_minor),
            t.currency,
            t.transfer_id
        );
        crate::sms::send(&tx, event, &t.from_user_id, &text, now_ms)?;
    }
    tx.commit()?;
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
