//! Mirrors of the SDK's transfer values as uniffi records and enums, with the conversions both ways.
//!
//! Times are `i64` milliseconds since the Unix epoch. Settings (config, retry, train mode) are in
//! [`crate::settings`].

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
