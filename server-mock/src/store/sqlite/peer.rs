//! The bench's peer on SQLite: what a team would ship instead of sendonce — an idempotency
//! layer in the style of AWS Lambda Powertools over the same database, implemented honestly:
//! one conditional insert of an `INPROGRESS` record (it takes over an expired record or an
//! in-progress one past its own expiry, as Powertools' `put_record` does), then the handler
//! (the money moved in its own transaction: the sender's balance read, the debit and the
//! recipient's credit, the credit inline because there is no outbox), then one update of the
//! record to `COMPLETED` with the stored response (a handler that fails deletes the record, as
//! Powertools does, so the retry runs again). No fence (a handler slower than the
//! in-progress expiry runs twice), no gateway record, no outbox.
//!
//! Durability as such a layer needs it to stay correct on a power cut: the in-progress insert
//! may be lost with nothing done (the handler's commit, later in the same WAL, makes it
//! durable), so it commits without waiting for the disk as the contract's claim does; the
//! handler's commit and the completion each wait for it (a lost completion would run the
//! handler again on the retry).

use rusqlite::params;

use crate::ledger;
use crate::store::{
    FloorTransfer, PlainRow, PEER_EXPIRES_AFTER_MS as EXPIRES_AFTER_MS,
    PEER_IN_PROGRESS_MS as IN_PROGRESS_MS,
};
use sendonce_server::store::sqlite::{Db, Durability};
use sendonce_server::store::DbError;

/// One first request through the peer layer; returns the debit's ledger entry id.
pub(super) async fn first_request(db: &Db, p: PlainRow) -> Result<i64, DbError> {
    let FloorTransfer {
        record: t,
        body,
        hash,
    } = p.floor_transfer();
    let t = std::sync::Arc::new(t);
    let now = t.created_at_ms;
    let (user, key) = (t.from_user_id.clone(), t.idempotency_key.clone());
    let put_hash = hash.clone();
    let taken = db
        .write(Durability::Normal, move |c| {
            Ok(c.prepare_cached(
                "INSERT INTO bench_peer_keys
                     (user_id, idem_key, status, payload_hash, expiry_ms, in_progress_expiry_ms)
                 VALUES (?1, ?2, 'INPROGRESS', ?3, ?4, ?5)
                 ON CONFLICT (user_id, idem_key) DO UPDATE SET
                     status = 'INPROGRESS', payload_hash = excluded.payload_hash,
                     expiry_ms = excluded.expiry_ms,
                     in_progress_expiry_ms = excluded.in_progress_expiry_ms, response = NULL
                 WHERE bench_peer_keys.expiry_ms < ?6
                    OR (bench_peer_keys.status = 'INPROGRESS'
                        AND bench_peer_keys.in_progress_expiry_ms < ?6)",
            )?
            .execute(params![
                user,
                key,
                put_hash,
                now + EXPIRES_AFTER_MS,
                now + IN_PROGRESS_MS,
                now
            ])?)
        })
        .await?;
    if taken != 1 {
        return Err(DbError::Task("the peer's key is already in use".into()));
    }
    let handler = t.clone();
    let ran = db
        .write(Durability::Full, move |c| {
            if ledger::balance(c, &handler.from_user_id)? < handler.amount_minor {
                return Err(DbError::Task(
                    "the peer's sender cannot cover the amount".into(),
                ));
            }
            ledger::insert_debit(c, &handler, &hash)?;
            let entry = c.last_insert_rowid();
            ledger::insert_credit(c, &handler, handler.created_at_ms)?;
            Ok(entry)
        })
        .await;
    let entry = match ran {
        Ok(entry) => entry,
        // As Powertools does when the handler raises: the record goes, so a retry runs again.
        Err(e) => {
            let (user, key) = (t.from_user_id.clone(), t.idempotency_key.clone());
            db.write(Durability::Normal, move |c| {
                c.prepare_cached(
                    "DELETE FROM bench_peer_keys WHERE user_id = ?1 AND idem_key = ?2",
                )?
                .execute(params![user, key])?;
                Ok(())
            })
            .await?;
            return Err(e);
        }
    };
    db.write(Durability::Full, move |c| {
        c.prepare_cached(
            "UPDATE bench_peer_keys SET status = 'COMPLETED', response = ?3
             WHERE user_id = ?1 AND idem_key = ?2",
        )?
        .execute(params![t.from_user_id, t.idempotency_key, body])?;
        Ok(())
    })
    .await?;
    Ok(entry)
}
