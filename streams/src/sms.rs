//! SMS: tells the recipient of each approved transfer, and the payer of each large one
//! (the fraud check's `transfers.large`), once each. The send is a row in this consumer's
//! database, committed with its inbox row; the gateway call it stands for would carry
//! `(transfer id, kind)` as its own idempotency key.

use rusqlite::{params, Transaction};

use crate::consume::Effect;
use crate::event::{Envelope, LARGE_TRANSFER, TRANSFER_DONE};
use crate::inbox::InboxError;

/// Where sent SMS are recorded: one per transfer and kind (`received`: to the recipient;
/// `large`: to the payer), whatever the inbox still remembers.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS sms (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id      INTEGER NOT NULL,
        transfer_id   TEXT NOT NULL,
        user_id       TEXT NOT NULL,
        text          TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        kind          TEXT NOT NULL DEFAULT 'received'
    );
    CREATE UNIQUE INDEX IF NOT EXISTS sms_once ON sms (transfer_id, kind);";

/// Records one SMS of `kind` to `user_id` about `event`'s transfer, unless that transfer
/// has had its SMS of this kind (then false).
pub fn send(
    tx: &Transaction<'_>,
    event: &Envelope,
    kind: &str,
    user_id: &str,
    text: &str,
    now_ms: i64,
) -> Result<bool, InboxError> {
    Ok(tx
        .prepare_cached(
            "INSERT INTO sms (event_id, transfer_id, user_id, text, created_at_ms, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (transfer_id, kind) DO NOTHING",
        )?
        .execute(params![
            event.event_id,
            event.transfer.transfer_id,
            user_id,
            text,
            now_ms,
            kind
        ])?
        == 1)
}

/// `12345` → `123.45` (two-decimal currencies such as BDT).
pub fn format_minor(amount: i64) -> String {
    // On the magnitude: `amount / 100` of -5 is 0, and "0.05" would drop the sign.
    let sign = if amount < 0 { "-" } else { "" };
    let magnitude = amount.unsigned_abs();
    format!("{sign}{}.{:02}", magnitude / 100, magnitude % 100)
}

/// The SMS consumer.
pub struct Sms;

impl Effect for Sms {
    const NAME: &'static str = "sms";
    const TOPICS: &'static [&'static str] = &[crate::event::APPROVED, crate::event::LARGE];
    const CRASH_POINT: &'static str = crate::crash::SMS_AFTER_DB;
    const SCHEMA: &'static str = SCHEMA;

    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<bool, InboxError> {
        let t = &event.transfer;
        let amount = format_minor(t.amount_minor);
        match event.kind.as_str() {
            LARGE_TRANSFER => {
                let text = format!(
                    "sendonce: a large transfer of {amount} {} left your account (ref {})",
                    t.currency, t.transfer_id
                );
                send(tx, event, "large", &t.from_user_id, &text, now_ms)
            }
            TRANSFER_DONE => {
                let text = format!(
                    "sendonce: you received {amount} {} (ref {})",
                    t.currency, t.transfer_id
                );
                send(tx, event, "received", &t.to_user_id, &text, now_ms)
            }
            other => {
                tracing::error!(kind = other, "event of an unknown kind skipped");
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod format_tests {
    use super::format_minor;

    /// Before the fix, -5 read "0.05" and -150 read "-1.50": the sign was lost below one unit.
    #[test]
    fn minor_units_keep_their_sign() {
        assert_eq!(format_minor(12345), "123.45");
        assert_eq!(format_minor(5), "0.05");
        assert_eq!(format_minor(0), "0.00");
        assert_eq!(format_minor(-5), "-0.05");
        assert_eq!(format_minor(-99), "-0.99");
        assert_eq!(format_minor(-150), "-1.50");
        assert_eq!(format_minor(i64::MIN), "-92233720368547758.08");
    }
}
