//! What a transfer request must be before anything is stored: its body parses, the amount
//! and note are within limits, the recipient exists in the same currency.

use axum::http::StatusCode;
use serde::Deserialize;

use super::Caller;
use crate::problem::Problem;
use crate::App;

/// Largest amount accepted, in minor units.
pub const MAX_AMOUNT_MINOR: i64 = 1_000_000_000_000;
/// Longest note accepted, in characters.
pub const MAX_NOTE_CHARS: usize = 280;

/// Body of `POST /v1/transfers` as sent.
#[derive(Debug, Deserialize)]
pub(super) struct TransferBody {
    pub(super) to_user_id: String,
    pub(super) amount_minor: i64,
    pub(super) currency: String,
    #[serde(default)]
    pub(super) note: Option<String>,
}

/// A transfer request that passed validation (recipient exists, currencies match).
#[derive(Debug, Clone)]
pub struct ValidTransfer {
    /// Recipient.
    pub to_user_id: String,
    /// Amount in minor units, 1..=10^12.
    pub amount_minor: i64,
    /// Currency of both wallets.
    pub currency: String,
    /// Optional note.
    pub note: Option<String>,
}

/// Parses and validates a transfer body (shared with the bench endpoint). Nothing is stored.
pub async fn validate(app: &App, caller: &Caller, body: &[u8]) -> Result<ValidTransfer, Problem> {
    let parsed = parse(body)?;
    // The body's own checks first: a body they refuse costs no read.
    check_body(app, caller, &parsed)?;
    let recipient_currency = app
        .store
        .user_currency(parsed.to_user_id.clone())
        .await
        .map_err(Problem::from_db)?;
    check_recipient(parsed, recipient_currency)
}

/// The body as sent, or 400.
pub(super) fn parse(body: &[u8]) -> Result<TransferBody, Problem> {
    serde_json::from_slice(body)
        .map_err(|e| Problem::invalid(format!("malformed transfer body: {e}")))
}

/// The checks of [`validate`] on a parsed body, given the recipient's wallet currency as
/// looked up (`None`: no such user).
pub(super) fn check(
    app: &App,
    caller: &Caller,
    parsed: TransferBody,
    recipient_currency: Option<String>,
) -> Result<ValidTransfer, Problem> {
    check_body(app, caller, &parsed)?;
    check_recipient(parsed, recipient_currency)
}

/// The checks that need nothing but the body and the caller.
fn check_body(app: &App, caller: &Caller, parsed: &TransferBody) -> Result<(), Problem> {
    let max = app.max_amount_minor();
    if parsed.amount_minor <= 0 || parsed.amount_minor > max {
        return Err(Problem::invalid(format!(
            "amount_minor must be between 1 and {max}"
        )));
    }
    if parsed.currency != caller.currency {
        return Err(Problem::invalid(format!(
            "currency {:?} does not match the wallet currency {}",
            parsed.currency, caller.currency
        )));
    }
    if parsed
        .note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return Err(Problem::invalid(format!(
            "note is longer than {MAX_NOTE_CHARS} characters"
        )));
    }
    if parsed
        .note
        .as_ref()
        .is_some_and(|n| n.chars().any(crate::http::forbidden_char))
    {
        return Err(Problem::invalid(
            "note must not contain control or bidi characters",
        ));
    }
    if parsed.to_user_id == caller.user_id {
        return Err(Problem::invalid("a transfer to yourself is not allowed"));
    }
    Ok(())
}

/// The recipient exists, in the body's currency.
fn check_recipient(
    parsed: TransferBody,
    recipient_currency: Option<String>,
) -> Result<ValidTransfer, Problem> {
    match recipient_currency {
        None => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "recipient_not_found",
            "no user with this to_user_id",
        )),
        Some(c) if c != parsed.currency => Err(Problem::invalid(
            "the recipient's wallet uses another currency",
        )),
        Some(_) => Ok(ValidTransfer {
            to_user_id: parsed.to_user_id,
            amount_minor: parsed.amount_minor,
            currency: parsed.currency,
            note: parsed.note,
        }),
    }
}
