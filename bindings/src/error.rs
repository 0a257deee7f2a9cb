//! The one error type every call into the bindings can return, mapped 1:1 from [`sendonce::SdkError`].

use std::any::Any;

/// Everything that can go wrong in a call into sendonce (Kotlin: sealed `SendOnceException`, Swift: enum
/// `SendOnceError`).
///
/// Exported with its fields: each variant is its own exception class / case carrying them. `detail` is a
/// diagnostic for logs (English, from the SDK), never a text to show: an app shows the message key
/// (`messageKey` in Kotlin and Swift, mapped in `Errors.kt` / `Errors.swift`) in its own language.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum SendOnceError {
    /// The amount is zero, negative or above the per-transfer limit.
    #[error("invalid amount: {detail}")]
    InvalidAmount { detail: String },
    /// The currency is not a three-letter ISO 4217 code.
    #[error("invalid currency: {detail}")]
    InvalidCurrency { detail: String },
    /// The recipient id is empty, too long or has invisible characters.
    #[error("invalid recipient: {detail}")]
    InvalidRecipient { detail: String },
    /// The note is too long or has control characters.
    #[error("invalid note: {detail}")]
    InvalidNote { detail: String },
    /// The configuration cannot work (bad URL, zero or negative timeout, a response contract that
    /// cannot tell the server's answer from an intermediary's, ...).
    #[error("invalid configuration: {detail}")]
    InvalidConfig { detail: String },
    /// The operation cannot be sent as described (bad path, reserved header, body too large).
    #[error("invalid operation: {detail}")]
    InvalidOperation { detail: String },
    /// The database file is not a sendonce database or is damaged; it was left untouched.
    #[error("database is corrupt: {detail}")]
    StorageCorrupt { detail: String },
    /// The file was written by a newer SDK (the app was downgraded, or a newer install's backup was
    /// restored): left untouched, its transfers still in it; not corrupt. Update the app.
    #[error("database written by a newer SDK (schema {found}, this SDK reads up to {supported})")]
    StorageFromNewerVersion { found: i64, supported: i64 },
    /// The store is encrypted and this key cannot read it (another key, a file kept in clear, or
    /// not a sendonce file); nothing was changed.
    #[error("storage key: {detail}")]
    StorageKey { detail: String },
    /// The disk is full; nothing was written.
    #[error("storage full: {detail}")]
    StorageFull { detail: String },
    /// The database file cannot be opened or written (permissions, missing folder, ...).
    #[error("storage unavailable: {detail}")]
    StorageUnavailable { detail: String },
    /// Another instance (this process or another) already owns this database file.
    #[error("database is in use by another sendonce instance: {detail}")]
    AlreadyOpen { detail: String },
    /// Another process (an app's `:worker` process) holds this database file: try again later.
    #[error("database is busy in another process, try again later: {detail}")]
    Busy { detail: String },
    /// The store is bound to another account that still has unfinished transfers.
    #[error("this device's transfers belong to another account: {detail}")]
    AccountMismatch { detail: String },
    /// Refused: this many transfers are unfinished (pass `force` to discard them).
    #[error("{count} transfers are unfinished; refusing to discard them without force")]
    UnfinishedTransfers { count: u32 },
    /// No transfer with this local id.
    #[error("no transfer with id {local_id}")]
    NotFound { local_id: String },
    /// The composer's current transfer is still unfinished; wait for its outcome first.
    #[error("the current transfer is still unfinished")]
    TransferUnfinished,
    /// The SDK was closed; open it again.
    #[error("the SDK is closed")]
    Closed,
    /// The status look-up could not reach a verdict (network, server).
    #[error("status look-up failed: {detail}")]
    LookupFailed { detail: String },
    /// The call was cancelled through its `CancelSignal` (Swift Task cancellation); nothing was undone:
    /// a transfer it was waiting for goes on.
    #[error("the call was cancelled")]
    Cancelled,
    /// A bug inside the Rust core, caught before it could cross the FFI and crash the app.
    #[error("internal error: {detail}")]
    Internal { detail: String },
}

impl From<sendonce::SdkError> for SendOnceError {
    fn from(e: sendonce::SdkError) -> Self {
        use sendonce::SdkError as E;
        match e {
            E::InvalidAmount(detail) => Self::InvalidAmount { detail },
            E::InvalidCurrency(detail) => Self::InvalidCurrency { detail },
            E::InvalidRecipient(detail) => Self::InvalidRecipient { detail },
            E::InvalidNote(detail) => Self::InvalidNote { detail },
            E::InvalidConfig(detail) => Self::InvalidConfig { detail },
            E::InvalidOperation(detail) => Self::InvalidOperation { detail },
            E::StorageCorrupt(detail) => Self::StorageCorrupt { detail },
            E::StorageFromNewerVersion { found, supported } => {
                Self::StorageFromNewerVersion { found, supported }
            }
            E::StorageKey(detail) => Self::StorageKey { detail },
            E::StorageFull(detail) => Self::StorageFull { detail },
            E::StorageUnavailable(detail) => Self::StorageUnavailable { detail },
            E::AlreadyOpen(detail) => Self::AlreadyOpen { detail },
            E::Busy(detail) => Self::Busy { detail },
            E::AccountMismatch(detail) => Self::AccountMismatch { detail },
            E::UnfinishedTransfers(count) => Self::UnfinishedTransfers { count },
            E::NotFound(local_id) => Self::NotFound { local_id },
            E::TransferUnfinished => Self::TransferUnfinished,
            E::Closed => Self::Closed,
            E::LookupFailed(detail) => Self::LookupFailed { detail },
            E::Internal(detail) => Self::Internal { detail },
        }
    }
}

impl SendOnceError {
    pub(crate) fn config(detail: impl Into<String>) -> Self {
        Self::InvalidConfig {
            detail: detail.into(),
        }
    }

    /// A caught panic becomes a typed error.
    pub(crate) fn from_panic(payload: Box<dyn Any + Send>) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        tracing::error!(panic = %what, "a panic was caught at the FFI boundary");
        Self::Internal {
            detail: format!("panic: {what}"),
        }
    }
}

/// Result of every fallible export.
pub type Result<T, E = SendOnceError> = std::result::Result<T, E>;
