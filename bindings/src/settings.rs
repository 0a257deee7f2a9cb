//! Mirrors of the SDK's settings: the open config, the retry policy and train mode (network simulator).
//!
//! Every span is a `Duration` (Kotlin `java.time.Duration`, Swift `TimeInterval`; the generated code
//! refuses a negative one before it reaches Rust). A rate outside [0, 1] is refused with `InvalidConfig`.

use std::time::Duration;

use sendonce::Clock as _;

use crate::error::{Result, SendOnceError};

/// Fault settings of the network simulator (train mode). Rates are probabilities per request in [0, 1].
/// Spans are `Duration`s (Kotlin `java.time.Duration`, Swift `TimeInterval`); `None` is the knob's
/// default (no latency, no tunnels, a 15 s timeout), so a custom profile names only what it changes.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct NetsimSettings {
    /// Seed of every random choice (replaced by the seed given to `set_network_profile`).
    #[uniffi(default = 0)]
    pub seed: u64,
    /// Mean one-way latency (default none).
    #[uniffi(default = None)]
    pub latency: Option<Duration>,
    /// Latency spread, uniform ± this (default none).
    #[uniffi(default = None)]
    pub latency_jitter: Option<Duration>,
    /// The request never reaches the server; the client waits for its timeout.
    #[uniffi(default = 0.0)]
    pub drop_request_rate: f64,
    /// The server answered (and committed) but the answer is lost; the client sees a timeout.
    #[uniffi(default = 0.0)]
    pub drop_response_rate: f64,
    /// The request reaches the server twice at once, as a load balancer's replay would.
    #[uniffi(default = 0.0)]
    pub duplicate_rate: f64,
    /// The request hangs until the client's timeout without reaching the server.
    #[uniffi(default = 0.0)]
    pub timeout_rate: f64,
    /// Mean time between the starts of two tunnels (default none).
    #[uniffi(default = None)]
    pub tunnel_every: Option<Duration>,
    /// Mean length of a tunnel; with no `tunnel_every`, any length above zero means always offline
    /// (`Duration::MAX` / the largest span: forever).
    #[uniffi(default = None)]
    pub tunnel_length: Option<Duration>,
    /// How long the simulated client waits before declaring a timeout, in SDK-clock time (default 15 s).
    #[uniffi(default = None)]
    pub timeout: Option<Duration>,
}

/// A span as the simulator's ms, saturating: `u64::MAX` ms is "forever" in the SDK.
fn ms(span: Option<Duration>, default_ms: u64) -> u64 {
    span.map_or(default_ms, |d| {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    })
}

fn rate(name: &str, v: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(SendOnceError::config(format!(
            "{name} must be within [0, 1], got {v}"
        )))
    }
}

/// The simulator's timeout when the settings name none.
const DEFAULT_TIMEOUT_MS: u64 = 15_000;

impl TryFrom<NetsimSettings> for sendonce::NetsimSettings {
    type Error = SendOnceError;
    fn try_from(s: NetsimSettings) -> Result<Self> {
        Ok(Self {
            seed: s.seed,
            latency_ms: ms(s.latency, 0),
            latency_jitter_ms: ms(s.latency_jitter, 0),
            drop_request_rate: rate("drop_request_rate", s.drop_request_rate)?,
            drop_response_rate: rate("drop_response_rate", s.drop_response_rate)?,
            duplicate_rate: rate("duplicate_rate", s.duplicate_rate)?,
            timeout_rate: rate("timeout_rate", s.timeout_rate)?,
            tunnel_every_ms: ms(s.tunnel_every, 0),
            tunnel_length_ms: ms(s.tunnel_length, 0),
            timeout_ms: ms(s.timeout, DEFAULT_TIMEOUT_MS),
        })
    }
}

impl From<sendonce::NetsimSettings> for NetsimSettings {
    fn from(s: sendonce::NetsimSettings) -> Self {
        Self {
            seed: s.seed,
            latency: Some(Duration::from_millis(s.latency_ms)),
            latency_jitter: Some(Duration::from_millis(s.latency_jitter_ms)),
            drop_request_rate: s.drop_request_rate,
            drop_response_rate: s.drop_response_rate,
            duplicate_rate: s.duplicate_rate,
            timeout_rate: s.timeout_rate,
            tunnel_every: Some(Duration::from_millis(s.tunnel_every_ms)),
            tunnel_length: Some(Duration::from_millis(s.tunnel_length_ms)),
            timeout: Some(Duration::from_millis(s.timeout_ms)),
        }
    }
}

/// Named network conditions of train mode, switchable at run time.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum NetworkProfile {
    /// The real network, untouched.
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
    Custom { settings: NetsimSettings },
}

impl TryFrom<NetworkProfile> for sendonce::NetworkProfile {
    type Error = SendOnceError;
    fn try_from(p: NetworkProfile) -> Result<Self> {
        Ok(match p {
            NetworkProfile::Off => Self::Off,
            NetworkProfile::Offline => Self::Offline,
            NetworkProfile::Train => Self::Train,
            NetworkProfile::Flaky => Self::Flaky,
            NetworkProfile::LbReplay => Self::LbReplay,
            NetworkProfile::Custom { settings } => Self::Custom(settings.try_into()?),
        })
    }
}

impl From<sendonce::NetworkProfile> for NetworkProfile {
    fn from(p: sendonce::NetworkProfile) -> Self {
        use sendonce::NetworkProfile as P;
        match p {
            P::Off => Self::Off,
            P::Offline => Self::Offline,
            P::Train => Self::Train,
            P::Flaky => Self::Flaky,
            P::LbReplay => Self::LbReplay,
            P::Custom(settings) => Self::Custom {
                settings: settings.into(),
            },
        }
    }
}

/// Counts of what the network simulator did.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
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

impl From<sendonce::NetsimStats> for NetsimStats {
    fn from(s: sendonce::NetsimStats) -> Self {
        Self {
            requests: s.requests,
            offline: s.offline,
            dropped_requests: s.dropped_requests,
            dropped_responses: s.dropped_responses,
            duplicated: s.duplicated,
            timeouts: s.timeouts,
        }
    }
}

/// How the sender retries an unknown outcome; start from `default_retry_policy()` and change a field.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RetryPolicy {
    /// First backoff step (SDK default 500 ms).
    pub base: Duration,
    /// Largest delay between two attempts; also clamps `Retry-After` (SDK default 60 s).
    pub cap: Duration,
    /// Time after confirmation when the SDK stops sending; below the server's key window (default 24 h).
    pub give_up_after: Duration,
    /// Full jitter on (the default).
    #[uniffi(default = true)]
    pub jitter: bool,
    /// Retry budget: retries allowed in a burst.
    #[uniffi(default = 20)]
    pub budget_burst: u32,
    /// Retry budget: retries regained per second.
    #[uniffi(default = 2.0)]
    pub budget_per_second: f64,
}

impl TryFrom<RetryPolicy> for sendonce::RetryPolicy {
    type Error = SendOnceError;
    fn try_from(r: RetryPolicy) -> Result<Self> {
        Ok(Self {
            base: r.base,
            cap: r.cap,
            give_up_after: r.give_up_after,
            jitter: r.jitter,
            budget_burst: r.budget_burst,
            budget_per_second: r.budget_per_second,
        })
    }
}

impl From<sendonce::RetryPolicy> for RetryPolicy {
    fn from(r: sendonce::RetryPolicy) -> Self {
        Self {
            base: r.base,
            cap: r.cap,
            give_up_after: r.give_up_after,
            jitter: r.jitter,
            budget_burst: r.budget_burst,
            budget_per_second: r.budget_per_second,
        }
    }
}

/// A bearer token. An object rather than a string so that no `toString`, `description` or
/// `Debug` of a config (Kotlin data classes and Swift structs print every field) shows it.
#[derive(uniffi::Object)]
pub struct AccessToken(String);

#[uniffi::export]
impl AccessToken {
    /// Wraps the token the app got at sign-in.
    #[uniffi::constructor]
    pub fn new(value: String) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self(value))
    }
}

impl AccessToken {
    /// The token itself, for the SDK config only.
    fn expose(&self) -> String {
        self.0.clone()
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

impl PartialEq for AccessToken {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

/// Everything `SendOnceCore.open` needs; only the URL and the file have no default.
#[derive(Clone, PartialEq, uniffi::Record)]
pub struct SendOnceConfig {
    /// Server base URL, e.g. `https://api.example.com`.
    pub base_url: String,
    /// Path of the SQLite file that holds the transfers (app-private storage).
    pub db_path: String,
    /// Bearer token; can be replaced later with `set_access_token`. Never printed.
    #[uniffi(default = None)]
    pub access_token: Option<std::sync::Arc<AccessToken>>,
    /// Encrypts the store file with this key (a library built with encryption; see
    /// `store_encryption_available`); `None`: in clear. Never printed.
    #[uniffi(default = None)]
    pub encryption_key: Option<std::sync::Arc<crate::store_key::StoreKey>>,
    /// Retry settings; `None` for the SDK's defaults.
    #[uniffi(default = None)]
    pub retry: Option<RetryPolicy>,
    /// Time for one whole request; `None` for the SDK's 15 s.
    #[uniffi(default = None)]
    pub request_timeout: Option<Duration>,
    /// Time to establish a connection; `None` for the SDK's 5 s.
    #[uniffi(default = None)]
    pub connect_timeout: Option<Duration>,
    /// Network simulation at start; `None` for the real network.
    #[uniffi(default = None)]
    pub network_profile: Option<NetworkProfile>,
    /// Transfers sent at once.
    #[uniffi(default = 4)]
    pub max_concurrent_sends: u32,
    /// Simulated time: the SDK clock runs this many times faster than real time (tests and demos
    /// only; `1.0`, the default, is the device clock).
    #[uniffi(default = 1.0)]
    pub clock_speed: f64,
    /// How long finished transfers are kept (1 hour to 10 years); `None` for the SDK's 30 days.
    #[uniffi(default = None)]
    pub retention: Option<Duration>,
    /// The account the store is bound to (persisted at first use); another account is refused with
    /// `AccountMismatch` while this one has unfinished transfers.
    #[uniffi(default = None)]
    pub account_id: Option<String>,
    /// Longest wait for the token provider; past it the transfer parks in AuthRequired. `None` for
    /// the SDK's 10 s.
    #[uniffi(default = None)]
    pub token_timeout: Option<Duration>,
    /// Background wake-ups (drain, network back in the background) spread their first requests
    /// over at most this long (at most the retry cap); `None` for the SDK's 60 s.
    #[uniffi(default = None)]
    pub background_wake_window: Option<Duration>,
    /// Opt-in: log lines may name the recipient and the note (never the token).
    #[uniffi(default = false)]
    pub log_personal_data: bool,
    /// How to read the server's answers (the bank's own API); `None` for server-mock's contract.
    #[uniffi(default = None)]
    pub contract: Option<crate::operations::ResponseContract>,
}

impl std::fmt::Debug for SendOnceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: say whether one is set, never what it is.
        let token = self.access_token.as_ref().map(|_| "<redacted>");
        f.debug_struct("SendOnceConfig")
            .field("base_url", &self.base_url)
            .field("db_path", &self.db_path)
            .field("access_token", &token)
            .field(
                "encryption_key",
                &self.encryption_key.as_ref().map(|_| "<redacted>"),
            )
            .field("retry", &self.retry)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("network_profile", &self.network_profile)
            .field("max_concurrent_sends", &self.max_concurrent_sends)
            .field("clock_speed", &self.clock_speed)
            .field("retention", &self.retention)
            .field(
                "account_id",
                &self.account_id.as_ref().map(|_| "<redacted>"),
            )
            .field("token_timeout", &self.token_timeout)
            .field("background_wake_window", &self.background_wake_window)
            .field("log_personal_data", &self.log_personal_data)
            .field("contract", &self.contract.is_some())
            .finish()
    }
}

impl TryFrom<SendOnceConfig> for sendonce::SdkConfig {
    type Error = SendOnceError;
    fn try_from(c: SendOnceConfig) -> Result<Self> {
        let mut builder = sendonce::SdkConfig::builder(c.base_url, c.db_path)
            .max_concurrent_sends(c.max_concurrent_sends as usize)
            .log_personal_data(c.log_personal_data);
        if let Some(timeout) = c.request_timeout {
            builder = builder.request_timeout(timeout);
        }
        if let Some(timeout) = c.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(retention) = c.retention {
            builder = builder.retention(retention);
        }
        if let Some(timeout) = c.token_timeout {
            builder = builder.token_timeout(timeout);
        }
        if let Some(window) = c.background_wake_window {
            builder = builder.background_wake_window(window);
        }
        if let Some(account) = c.account_id {
            builder = builder.account_id(account);
        }
        if let Some(token) = c.access_token {
            builder = builder.access_token(token.expose());
        }
        if let Some(key) = c.encryption_key {
            builder = builder.encryption_key(key.key());
        }
        if let Some(contract) = c.contract {
            builder = builder.contract(contract);
        }
        if let Some(retry) = c.retry {
            builder = builder.retry(retry.try_into()?);
        }
        if let Some(profile) = c.network_profile {
            builder = builder.network_profile(profile.try_into()?);
        }
        if !(c.clock_speed.is_finite() && c.clock_speed > 0.0) {
            return Err(SendOnceError::config(format!(
                "clock_speed must be above zero, got {}",
                c.clock_speed
            )));
        }
        if c.clock_speed != 1.0 {
            let now = sendonce::SystemClock.now_ms();
            builder = builder.clock(std::sync::Arc::new(sendonce::SimClock::new(
                now,
                c.clock_speed,
            )));
        }
        Ok(builder.build()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_never_prints_its_token() {
        let config = SendOnceConfig {
            base_url: "https://api.example.com".into(),
            db_path: "/tmp/x.db".into(),
            access_token: Some(AccessToken::new("tok_secret_123".into())),
            encryption_key: Some(crate::store_key::StoreKey::new(vec![0xab; 32]).unwrap()),
            retry: None,
            request_timeout: None,
            connect_timeout: None,
            network_profile: None,
            max_concurrent_sends: 4,
            clock_speed: 1.0,
            retention: None,
            account_id: Some("acct-1".into()),
            token_timeout: None,
            background_wake_window: None,
            log_personal_data: false,
            contract: None,
        };
        let printed = format!("{config:?}");
        assert!(!printed.contains("tok_secret_123"), "{printed}");
        assert!(!printed.to_lowercase().contains("abab"), "{printed}");
        assert!(printed.contains("redacted"));
    }
}
