//! The loop of a consumer whose effect lives outside Kafka (wallet, SMS): for each
//! message, the inbox insert and the effect in one local transaction, then the offset
//! commit. A crash between the two redelivers the message; the inbox absorbs it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use rusqlite::{Connection, Transaction};

use crate::broker::{Broker, BrokerError, Isolation};
use crate::event::{header_event_id, Envelope};
use crate::inbox::{self, Clock, InboxError, WindowTooShort};

/// How often the inbox forgets events older than its window.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// An effect applied once per event, inside the inbox's transaction.
pub trait Effect {
    /// The consumer's name: its consumer group (in the broker's namespace).
    const NAME: &'static str;
    /// Where a test may kill it: after the local commit, before the offset commit.
    const CRASH_POINT: &'static str;
    /// Tables the effect writes (run at every start, so `IF NOT EXISTS`).
    const SCHEMA: &'static str;
    /// Applies the event; the caller commits the transaction with the inbox row.
    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<(), InboxError>;
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
    /// Test-only: start even when the window is shorter than the topic's retention.
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
    /// The inbox window does not cover the retention.
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

/// Refuses an inbox that forgets events while `topic` (full name) still holds them.
pub fn guard_window(settings: &Settings, topic: &str) -> Result<(), ConsumeError> {
    let retention = settings.broker.retention(topic)?;
    match inbox::check_window(settings.inbox_window, topic, retention) {
        Err(e) if settings.skip_window_check => {
            tracing::warn!(%e, "inbox window check skipped (test-only flag)");
            Ok(())
        }
        other => Ok(other?),
    }
}

/// Consumes `topic` (base name) until the process is killed or an error stops it.
pub fn run<E: Effect>(settings: &Settings, topic: &str) -> Result<(), ConsumeError> {
    let topic = settings.broker.name(topic);
    let span = tracing::info_span!("consumer", name = E::NAME, %topic);
    let _guard = span.enter();
    let mut conn = inbox::open(&settings.db, E::SCHEMA)?;
    settings.broker.ensure_topics()?;
    guard_window(settings, &topic)?;
    let consumer: BaseConsumer = settings
        .broker
        .consumer(&settings.broker.name(E::NAME), Isolation::ReadCommitted)
        .create()?;
    consumer.subscribe(&[&topic])?;
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
                commit_position(&consumer)?;
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
    if inbox::claim(&tx, event.event_id, now_ms)? {
        E::apply(&tx, &event, now_ms)?;
    } else {
        tracing::debug!(
            event_id = event.event_id,
            "redelivery absorbed by the inbox"
        );
    }
    tx.commit().map_err(InboxError::from)?;
    Ok(())
}

/// Where the consumer stands on each partition it has read: everything before it has had
/// its effect (committed locally, or inside the caller's Kafka transaction).
pub fn positions(consumer: &BaseConsumer) -> Result<TopicPartitionList, KafkaError> {
    let mut done = TopicPartitionList::new();
    for elem in consumer.position()?.elements() {
        if let Offset::Offset(o) = elem.offset() {
            done.add_partition_offset(elem.topic(), elem.partition(), Offset::Offset(o))?;
        }
    }
    Ok(done)
}

/// Commits [`positions`].
fn commit_position(consumer: &BaseConsumer) -> Result<(), KafkaError> {
    let done = positions(consumer)?;
    if done.count() > 0 {
        consumer.commit(&done, CommitMode::Sync)?;
    }
    Ok(())
}
