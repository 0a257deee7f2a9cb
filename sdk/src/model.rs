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
    ///
    /// The wire format of every release so far: a JSON object with its keys in sorted order
    /// (what a `serde_json::Value` map printed), written from a borrowed struct so a
    /// confirmation builds no map (tested byte for byte against the map below).
    pub(crate) fn body_bytes(&self) -> Vec<u8> {
        /// Fields in sorted order: the bytes of earlier releases.
        #[derive(serde::Serialize)]
        struct Wire<'a> {
            amount_minor: i64,
            currency: &'a str,
            note: Option<&'a str>,
            to_user_id: &'a str,
        }
        serde_json::to_vec(&Wire {
            amount_minor: self.amount_minor,
            currency: &self.currency,
            note: self.note.as_deref(),
            to_user_id: &self.to_user_id,
        })
        .expect("a JSON object of strings and integers always serialises")
    }
}

#[cfg(test)]
mod wire_tests {
    use super::TransferRequest;

    /// The bytes earlier releases sent (and committed for transfers still in flight): a map.
    fn as_a_map(r: &TransferRequest) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "to_user_id": r.to_user_id,
            "amount_minor": r.amount_minor,
            "currency": r.currency,
            "note": r.note,
        }))
        .unwrap()
    }

    #[test]
    fn the_body_is_byte_for_byte_the_map_earlier_releases_sent() {
        let notes = [
            None,
            Some(""),
            Some("rent"),
            Some("quote \" backslash \\ tab-free ünïcødé 🚆 </script>"),
            Some("\u{2028}\u{2029}"),
        ];
        for note in notes {
            for amount in [1, 50_000, super::MAX_AMOUNT_MINOR] {
                let r = TransferRequest {
                    to_user_id: "usr_\"odd\"".into(),
                    amount_minor: amount,
                    currency: "BDT".into(),
                    note: note.map(str::to_string),
                };
                assert_eq!(r.body_bytes(), as_a_map(&r), "{r:?}");
            }
        }
        let r = TransferRequest {
            to_user_id: "usr_b".into(),
            amount_minor: 1250,
            currency: "EUR".into(),
            note: None,
        };
        assert_eq!(
            String::from_utf8(r.body_bytes()).unwrap(),
            r#"{"amount_minor":1250,"currency":"EUR","note":null,"to_user_id":"usr_b"}"#
        );
    }
}

/// Where a transfer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
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
    /// The server wants the customer to complete a step first (3-D Secure, an SCA challenge, a code).
    /// Parked: never sent, never given up, until `action_completed` (or a look-up that finds it done).
    RequiresAction,
}

impl TransferState {
    /// True once the outcome is known and nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Rejected | Self::Failed)
    }

    /// True once a UI should stop showing progress (final, or handed to the user: NeedsAttention, or
    /// RequiresAction, which waits for the customer).
    pub fn is_settled(self) -> bool {
        self.is_final() || matches!(self, Self::NeedsAttention | Self::RequiresAction)
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
            Self::RequiresAction => "requires_action",
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
            "requires_action" => Self::RequiresAction,
            _ => return None,
        })
    }
}

/// Why the server (or the SDK) said no, as a type an app can switch over; `Other` keeps the server's
/// own code of anything else. The same type in Kotlin and Swift (a uniffi enum under the `uniffi`
/// feature; `Other` carries a field named `code` there).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum RejectionReason {
    /// The sender's account does not hold the amount.
    InsufficientFunds,
    /// No such recipient.
    RecipientNotFound,
    /// The recipient's account would exceed its highest balance.
    RecipientLimitReached,
    /// The server refused the request as malformed.
    InvalidRequest,
    /// The idempotency key was already used with another body: a bug.
    KeyReused,
    /// The status look-up said the server never executed it; nothing moved.
    NotExecuted,
    /// Any other code of the server's.
    Other(#[cfg_attr(feature = "uniffi", uniffi(name = "code"))] String),
}

impl RejectionReason {
    /// server-mock's codes, as `send_transfer` always read them.
    pub fn of_code(code: &str) -> Self {
        match code {
            "insufficient_funds" => Self::InsufficientFunds,
            "recipient_not_found" => Self::RecipientNotFound,
            "recipient_balance_limit" => Self::RecipientLimitReached,
            "invalid_request" => Self::InvalidRequest,
            "idempotency_key_reused" => Self::KeyReused,
            "not_executed" => Self::NotExecuted,
            other => Self::Other(other.into()),
        }
    }

    /// The key an app looks its localised text up by, e.g. `sendonce.rejection.insufficient_funds`
    /// (`sendonce.rejection.other` for every `Other`).
    pub fn message_key(&self) -> String {
        let name = match self {
            Self::Other(_) => "other".to_string(),
            known => known.to_stored(),
        };
        format!("sendonce.rejection.{name}")
    }

    /// The stable name persisted in the store (`other:<code>` for `Other`).
    pub(crate) fn to_stored(&self) -> String {
        match self {
            Self::InsufficientFunds => "insufficient_funds".into(),
            Self::RecipientNotFound => "recipient_not_found".into(),
            Self::RecipientLimitReached => "recipient_limit_reached".into(),
            Self::InvalidRequest => "invalid_request".into(),
            Self::KeyReused => "key_reused".into(),
            Self::NotExecuted => "not_executed".into(),
            Self::Other(code) => format!("other:{code}"),
        }
    }

    /// Reads [`Self::to_stored`] back.
    pub(crate) fn from_stored(s: &str) -> Self {
        match s {
            "insufficient_funds" => Self::InsufficientFunds,
            "recipient_not_found" => Self::RecipientNotFound,
            "recipient_limit_reached" => Self::RecipientLimitReached,
            "invalid_request" => Self::InvalidRequest,
            "key_reused" => Self::KeyReused,
            "not_executed" => Self::NotExecuted,
            other => Self::Other(other.strip_prefix("other:").unwrap_or(other).into()),
        }
    }
}

/// What the customer must do before a parked operation can go on (3-D Secure, an SCA challenge, a code).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct RequiredAction {
    /// The server's code for it.
    pub code: String,
    /// A URL to open, if the server gave one.
    pub url: Option<String>,
    /// A challenge id, if the server gave one.
    pub challenge_id: Option<String>,
}

/// Why the server (or the SDK) said no.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Rejection {
    /// What the app switches over (mapped by the response contract).
    pub reason: RejectionReason,
    /// Stable machine code, e.g. `insufficient_funds`.
    pub code: String,
    /// The server's own detail, for logs; not a text to show (it is English and may change).
    pub detail: String,
    /// HTTP status of the answer, 0 when the SDK decided.
    pub http_status: u16,
}

/// One transfer (or any other operation) as persisted on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Local id, minted at confirm.
    pub local_id: String,
    /// The operation's type name (`transfer` for `send_transfer`).
    pub operation_type: String,
    /// Idempotency key, minted at confirm, never changed.
    pub idempotency_key: String,
    /// Recipient user id (an operation's summary counterparty).
    pub to_user_id: String,
    /// Amount in minor units (an operation's summary amount).
    pub amount_minor: i64,
    /// ISO 4217 code (an operation's summary currency).
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
    /// While `RequiresAction`: what the customer must do.
    pub required_action: Option<RequiredAction>,
}

#[cfg(test)]
mod tests {
    use super::RejectionReason as R;

    #[test]
    fn every_reason_has_its_message_key_and_survives_the_store() {
        let all = [
            (R::InsufficientFunds, "insufficient_funds"),
            (R::RecipientNotFound, "recipient_not_found"),
            (R::RecipientLimitReached, "recipient_limit_reached"),
            (R::InvalidRequest, "invalid_request"),
            (R::KeyReused, "key_reused"),
            (R::NotExecuted, "not_executed"),
            (R::Other("card_blocked".into()), "other"),
        ];
        for (reason, key) in all {
            assert_eq!(reason.message_key(), format!("sendonce.rejection.{key}"));
            assert_eq!(R::from_stored(&reason.to_stored()), reason);
        }
    }
}
