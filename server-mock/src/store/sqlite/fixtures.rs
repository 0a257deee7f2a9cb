//! server-mock's test API and bench endpoints on SQLite ([`Fixtures`]).

use rusqlite::{params, Connection};
use sendonce_server::store::sqlite::Durability;
use sendonce_server::store::sqlite::{inbox, keys, outbox};
use sendonce_server::store::DbError;

use super::SqliteStore;
use crate::ledger::{self, EntryJson};
use crate::store::{Fixtures, Fut, NewUser, PlainRow, Sms, Stats, UserChange};

impl Fixtures for SqliteStore {
    fn create_user(&self, u: NewUser) -> Fut<'_, ()> {
        Box::pin(self.db.call(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO users (user_id, token, display_name, currency, created_at_ms,
                                    token_expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    u.user_id,
                    u.token_hash,
                    u.display_name,
                    u.currency,
                    u.now_ms,
                    u.token_expires_at_ms
                ],
            )?;
            // The opening balance is a ledger entry: balance is always the ledger's sum.
            if u.balance_minor > 0 {
                ledger::deposit(&tx, &u.user_id, u.balance_minor, &u.currency, u.now_ms)?;
            }
            tx.commit()?;
            Ok(())
        }))
    }

    fn change_user(&self, change: UserChange, user_id: String) -> Fut<'_, usize> {
        let sql = match change {
            UserChange::Remove => "DELETE FROM users WHERE user_id = ?1",
            UserChange::Revoke => "UPDATE users SET token_expires_at_ms = 0 WHERE user_id = ?1",
        };
        Box::pin(self.db.write(Durability::Full, move |c| {
            Ok(c.execute(sql, params![user_id])?)
        }))
    }

    fn ledger_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<EntryJson>> {
        Box::pin(self.db.read(move |c| ledger::entries_page(c, after, limit)))
    }

    fn sms_page(&self, after: i64, limit: i64) -> Fut<'_, Vec<Sms>> {
        Box::pin(self.db.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT sms_id, user_id, transfer_id, text FROM sms
                 WHERE sms_id > ?1 ORDER BY sms_id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![after, limit], |r| {
                Ok(Sms {
                    sms_id: r.get(0)?,
                    user_id: r.get(1)?,
                    transfer_id: r.get(2)?,
                    text: r.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        }))
    }

    fn stats(&self) -> Fut<'_, Stats> {
        Box::pin(self.db.read(|c| stats(c)))
    }

    fn bench_plain(&self, p: PlainRow) -> Fut<'_, i64> {
        // The same group-commit path and durability (FULL) as a transfer's money
        // transaction, so the baseline gets the same batching under load.
        Box::pin(self.db.write(Durability::Full, move |c| {
            c.prepare_cached(
                "INSERT OR ROLLBACK INTO bench_plain (user_id, to_user_id, amount_minor, currency, note, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![p.user_id, p.to_user_id, p.amount_minor, p.currency, p.note, p.now_ms])?;
            Ok(c.last_insert_rowid())
        }))
    }

    fn bench_floor(&self, row: PlainRow) -> Option<Fut<'_, i64>> {
        Some(Box::pin(super::floor::first_request(
            &self.db,
            &self.instance,
            row,
        )))
    }

    fn bench_peer(&self, row: PlainRow) -> Option<Fut<'_, i64>> {
        Some(Box::pin(super::peer::first_request(&self.db, row)))
    }
}

fn stats(c: &Connection) -> Result<Stats, DbError> {
    let count = |sql: &str| -> Result<i64, DbError> { Ok(c.query_row(sql, [], |r| r.get(0))?) };
    let gateway = super::gateway::counts(c)?;
    let (outbox_rows, outbox_pending) = outbox::counts(c)?;
    let (idempotency_keys, keys_in_progress) = keys::counts(c)?;
    Ok(Stats {
        idempotency_keys,
        keys_in_progress,
        outbox_pending,
        outbox_rows,
        inbox_rows: inbox::count(c)?,
        ledger_entries: count("SELECT COUNT(*) FROM ledger")?,
        sms_sent: count("SELECT COUNT(*) FROM sms")?,
        credits: count("SELECT COUNT(*) FROM ledger WHERE kind = 'credit'")?,
        gateway_authorizations: gateway.authorizations,
        gateway_calls: gateway.calls,
        gateway_captures: gateway.captures,
        gateway_voids: gateway.voids,
    })
}
