//! SMS: tells the recipient of each approved transfer, once. The send is a row in this
//! consumer's database, committed with its inbox row (the gateway call it stands for
//! would carry the event id as its own idempotency key).

use rusqlite::{params, Transaction};

use crate::consume::Effect;
use crate::event::Envelope;
use crate::inbox::InboxError;

/// Where sent SMS are recorded (the SMS consumer's and the fraud check's databases).
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS sms (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id      INTEGER NOT NULL,
        transfer_id   TEXT NOT NULL,
        user_id       TEXT NOT NULL,
        text          TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    );";

/// Records one SMS to `user_id` about `event`'s transfer.
pub fn send(
    tx: &Transaction<'_>,
    event: &Envelope,
    user_id: &str,
    text: &str,
    now_ms: i64,
) -> Result<(), InboxError> {
    tx.prepare_cached(
        "INSERT INTO sms (event_id, transfer_id, user_id, text, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        event.event_id,
        event.transfer.transfer_id,
        user_id,
        text,
        now_ms
    ])?;
    Ok(())
}

/// `12345` → `123.45` (two-decimal currencies such as BDT).
pub fn format_minor(amount: i64) -> String {
    format!("{}.{:02}", amount / 100, (amount % 100).abs())
}

/// The recipient's SMS consumer.
pub struct Sms;

impl Effect for Sms {
    const NAME: &'static str = "sms";
    const CRASH_POINT: &'static str = crate::crash::SMS_AFTER_DB;
    const SCHEMA: &'static str = SCHEMA;

    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<(), InboxError> {
        let t = &event.transfer;
        let text = format!(
            "sendonce: you received {} {} (ref {})",
            format_minor(t.amount_minor),
            t.currency,
            t.transfer_id
        );
        send(tx, event, &t.to_user_id, &text, now_ms)
    }
}
