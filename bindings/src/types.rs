//! Mirrors of the SDK's values as uniffi records and enums, with the conversions both ways.
//!
//! Times are `i64` milliseconds (timestamps since the Unix epoch, durations as lengths); a negative
//! duration is refused with `InvalidConfig`.

use std::time::Duration;

use sendonce::Clock as _;

use crate::error::{Result, SendOnceError};

/// What the user confirmed: one intent to move money.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TransferRequest {
    /// Server user id of the recipient.
    pub to_user_id: String,
    /// Amount in minor units (paisa for BDT).
    pub amount_minor: i64,
    /// ISO 4217 code, upper case.
    pub currency: String,
    /// Free text shown to both sides.
    #[uniffi(default = None)]
    pub note: Option<String>,
}

impl From<TransferRequest> for sendonce::TransferRequest {
    fn from(r: TransferRequest) -> Self {
        Self {
            to_user_id: r.to_user_id,
            amount_minor: r.amount_minor,
            currency: r.currency,
            note: r.note,
        }
    }
}

/// Where a transfer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum TransferState {
    /// Persisted, not yet sent.
    Pending,
    /// A request is on the wire (or was when the app died).
    Sending,
    /// The last attempt's outcome was unknown; another one is scheduled.
    Retrying,
    /// The server refused the credentials; waits for `set_access_token`.
    AuthRequired,
    /// The server moved the money.
    Succeeded,
    /// The server said a definitive no (insufficient funds, invalid request).
    Rejected,
    /// A bug (key reused with another body) or the server never executed it; never retried.
    Failed,
    /// The client stopped sending at the give-up horizon; the outcome is resolved by status look-up.
    NeedsAttention,
}

impl From<sendonce::TransferState> for TransferState {
    fn from(s: sendonce::TransferState) -> Self {
        use sendonce::TransferState as S;
        match s {
            S::Pending => Self::Pending,
            S::Sending => Self::Sending,
            S::Retrying => Self::Retrying,
            S::AuthRequired => Self::AuthRequired,
            S::Succeeded => Self::Succeeded,
            S::Rejected => Self::Rejected,
            S::Failed => Self::Failed,
            S::NeedsAttention => Self::NeedsAttention,
        }
    }
}

impl From<TransferState> for sendonce::TransferState {
    fn from(s: TransferState) -> Self {
        use TransferState as S;
        match s {
            S::Pending => Self::Pending,
            S::Sending => Self::Sending,
            S::Retrying => Self::Retrying,
            S::AuthRequired => Self::AuthRequired,
            S::Succeeded => Self::Succeeded,
            S::Rejected => Self::Rejected,
            S::Failed => Self::Failed,
            S::NeedsAttention => Self::NeedsAttention,
        }
    }
}

/// Why the server (or the SDK) said no.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Rejection {
    /// Stable machine code, e.g. `insufficient_funds`.
    pub code: String,
    /// Human-readable detail from the server.
    pub detail: String,
    /// HTTP status of the answer, 0 when the SDK decided.
    pub http_status: u16,
}

impl From<sendonce::Rejection> for Rejection {
    fn from(r: sendonce::Rejection) -> Self {
        Self {
            code: r.code,
            detail: r.detail,
            http_status: r.http_status,
        }
    }
}

impl From<Rejection> for sendonce::Rejection {
    fn from(r: Rejection) -> Self {
        Self {
            code: r.code,
            detail: r.detail,
            http_status: r.http_status,
        }
    }
}

/// One transfer as persisted on the device.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Transfer {
    /// Local id, minted at confirm.
    pub local_id: String,
    /// Idempotency key, minted at confirm, never changed.
    pub idempotency_key: String,
    /// Recipient user id.
    pub to_user_id: String,
    /// Amount in minor units.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Free text.
    pub note: Option<String>,
    /// Current state.
    pub state: TransferState,
    /// Attempts started so far.
    pub attempts: u32,
    /// When the user confirmed (ms since the Unix epoch, SDK clock).
    pub created_at_ms: i64,
    /// Last change.
    pub updated_at_ms: i64,
    /// When the last attempt started.
    pub last_attempt_at_ms: Option<i64>,
    /// When the next attempt is due, while retrying.
    pub next_attempt_at_ms: Option<i64>,
    /// What went wrong last, for the UI.
    pub last_error: Option<String>,
    /// Server's transfer id once succeeded.
    pub server_transfer_id: Option<String>,
    /// Why it was rejected or failed.
    pub rejection: Option<Rejection>,
    /// The success came back as a replay of an earlier attempt.
    pub replayed: bool,
}

impl From<sendonce::Transfer> for Transfer {
    fn from(t: sendonce::Transfer) -> Self {
        Self {
            local_id: t.local_id,
            idempotency_key: t.idempotency_key,
            to_user_id: t.to_user_id,
            amount_minor: t.amount_minor,
            currency: t.currency,
            note: t.note,
            state: t.state.into(),
            attempts: t.attempts,
            created_at_ms: t.created_at_ms,
            updated_at_ms: t.updated_at_ms,
            last_attempt_at_ms: t.last_attempt_at_ms,
            next_attempt_at_ms: t.next_attempt_at_ms,
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection.map(Into::into),
            replayed: t.replayed,
        }
    }
}

impl From<Transfer> for sendonce::Transfer {
    fn from(t: Transfer) -> Self {
        Self {
            local_id: t.local_id,
            idempotency_key: t.idempotency_key,
            to_user_id: t.to_user_id,
            amount_minor: t.amount_minor,
            currency: t.currency,
            note: t.note,
            state: t.state.into(),
            attempts: t.attempts,
            created_at_ms: t.created_at_ms,
            updated_at_ms: t.updated_at_ms,
            last_attempt_at_ms: t.last_attempt_at_ms,
            next_attempt_at_ms: t.next_attempt_at_ms,
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection.map(Into::into),
            replayed: t.replayed,
        }
    }
}

/// What the confirm screen shows.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ComposerState {
    /// The user is filling in the form.
    Editing,
    /// Confirmed; the first attempt is on its way.
    Submitting {
        /// The persisted transfer, once written.
        transfer: Option<Transfer>,
    },
    /// The outcome is not known yet; the SDK keeps trying with the same key.
    Waiting {
        /// The transfer (attempts, next attempt time, last error).
        transfer: Transfer,
        /// True when the SDK waits for a fresh access token rather than the network.
        needs_auth: bool,
    },
    /// The money moved: show the receipt.
    Done {
        /// The succeeded transfer (server transfer id, amounts).
        receipt: Transfer,
    },
    /// A definitive no: nothing moved.
    Rejected {
        /// Why.
        reason: Rejection,
        /// The transfer.
        transfer: Transfer,
    },
    /// The SDK stopped sending after the give-up horizon; the outcome is being resolved by look-up.
    NeedsAttention {
        /// The transfer.
        transfer: Transfer,
    },
}

impl From<sendonce::ComposerState> for ComposerState {
    fn from(s: sendonce::ComposerState) -> Self {
        use sendonce::ComposerState as S;
        match s {
            S::Editing => Self::Editing,
            S::Submitting { transfer } => Self::Submitting {
                transfer: transfer.map(Into::into),
            },
            S::Waiting {
                transfer,
                needs_auth,
            } => Self::Waiting {
                transfer: transfer.into(),
                needs_auth,
            },
            S::Done { receipt } => Self::Done {
                receipt: receipt.into(),
            },
            S::Rejected { reason, transfer } => Self::Rejected {
                reason: reason.into(),
                transfer: transfer.into(),
            },
            S::NeedsAttention { transfer } => Self::NeedsAttention {
                transfer: transfer.into(),
            },
        }
    }
}

impl From<ComposerState> for sendonce::ComposerState {
    fn from(s: ComposerState) -> Self {
        use ComposerState as S;
        match s {
            S::Editing => Self::Editing,
            S::Submitting { transfer } => Self::Submitting {
                transfer: transfer.map(Into::into),
            },
            S::Waiting {
                transfer,
                needs_auth,
            } => Self::Waiting {
                transfer: transfer.into(),
                needs_auth,
            },
            S::Done { receipt } => Self::Done {
                receipt: receipt.into(),
            },
            S::Rejected { reason, transfer } => Self::Rejected {
                reason: reason.into(),
                transfer: transfer.into(),
            },
            S::NeedsAttention { transfer } => Self::NeedsAttention {
                transfer: transfer.into(),
            },
        }
    }
}

/// Fault settings of the network simulator (train mode). Rates are probabilities per request in [0, 1].
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct NetsimSettings {
    /// Seed of every random choice (replaced by the seed given to `set_network_profile`).
    #[uniffi(default = 0)]
    pub seed: u64,
    /// Mean one-way latency (ms).
    #[uniffi(default = 0)]
    pub latency_ms: i64,
    /// Latency spread, uniform ± this (ms).
    #[uniffi(default = 0)]
    pub latency_jitter_ms: i64,
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
    /// Mean time between the starts of two tunnels (ms); 0 for none.
    #[uniffi(default = 0)]
    pub tunnel_every_ms: i64,
    /// Mean length of a tunnel (ms); with `tunnel_every_ms` 0, any value above 0 means always offline.
    #[uniffi(default = 0)]
    pub tunnel_length_ms: i64,
    /// How long the simulated client waits before declaring a timeout (ms of the SDK clock).
    #[uniffi(default = 15000)]
    pub timeout_ms: i64,
}

fn ms(name: &str, v: i64) -> Result<u64> {
    u64::try_from(v)
        .map_err(|_| SendOnceError::config(format!("{name} must not be negative, got {v}")))
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

fn duration(name: &str, v: i64) -> Result<Duration> {
    ms(name, v).map(Duration::from_millis)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl TryFrom<NetsimSettings> for sendonce::NetsimSettings {
    type Error = SendOnceError;
    fn try_from(s: NetsimSettings) -> Result<Self> {
        Ok(Self {
            seed: s.seed,
            latency_ms: ms("latency_ms", s.latency_ms)?,
            latency_jitter_ms: ms("latency_jitter_ms", s.latency_jitter_ms)?,
            drop_request_rate: rate("drop_request_rate", s.drop_request_rate)?,
            drop_response_rate: rate("drop_response_rate", s.drop_response_rate)?,
            duplicate_rate: rate("duplicate_rate", s.duplicate_rate)?,
            timeout_rate: rate("timeout_rate", s.timeout_rate)?,
            tunnel_every_ms: ms("tunnel_every_ms", s.tunnel_every_ms)?,
            // i64::MAX is "forever", as u64::MAX is in the SDK.
            tunnel_length_ms: if s.tunnel_length_ms == i64::MAX {
                u64::MAX
            } else {
                ms("tunnel_length_ms", s.tunnel_length_ms)?
            },
            timeout_ms: ms("timeout_ms", s.timeout_ms)?,
        })
    }
}

impl From<sendonce::NetsimSettings> for NetsimSettings {
    fn from(s: sendonce::NetsimSettings) -> Self {
        Self {
            seed: s.seed,
            latency_ms: to_i64(s.latency_ms),
            latency_jitter_ms: to_i64(s.latency_jitter_ms),
            drop_request_rate: s.drop_request_rate,
            drop_response_rate: s.drop_response_rate,
            duplicate_rate: s.duplicate_rate,
            timeout_rate: s.timeout_rate,
            tunnel_every_ms: to_i64(s.tunnel_every_ms),
            tunnel_length_ms: to_i64(s.tunnel_length_ms),
            timeout_ms: to_i64(s.timeout_ms),
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

/// How the sender retries an unknown outcome (defaults match the SDK's).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RetryPolicy {
    /// First backoff step (ms).
    #[uniffi(default = 500)]
    pub base_ms: i64,
    /// Largest delay between two attempts (ms; also clamps `Retry-After`).
    #[uniffi(default = 60000)]
    pub cap_ms: i64,
    /// Time after confirmation when the SDK stops sending (ms; below the server's key window).
    #[uniffi(default = 86400000)]
    pub give_up_after_ms: i64,
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
            base: duration("retry.base_ms", r.base_ms)?,
            cap: duration("retry.cap_ms", r.cap_ms)?,
            give_up_after: duration("retry.give_up_after_ms", r.give_up_after_ms)?,
            jitter: r.jitter,
            budget_burst: r.budget_burst,
            budget_per_second: r.budget_per_second,
        })
    }
}

impl From<sendonce::RetryPolicy> for RetryPolicy {
    fn from(r: sendonce::RetryPolicy) -> Self {
        Self {
            base_ms: r.base.as_millis() as i64,
            cap_ms: r.cap.as_millis() as i64,
            give_up_after_ms: r.give_up_after.as_millis() as i64,
            jitter: r.jitter,
            budget_burst: r.budget_burst,
            budget_per_second: r.budget_per_second,
        }
    }
}

/// Everything `SendOnceCore.open` needs; only the URL and the file have no default.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SendOnceConfig {
    /// Server base URL, e.g. `https://api.example.com`.
    pub base_url: String,
    /// Path of the SQLite file that holds the transfers (app-private storage).
    pub db_path: String,
    /// Bearer token; can be replaced later with `set_access_token`.
    #[uniffi(default = None)]
    pub access_token: Option<String>,
    /// Retry settings; `None` for the SDK's defaults.
    #[uniffi(default = None)]
    pub retry: Option<RetryPolicy>,
    /// Time for one whole request (ms).
    #[uniffi(default = 15000)]
    pub request_timeout_ms: i64,
    /// Time to establish a connection (ms).
    #[uniffi(default = 5000)]
    pub connect_timeout_ms: i64,
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
}

impl TryFrom<SendOnceConfig> for sendonce::SdkConfig {
    type Error = SendOnceError;
    fn try_from(c: SendOnceConfig) -> Result<Self> {
        let mut builder = sendonce::SdkConfig::builder(c.base_url, c.db_path)
            .request_timeout(duration("request_timeout_ms", c.request_timeout_ms)?)
            .connect_timeout(duration("connect_timeout_ms", c.connect_timeout_ms)?)
            .max_concurrent_sends(c.max_concurrent_sends as usize);
        if let Some(token) = c.access_token {
            builder = builder.access_token(token);
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
