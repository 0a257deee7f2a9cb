//! The broker connection: `kafka://HOST:PORT` addresses, client settings, topics, and the
//! admin calls the processes and the tests need (group reset, lag; topics: `topics`).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

/// Partitions of each topic (events of one payer stay in one of them).
pub const PARTITIONS: i32 = 3;
/// How long an admin or metadata call may take.
pub(crate) const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors talking to the broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The address is not `kafka://HOST:PORT`.
    #[error("broker address must be kafka://HOST:PORT, got {0:?}")]
    Address(String),
    /// The client or the broker refused.
    #[error("kafka: {0}")]
    Kafka(#[from] KafkaError),
    /// The consumer has no group metadata (it has not joined its group).
    #[error("the consumer has no group metadata")]
    NoGroup,
    /// A topic's configuration could not be read.
    #[error("topic {topic}: {why}")]
    Topic {
        /// The topic.
        topic: String,
        /// What went wrong.
        why: String,
    },
}

/// One broker (or cluster) address, and the namespace its topics and groups live in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    bootstrap: String,
    namespace: String,
}

impl Broker {
    /// Parses `kafka://HOST:PORT[,HOST:PORT...][/NAMESPACE]`; a namespace prefixes every
    /// topic, group and transactional id, so tests and rides can share one broker.
    pub fn parse(url: &str) -> Result<Self, BrokerError> {
        let bad = || BrokerError::Address(url.to_string());
        let rest = url.strip_prefix("kafka://").ok_or_else(bad)?;
        let (hosts, namespace) = rest.split_once('/').unwrap_or((rest, ""));
        let hosts_ok = !hosts.is_empty()
            && hosts.split(',').all(|hp| {
                hp.rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            });
        let ns_ok = namespace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !hosts_ok || !ns_ok {
            return Err(bad());
        }
        Ok(Self {
            bootstrap: hosts.to_string(),
            namespace: namespace.to_string(),
        })
    }

    /// `name` in this broker's namespace (a topic, a group or a transactional id).
    pub fn name(&self, name: &str) -> String {
        match self.namespace.as_str() {
            "" => name.to_string(),
            ns => format!("{ns}.{name}"),
        }
    }

    /// `HOST:PORT` list for `bootstrap.servers`.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Settings every client of this crate shares.
    pub fn client(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap)
            .set("broker.address.family", "v4")
            .set("log_level", "4");
        c
    }

    /// An idempotent producer's settings: retries never duplicate or reorder a partition.
    pub fn idempotent_producer(&self) -> ClientConfig {
        let mut c = self.client();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "2");
        c
    }

    /// A consumer of `group` that commits its offsets itself, after its effect.
    pub fn consumer(&self, group: &str, isolation: Isolation) -> ClientConfig {
        let mut c = self.client();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", isolation.as_str())
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "1000");
        c
    }

    /// A consumer of `group` that reports each partition's end (`PartitionEOF`) to its
    /// caller without logging it as an error.
    pub fn end_reader(
        &self,
        group: &str,
        isolation: Isolation,
    ) -> Result<BaseConsumer<QuietEof>, BrokerError> {
        Ok(self
            .consumer(group, isolation)
            .set("enable.partition.eof", "true")
            .create_with_context(QuietEof)?)
    }

    pub(crate) fn admin(&self) -> Result<AdminClient<DefaultClientContext>, BrokerError> {
        Ok(self.client().create()?)
    }

    /// Deletes a (stopped) consumer group's (full name) offsets: its next start reads every topic from
    /// offset 0, as an operator's offset reset or a new deployment would.
    /// A member killed a moment ago still counts until its session times out, so this
    /// waits for the group to empty (and, after a broker restart, for its coordinator).
    pub fn reset_group(&self, group: &str) -> Result<(), BrokerError> {
        let admin = self.admin()?;
        let deadline = std::time::Instant::now() + 2 * ADMIN_TIMEOUT;
        loop {
            let results = block_on(admin.delete_groups(&[group], &admin_options()))?;
            match results.into_iter().next() {
                None | Some(Ok(_)) | Some(Err((_, RDKafkaErrorCode::GroupIdNotFound))) => {
                    return Ok(())
                }
                // A member killed a moment ago; or a broker just restarted, its group coordinator
                // not elected or not loaded yet; or the broker still down, restarting (a ride's
                // mid-ride replay can fall on a broker crash when the machine is slow): all pass.
                Some(Err((
                    _,
                    RDKafkaErrorCode::NonEmptyGroup
                    | RDKafkaErrorCode::NotCoordinator
                    | RDKafkaErrorCode::CoordinatorLoadInProgress
                    | RDKafkaErrorCode::CoordinatorNotAvailable
                    | RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown,
                ))) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(250));
                }
                Some(Err((group, code))) => {
                    return Err(BrokerError::Topic {
                        topic: format!("group {group}"),
                        why: code.to_string(),
                    })
                }
            }
        }
    }

    /// Messages of `topic` (full name) that `group` (full name) has not committed yet, as
    /// a `read_committed` reader counts them: read from the group's offsets up to the end
    /// of each partition. (The raw `high - committed` never reaches 0 on a transactional
    /// topic: the last transaction's commit marker sits after the last message.)
    pub fn lag(&self, group: &str, topic: &str) -> Result<i64, BrokerError> {
        let owner: BaseConsumer = self.consumer(group, Isolation::ReadCommitted).create()?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition(topic, p);
        }
        let committed = owner.committed_offsets(tpl, ADMIN_TIMEOUT)?;
        let mut raw = 0;
        for elem in committed.elements() {
            let (low, high) = owner.fetch_watermarks(topic, elem.partition(), ADMIN_TIMEOUT)?;
            let done = elem.offset().to_raw().filter(|o| *o >= 0).unwrap_or(low);
            raw += (high - done).max(0);
        }
        if raw == 0 {
            return Ok(0);
        }
        let mut start = TopicPartitionList::new();
        for elem in committed.elements() {
            let at = match elem.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            start.add_partition_offset(topic, elem.partition(), at)?;
        }
        // A reader outside the group (it never commits), stopping at each partition's end.
        let reader = self.end_reader(&format!("{group}.lag-reader"), Isolation::ReadCommitted)?;
        reader.assign(&start)?;
        let (mut ended, mut lag) = (0, 0);
        let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
        while ended < PARTITIONS && std::time::Instant::now() < deadline {
            match reader.poll(Duration::from_millis(100)) {
                Some(Ok(_)) => lag += 1,
                Some(Err(KafkaError::PartitionEOF(_))) => ended += 1,
                Some(Err(e)) => return Err(e.into()),
                None => {}
            }
        }
        Ok(lag)
    }
}

/// Client context of [`Broker::end_reader`]: a partition's end is expected, not an error.
pub struct QuietEof;

impl ClientContext for QuietEof {
    fn error(&self, error: KafkaError, reason: &str) {
        let eof = matches!(error, KafkaError::PartitionEOF(_))
            || error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF);
        if !eof {
            tracing::error!(%error, reason, "librdkafka");
        }
    }
}

impl ConsumerContext for QuietEof {}

/// What a consumer sees of transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Only committed transactions' messages (and non-transactional ones).
    ReadCommitted,
    /// Everything written, aborted transactions included.
    ReadUncommitted,
}

impl Isolation {
    fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

pub(crate) fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT))
}

/// Runs one admin future to completion on a thread of its own, so callers may be
/// synchronous processes or async tasks alike.
pub(crate) fn block_on<F>(f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds")
                .block_on(f)
        })
        .join()
        .expect("admin thread")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_broker_addresses() {
        let plain = Broker::parse("kafka://127.0.0.1:9092").unwrap();
        assert_eq!(plain.bootstrap(), "127.0.0.1:9092");
        assert_eq!(plain.name("transfers.done"), "transfers.done");
        let ns = Broker::parse("kafka://127.0.0.1:9092/ride-7").unwrap();
        assert_eq!(ns.bootstrap(), "127.0.0.1:9092");
        assert_eq!(ns.name("wallet"), "ride-7.wallet");
        for bad in [
            "127.0.0.1:9092",
            "kafka://",
            "kafka://host",
            "kafka://h:99999",
            "kafka://:1",
            "kafka://h:1/a.b",
        ] {
            assert!(Broker::parse(bad).is_err(), "{bad}");
        }
    }
}
