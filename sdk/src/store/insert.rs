//! Phase "persist before the first byte": new transfers, alone or several in one commit.

use rusqlite::{params, Connection};

use super::Store;
use crate::error::Result;
use crate::model::{Transfer, TransferState};
use crate::operation::Committed;

/// An operation to commit: ids and key minted, body and headers fixed, before the store is touched.
pub struct NewTransfer {
    pub local_id: String,
    pub key: String,
    pub op: Committed,
    pub now_ms: i64,
}

const INSERT: &str =
    "INSERT INTO transfers (local_id, idem_key, to_user_id, amount_minor, currency, note, body, \
    state, created_at_ms, updated_at_ms, next_attempt_at_ms, op_type, method, path, headers) \
    VALUES (?1,?2,?3,?4,?5,?6,?7,'pending',?8,?8,?8,?9,?10,?11,?12)";

impl Store {
    /// Transfer, key and exact body in one statement, one transaction, one fsync.
    pub fn insert(&self, new: &NewTransfer) -> Result<Transfer> {
        insert_row(&self.conn(), new)?;
        self.committed();
        Ok(inserted(new))
    }

    /// Several confirmations that arrived together, in one transaction (one fsync for all).
    ///
    /// If the shared transaction fails, each is tried again on its own, so one bad row (or a full
    /// disk that frees up) gives each caller its own answer.
    pub fn insert_batch(&self, batch: &[NewTransfer]) -> Vec<Result<Transfer>> {
        if let [one] = batch {
            return vec![self.insert(one)];
        }
        let together = {
            let conn = self.conn();
            let tx = conn.unchecked_transaction();
            tx.and_then(|tx| {
                for new in batch {
                    insert_row(&tx, new)?;
                }
                tx.commit()
            })
        };
        match together {
            Ok(()) => {
                self.committed();
                batch.iter().map(|new| Ok(inserted(new))).collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, n = batch.len(), "group commit failed; committing one by one");
                batch.iter().map(|new| self.insert(new)).collect()
            }
        }
    }
}

fn insert_row(conn: &Connection, new: &NewTransfer) -> rusqlite::Result<usize> {
    let op = &new.op;
    let s = &op.summary;
    let headers = serde_json::to_string(&op.headers)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
    conn.prepare_cached(INSERT)?.execute(params![
        new.local_id,
        new.key,
        s.counterparty,
        s.amount_minor,
        s.currency,
        s.note,
        op.body,
        new.now_ms,
        op.type_name,
        method_name(op.method),
        op.path,
        headers,
    ])
}

/// The stored name of a method.
pub(crate) fn method_name(m: crate::transport::Method) -> &'static str {
    use crate::transport::Method as M;
    match m {
        M::Get => "GET",
        M::Post => "POST",
        M::Put => "PUT",
        M::Patch => "PATCH",
        M::Delete => "DELETE",
    }
}

/// The row is exactly what was written: no need to read it back.
fn inserted(new: &NewTransfer) -> Transfer {
    let s = &new.op.summary;
    Transfer {
        local_id: new.local_id.clone(),
        operation_type: new.op.type_name.clone(),
        idempotency_key: new.key.clone(),
        to_user_id: s.counterparty.clone(),
        amount_minor: s.amount_minor,
        currency: s.currency.clone(),
        note: s.note.clone(),
        state: TransferState::Pending,
        attempts: 0,
        created_at_ms: new.now_ms,
        updated_at_ms: new.now_ms,
        last_attempt_at_ms: None,
        next_attempt_at_ms: Some(new.now_ms),
        last_error: None,
        server_transfer_id: None,
        rejection: None,
        replayed: false,
        required_action: None,
    }
}
