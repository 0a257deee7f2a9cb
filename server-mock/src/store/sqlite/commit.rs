//! Phase 3 on SQLite: the fenced money transaction. The decision is `ledger::decide`, the
//! one the PostgreSQL store's `commit.rs` asks too; this file holds how SQLite reads for it
//! and writes its verdict.

use super::gateway::{capture, settle};
use crate::authorization::Settle;
use crate::ledger::decide::{decide, KeyWrite, Rules, Verdict};
use crate::ledger::{self, TransferRecord};
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::DbError;
use sendonce_server::{Answer, Problem};

/// Phase 3 in one transaction (`db::atomically`: the group job's, all or nothing).
///
/// The fence is the key row's own conditional write, the first write of every branch: the
/// completion (or release) applies only while the row is still `IN_PROGRESS` under
/// `lock_id`. A request that lost its lock (the reaper released it, expiry removed it, the
/// reaper finished it, another request claimed it since) writes nothing else, moves nothing
/// and answers 409 with `Retry-After`: whoever holds the key now decides, and the retry gets
/// that answer. (A separate read of the row first would cost a statement per request and
/// decide nothing the write does not.)
///
/// The gateway's authorisation ends with the key's outcome: the debit captures it; every
/// other outcome written here — and a fence that finds the key decided by another — voids
/// it (`gateway::settle`).
///
/// The decision is `decide` (the PostgreSQL store asks it too), taken before anything is
/// written, so nothing written is ever undone and no nested SAVEPOINT is needed; the
/// ledger's one-debit-per-key index stays the last guard under the look-up — a debit it
/// refuses fails the job, and the group rolls the job back.
pub(crate) fn commit_transfer(
    conn: &mut rusqlite::Connection,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    sendonce_server::store::sqlite::atomically(conn, |tx| {
        commit_in(tx, record, hash, lock_id, rules)
    })
}

fn commit_in(
    tx: &rusqlite::Connection,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    let (user, key) = (
        record.from_user_id.as_str(),
        record.idempotency_key.as_str(),
    );
    let now = record.created_at_ms;
    // Whether the key's conditional write found our lock (a test-only unfenced build
    // goes on without it).
    let held = |wrote: bool| wrote || !rules.fenced;
    let reads = ledger::money_reads(tx, user, key, &record.to_user_id)?;
    let unmoved = match decide(&reads, record, hash, rules) {
        Verdict::Unmoved(unmoved) => unmoved,
        Verdict::Debit => {
            let body = record.to_json();
            if !held(keys::complete(tx, user, key, lock_id, 201, &body)?) {
                return lock_lost(tx, user, key, now);
            }
            ledger::insert_debit(tx, record, hash)?;
            capture(tx, user, key, now)?;
            crate::outbox::insert_transfer_done(tx, record, &body)?;
            return Ok(Answer::committed(body));
        }
    };
    let wrote = match unmoved.write {
        KeyWrite::Complete { status, body } => {
            keys::complete(tx, user, key, lock_id, status, &body)?
        }
        KeyWrite::Release => keys::release(tx, user, key, lock_id)?,
    };
    if !held(wrote) {
        return lock_lost(tx, user, key, now);
    }
    if unmoved.void_authorisation {
        settle(tx, user, key, now, Settle::UnlessHeld)?;
    }
    Ok(unmoved.answer)
}

/// The fence found the key no longer ours: nothing written, a retryable 409.
fn lock_lost(
    tx: &rusqlite::Connection,
    user: &str,
    key: &str,
    now: i64,
) -> Result<Answer, DbError> {
    tracing::warn!(key, "lock lost before the debit: nothing moved");
    // Asleep in the gateway past its lease, this request may have written the key's
    // authorisation after the key got its outcome (a look-up's 404, a retry's 402):
    // nobody will capture it then.
    settle(tx, user, key, now, Settle::IfDecided)?;
    Ok(Problem::key_in_use().into())
}
