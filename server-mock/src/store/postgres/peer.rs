//! The bench's peer on PostgreSQL: the Powertools-style idempotency layer of
//! `store/sqlite/peer.rs` (read its doc for what it is and is not) on the same database, each
//! step one autocommit statement: the conditional insert of the `INPROGRESS` record
//! (committed without waiting for the disk, as the contract's claim: the handler's commit
//! after it makes it durable), the handler (the sender's balance row locked and checked, the
//! debit and the recipient's credit, inline: there is no outbox), the completion
//! (synchronous: a lost completion would run the handler again on the retry); a failed
//! handler deletes the record, as Powertools does.

use super::{exec, opt, PgStore};
use crate::store::{
    FloorTransfer, PlainRow, PEER_EXPIRES_AFTER_MS as EXPIRES_AFTER_MS,
    PEER_IN_PROGRESS_MS as IN_PROGRESS_MS,
};
use sendonce_server::store::DbError;

const PUT: &str = "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
     INSERT INTO bench_peer_keys
         (user_id, idem_key, status, payload_hash, expiry_ms, in_progress_expiry_ms)
     SELECT $1, $2, 'INPROGRESS', $3, $5, $6 FROM async
     ON CONFLICT (user_id, idem_key) DO UPDATE SET
         status = 'INPROGRESS', payload_hash = EXCLUDED.payload_hash,
         expiry_ms = EXCLUDED.expiry_ms,
         in_progress_expiry_ms = EXCLUDED.in_progress_expiry_ms, response = NULL
     WHERE bench_peer_keys.expiry_ms < $4
        OR (bench_peer_keys.status = 'INPROGRESS' AND bench_peer_keys.in_progress_expiry_ms < $4)";

/// The handler: debit and credit only if the sender's balance, its row locked, covers it.
const HANDLER: &str = "WITH sender AS (
         SELECT balance_minor FROM balances WHERE user_id = $1 FOR UPDATE),
     covered AS (SELECT 1 WHERE (SELECT balance_minor FROM sender) >= $2),
     debit AS (
         INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                             counterparty, currency, note, created_at_ms)
         SELECT $1, 'debit', $2, $3, $4, $5, $6, $7, $8, $9 FROM covered
         RETURNING entry_id)
     INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, counterparty,
                         currency, note, created_at_ms)
     SELECT $6, 'credit', $2, $3, $4, $1, $7, $8, $9 FROM debit
     RETURNING (SELECT entry_id FROM debit)";

const DELETE: &str = "DELETE FROM bench_peer_keys WHERE user_id = $1 AND idem_key = $2";

const COMPLETE: &str = "UPDATE bench_peer_keys SET status = 'COMPLETED', response = $3
     WHERE user_id = $1 AND idem_key = $2";

/// One first request through the peer layer; returns the debit's ledger entry id.
pub(super) async fn first_request(store: &PgStore, p: PlainRow) -> Result<i64, DbError> {
    let FloorTransfer {
        record: t,
        body,
        hash,
    } = p.floor_transfer();
    let key = &t.idempotency_key;
    let c = store.client().await?;
    let now = t.created_at_ms;
    let put = exec(
        &c,
        PUT,
        &[
            &t.from_user_id,
            key,
            &hash,
            &now,
            &(now + EXPIRES_AFTER_MS),
            &(now + IN_PROGRESS_MS),
        ],
    )
    .await?;
    if put != 1 {
        return Err(DbError::Task("the peer's key is already in use".into()));
    }
    let ran = opt(
        &c,
        HANDLER,
        &[
            &t.from_user_id,
            &t.amount_minor,
            &t.transfer_id,
            key,
            &hash,
            &t.to_user_id,
            &t.currency,
            &t.note,
            &now,
        ],
    )
    .await
    .and_then(|row| {
        row.ok_or_else(|| DbError::Task("the peer's sender cannot cover the amount".into()))
    });
    let entry: i64 = match ran {
        Ok(row) => row.get(0),
        // As Powertools does when the handler raises: the record goes, so a retry runs again.
        Err(e) => {
            exec(&c, DELETE, &[&t.from_user_id, key]).await?;
            return Err(e);
        }
    };
    exec(&c, COMPLETE, &[&t.from_user_id, key, &body]).await?;
    Ok(entry)
}
