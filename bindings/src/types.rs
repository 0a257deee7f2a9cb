//! Mirrors of the SDK's transfer values as uniffi records and enums, with the conversions both ways.
//!
//! Times are `SystemTime` (Kotlin `Instant`, Swift `Date`), converted in the `time` module. Amounts are
//! `i64` minor units of the currency (paisa for BDT, cents for USD: 1 BDT = 100). Settings (config,
//! retry, train mode) are in [`crate::settings`].

use std::time::SystemTime;

use crate::time::{epoch_ms, instant};

/// What the user confirmed: one intent to move money. Prints without the recipient and the note
/// (`crate::redact`).
#[derive(Clone, PartialEq, Eq, uniffi::Record)]
#[uniffi::export(Debug, Display)]
pub struct TransferRequest {
    /// Server user id of the recipient.
    pub to_user_id: String,
    /// Amount in minor units of `currency` (paisa for BDT: 50_000 is 500.00 BDT); 1 to
    /// `max_amount_minor()`.
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
    /// The server wants the customer to complete a step (3-D Secure, SCA, a code); parked until
    /// `action_completed`, never given up, never a new key.
    RequiresAction,
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
            S::RequiresAction => Self::RequiresAction,
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
            S::RequiresAction => Self::RequiresAction,
        }
    }
}

/// Why the server (or the SDK) said no, as a type an app can switch over; `Other` keeps the server's
/// code of anything newer than these bindings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum RejectionReason {
    /// The sender's wallet does not hold the amount (402 `insufficient_funds`).
    InsufficientFunds,
    /// No user with this recipient id (404 `recipient_not_found`).
    RecipientNotFound,
    /// The recipient's wallet would exceed its highest balance (`recipient_balance_limit`).
    RecipientLimitReached,
    /// The server refused the request as malformed (400 `invalid_request`).
    InvalidRequest,
    /// The idempotency key was already used with another body (422 `idempotency_key_reused`): a bug.
    KeyReused,
    /// The status look-up said the server never executed it (`not_executed`); nothing moved.
    NotExecuted,
    /// A code these bindings do not know yet.
    Other {
        /// The server's stable code.
        code: String,
    },
}

impl RejectionReason {
    /// The typed reason of a stable code.
    pub fn of_code(code: &str) -> Self {
        match code {
            "insufficient_funds" => Self::InsufficientFunds,
            "recipient_not_found" => Self::RecipientNotFound,
            "recipient_balance_limit" => Self::RecipientLimitReached,
            "invalid_request" => Self::InvalidRequest,
            "idempotency_key_reused" => Self::KeyReused,
            "not_executed" => Self::NotExecuted,
            other => Self::Other { code: other.into() },
        }
    }

    /// The key an app looks its localised text up by, e.g. `sendonce.rejection.insufficient_funds`.
    pub fn message_key(&self) -> String {
        let name = match self {
            Self::InsufficientFunds => "insufficient_funds",
            Self::RecipientNotFound => "recipient_not_found",
            Self::RecipientLimitReached => "recipient_limit_reached",
            Self::InvalidRequest => "invalid_request",
            Self::KeyReused => "key_reused",
            Self::NotExecuted => "not_executed",
            Self::Other { .. } => "other",
        };
        format!("sendonce.rejection.{name}")
    }
}

/// Why the server (or the SDK) said no.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Rejection {
    /// What the app switches over (and localises through `rejection_reason_message_key`).
    pub reason: RejectionReason,
    /// Stable machine code, e.g. `insufficient_funds`.
    pub code: String,
    /// The server's own detail, for logs; not a text to show (it is English and may change).
    pub detail: String,
    /// HTTP status of the answer, 0 when the SDK decided.
    pub http_status: u16,
}

impl From<sendonce::RejectionReason> for RejectionReason {
    fn from(r: sendonce::RejectionReason) -> Self {
        use sendonce::RejectionReason as R;
        match r {
            R::InsufficientFunds => Self::InsufficientFunds,
            R::RecipientNotFound => Self::RecipientNotFound,
            R::RecipientLimitReached => Self::RecipientLimitReached,
            R::InvalidRequest => Self::InvalidRequest,
            R::KeyReused => Self::KeyReused,
            R::NotExecuted => Self::NotExecuted,
            R::Other(code) => Self::Other { code },
        }
    }
}

impl From<RejectionReason> for sendonce::RejectionReason {
    fn from(r: RejectionReason) -> Self {
        use RejectionReason as R;
        match r {
            R::InsufficientFunds => Self::InsufficientFunds,
            R::RecipientNotFound => Self::RecipientNotFound,
            R::RecipientLimitReached => Self::RecipientLimitReached,
            R::InvalidRequest => Self::InvalidRequest,
            R::KeyReused => Self::KeyReused,
            R::NotExecuted => Self::NotExecuted,
            R::Other { code } => Self::Other(code),
        }
    }
}

/// What the customer must do before a parked operation goes on (the server's "action required").
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RequiredAction {
    /// The server's code for it (e.g. `SCA_REQUIRED`).
    pub code: String,
    /// A URL to open, if the server gave one.
    pub url: Option<String>,
    /// A challenge id, if the server gave one.
    pub challenge_id: Option<String>,
}

impl From<sendonce::RequiredAction> for RequiredAction {
    fn from(a: sendonce::RequiredAction) -> Self {
        Self {
            code: a.code,
            url: a.url,
            challenge_id: a.challenge_id,
        }
    }
}

impl From<RequiredAction> for sendonce::RequiredAction {
    fn from(a: RequiredAction) -> Self {
        Self {
            code: a.code,
            url: a.url,
            challenge_id: a.challenge_id,
        }
    }
}

impl From<sendonce::Rejection> for Rejection {
    fn from(r: sendonce::Rejection) -> Self {
        Self {
            // The response contract mapped it (a bank's own codes too).
            reason: r.reason.into(),
            code: r.code,
            detail: r.detail,
            http_status: r.http_status,
        }
    }
}

impl From<Rejection> for sendonce::Rejection {
    fn from(r: Rejection) -> Self {
        Self {
            reason: r.reason.into(),
            code: r.code,
            detail: r.detail,
            http_status: r.http_status,
        }
    }
}

/// One transfer as persisted on the device. Prints without the recipient and the note
/// (`crate::redact`).
#[derive(Clone, PartialEq, Eq, uniffi::Record)]
#[uniffi::export(Debug, Display)]
pub struct Transfer {
    /// Local id, minted at confirm.
    pub local_id: String,
    /// Idempotency key, minted at confirm, never changed.
    pub idempotency_key: String,
    /// Recipient user id.
    pub to_user_id: String,
    /// Amount in minor units of `currency`.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Free text.
    pub note: Option<String>,
    /// Current state.
    pub state: TransferState,
    /// Attempts started so far.
    pub attempts: u32,
    /// When the user confirmed (SDK clock).
    pub created_at: SystemTime,
    /// Last change.
    pub updated_at: SystemTime,
    /// When the last attempt started.
    pub last_attempt_at: Option<SystemTime>,
    /// When the next attempt is due, while retrying.
    pub next_attempt_at: Option<SystemTime>,
    /// What went wrong last, for logs (English diagnostic; the state says what to show).
    pub last_error: Option<String>,
    /// Server's transfer id once succeeded.
    pub server_transfer_id: Option<String>,
    /// Why it was rejected or failed.
    pub rejection: Option<Rejection>,
    /// The success came back as a replay of an earlier attempt.
    pub replayed: bool,
    /// The operation's type name (`transfer` for `send_transfer`).
    pub operation_type: String,
    /// While `RequiresAction`: what the customer must do.
    pub required_action: Option<RequiredAction>,
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
            created_at: instant(t.created_at_ms),
            updated_at: instant(t.updated_at_ms),
            last_attempt_at: t.last_attempt_at_ms.map(instant),
            next_attempt_at: t.next_attempt_at_ms.map(instant),
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection.map(Into::into),
            replayed: t.replayed,
            operation_type: t.operation_type,
            required_action: t.required_action.map(Into::into),
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
            created_at_ms: epoch_ms(t.created_at),
            updated_at_ms: epoch_ms(t.updated_at),
            last_attempt_at_ms: t.last_attempt_at.map(epoch_ms),
            next_attempt_at_ms: t.next_attempt_at.map(epoch_ms),
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection.map(Into::into),
            replayed: t.replayed,
            operation_type: t.operation_type,
            required_action: t.required_action.map(Into::into),
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
    /// The server wants the customer to complete a step; Send stays disabled, a second tap returns
    /// this operation; the app calls `action_completed` once the customer is done.
    RequiresAction {
        /// The parked operation.
        transfer: Transfer,
        /// What the customer must do.
        action: RequiredAction,
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
            S::RequiresAction { transfer, action } => Self::RequiresAction {
                transfer: transfer.into(),
                action: action.into(),
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
            S::RequiresAction { transfer, action } => Self::RequiresAction {
                transfer: transfer.into(),
                action: action.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_code_has_its_reason_and_an_unknown_one_keeps_its_code() {
        for (code, reason) in [
            ("insufficient_funds", RejectionReason::InsufficientFunds),
            ("recipient_not_found", RejectionReason::RecipientNotFound),
            (
                "recipient_balance_limit",
                RejectionReason::RecipientLimitReached,
            ),
            ("invalid_request", RejectionReason::InvalidRequest),
            ("idempotency_key_reused", RejectionReason::KeyReused),
            ("not_executed", RejectionReason::NotExecuted),
        ] {
            assert_eq!(RejectionReason::of_code(code), reason);
        }
        assert_eq!(
            RejectionReason::of_code("card_blocked"),
            RejectionReason::Other {
                code: "card_blocked".into()
            }
        );
    }
}
