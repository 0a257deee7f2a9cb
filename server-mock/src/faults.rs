//! Switchable server faults for tests and simulations, with a seedable random source.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Longest injected delay: long enough for any lease test, short enough that a typo
/// (or u64::MAX) cannot hang every transfer for good.
pub const MAX_DELAY_MS: u64 = 300_000;

/// The fault switches as the test API reads and writes them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FaultSettings {
    /// Gateway latency override in milliseconds (`None`: the configured default).
    pub gateway_delay_ms: Option<u64>,
    /// Abort the process after the key row commits, before the ledger transaction.
    pub crash_after_key_insert: bool,
    /// Abort the process after the gateway authorised, before the ledger transaction.
    pub crash_after_gateway: bool,
    /// Probability that one gateway step takes `slow_gateway_ms` instead (a step slower
    /// than its lease).
    pub slow_gateway_rate: f64,
    /// Latency of a slow gateway step in milliseconds.
    pub slow_gateway_ms: u64,
    /// Probability of answering 503 before touching anything.
    pub error_503_rate: f64,
    /// Probability of committing a transfer and then dropping the connection unanswered.
    pub drop_response_after_commit_rate: f64,
    /// Probability of running a transfer request twice concurrently (load-balancer replay).
    pub duplicate_delivery_rate: f64,
    /// Probability that a request's money transaction fails before it runs (a database
    /// error: nothing committed).
    #[serde(default)]
    pub fail_commit_rate: f64,
    /// Seed of the random source, for reproducible runs.
    pub seed: Option<u64>,
}

/// A partial update; absent fields keep their current value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPatch {
    /// See [`FaultSettings::gateway_delay_ms`].
    pub gateway_delay_ms: Option<u64>,
    /// See [`FaultSettings::crash_after_key_insert`].
    pub crash_after_key_insert: Option<bool>,
    /// See [`FaultSettings::crash_after_gateway`].
    pub crash_after_gateway: Option<bool>,
    /// See [`FaultSettings::slow_gateway_rate`].
    pub slow_gateway_rate: Option<f64>,
    /// See [`FaultSettings::slow_gateway_ms`].
    pub slow_gateway_ms: Option<u64>,
    /// See [`FaultSettings::error_503_rate`].
    pub error_503_rate: Option<f64>,
    /// See [`FaultSettings::drop_response_after_commit_rate`].
    pub drop_response_after_commit_rate: Option<f64>,
    /// See [`FaultSettings::duplicate_delivery_rate`].
    pub duplicate_delivery_rate: Option<f64>,
    /// See [`FaultSettings::fail_commit_rate`].
    pub fail_commit_rate: Option<f64>,
    /// See [`FaultSettings::seed`].
    pub seed: Option<u64>,
}

/// SplitMix64: tiny, seedable and good enough to decide coin flips.
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug)]
struct Inner {
    settings: FaultSettings,
    rng: SplitMix64,
}

/// Current faults plus the random source that decides them.
#[derive(Debug)]
pub struct Faults {
    inner: Mutex<Inner>,
    default_gateway_delay: Duration,
}

impl Faults {
    /// No faults; the gateway takes `default_gateway_delay`.
    pub fn new(default_gateway_delay: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner {
                settings: FaultSettings::default(),
                rng: SplitMix64(0x5EED),
            }),
            default_gateway_delay,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        // Plain data behind the lock: a poisoned lock still holds consistent values.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Merges a patch; rates must lie in [0, 1], delays at most [`MAX_DELAY_MS`].
    pub fn apply(&self, patch: FaultPatch) -> Result<FaultSettings, String> {
        for (name, delay) in [
            ("gateway_delay_ms", patch.gateway_delay_ms),
            ("slow_gateway_ms", patch.slow_gateway_ms),
        ] {
            if delay.is_some_and(|d| d > MAX_DELAY_MS) {
                return Err(format!("{name} must be at most {MAX_DELAY_MS} (5 minutes)"));
            }
        }
        for (name, rate) in [
            ("error_503_rate", patch.error_503_rate),
            (
                "drop_response_after_commit_rate",
                patch.drop_response_after_commit_rate,
            ),
            ("duplicate_delivery_rate", patch.duplicate_delivery_rate),
            ("slow_gateway_rate", patch.slow_gateway_rate),
            ("fail_commit_rate", patch.fail_commit_rate),
        ] {
            if let Some(r) = rate {
                if !(0.0..=1.0).contains(&r) {
                    return Err(format!("{name} must be between 0 and 1"));
                }
            }
        }
        Ok(self.with(|inner| {
            let s = &mut inner.settings;
            if patch.gateway_delay_ms.is_some() {
                s.gateway_delay_ms = patch.gateway_delay_ms;
            }
            if let Some(v) = patch.crash_after_key_insert {
                s.crash_after_key_insert = v;
            }
            if let Some(v) = patch.crash_after_gateway {
                s.crash_after_gateway = v;
            }
            if let Some(v) = patch.slow_gateway_rate {
                s.slow_gateway_rate = v;
            }
            if let Some(v) = patch.slow_gateway_ms {
                s.slow_gateway_ms = v;
            }
            if let Some(v) = patch.error_503_rate {
                s.error_503_rate = v;
            }
            if let Some(v) = patch.drop_response_after_commit_rate {
                s.drop_response_after_commit_rate = v;
            }
            if let Some(v) = patch.duplicate_delivery_rate {
                s.duplicate_delivery_rate = v;
            }
            if let Some(v) = patch.fail_commit_rate {
                s.fail_commit_rate = v;
            }
            if let Some(seed) = patch.seed {
                s.seed = Some(seed);
                inner.rng = SplitMix64(seed);
            }
            inner.settings.clone()
        }))
    }

    /// Clears every fault.
    pub fn clear(&self) -> FaultSettings {
        self.with(|inner| {
            inner.settings = FaultSettings::default();
            inner.settings.clone()
        })
    }

    /// Current settings.
    pub fn settings(&self) -> FaultSettings {
        self.with(|inner| inner.settings.clone())
    }

    /// Latency of this gateway step (a slow one now and then, when so configured).
    pub fn gateway_delay(&self) -> Duration {
        if self.roll(|s| s.slow_gateway_rate) {
            return Duration::from_millis(self.with(|inner| inner.settings.slow_gateway_ms));
        }
        self.with(|inner| inner.settings.gateway_delay_ms)
            .map(Duration::from_millis)
            .unwrap_or(self.default_gateway_delay)
    }

    /// Whether to crash between the key insert and the ledger transaction.
    pub fn crash_after_key_insert(&self) -> bool {
        self.with(|inner| inner.settings.crash_after_key_insert)
    }

    /// Whether to crash between the gateway's authorisation and the ledger transaction.
    pub fn crash_after_gateway(&self) -> bool {
        self.with(|inner| inner.settings.crash_after_gateway)
    }

    fn roll(&self, pick: impl FnOnce(&FaultSettings) -> f64) -> bool {
        self.with(|inner| {
            let rate = pick(&inner.settings);
            rate > 0.0 && inner.rng.next_f64() < rate
        })
    }

    /// Decides whether this request gets a 503.
    pub fn roll_503(&self) -> bool {
        self.roll(|s| s.error_503_rate)
    }

    /// Decides whether this committed response is dropped.
    pub fn roll_drop_response(&self) -> bool {
        self.roll(|s| s.drop_response_after_commit_rate)
    }

    /// Decides whether this request is delivered twice.
    pub fn roll_duplicate(&self) -> bool {
        self.roll(|s| s.duplicate_delivery_rate)
    }

    /// Decides whether this request's money transaction fails before it runs.
    pub fn fail_commit(&self) -> bool {
        self.roll(|s| s.fail_commit_rate)
    }

    /// A fair coin from the same seeded source.
    pub fn coin(&self) -> bool {
        self.with(|inner| inner.rng.next_u64() & 1 == 1)
    }
}

/// A body whose first frame is an error, so the server aborts the connection: a response
/// dropped after commit, as a router called without a socket (or hyper) sees it.
pub struct FailingBody;

impl http_body::Body for FailingBody {
    type Data = axum::body::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<axum::body::Bytes>, std::io::Error>>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::other(
            "response dropped by fault",
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_clear() {
        let f = Faults::new(Duration::from_millis(5));
        assert_eq!(f.gateway_delay(), Duration::from_millis(5));
        f.apply(FaultPatch {
            gateway_delay_ms: Some(50),
            error_503_rate: Some(1.0),
            ..Default::default()
        })
        .unwrap();
        f.apply(FaultPatch {
            crash_after_key_insert: Some(false),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(f.gateway_delay(), Duration::from_millis(50));
        assert!(f.roll_503());
        assert!(!f.roll_duplicate());
        assert!(f
            .apply(FaultPatch {
                error_503_rate: Some(1.5),
                ..Default::default()
            })
            .is_err());
        f.clear();
        assert!(!f.roll_503());
        assert_eq!(f.gateway_delay(), Duration::from_millis(5));
    }

    #[test]
    fn seeded_rolls_repeat() {
        let run = || {
            let f = Faults::new(Duration::ZERO);
            f.apply(FaultPatch {
                duplicate_delivery_rate: Some(0.5),
                seed: Some(42),
                ..Default::default()
            })
            .unwrap();
            (0..32).map(|_| f.roll_duplicate()).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
