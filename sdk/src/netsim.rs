//! Train mode: a transport wrapper with seeded, reproducible network faults.
//!
//! It wraps any [`Transport`], so a team can point it at its own backend.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Clock;
use crate::schedule::splitmix64;
use crate::transport::{BoxFuture, HttpRequest, HttpResponse, Transport, TransportError};

/// Fault settings of the simulator. Rates are probabilities per request in [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct NetsimSettings {
    /// Seed of every random choice.
    pub seed: u64,
    /// Mean one-way latency (ms).
    pub latency_ms: u64,
    /// Latency spread, uniform ± this (ms).
    pub latency_jitter_ms: u64,
    /// The request never reaches the server; the client waits for its timeout.
    pub drop_request_rate: f64,
    /// The server answered (and committed) but the answer is lost; the client sees a timeout.
    pub drop_response_rate: f64,
    /// The request reaches the server twice at once, as a load balancer's replay would.
    pub duplicate_rate: f64,
    /// The request hangs until the client's timeout without reaching the server.
    pub timeout_rate: f64,
    /// Mean time between the starts of two tunnels (ms); 0 for none.
    pub tunnel_every_ms: u64,
    /// Mean length of a tunnel (ms); `u64::MAX` with `tunnel_every_ms` 0 means always offline.
    pub tunnel_length_ms: u64,
    /// How long the simulated client waits before declaring a timeout (ms of the SDK clock).
    pub timeout_ms: u64,
}

impl NetsimSettings {
    /// No faults at all (a base for custom settings).
    pub fn clean(seed: u64) -> Self {
        Self {
            seed,
            latency_ms: 0,
            latency_jitter_ms: 0,
            drop_request_rate: 0.0,
            drop_response_rate: 0.0,
            duplicate_rate: 0.0,
            timeout_rate: 0.0,
            tunnel_every_ms: 0,
            tunnel_length_ms: 0,
            timeout_ms: 15_000,
        }
    }
}

/// Named network conditions, switchable at run time.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum NetworkProfile {
    /// The real network, untouched.
    #[default]
    Off,
    /// No network at all.
    Offline,
    /// A commuter train: long tunnels, ~30% of answers lost, seconds of latency.
    Train,
    /// A weak signal: some requests and answers lost, some timeouts.
    Flaky,
    /// A load balancer that replays requests: many requests arrive twice.
    LbReplay,
    /// Anything else.
    Custom(NetsimSettings),
}

impl NetworkProfile {
    /// Parses a profile name (`off`, `offline`, `train`, `flaky`, `lb-replay`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "off" | "none" => Self::Off,
            "offline" => Self::Offline,
            "train" => Self::Train,
            "flaky" => Self::Flaky,
            "lb-replay" | "lb_replay" => Self::LbReplay,
            _ => return None,
        })
    }

    /// The profile's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Offline => "offline",
            Self::Train => "train",
            Self::Flaky => "flaky",
            Self::LbReplay => "lb-replay",
            Self::Custom(_) => "custom",
        }
    }

    /// The fault settings of this profile with this seed; `None` for `Off`.
    pub fn settings(&self, seed: u64) -> Option<NetsimSettings> {
        let clean = NetsimSettings::clean(seed);
        Some(match self {
            Self::Off => return None,
            Self::Offline => NetsimSettings {
                tunnel_every_ms: 0,
                tunnel_length_ms: u64::MAX,
                ..clean
            },
            Self::Train => NetsimSettings {
                latency_ms: 1_500,
                latency_jitter_ms: 1_000,
                drop_request_rate: 0.05,
                drop_response_rate: 0.30,
                duplicate_rate: 0.02,
                timeout_rate: 0.05,
                tunnel_every_ms: 5 * 60_000,
                tunnel_length_ms: 90_000,
                ..clean
            },
            Self::Flaky => NetsimSettings {
                latency_ms: 300,
                latency_jitter_ms: 250,
                drop_request_rate: 0.10,
                drop_response_rate: 0.10,
                timeout_rate: 0.05,
                ..clean
            },
            Self::LbReplay => NetsimSettings {
                latency_ms: 50,
                latency_jitter_ms: 30,
                duplicate_rate: 0.5,
                ..clean
            },
            // A custom profile keeps its own seed; a non-zero run-time seed varies it reproducibly.
            Self::Custom(s) => NetsimSettings {
                seed: s.seed ^ seed,
                ..s.clone()
            },
        })
    }
}

/// Counts of what the simulator did, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetsimStats {
    /// Requests the app tried to send.
    pub requests: u64,
    /// Refused because a tunnel was on.
    pub offline: u64,
    /// Lost before the server.
    pub dropped_requests: u64,
    /// Answers lost after the server committed.
    pub dropped_responses: u64,
    /// Requests delivered twice.
    pub duplicated: u64,
    /// Hung until the timeout.
    pub timeouts: u64,
}

/// The wrapper itself.
pub struct SimTransport {
    inner: Arc<dyn Transport>,
    clock: Arc<dyn Clock>,
    settings: NetsimSettings,
    draws: AtomicU64,
    stats: [AtomicU64; 6],
}

impl SimTransport {
    /// Wraps `inner` with these faults.
    pub fn new(inner: Arc<dyn Transport>, clock: Arc<dyn Clock>, settings: NetsimSettings) -> Self {
        Self {
            inner,
            clock,
            settings,
            draws: AtomicU64::new(0),
            stats: Default::default(),
        }
    }

    /// What happened so far.
    pub fn stats(&self) -> NetsimStats {
        let s = |i: usize| self.stats[i].load(Ordering::Relaxed);
        NetsimStats {
            requests: s(0),
            offline: s(1),
            dropped_requests: s(2),
            dropped_responses: s(3),
            duplicated: s(4),
            timeouts: s(5),
        }
    }

    /// True while a tunnel covers `now_ms`: a pure function of the seed and the time.
    pub fn in_tunnel(&self, now_ms: i64) -> bool {
        let s = &self.settings;
        if s.tunnel_every_ms == 0 {
            return s.tunnel_length_ms > 0;
        }
        let period = s.tunnel_every_ms as i64;
        let index = now_ms.div_euclid(period);
        let r1 = unit(splitmix64(s.seed ^ 0xA5A5 ^ index as u64));
        let r2 = unit(splitmix64(s.seed ^ 0x5A5A ^ (index as u64).rotate_left(17)));
        let length = ((s.tunnel_length_ms as f64) * (0.5 + r1)).min(period as f64 * 0.9) as i64;
        let start = index * period + ((period - length) as f64 * r2) as i64;
        (start..start + length).contains(&now_ms)
    }

    fn chance(&self, rate: f64) -> bool {
        rate > 0.0 && unit(self.draw()) < rate
    }

    fn draw(&self) -> u64 {
        splitmix64(
            self.settings.seed
                ^ self
                    .draws
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0xD6E8_FEB8_6659_FD93),
        )
    }

    fn count(&self, i: usize) {
        self.stats[i].fetch_add(1, Ordering::Relaxed);
    }

    async fn wait(&self, ms: u64) {
        if ms > 0 {
            tokio::time::sleep(self.clock.real_duration(ms as i64)).await;
        }
    }

    fn latency(&self) -> u64 {
        let s = &self.settings;
        let spread = s.latency_jitter_ms as f64 * (2.0 * unit(self.draw()) - 1.0);
        (s.latency_ms as f64 + spread).max(0.0) as u64
    }

    async fn simulate(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        self.count(0);
        if self.in_tunnel(self.clock.now_ms()) {
            self.count(1);
            return Err(TransportError::Offline);
        }
        let s = &self.settings;
        if self.chance(s.drop_request_rate) {
            self.count(2);
            self.wait(s.timeout_ms).await;
            return Err(TransportError::Timeout);
        }
        if self.chance(s.timeout_rate) {
            self.count(5);
            self.wait(s.timeout_ms).await;
            return Err(TransportError::Timeout);
        }
        self.wait(self.latency() / 2).await;
        let answer = if self.chance(s.duplicate_rate) {
            self.count(4);
            let (a, b) = tokio::join!(self.inner.send(request.clone()), self.inner.send(request));
            // The client gets whichever copy the balancer answered with; pick one at random.
            if self.draw() & 1 == 0 {
                a
            } else {
                b
            }
        } else {
            self.inner.send(request).await
        };
        if answer.is_ok() && self.chance(s.drop_response_rate) {
            self.count(3);
            self.wait(s.timeout_ms.saturating_sub(self.latency() / 2))
                .await;
            return Err(TransportError::Timeout);
        }
        self.wait(self.latency() / 2).await;
        answer
    }
}

impl Transport for SimTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(self.simulate(request))
    }
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}
