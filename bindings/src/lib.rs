//! uniffi surface of the sendonce SDK: conversions and error mapping only; every decision stays in
//! the `sendonce` crate.
//!
//! * [`objects`]: `SendOnceCore` (the SDK handle) and `ComposerCore` (one confirm screen)
//! * [`types`]: transfer records and enums mirrored from the SDK (times through `time`)
//! * `time`: the SDK's `i64` ms as `SystemTime` and back
//! * [`probe`]: a StrictMode-like record of the thread of each store transaction and each send
//! * [`settings`]: the open config, retry policy and train-mode settings
//! * [`error`]: `SendOnceError`, one variant per `SdkError` (+ `Internal` for a caught panic)
//! * [`cancel`]: `CancelSignal`, the Swift layer's way to drop a waiting call's future
//! * [`listener`]: the foreign listener traits
//! * [`lifecycle`]: the shared instance, `drain`, accounts; [`foreign`]: token provider and transport
//! * [`events`]: the event listener; [`logs`]: the log sink
//!
//! No panic crosses the FFI: every export runs inside `guard`.

uniffi::setup_scaffolding!();

pub mod cancel;
pub mod error;
pub mod events;
pub mod foreign;
mod guard;
pub mod lifecycle;
pub mod listener;
pub mod logs;
pub mod objects;
pub mod operations;
#[cfg(feature = "io-probe")]
pub mod probe;
mod redact;
pub mod settings;
pub mod store_key;
mod time;
pub mod types;

pub use cancel::CancelSignal;
pub use error::SendOnceError;
pub use events::{EventListener, SdkEvent};
pub use foreign::{
    AccessTokenProvider, HttpHeader, HttpRequest, HttpResponse, HttpTransport, RequestHeaders,
};
pub use lifecycle::{DrainSummary, WipeReport};
pub use listener::{ComposerListener, ListenerError, TransferListener};
pub use logs::{LogLevel, LogRecord, LogSink};
pub use objects::{ComposerCore, SendOnceCore};
pub use settings::{NetsimSettings, NetsimStats, NetworkProfile, RetryPolicy, SendOnceConfig};
pub use types::{
    ComposerState, Rejection, RejectionReason, Transfer, TransferRequest, TransferState,
};

/// Version of the Rust core the bindings were built from.
#[uniffi::export]
pub fn sdk_version() -> String {
    env!("CARGO_PKG_VERSION").into()
}

/// Whether this library carries the core's built-in HTTP stack (reqwest + rustls). A mobile build
/// has not (built `--no-default-features`): the Kotlin and Swift layers then pass the platform's
/// stack (OkHttp, URLSession) when the app gives no transport.
#[uniffi::export]
pub fn has_built_in_transport() -> bool {
    sendonce::has_built_in_transport()
}

/// True once the outcome is known and nothing more will happen.
#[uniffi::export]
pub fn transfer_state_is_final(state: TransferState) -> bool {
    state.is_final()
}

/// True once a UI should stop showing progress (final, or handed to the user).
#[uniffi::export]
pub fn transfer_state_is_settled(state: TransferState) -> bool {
    state.is_settled()
}

/// Whether the Send button is enabled in this composer state.
#[uniffi::export]
pub fn composer_state_send_enabled(state: ComposerState) -> bool {
    sendonce::ComposerState::from(state).send_enabled()
}

/// What a confirm screen following `transfer` shows: the core's own mapping, exported so that a fake of
/// the SDK (the Kotlin and Swift testing artifacts) can be checked against it.
#[uniffi::export]
pub fn composer_state_of(transfer: Transfer) -> ComposerState {
    sendonce::ComposerState::of(&transfer.into()).into()
}

/// Parses a profile name (`off`, `offline`, `train`, `flaky`, `lb-replay`); `None` if unknown.
#[uniffi::export]
pub fn network_profile_from_name(name: String) -> Option<NetworkProfile> {
    sendonce::NetworkProfile::from_name(&name).map(Into::into)
}

/// The fault settings a profile stands for with this seed; `None` for `Off` (or invalid custom settings).
#[uniffi::export]
pub fn network_profile_settings(profile: NetworkProfile, seed: u64) -> Option<NetsimSettings> {
    let profile: sendonce::NetworkProfile = profile.try_into().ok()?;
    profile.settings(seed).map(Into::into)
}

/// The SDK's default retry policy.
#[uniffi::export]
pub fn default_retry_policy() -> RetryPolicy {
    sendonce::RetryPolicy::default().into()
}

/// The key an app looks the localised text of a rejection up by, e.g. `sendonce.rejection.insufficient_funds`.
#[uniffi::export]
pub fn rejection_reason_message_key(reason: RejectionReason) -> String {
    reason.message_key()
}

/// Largest amount of one transfer, in minor units.
#[uniffi::export]
pub fn max_amount_minor() -> i64 {
    sendonce::MAX_AMOUNT_MINOR
}
