//! Typed errors of the SDK: every failure a host app can see.

/// Everything that can go wrong in a call into the SDK.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdkError {
    /// The amount is zero, negative or above the per-transfer limit.
    #[error("invalid amount: {0}")]
    InvalidAmount(String),
    /// The currency is not a three-letter ISO 4217 code.
    #[error("invalid currency: {0}")]
    InvalidCurrency(String),
    /// The recipient id is empty, too long or has invisible characters.
    #[error("invalid recipient: {0}")]
    InvalidRecipient(String),
    /// The note is too long or has control characters.
    #[error("invalid note: {0}")]
    InvalidNote(String),
    /// The operation cannot be sent as described (bad path, reserved header, codec failed, body too large).
    #[error("invalid operation: {0}")]
    InvalidOperation(String),
    /// The configuration cannot work (bad URL, zero timeout, ...).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The database file is not a sendonce database or is damaged; it was left untouched.
    #[error("database is corrupt: {0}")]
    StorageCorrupt(String),
    /// The file was written by a newer SDK (a schema this one does not know: the app was downgraded,
    /// or a backup of a newer install restored). It was left untouched, its transfers are still in it,
    /// and the newer SDK opens it again; not corrupt.
    #[error("database written by a newer SDK (schema {found}, this SDK reads up to {supported}); left untouched")]
    StorageFromNewerVersion {
        /// The file's schema version.
        found: i64,
        /// The newest schema this SDK reads.
        supported: i64,
    },
    /// The store is encrypted and the key given cannot read it (or a key was given for a file kept
    /// in clear). Nothing was changed.
    #[error("storage key: {0}")]
    StorageKey(String),
    /// The disk is full; nothing was written.
    #[error("storage full: {0}")]
    StorageFull(String),
    /// The database file cannot be opened or written (permissions, missing folder, ...).
    #[error("storage unavailable: {0}")]
    StorageUnavailable(String),
    /// Another SDK instance (this process or another) already owns this database file.
    #[error("database is in use by another sendonce instance: {0}")]
    AlreadyOpen(String),
    /// Another process (an app's `:worker` process, say) holds this database file: try again later.
    #[error("database is busy in another process, try again later: {0}")]
    Busy(String),
    /// The store is bound to another account that still has unfinished transfers.
    #[error("this device's transfers belong to another account: {0}")]
    AccountMismatch(String),
    /// Refused: this many transfers are unfinished (pass `force` to discard them).
    #[error("{0} transfers are unfinished; refusing to discard them without force")]
    UnfinishedTransfers(u32),
    /// No transfer with this local id.
    #[error("no transfer with id {0}")]
    NotFound(String),
    /// The current transfer is still unfinished; wait for its outcome first.
    #[error("the current transfer is still unfinished")]
    TransferUnfinished,
    /// The SDK was closed; open it again.
    #[error("the SDK is closed")]
    Closed,
    /// The status look-up could not reach a verdict (network, server).
    #[error("status look-up failed: {0}")]
    LookupFailed(String),
    /// A bug inside the SDK that was caught before it could crash the host app.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<rusqlite::Error> for SdkError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        match e.sqlite_error_code() {
            Some(C::NotADatabase) | Some(C::DatabaseCorrupt) => {
                SdkError::StorageCorrupt(e.to_string())
            }
            Some(C::DiskFull) => SdkError::StorageFull(e.to_string()),
            Some(C::CannotOpen)
            | Some(C::ReadOnly)
            | Some(C::PermissionDenied)
            | Some(C::SystemIoFailure) => SdkError::StorageUnavailable(e.to_string()),
            _ => SdkError::StorageUnavailable(e.to_string()),
        }
    }
}

/// Result alias of the SDK.
pub type Result<T, E = SdkError> = std::result::Result<T, E>;
