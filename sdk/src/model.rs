//! The values a host app sees: requests, transfers and their states.

use crate::error::{Result, SdkError};

/// Largest amount of one transfer, in minor units (matches the server's limit).
pub const MAX_AMOUNT_MINOR: i64 = 1_000_000_000_000;

/// What the user confirmed: one intent to move money.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    /// Server user id of the recipient.
    pub to_user_id: String,
    /// Amount in minor units (paisa for BDT).
    pub amount_minor: i64,
    /// ISO 4217 code, upper case.
    pub currency: String,
    /// Free text shown to both sides.
    pub note: Option<String>,
}

impl TransferRequest {
    /// Checks the request before anything is persisted.
    pub fn validate(&self) -> Result<()> {
        if self.amount_minor <= 0 {
            return Err(SdkError::InvalidAmount(format!(
                "{} must be above zero",
                self.amount_minor
            )));
        }
        if self.amount_minor > MAX_AMOUNT_MINOR {
            return Err(SdkError::InvalidAmount(format!(
                "{} is above the limit of {MAX_AMOUNT_MINOR}",
                self.amount_minor
            )));
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(SdkError::InvalidCurrency(format!(
                "{:?} is not a three-letter upper-case code",
                self.currency
            )));
        }
        let to = &self.to_user_id;
        if to.is_empty() || to.len() > 128 || !to.chars().all(|c| c.is_ascii_graphic()) {
            return Err(SdkError::InvalidRecipient(format!(
                "{to:?} must be 1-128 visible ASCII characters"
            )));
        }
        if let Some(note) = &self.note {
            if note.chars().count() > 140 || note.chars().any(char::is_control) {
                return Err(SdkError::InvalidNote(
                    "at most 140 characters, no control characters".into(),
                ));
            }
        }
        Ok(())
    }

    /// The exact body bytes sent with every attempt under one key.
    pub(crate) fn body_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "to_user_id": self.to_user_id,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "note": self.note,
        }))
        .expect("a JSON object of strings and integers always serialises")
    }
}

/// Where a transfer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

impl TransferState {
    /// True once the outcome is known and nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Rejected | Self::Failed)
    }

    /// True once a UI should stop showing progress (final, or handed to the user).
    pub fn is_settled(self) -> bool {
        self.is_final() || self == Self::NeedsAttention
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Retrying => "retrying",
            Self::AuthRequired => "auth_required",
            Self::Succeeded => "succeeded",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
            Self::NeedsAttention => "needs_attention",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "sending" => Self::Sending,
            "retrying" => Self::Retrying,
            "auth_required" => Self::AuthRequired,
            "succeeded" => Self::Succeeded,
            "rejected" => Self::Rejected,
            "failed" => Self::Failed,
            "needs_attention" => Self::NeedsAttention,
            _ => return None,
        })
    }
}

/// Why the server (or the SDK) said no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Stable machine code, e.g. `insufficient_funds`.
    pub code: String,
    /// Human-readable detail from the server.
    pub detail: String,
    /// HTTP status of the answer, 0 when the SDK decided.
    pub http_status: u16,
}

/// One transfer as persisted on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
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
