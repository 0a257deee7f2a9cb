//! The topics as the broker really has them: created replicated where the cluster allows
//! and with a `segment.ms` of their own, and read back (retention, segment time, cleanup
//! policy, replicas), so a process can refuse a configuration that breaks its promise.

use std::time::Duration;

use rdkafka::admin::{NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::RDKafkaErrorCode;

use crate::broker::{admin_options, block_on, Broker, BrokerError, ADMIN_TIMEOUT, PARTITIONS};

/// Retention of the topics this crate creates: the seed's seven days.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Segment time of the topics this crate creates. Kafka deletes a closed segment only
/// once its newest record is past retention, so a record stays readable up to retention
/// plus this; left at the broker's 7-day default it would double what an inbox must cover.
pub const SEGMENT: Duration = Duration::from_secs(3600);
/// Replicas each partition needs so that an `acks=all` ack survives a lost broker.
pub const REPLICATION: usize = 3;
/// In-sync replicas an `acks=all` write needs (with [`REPLICATION`]: one broker may be down).
pub const MIN_INSYNC: i64 = 2;
/// The broker's `log.retention.check.interval.ms` when it does not say.
const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// One topic's settings as the broker reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// The topic (full name).
    pub topic: String,
    /// `retention.ms` (`None`: -1, kept forever).
    pub retention: Option<Duration>,
    /// `segment.ms`.
    pub segment: Duration,
    /// `cleanup.policy` (`delete`, `compact`, or both).
    pub cleanup_policy: String,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i64,
    /// The fewest replicas any of its partitions has.
    pub replication_factor: usize,
}

/// The broker settings that decide how long it still delivers a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerConfig {
    /// `log.retention.check.interval.ms`: how often expired segments are looked for.
    pub retention_check_interval: Duration,
    /// `offsets.retention.minutes`: a group idle this long loses its offsets and (with
    /// `auto.offset.reset=earliest`) reads its topics again from the oldest record.
    pub offsets_retention: Duration,
}

/// The topic's replication does not make an ack durable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "topic {topic}: replication factor {replication_factor}, min.insync.replicas \
     {min_insync_replicas}: an acks=all ack may be a single copy, and a lost broker loses \
     events already marked published; needs replication factor >= {REPLICATION} and \
     min.insync.replicas >= {MIN_INSYNC}"
)]
pub struct NotDurable {
    /// The topic.
    pub topic: String,
    /// Its fewest replicas.
    pub replication_factor: usize,
    /// Its `min.insync.replicas`.
    pub min_insync_replicas: i64,
}

impl TopicConfig {
    /// Refuses a topic whose acknowledged writes may exist on one broker only.
    pub fn check_durable(&self) -> Result<(), NotDurable> {
        if self.replication_factor >= REPLICATION && self.min_insync_replicas >= MIN_INSYNC {
            return Ok(());
        }
        Err(NotDurable {
            topic: self.topic.clone(),
            replication_factor: self.replication_factor,
            min_insync_replicas: self.min_insync_replicas,
        })
    }
}

impl Broker {
    /// Creates the topics that do not exist yet: [`RETENTION`], [`SEGMENT`], and
    /// [`REPLICATION`] replicas with [`MIN_INSYNC`] (fewer on a smaller cluster: the
    /// relay then refuses them outside the single-broker development setup).
    pub fn ensure_topics(&self) -> Result<(), BrokerError> {
        let admin = self.admin()?;
        let brokers = self.metadata(None)?.brokers().len().max(1);
        let replication = REPLICATION.min(brokers);
        let min_insync = MIN_INSYNC.min(replication as i64).to_string();
        let retention = RETENTION.as_millis().to_string();
        let segment = SEGMENT.as_millis().to_string();
        let names: Vec<String> = crate::event::TOPICS.iter().map(|t| self.name(t)).collect();
        let topics: Vec<NewTopic> = names
            .iter()
            .map(|t| {
                NewTopic::new(t, PARTITIONS, TopicReplication::Fixed(replication as i32))
                    .set("retention.ms", &retention)
                    .set("segment.ms", &segment)
                    .set("min.insync.replicas", &min_insync)
            })
            .collect();
        let results = block_on(admin.create_topics(&topics, &admin_options()))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(BrokerError::Topic {
                        topic,
                        why: code.to_string(),
                    })
                }
            }
        }
        Ok(())
    }

    /// `topic`'s (a full name) settings as the broker has them.
    pub fn topic_config(&self, topic: &str) -> Result<TopicConfig, BrokerError> {
        let err = |why: String| BrokerError::Topic {
            topic: topic.to_string(),
            why,
        };
        let configs = self.describe(ResourceSpecifier::Topic(topic), topic)?;
        let get = |name: &str| -> Result<String, BrokerError> {
            configs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| err(format!("no {name}")))
        };
        let ms = |name: &str| -> Result<i64, BrokerError> {
            let v = get(name)?;
            v.parse().map_err(|_| err(format!("{name} {v:?}")))
        };
        let replication_factor = self
            .metadata(Some(topic))?
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions())
            .map(|p| p.replicas().len())
            .min()
            .ok_or_else(|| err("no partitions".into()))?;
        Ok(TopicConfig {
            topic: topic.to_string(),
            retention: u64::try_from(ms("retention.ms")?)
                .ok()
                .map(Duration::from_millis),
            segment: Duration::from_millis(u64::try_from(ms("segment.ms")?).unwrap_or(0)),
            cleanup_policy: get("cleanup.policy")?,
            min_insync_replicas: ms("min.insync.replicas")?,
            replication_factor,
        })
    }

    /// The settings of one broker of the cluster (they are per broker; a cluster keeps
    /// them alike).
    pub fn broker_config(&self) -> Result<BrokerConfig, BrokerError> {
        let metadata = self.metadata(None)?;
        let id = metadata
            .brokers()
            .first()
            .map(|b| b.id())
            .ok_or_else(|| BrokerError::Topic {
                topic: "<cluster>".into(),
                why: "no broker in the metadata".into(),
            })?;
        let configs = self.describe(ResourceSpecifier::Broker(id), &format!("broker {id}"))?;
        let number = |name: &str| -> Option<u64> {
            configs
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.parse().ok())
        };
        Ok(BrokerConfig {
            retention_check_interval: number("log.retention.check.interval.ms")
                .map_or(DEFAULT_CHECK_INTERVAL, Duration::from_millis),
            offsets_retention: Duration::from_secs(
                60 * number("offsets.retention.minutes").unwrap_or(7 * 24 * 60),
            ),
        })
    }

    /// Every `(name, value)` the broker reports for one resource.
    fn describe(
        &self,
        resource: ResourceSpecifier<'_>,
        what: &str,
    ) -> Result<Vec<(String, String)>, BrokerError> {
        let admin = self.admin()?;
        let results = block_on(admin.describe_configs(&[resource], &admin_options()))?;
        let err = |why: String| BrokerError::Topic {
            topic: what.to_string(),
            why,
        };
        let resource = results
            .into_iter()
            .next()
            .ok_or_else(|| err("no answer".into()))?
            .map_err(|e| err(e.to_string()))?;
        Ok(resource
            .entries
            .into_iter()
            .filter_map(|e| Some((e.name, e.value?)))
            .collect())
    }

    /// The cluster's metadata (of one topic, or of all).
    fn metadata(&self, topic: Option<&str>) -> Result<rdkafka::metadata::Metadata, BrokerError> {
        let client: BaseConsumer = self.client().create()?;
        Ok(rdkafka::consumer::Consumer::fetch_metadata(
            &client,
            topic,
            ADMIN_TIMEOUT,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_replica_or_one_in_sync_replica_is_not_durable() {
        let mut c = TopicConfig {
            topic: "transfers.done".into(),
            retention: Some(RETENTION),
            segment: SEGMENT,
            cleanup_policy: "delete".into(),
            min_insync_replicas: 2,
            replication_factor: 3,
        };
        assert_eq!(c.check_durable(), Ok(()));
        c.min_insync_replicas = 1;
        let text = c.check_durable().unwrap_err().to_string();
        assert!(
            text.contains("replication factor 3, min.insync.replicas 1"),
            "{text}"
        );
        c.min_insync_replicas = 2;
        c.replication_factor = 1;
        assert!(c.check_durable().is_err());
    }
}
