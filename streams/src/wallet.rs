//! The wallet: credits the recipient of each approved transfer, once.

use rusqlite::{params, Transaction};

use crate::consume::Effect;
use crate::event::Envelope;
use crate::inbox::InboxError;

/// The wallet consumer's effect.
pub struct Wallet;

impl Effect for Wallet {
    const NAME: &'static str = "wallet";
    const CRASH_POINT: &'static str = crate::crash::WALLET_AFTER_DB;
    // No uniqueness on transfer_id: the inbox alone must keep credits single, so a test
    // can show what happens when it forgets too early.
    const SCHEMA: &'static str = "
        CREATE TABLE IF NOT EXISTS credits (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            event_id      INTEGER NOT NULL,
            transfer_id   TEXT NOT NULL,
            user_id       TEXT NOT NULL,
            amount_minor  INTEGER NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS balances (
            user_id       TEXT PRIMARY KEY,
            balance_minor INTEGER NOT NULL
        );";

    fn apply(tx: &Transaction<'_>, event: &Envelope, now_ms: i64) -> Result<(), InboxError> {
        let t = &event.transfer;
        tx.prepare_cached(
            "INSERT INTO credits (event_id, transfer_id, user_id, amount_minor, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            event.event_id,
            t.transfer_id,
            t.to_user_id,
            t.amount_minor,
            now_ms
        ])?;
        tx.prepare_cached(
            "INSERT INTO balances (user_id, balance_minor) VALUES (?1, ?2)
             ON CONFLICT (user_id) DO UPDATE SET balance_minor = balance_minor + excluded.balance_minor",
        )?
        .execute(params![t.to_user_id, t.amount_minor])?;
        Ok(())
    }
}
