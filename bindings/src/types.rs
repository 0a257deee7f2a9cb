//! The SDK's transfer values that need an FFI shape of their own (times as `SystemTime`, printing
//! that hides personal data, the composer's `send_enabled`), with the conversions both ways. The
//! core's plain values — `TransferState`, `Rejection`, `RejectionReason`, `RequiredAction` and the
//! response contract — are uniffi types in the core itself (its `uniffi` feature), re-exported here.
//!
//! Times are `SystemTime` (Kotlin `Instant`, Swift `Date`), converted in the `time` module. Amounts are
//! `i64` minor units of the currency (paisa for BDT, cents for USD: 1 BDT = 100). Settings (config,
//! retry, train mode) are in [`crate::settings`].

use std::time::SystemTime;

use crate::time::{epoch_ms, instant};

pub use sendonce::{Rejection, RejectionReason, RequiredAction, TransferState};

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
            state: t.state,
            attempts: t.attempts,
            created_at: instant(t.created_at_ms),
            updated_at: instant(t.updated_at_ms),
            last_attempt_at: t.last_attempt_at_ms.map(instant),
            next_attempt_at: t.next_attempt_at_ms.map(instant),
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection,
            replayed: t.replayed,
            operation_type: t.operation_type,
            required_action: t.required_action,
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
            state: t.state,
            attempts: t.attempts,
            created_at_ms: epoch_ms(t.created_at),
            updated_at_ms: epoch_ms(t.updated_at),
            last_attempt_at_ms: t.last_attempt_at.map(epoch_ms),
            next_attempt_at_ms: t.next_attempt_at.map(epoch_ms),
            last_error: t.last_error,
            server_transfer_id: t.server_transfer_id,
            rejection: t.rejection,
            replayed: t.replayed,
            operation_type: t.operation_type,
            required_action: t.required_action,
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
                reason,
                transfer: transfer.into(),
            },
            S::NeedsAttention { transfer } => Self::NeedsAttention {
                transfer: transfer.into(),
            },
            S::RequiresAction { transfer, action } => Self::RequiresAction {
                transfer: transfer.into(),
                action,
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
                reason,
                transfer: transfer.into(),
            },
            S::NeedsAttention { transfer } => Self::NeedsAttention {
                transfer: transfer.into(),
            },
            S::RequiresAction { transfer, action } => Self::RequiresAction {
                transfer: transfer.into(),
                action,
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
            RejectionReason::Other("card_blocked".into())
        );
    }
}
