//! Phase 3 on PostgreSQL: the fenced debit, and the ledger reads its last guard and the
//! look-ups rest on. The decisions are those of `transfer::commit_transfer` (SQLite), in
//! the same order, on rows locked `FOR UPDATE`.

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::keys::{complete, hold, release, HOLD};
use super::opt;
use crate::db::DbError;
use crate::ledger::TransferRecord;
use crate::problem::Problem;
use crate::transfer::{self, Answer, Authorised, Rules};

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

/// What the debit decision reads, in one statement: the sender's balance (its row locked
/// so one sender's debits run one at a time), the recipient's, and whether a debit for
/// this key exists already (the last guard).
const POSITION: &str = "SELECT balance_minor,
        COALESCE((SELECT balance_minor FROM balances WHERE user_id = $2), 0),
        EXISTS (SELECT 1 FROM ledger WHERE kind = 'debit' AND user_id = $1 AND idem_key = $3)
     FROM balances WHERE user_id = $1 FOR UPDATE";

struct Position {
    balance: i64,
    recipient: i64,
    debited: bool,
}

async fn position<C: GenericClient>(
    c: &C,
    user_id: &str,
    recipient: &str,
    key: &str,
) -> Result<Position, DbError> {
    let row = opt(c, POSITION, &[&user_id, &recipient, &key]).await?;
    Ok(match row {
        Some(r) => Position {
            balance: r.get(0),
            recipient: r.get(1),
            debited: r.get(2),
        },
        // No balance row: nothing was ever credited, so nothing can be debited either.
        None => Position {
            balance: 0,
            recipient: 0,
            debited: debit_by_key(c, user_id, key).await?.is_some(),
        },
    })
}

/// Phase 3 in one transaction: the fence, then the same decisions as SQLite's
/// `commit_transfer`: the ledger guard, 402, the recipient's limit, an unauthorised
/// commit, and only then the debit, the outbox event and the completed key.
pub(super) async fn commit_in(
    tx: &Transaction<'_>,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    let (user, key) = (
        record.from_user_id.as_str(),
        record.idempotency_key.as_str(),
    );
    // The fence's row lock, then the balances, in one round trip (pipelined, see keys.rs):
    // both statements prepared first, so each future sends its query on its first poll,
    // in this order. Reading the balances of a request that lost its lock costs nothing.
    tx.prepare_cached(HOLD).await?;
    tx.prepare_cached(POSITION).await?;
    let fence = async { Ok::<_, DbError>(!rules.fenced || hold(tx, user, key, lock_id).await?) };
    let (held, pos) = tokio::try_join!(fence, position(tx, user, &record.to_user_id, key))?;
    if !held {
        tracing::warn!(key, "lock lost before the debit: nothing moved");
        return Ok(Problem::key_in_use().into());
    }
    if pos.debited {
        if let Some(answer) = guard(tx, user, key, lock_id, hash).await? {
            return Ok(answer);
        }
    }
    if pos.balance < record.amount_minor {
        let problem = transfer::insufficient_funds(pos.balance, record.amount_minor);
        complete(tx, user, key, lock_id, 402, &problem.body_bytes()).await?;
        return Ok(problem.into());
    }
    if transfer::recipient_full(pos.recipient, record.amount_minor, rules.max_balance) {
        let problem = transfer::recipient_balance_limit();
        complete(tx, user, key, lock_id, 422, &problem.body_bytes()).await?;
        return Ok(problem.into());
    }
    if rules.authorised == Authorised::No {
        // Money arrived since the pre-check: no debit without the gateway.
        release(tx, user, key, lock_id).await?;
        return Ok(Problem::key_in_use().into());
    }
    let body = record.to_json();
    // The debit, its outbox event and the completed key in one statement; the ON CONFLICT
    // of the one-debit-per-key index makes it all or nothing.
    let inserted = opt(
        tx,
        "WITH debit AS (
             INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                                 counterparty, currency, note, created_at_ms)
             VALUES ($1, 'debit', $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (user_id, idem_key) WHERE kind = 'debit' DO NOTHING
             RETURNING 1),
         event AS (
             INSERT INTO outbox (kind, transfer_id, payload, created_at_ms)
             SELECT 'TransferDone', $3, $10, $9 FROM debit),
         done AS (
             UPDATE idempotency_keys SET state = 'completed', response_status = 201,
                                         response_body = $11
             WHERE user_id = $1 AND idem_key = $4 AND lock_id = $12 AND state = 'in_progress'
               AND EXISTS (SELECT 1 FROM debit))
         SELECT COUNT(*) FROM debit",
        &[
            &record.from_user_id,
            &record.amount_minor,
            &record.transfer_id,
            &record.idempotency_key,
            &hash,
            &record.to_user_id,
            &record.currency,
            &record.note,
            &record.created_at_ms,
            &String::from_utf8_lossy(&body).as_ref(),
            &body,
            &lock_id,
        ],
    )
    .await?
    .is_some_and(|r| r.get::<_, i64>(0) == 1);
    if !inserted {
        // A concurrent debit for this key committed after our read (only without the
        // fence): the guard answers from it.
        return Ok(guard(tx, user, key, lock_id, hash)
            .await?
            .unwrap_or_else(|| Problem::key_in_use().into()));
    }
    Ok(Answer::committed(body))
}

/// The last guard: if money already moved for this key, the answer comes from the ledger
/// (a replay of the same request, or 422 for another body) and the key is settled.
async fn guard(
    tx: &Transaction<'_>,
    user: &str,
    key: &str,
    lock_id: &str,
    hash: &[u8],
) -> Result<Option<Answer>, DbError> {
    Ok(match debit_by_key(tx, user, key).await? {
        None => None,
        Some((existing, stored_hash)) if stored_hash == hash => {
            let body = existing.to_json();
            complete(tx, user, key, lock_id, 201, &body).await?;
            Some(Answer::replay(201, body))
        }
        Some(_) => {
            release(tx, user, key, lock_id).await?;
            Some(Problem::key_reused().into())
        }
    })
}
