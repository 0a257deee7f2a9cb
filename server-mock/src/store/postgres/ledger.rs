//! The ledger's debit rows on PostgreSQL, as the look-ups and the reaper read them (the
//! debit itself is written by `commit`).

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::opt;
use crate::ledger::TransferRecord;
use sendonce_server::store::DbError;

const DEBIT_COLUMNS: &str =
    "transfer_id, user_id, counterparty, amount_minor, currency, note, created_at_ms, idem_key";

fn record_from_row(r: &Row) -> TransferRecord {
    TransferRecord {
        transfer_id: r.get(0),
        from_user_id: r.get(1),
        to_user_id: r.get(2),
        amount_minor: r.get(3),
        currency: r.get(4),
        note: r.get(5),
        created_at_ms: r.get(6),
        idempotency_key: r.get(7),
    }
}

/// The debit (and its request fingerprint) for a sender's key, if money moved.
pub(super) async fn debit_by_key<C: GenericClient>(
    c: &C,
    user_id: &str,
    key: &str,
) -> Result<Option<(TransferRecord, Vec<u8>)>, DbError> {
    let row = opt(
        c,
        &format!(
            "SELECT {DEBIT_COLUMNS}, request_hash FROM ledger
             WHERE kind = 'debit' AND user_id = $1 AND idem_key = $2"
        ),
        &[&user_id, &key],
    )
    .await?;
    Ok(row.map(|r| {
        let hash: Option<Vec<u8>> = r.get(8);
        (record_from_row(&r), hash.unwrap_or_default())
    }))
}

/// The sender's debit for a transfer id.
pub(super) async fn debit_by_transfer<C: GenericClient>(
    c: &C,
    user_id: &str,
    transfer_id: &str,
) -> Result<Option<TransferRecord>, DbError> {
    let row = opt(
        c,
        &format!(
            "SELECT {DEBIT_COLUMNS} FROM ledger
             WHERE kind = 'debit' AND user_id = $1 AND transfer_id = $2"
        ),
        &[&user_id, &transfer_id],
    )
    .await?;
    Ok(row.as_ref().map(record_from_row))
}
