//! How long after a record's append the broker may still hand it to a consumer, and
//! whether an inbox window covers that.
//!
//! Kafka deletes a closed segment only once its *newest* record is past `retention.ms`,
//! and looks for such segments every `log.retention.check.interval.ms`: a record at the
//! start of a segment stays readable for up to retention + `segment.ms` + that interval.
//! A compacted topic keeps each key's newest record forever. Whatever is still readable
//! comes back to a group whose offsets are reset, or expire (`offsets.retention.minutes`)
//! with `auto.offset.reset=earliest`: the inbox must remember at least that long.

use std::time::Duration;

use crate::topics::{BrokerConfig, TopicConfig};

/// What the broker may still deliver of a topic, with the settings it follows from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Horizon {
    /// The topic (full name).
    pub topic: String,
    /// How long after its append a record may still be read (`None`: forever).
    pub readable_for: Option<Duration>,
    /// The settings, named with their values (`retention.ms 20000 + segment.ms …`).
    pub because: String,
    /// `offsets.retention.minutes`: one way a group comes to re-read all of it.
    pub offsets_retention_minutes: u64,
}

impl Horizon {
    /// The horizon of `topic` on a broker with `broker`'s settings.
    pub fn of(topic: &TopicConfig, broker: &BrokerConfig) -> Horizon {
        let offsets_retention_minutes = broker.offsets_retention.as_secs() / 60;
        let (readable_for, because) = if topic.cleanup_policy.contains("compact") {
            (
                None,
                format!(
                    "cleanup.policy {} keeps each key's newest record forever",
                    topic.cleanup_policy
                ),
            )
        } else if let Some(retention) = topic.retention {
            let total = retention + topic.segment + broker.retention_check_interval;
            (
                Some(total),
                format!(
                    "retention.ms {} + segment.ms {} + log.retention.check.interval.ms {} = {}",
                    retention.as_millis(),
                    topic.segment.as_millis(),
                    broker.retention_check_interval.as_millis(),
                    human(total)
                ),
            )
        } else {
            (
                None,
                "retention.ms -1 keeps every record forever".to_string(),
            )
        };
        Horizon {
            topic: topic.topic.clone(),
            readable_for,
            because,
            offsets_retention_minutes,
        }
    }

    /// Checks that an inbox keeping `window` (`None`: forever) covers this horizon.
    pub fn check(&self, window: Option<Duration>) -> Result<(), WindowTooShort> {
        let covered = match (window, self.readable_for) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(w), Some(h)) => w >= h,
        };
        if covered {
            return Ok(());
        }
        Err(WindowTooShort {
            window: window.unwrap_or_default(),
            horizon: self.clone(),
        })
    }
}

/// The consumer refuses to start: its inbox would forget events the topic still holds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "inbox window {} is shorter than what topic {} can still deliver ({}); a group reset, \
     or offsets expired after offsets.retention.minutes {}, would apply again events the \
     inbox has forgotten: set --inbox-window to at least {}, or shorten the topic's \
     segment.ms or retention.ms",
    human(*window), horizon.topic, horizon.because, horizon.offsets_retention_minutes,
    horizon.readable_for.map_or("forever".to_string(), human)
)]
pub struct WindowTooShort {
    /// The consumer's inbox window.
    pub window: Duration,
    /// What the topic can still deliver.
    pub horizon: Horizon,
}

/// `90061s` → `1d 1h 1m 1s`, `20s` → `20s`, `500ms` → `500ms`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        return format!("{}ms", d.as_millis());
    }
    let parts = [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "m"),
        (s % 60, "s"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn topic(retention: Option<Duration>, segment: Duration, policy: &str) -> TopicConfig {
        TopicConfig {
            topic: "transfers.approved".into(),
            retention,
            segment,
            cleanup_policy: policy.into(),
            min_insync_replicas: 1,
            replication_factor: 1,
        }
    }

    const BROKER: BrokerConfig = BrokerConfig {
        retention_check_interval: Duration::from_secs(300),
        offsets_retention: Duration::from_secs(7 * 86_400),
    };

    #[test]
    fn the_horizon_adds_segment_time_and_the_check_interval_to_retention() {
        let h = Horizon::of(
            &topic(Some(Duration::from_secs(20)), 7 * DAY, "delete"),
            &BROKER,
        );
        assert_eq!(h.readable_for, Some(7 * DAY + Duration::from_secs(320)));
        let text = h
            .check(Some(Duration::from_secs(20)))
            .unwrap_err()
            .to_string();
        for named in [
            "inbox window 20s",
            "retention.ms 20000 + segment.ms 604800000 + log.retention.check.interval.ms 300000 = 7d 5m 20s",
            "offsets.retention.minutes 10080",
            "at least 7d 5m 20s",
        ] {
            assert!(text.contains(named), "{named:?} not in {text}");
        }
        assert!(h.check(Some(8 * DAY)).is_ok());
        assert!(h.check(None).is_ok());
    }

    #[test]
    fn compaction_and_infinite_retention_need_a_window_of_forever() {
        for t in [
            topic(Some(DAY), DAY, "compact,delete"),
            topic(None, DAY, "delete"),
        ] {
            let h = Horizon::of(&t, &BROKER);
            assert_eq!(h.readable_for, None);
            assert!(h.check(Some(365 * DAY)).is_err());
            assert!(h.check(None).is_ok());
        }
    }

    #[test]
    fn the_default_window_covers_the_topics_this_crate_creates() {
        let t = topic(
            Some(crate::topics::RETENTION),
            crate::topics::SEGMENT,
            "delete",
        );
        assert!(Horizon::of(&t, &BROKER)
            .check(Some(crate::cli::DEFAULT_WINDOW))
            .is_ok());
    }
}
