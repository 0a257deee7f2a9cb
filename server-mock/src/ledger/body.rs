//! The body of `POST /v1/transfers` as sent, and the ledger record a stored body describes —
//! shared by validation, the stores and the reaper (which finishes authorised keys from it).

use serde::Deserialize;

use crate::ledger::TransferRecord;

/// Body of `POST /v1/transfers` as sent.
#[derive(Debug, Deserialize)]
pub struct TransferBody {
    /// Recipient.
    pub to_user_id: String,
    /// Amount in minor units (checked by `transfer::check_body`).
    pub amount_minor: i64,
    /// Currency (must be the caller's).
    pub currency: String,
    /// Optional note.
    #[serde(default)]
    pub note: Option<String>,
}

/// The record a stored request body describes (the reaper finishes authorised keys with
/// it); `None` if the body does not parse, which a claimed key's body always does.
pub fn record_from_body(
    user_id: &str,
    key: &str,
    body: &[u8],
    now_ms: i64,
) -> Option<TransferRecord> {
    let parsed: TransferBody = serde_json::from_slice(body).ok()?;
    Some(TransferRecord {
        transfer_id: format!("tr_{}", uuid::Uuid::now_v7().simple()),
        from_user_id: user_id.to_string(),
        to_user_id: parsed.to_user_id,
        amount_minor: parsed.amount_minor,
        currency: parsed.currency,
        note: parsed.note,
        created_at_ms: now_ms,
        idempotency_key: key.to_string(),
    })
}
