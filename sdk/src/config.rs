//! SDK configuration, built with [`SdkConfig::builder`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::contract::ResponseContract;
use crate::error::{Result, SdkError};
use crate::netsim::NetworkProfile;
use crate::operation::HeaderProvider;
use crate::token::AccessTokenProvider;

/// How the sender retries an unknown outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// First backoff step.
    pub base: Duration,
    /// Largest delay between two attempts (also clamps `Retry-After`).
    pub cap: Duration,
    /// Time after confirmation when the SDK stops sending (must stay below the server's key window).
    pub give_up_after: Duration,
    /// Full jitter on (the default); off only to measure what jitter buys.
    pub jitter: bool,
    /// Retry budget: retries allowed in a burst.
    pub budget_burst: u32,
    /// Retry budget: retries regained per second.
    pub budget_per_second: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(60),
            give_up_after: Duration::from_secs(24 * 3600),
            jitter: true,
            budget_burst: 20,
            budget_per_second: 2.0,
        }
    }
}

/// Everything [`crate::Sdk::open`] needs.
#[derive(Clone)]
pub struct SdkConfig {
    /// Server base URL, e.g. `https://api.example.com`.
    pub base_url: String,
    /// Path of the SQLite file that holds the transfers.
    pub db_path: PathBuf,
    /// Bearer token; can be replaced later with `set_access_token`.
    pub access_token: Option<String>,
    /// Retry settings.
    pub retry: RetryPolicy,
    /// Time for one whole request.
    pub request_timeout: Duration,
    /// Time to establish a connection.
    pub connect_timeout: Duration,
    /// Network simulation at start (off by default).
    pub network_profile: NetworkProfile,
    /// Clock for schedules and timestamps (simulated in tests and rides).
    pub clock: Arc<dyn Clock>,
    /// Transfers sent at once.
    pub max_concurrent_sends: usize,
    /// Debug only: mint a new key for every retry. Breaks exactly-once; exists to prove the checkers can fail.
    pub unsafe_new_key_per_retry: bool,
    /// Test-only builds: the classification from before only the server's answers counted.
    pub unsafe_legacy_classify: bool,
    /// How long a finished transfer stays on the device (SDK clock), counted from when it ended.
    pub retention: Duration,
    /// Asked for a fresh token once when the server answers 401 (see [`AccessTokenProvider`]).
    pub token_provider: Option<Arc<dyn AccessTokenProvider>>,
    /// Longest wait for the token provider; past it the transfer parks in AuthRequired.
    pub token_timeout: Duration,
    /// The account the store is bound to (persisted at first use); `None` binds nothing.
    pub account_id: Option<String>,
    /// Background wake-ups (drain, network back while in the background) spread their first request
    /// over at most this long.
    pub background_wake_window: Duration,
    /// Opt-in: log lines may name the recipient and the note (never the token); events never do.
    pub log_personal_data: bool,
    /// Deterministic simulations only (`sendonce-sim ride`): never set by an app.
    pub deterministic: Option<Deterministic>,
    /// How the server's answers are read; the default is server-mock's (see [`ResponseContract`]).
    pub contract: ResponseContract,
    /// Asked before every attempt for headers that change per attempt (not committed).
    pub header_provider: Option<Arc<dyn HeaderProvider>>,
    /// Encrypts the store file with this key (builds with the `encryption` feature); `None`: in clear.
    pub encryption_key: Option<crate::encryption::EncryptionKey>,
}

/// What a deterministic simulation replaces, so a seed replays the same ride: the runtime the SDK's
/// tasks run on, where its blocking writes run, and where its keys come from.
#[derive(Clone)]
pub struct Deterministic {
    /// Every task of the SDK runs here (a current-thread runtime with a paused clock); blocking store
    /// writes run inline on it instead of on a thread pool.
    pub runtime: tokio::runtime::Handle,
    /// Mints idempotency keys (seeded: a key's bytes seed its retry jitter). Keys must stay unique.
    pub mint_key: Arc<dyn Fn() -> String + Send + Sync>,
}

impl std::fmt::Debug for SdkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never print it.
        f.debug_struct("SdkConfig")
            .field("base_url", &self.base_url)
            .field("db_path", &self.db_path)
            .field("encrypted", &self.encryption_key.is_some())
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| Redacted),
            )
            .field("retry", &self.retry)
            .field("request_timeout", &self.request_timeout)
            .field("network_profile", &self.network_profile)
            .field("retention", &self.retention)
            .field("account_id", &self.account_id.as_ref().map(|_| Redacted))
            .field("token_provider", &self.token_provider.is_some())
            .field("deterministic", &self.deterministic.is_some())
            .finish_non_exhaustive()
    }
}

/// Stands for a secret in `Debug` output: says one is set, never what it is.
struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl SdkConfig {
    /// Starts a builder with the two settings that have no default.
    pub fn builder(base_url: impl Into<String>, db_path: impl Into<PathBuf>) -> SdkConfigBuilder {
        SdkConfigBuilder {
            config: SdkConfig {
                base_url: base_url.into(),
                db_path: db_path.into(),
                access_token: None,
                retry: RetryPolicy::default(),
                request_timeout: Duration::from_secs(15),
                connect_timeout: Duration::from_secs(5),
                network_profile: NetworkProfile::Off,
                clock: Arc::new(SystemClock),
                max_concurrent_sends: 4,
                unsafe_new_key_per_retry: false,
                unsafe_legacy_classify: false,
                retention: DEFAULT_RETENTION,
                token_provider: None,
                token_timeout: Duration::from_secs(10),
                account_id: None,
                background_wake_window: DEFAULT_WAKE_WINDOW,
                log_personal_data: false,
                deterministic: None,
                contract: ResponseContract::default(),
                header_provider: None,
                encryption_key: None,
            },
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        self.contract.validate()?;
        let url = self.base_url.trim_end_matches('/');
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| {
                SdkError::InvalidConfig(format!(
                    "base URL {:?} must start with http:// or https://",
                    self.base_url
                ))
            })?;
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return Err(SdkError::InvalidConfig(format!(
                "base URL {:?} has no host",
                self.base_url
            )));
        }
        let parsed = url::Url::parse(url).map_err(|_| {
            SdkError::InvalidConfig(format!("base URL {:?} does not parse", self.base_url))
        })?;
        if parsed.scheme() == "http" && !is_loopback(&parsed) {
            return Err(SdkError::InvalidConfig(format!(
                "base URL {:?}: plain http:// only to this device (127.0.0.0/8, ::1, localhost); use https://",
                self.base_url
            )));
        }
        within(
            "request_timeout",
            self.request_timeout,
            MIN_STEP,
            MAX_TIMEOUT,
        )?;
        within(
            "connect_timeout",
            self.connect_timeout,
            MIN_STEP,
            MAX_TIMEOUT,
        )?;
        self.retry.validate()?;
        within("retention", self.retention, MIN_RETENTION, MAX_RETENTION)?;
        within("token_timeout", self.token_timeout, MIN_STEP, MAX_TIMEOUT)?;
        within(
            "background_wake_window",
            self.background_wake_window,
            Duration::ZERO,
            MAX_CAP,
        )?;
        if let Some(account) = &self.account_id {
            if account.is_empty() || account.len() > 255 || account.chars().any(char::is_control) {
                return Err(SdkError::InvalidConfig(
                    "account_id must be 1-255 characters, no control characters".into(),
                ));
            }
        }
        if !(1..=MAX_CONCURRENT_SENDS).contains(&self.max_concurrent_sends) {
            return Err(SdkError::InvalidConfig(format!(
                "max_concurrent_sends is {}, must be 1-{MAX_CONCURRENT_SENDS}",
                self.max_concurrent_sends
            )));
        }
        Ok(())
    }
}

/// True if the URL's host is this device: the token and the transfer never cross a network in clear.
fn is_loopback(url: &url::Url) -> bool {
    // The URL parser has already normalised the host (IPv4 in dotted form, IPv6 in brackets).
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Shortest base, timeout or horizon: schedules count whole milliseconds, so less would be 0 ms (a hot loop).
const MIN_STEP: Duration = Duration::from_millis(1);
/// Longest request or connect timeout (a look-up waits for twice the request timeout).
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Longest delay between two attempts.
const MAX_CAP: Duration = Duration::from_secs(24 * 3600);
/// Longest give-up horizon: it must stay below the server's key window (48 h by default).
const MAX_GIVE_UP: Duration = Duration::from_secs(47 * 3600);
/// Slowest budget refill (one retry per ~17 min): below it the budget would all but stop retries.
const MIN_BUDGET_PER_SECOND: f64 = 1e-3;
/// Fastest budget refill: above it the budget no longer bounds anything.
const MAX_BUDGET_PER_SECOND: f64 = 1e6;
/// Largest burst of retries.
const MAX_BUDGET_BURST: u32 = 1_000_000;
/// Finished transfers kept by default: a month of receipts.
const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Shortest retention: a receipt the user has not had a chance to look at is not deleted under them.
const MIN_RETENTION: Duration = Duration::from_secs(3600);
/// Longest retention (ten years): beyond it the bound on storage means nothing.
const MAX_RETENTION: Duration = Duration::from_secs(3650 * 24 * 3600);
/// Background wake-ups spread over one retry cap by default: a fleet coming back at once then sends
/// at about the rate its retries would have had.
const DEFAULT_WAKE_WINDOW: Duration = Duration::from_secs(60);
/// Most transfers sent at once.
const MAX_CONCURRENT_SENDS: usize = 1024;

fn within(name: &str, d: Duration, min: Duration, max: Duration) -> Result<()> {
    if d < min || d > max {
        return Err(SdkError::InvalidConfig(format!(
            "{name} is {d:?}, must be {min:?}-{max:?}"
        )));
    }
    Ok(())
}

impl RetryPolicy {
    /// Refuses a policy that could overflow, spin or silently stop bounding retries.
    pub(crate) fn validate(&self) -> Result<()> {
        within("retry base", self.base, MIN_STEP, MAX_CAP)?;
        within("retry cap", self.cap, self.base, MAX_CAP)?;
        within("give_up_after", self.give_up_after, self.base, MAX_GIVE_UP)?;
        if !(1..=MAX_BUDGET_BURST).contains(&self.budget_burst) {
            return Err(SdkError::InvalidConfig(format!(
                "budget_burst is {}, must be 1-{MAX_BUDGET_BURST}",
                self.budget_burst
            )));
        }
        // NaN is in no range, so it is refused too.
        let rate = self.budget_per_second;
        if !(MIN_BUDGET_PER_SECOND..=MAX_BUDGET_PER_SECOND).contains(&rate) {
            return Err(SdkError::InvalidConfig(format!(
                "budget_per_second is {rate}, must be {MIN_BUDGET_PER_SECOND}-{MAX_BUDGET_PER_SECOND}"
            )));
        }
        Ok(())
    }
}

/// Builder of [`SdkConfig`].
#[derive(Debug, Clone)]
pub struct SdkConfigBuilder {
    config: SdkConfig,
}

impl SdkConfigBuilder {
    /// Encrypts the store file with `key` (SQLCipher; builds with the `encryption` feature, else
    /// `build` answers `InvalidConfig`). Pass the same key at every open.
    pub fn encryption_key(mut self, key: crate::encryption::EncryptionKey) -> Self {
        self.config.encryption_key = Some(key);
        self
    }
    /// Initial bearer token.
    pub fn access_token(mut self, token: impl Into<String>) -> Self {
        self.config.access_token = Some(token.into());
        self
    }
    /// Whole retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }
    /// First backoff step.
    pub fn retry_base(mut self, base: Duration) -> Self {
        self.config.retry.base = base;
        self
    }
    /// Largest delay between attempts.
    pub fn retry_cap(mut self, cap: Duration) -> Self {
        self.config.retry.cap = cap;
        self
    }
    /// Give-up horizon.
    pub fn give_up_after(mut self, horizon: Duration) -> Self {
        self.config.retry.give_up_after = horizon;
        self
    }
    /// Time for one whole request.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout = timeout;
        self
    }
    /// Time to establish a connection.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }
    /// Network simulation at start.
    pub fn network_profile(mut self, profile: NetworkProfile) -> Self {
        self.config.network_profile = profile;
        self
    }
    /// Clock (simulated time in rides and tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }
    /// Transfers sent at once.
    pub fn max_concurrent_sends(mut self, n: usize) -> Self {
        self.config.max_concurrent_sends = n;
        self
    }
    /// Debug only: a new key per retry, to prove the invariant checkers fail.
    pub fn unsafe_new_key_per_retry(mut self, on: bool) -> Self {
        self.config.unsafe_new_key_per_retry = on;
        self
    }
    /// Test-only builds (feature `legacy-classify`): the old classification, to prove the ride's
    /// checker catches it. Any other build refuses it with `InvalidConfig`.
    pub fn unsafe_legacy_classify(mut self, on: bool) -> Self {
        self.config.unsafe_legacy_classify = on;
        self
    }
    /// How long finished transfers are kept (default 30 days; 1 hour to 10 years).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.config.retention = retention;
        self
    }
    /// The app's token provider, asked once for a fresh token on a 401.
    pub fn token_provider(mut self, provider: Arc<dyn AccessTokenProvider>) -> Self {
        self.config.token_provider = Some(provider);
        self
    }
    /// Longest wait for the token provider (default 10 s).
    pub fn token_timeout(mut self, timeout: Duration) -> Self {
        self.config.token_timeout = timeout;
        self
    }
    /// Binds the store to this account (refused while another account has unfinished transfers).
    pub fn account_id(mut self, account: impl Into<String>) -> Self {
        self.config.account_id = Some(account.into());
        self
    }
    /// Longest spread of a background wake-up's first requests (default 60 s, at most 24 h).
    pub fn background_wake_window(mut self, window: Duration) -> Self {
        self.config.background_wake_window = window;
        self
    }
    /// Opt-in: recipient and note may appear in log lines (never the token; events never carry them).
    pub fn log_personal_data(mut self, on: bool) -> Self {
        self.config.log_personal_data = on;
        self
    }
    /// Deterministic simulations only: the runtime, inline writes and seeded keys of [`Deterministic`].
    pub fn deterministic(mut self, hooks: Deterministic) -> Self {
        self.config.deterministic = Some(hooks);
        self
    }
    /// How to read the server's answers (the bank's own API); refused at `build` if it cannot tell the
    /// server's answer from an intermediary's.
    pub fn contract(mut self, contract: ResponseContract) -> Self {
        self.config.contract = contract;
        self
    }
    /// Headers asked for before every attempt (a signature, an attestation), never committed.
    pub fn header_provider(mut self, provider: Arc<dyn HeaderProvider>) -> Self {
        self.config.header_provider = Some(provider);
        self
    }
    /// Finishes the configuration.
    pub fn build(self) -> Result<SdkConfig> {
        if self.config.unsafe_legacy_classify && !cfg!(feature = "legacy-classify") {
            return Err(SdkError::InvalidConfig(
                "this build has no legacy classification (a test-only build with the feature legacy-classify has)".into(),
            ));
        }
        if self.config.encryption_key.is_some() && !crate::encryption::available() {
            return Err(crate::encryption::no_encryption());
        }
        self.config.validate()?;
        Ok(self.config)
    }
}
