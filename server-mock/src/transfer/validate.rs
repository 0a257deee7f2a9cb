//! What a transfer request must be before anything is stored: its body parses, the amount
//! and note are within limits, the recipient exists in the same currency.

use axum::http::StatusCode;

use crate::app::App;
use crate::auth::Caller;
use crate::ledger::body::TransferBody;
use sendonce_server::Problem;

pub use crate::ledger::decide::MAX_AMOUNT_MINOR;
/// Longest note accepted, in characters.
pub const MAX_NOTE_CHARS: usize = 280;

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
    check_body(app.max_amount_minor(), caller, &parsed)?;
    let recipient_currency = app
        .store()
        .user_currency(parsed.to_user_id.clone())
        .await
        .map_err(crate::problem::from_db)?;
    check_recipient(parsed, recipient_currency)
}

/// The body as sent, or 400.
pub fn parse(body: &[u8]) -> Result<TransferBody, Problem> {
    // serde_json skips an unknown field's string without checking its bytes: without this, a
    // body that is not JSON (RFC 8259 JSON is UTF-8) would be accepted and stored.
    let text = std::str::from_utf8(body)
        .map_err(|e| Problem::invalid(format!("transfer body is not UTF-8: {e}")))?;
    serde_json::from_str(text)
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
    check_body(app.max_amount_minor(), caller, &parsed)?;
    check_recipient(parsed, recipient_currency)
}

/// The checks that need nothing but the body, the caller and the amount limit in force
/// (no read: also what the fuzz target `body` drives with arbitrary bytes).
pub fn check_body(max: i64, caller: &Caller, parsed: &TransferBody) -> Result<(), Problem> {
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
        .is_some_and(|n| n.chars().any(crate::text::forbidden_char))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `body` fuzz target (fuzz/regressions/body/): invalid UTF-8 inside an unknown
    /// field's string was accepted as a transfer body.
    #[test]
    fn a_body_that_is_not_utf8_is_refused() {
        let mut body =
            br#"{"to_user_id":"bob","amount_minor":5,"currency":"EUR","memo":"p"#.to_vec();
        body.extend_from_slice(&[0xce, 0xce, b'"', b'}']);
        let problem = parse(&body).unwrap_err();
        assert_eq!(problem.code, "invalid_request");
        let utf8 =
            "{\"to_user_id\":\"bob\",\"amount_minor\":5,\"currency\":\"EUR\",\"memo\":\"p\u{e9}\"}";
        assert!(parse(utf8.as_bytes()).is_ok());
    }
}
