//! The loop of a consumer whose effect lives outside Kafka (wallet, SMS): for each
//! message, the inbox insert and the effect in one local transaction, then the offset
//! commit. A crash between the two redelivers the message; the inbox absorbs it, and
//! what the inbox has forgotten (a replay older than its window) the effect's own
//! uniqueness on the transfer absorbs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use rusqlite::{Connection, Transaction};

use crate::broker::{Broker, BrokerError, Isolation};
use crate::event::{header_event_id, Envelope};
use crate::horizon::{Horizon, WindowTooShort};
use crate::inbox::{self, Clock, InboxError};

/// How often the inbox forgets events older than its window.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// An effect applied once per event, inside the inbox's transaction.
pub trait Effect {
    /// The consumer's name: its consumer group (in the broker's namespace).
    const NAME: &'static str;
    /// The topics it reads (base names).
    const TOPICS: &'static [&'static str];
    /// Where a test may kill it: after the local commit, before the offset commit.
    const CRASH_POINT: &'static str;
    /// Tables the effect writes (run at every start, so `IF NOT EXISTS`), each with a
    /// uniqueness of its own on the transfer.
    const SCHEMA: &'static str;
    /// Applies the event unless its own guard finds the transfer's effect done already
    /// (then returns false); the caller commits the transaction with the inbox row.
    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<bool, InboxError>;
}

/// How one consumer process runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The broker and namespace.
    pub broker: Broker,
    /// Its SQLite database file.
    pub db: PathBuf,
    /// How long the inbox remembers an event (`None`: forever).
    pub inbox_window: Option<Duration>,
    /// Test-only: start even when the window is shorter than what the topic can deliver.
    pub skip_window_check: bool,
    /// The clock (a test offsets it by simulated days).
    pub clock: Clock,
}

/// Why a consumer stopped.
#[derive(Debug, thiserror::Error)]
pub enum ConsumeError {
    /// The broker failed.
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// The inbox window does not cover what the topic can still deliver.
    #[error(transparent)]
    Window(#[from] WindowTooShort),
    /// The local database failed.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

impl From<KafkaError> for ConsumeError {
    fn from(e: KafkaError) -> Self {
        ConsumeError::Broker(e.into())
    }
}

/// Refuses an inbox that forgets events while `topic` (full name) can still deliver
/// them, as the broker's actual settings say.
pub fn guard_window(settings: &Settings, topic: &str) -> Result<(), ConsumeError> {
    let horizon = Horizon::of(
        &settings.broker.topic_config(topic)?,
        &settings.broker.broker_config()?,
    );
    match horizon.check(settings.inbox_window) {
        Err(e) if settings.skip_window_check => {
            tracing::warn!(%e, "inbox window check skipped (test-only flag)");
            Ok(())
        }
        other => Ok(other?),
    }
}

/// Consumes `E::TOPICS` until the process is killed or an error stops it.
pub fn run<E: Effect>(settings: &Settings) -> Result<(), ConsumeError> {
    let topics: Vec<String> = E::TOPICS.iter().map(|t| settings.broker.name(t)).collect();
    let span = tracing::info_span!("consumer", name = E::NAME, topics = %topics.join(","));
    let _guard = span.enter();
    let mut conn = inbox::open(&settings.db, E::SCHEMA)?;
    settings.broker.ensure_topics()?;
    for topic in &topics {
        guard_window(settings, topic)?;
    }
    let consumer: BaseConsumer = settings
        .broker
        .consumer(&settings.broker.name(E::NAME), Isolation::ReadCommitted)
        .create()?;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&names)?;
    let mut last_prune = None::<Instant>;
    loop {
        if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            prune(&conn, settings)?;
            last_prune = Some(Instant::now());
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Err(e)) => tracing::warn!(%e, "poll failed; polling again"),
            Some(Ok(msg)) => {
                handle::<E>(&mut conn, &msg, settings.clock.now_ms())?;
                crate::crash::point(E::CRASH_POINT);
                commit_after(&consumer, &msg)?;
            }
        }
    }
}

fn prune(conn: &Connection, settings: &Settings) -> Result<(), ConsumeError> {
    if let Some(window) = settings.inbox_window {
        let forgotten = inbox::prune(conn, window, settings.clock.now_ms())?;
        if forgotten > 0 {
            tracing::info!(forgotten, "inbox pruned");
        }
    }
    Ok(())
}

/// One message: inbox insert and effect in one local transaction; a message that cannot
/// be read is logged and skipped (it must not stop the stream).
fn handle<E: Effect>(
    conn: &mut Connection,
    msg: &BorrowedMessage<'_>,
    now_ms: i64,
) -> Result<(), ConsumeError> {
    let event = match Envelope::from_message(msg) {
        Ok(event) => event,
        Err(e) => {
            tracing::error!(offset = msg.offset(), %e, "unreadable message skipped");
            return Ok(());
        }
    };
    if header_event_id(msg).is_some_and(|id| id != event.event_id) {
        tracing::warn!(
            event_id = event.event_id,
            "event-id header disagrees with the payload"
        );
    }
    let tx = conn.transaction().map_err(InboxError::from)?;
    let transfer_id = event.transfer.transfer_id.as_str();
    if inbox::claim(&tx, transfer_id, &event.kind, now_ms)? {
        if !E::apply(&tx, &event, now_ms)? {
            inbox::guard_absorbed(&tx)?;
            tracing::info!(
                event_id = event.event_id,
                transfer_id,
                "redelivery past the inbox window absorbed by the effect's guard"
            );
        }
    } else {
        tracing::debug!(
            event_id = event.event_id,
            "redelivery absorbed by the inbox"
        );
    }
    tx.commit().map_err(InboxError::from)?;
    Ok(())
}

/// Commits the offset after `msg`, on its own partition: exactly what was handled, even
/// if a rebalance has changed the assignment since.
fn commit_after(consumer: &BaseConsumer, msg: &BorrowedMessage<'_>) -> Result<(), KafkaError> {
    let mut done = TopicPartitionList::new();
    done.add_partition_offset(
        msg.topic(),
        msg.partition(),
        Offset::Offset(msg.offset() + 1),
    )?;
    consumer.commit(&done, CommitMode::Sync)
}
