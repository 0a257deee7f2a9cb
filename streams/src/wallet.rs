//! The wallet: credits the recipient of each approved transfer, once.

use rusqlite::{params, Transaction};

use crate::consume::Effect;
use crate::event::Envelope;
use crate::inbox::InboxError;

/// The wallet consumer's effect.
pub struct Wallet;

impl Effect for Wallet {
    const NAME: &'static str = "wallet";
    const TOPICS: &'static [&'static str] = &[crate::event::APPROVED];
    const CRASH_POINT: &'static str = crate::crash::WALLET_AFTER_DB;
    // One credit per transfer, whatever the inbox still remembers: a replay older than
    // its window (an offset reset, expired offsets, the fraud check's group reset
    // re-emitting approvals) finds the credit there. Credits are the wallet's ledger,
    // kept anyway, so this guard costs no retention of its own.
    const SCHEMA: &'static str = "
        CREATE TABLE IF NOT EXISTS credits (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            event_id      INTEGER NOT NULL,
            transfer_id   TEXT NOT NULL,
            user_id       TEXT NOT NULL,
            amount_minor  INTEGER NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX IF NOT EXISTS credits_once ON credits (transfer_id);
        CREATE TABLE IF NOT EXISTS balances (
            user_id       TEXT PRIMARY KEY,
            balance_minor INTEGER NOT NULL
        );";

    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<bool, InboxError> {
        let t = &event.transfer;
        let fresh =
            tx.prepare_cached(
                "INSERT INTO credits (event_id, transfer_id, user_id, amount_minor, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (transfer_id) DO NOTHING",
            )?
            .execute(params![
                event.event_id,
                t.transfer_id,
                t.to_user_id,
                t.amount_minor,
                now_ms
            ])? == 1;
        if !fresh {
            return Ok(false);
        }
        tx.prepare_cached(
            "INSERT INTO balances (user_id, balance_minor) VALUES (?1, ?2)
             ON CONFLICT (user_id) DO UPDATE SET balance_minor = balance_minor + excluded.balance_minor",
        )?
        .execute(params![t.to_user_id, t.amount_minor])?;
        Ok(true)
    }
}
