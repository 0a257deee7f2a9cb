//! Downstream consumers of `TransferDone`: wallet credit and SMS, each behind the library's
//! inbox (`sendonce_server::store::sqlite::inbox`, in the transaction of the effect).

use rusqlite::{params, Connection, OptionalExtension};
use serde::Deserialize;

use crate::ledger::{self, TransferRecord};
use sendonce_server::store::sqlite::inbox;
use sendonce_server::store::DbError;

/// The `TransferDone` event as published (the transfer's JSON).
#[derive(Debug, Clone, Deserialize)]
pub struct TransferDone {
    transfer_id: String,
    from_user_id: String,
    to_user_id: String,
    amount_minor: i64,
    currency: String,
    #[serde(default)]
    note: Option<String>,
    idempotency_key: String,
}

impl TransferDone {
    /// The transfer as the wallet consumer credits it.
    pub(crate) fn record(&self, created_at_ms: i64) -> TransferRecord {
        TransferRecord {
            transfer_id: self.transfer_id.clone(),
            from_user_id: self.from_user_id.clone(),
            to_user_id: self.to_user_id.clone(),
            amount_minor: self.amount_minor,
            currency: self.currency.clone(),
            note: self.note.clone(),
            created_at_ms,
            idempotency_key: self.idempotency_key.clone(),
        }
    }
}

/// Name and effect of one consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// Credits the recipient's wallet.
    WalletCredit,
    /// Sends the recipient one SMS.
    Sms,
}

impl Consumer {
    /// Every consumer subscribed to the outbox.
    pub const ALL: [Consumer; 2] = [Consumer::WalletCredit, Consumer::Sms];

    /// Stable name stored in the inbox.
    pub fn name(self) -> &'static str {
        match self {
            Consumer::WalletCredit => "wallet_credit",
            Consumer::Sms => "sms",
        }
    }

    /// Handles a batch of deliveries; returns how many had an effect (the rest were seen).
    ///
    /// Each event's inbox insert and its effect share one transaction (the whole batch's):
    /// either both happen or neither, so a redelivery (relay retry, broker replay) never
    /// acts twice. One transaction per batch keeps the fsyncs per event low under load.
    /// The transaction is its own on a bare connection, or the relay's group job
    /// (`db::atomically`).
    pub fn handle_batch(
        self,
        conn: &mut Connection,
        events: &[(i64, TransferDone)],
        now_ms: i64,
    ) -> Result<usize, DbError> {
        sendonce_server::store::sqlite::atomically(conn, |tx| self.handle_in(tx, events, now_ms))
    }

    fn handle_in(
        self,
        tx: &Connection,
        events: &[(i64, TransferDone)],
        now_ms: i64,
    ) -> Result<usize, DbError> {
        let mut applied = 0;
        for (event_id, event) in events {
            if !inbox::first_time(tx, self.name(), *event_id, now_ms)? {
                continue;
            }
            match self {
                Consumer::WalletCredit => ledger::insert_credit(tx, &event.record(now_ms), now_ms)?,
                Consumer::Sms => send_sms(tx, event, now_ms)?,
            }
            applied += 1;
        }
        Ok(applied)
    }
}

/// Records the SMS the recipient would get.
fn send_sms(tx: &Connection, event: &TransferDone, now_ms: i64) -> Result<(), DbError> {
    let sender: Option<String> = tx
        .prepare_cached("SELECT display_name FROM users WHERE user_id = ?1")?
        .query_row(params![event.from_user_id], |r| r.get(0))
        .optional()?;
    let text = sms_text(event, sender.as_deref());
    tx.prepare_cached(
        "INSERT OR ROLLBACK INTO sms (user_id, transfer_id, text, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![event.to_user_id, event.transfer_id, text, now_ms])?;
    Ok(())
}

/// The text the recipient of `event` gets, naming the sender as `sender`.
pub(crate) fn sms_text(event: &TransferDone, sender: Option<&str>) -> String {
    format!(
        "sendonce: you received {} {} from {} (ref {})",
        format_minor(event.amount_minor),
        event.currency,
        sms_name(sender),
        event.transfer_id
    )
}

/// The sender's name as an SMS may show it: at most 40 characters, nothing but printable
/// text (names are checked when stored; this also covers rows stored before that check).
fn sms_name(name: Option<&str>) -> String {
    let clean: String = name
        .unwrap_or_default()
        .chars()
        .filter(|&c| !crate::text::forbidden_char(c))
        .take(40)
        .collect();
    match clean.trim() {
        "" => "a sendonce user".to_string(),
        t => t.to_string(),
    }
}

/// `12345` → `123.45` (two-decimal currencies such as BDT).
fn format_minor(amount: i64) -> String {
    format!("{}.{:02}", amount / 100, (amount % 100).abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_minor_units() {
        assert_eq!(format_minor(12345), "123.45");
        assert_eq!(format_minor(5), "0.05");
    }
}
