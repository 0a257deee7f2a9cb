//! Phase 3 of a transfer: the one fenced transaction that decides it — the fence, the ledger's
//! last guard, the balance and the recipient's limit, then the debit, the capture and the outbox
//! event with the completed key (SQLite; the PostgreSQL store's `commit.rs` takes the same
//! decisions in the same order).

use axum::http::StatusCode;

use crate::gateway::{self, Settle};
use crate::ledger::{self, TransferRecord};
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::DbError;
use sendonce_server::{Answer, Problem};

/// What the money transaction enforces besides the ledger's own constraints.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Check the lock first (always, but in a test-only unfenced build).
    pub fenced: bool,
    /// Whether the gateway authorised the payment.
    pub authorised: Authorised,
    /// Highest balance a recipient may reach (far below i64::MAX, so credits in flight
    /// can never overflow a balance into a float).
    pub max_balance: i64,
}

/// Whether the gateway authorised the payment before the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorised {
    /// It did: the commit may move money.
    Yes,
    /// The balance pre-check skipped it: the commit may only store a 402.
    No,
}

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
/// Every decision is taken before the debit is written (the order of the PostgreSQL store's
/// `commit_in`), so nothing written is ever undone and no nested SAVEPOINT is needed; the
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
    if let Some((existing, stored_hash)) = reads.debit {
        // The last guard: money already moved for this key (the key row expired or was
        // reaped while an earlier attempt was still running). Answer from the ledger.
        let (wrote, answer) = if stored_hash == hash {
            let body = existing.to_json();
            let wrote = keys::complete(tx, user, key, lock_id, 201, &body)?;
            (wrote, Answer::replay(201, body))
        } else {
            let wrote = keys::release(tx, user, key, lock_id)?;
            (wrote, Problem::key_reused().into())
        };
        if !held(wrote) {
            return lock_lost(tx, user, key, now);
        }
        gateway::settle(tx, user, key, now, Settle::UnlessHeld)?;
        return Ok(answer);
    }
    let (balance, recipient) = (reads.balance, reads.recipient_balance);
    let refusal = if balance < record.amount_minor {
        Some(insufficient_funds(balance, record.amount_minor))
    } else if recipient_full(recipient, record.amount_minor, rules.max_balance) {
        Some(recipient_balance_limit())
    } else {
        None
    };
    if let Some(problem) = refusal {
        let status = problem.status.as_u16();
        if !held(keys::complete(
            tx,
            user,
            key,
            lock_id,
            status,
            &problem.body_bytes(),
        )?) {
            return lock_lost(tx, user, key, now);
        }
        gateway::settle(tx, user, key, now, Settle::UnlessHeld)?;
        return Ok(problem.into());
    }
    if rules.authorised == Authorised::No {
        // Money arrived since the pre-check: no debit without the gateway. The retry runs
        // the whole path.
        if !held(keys::release(tx, user, key, lock_id)?) {
            return lock_lost(tx, user, key, now);
        }
        return Ok(Problem::key_in_use().into());
    }
    let body = record.to_json();
    if !held(keys::complete(tx, user, key, lock_id, 201, &body)?) {
        return lock_lost(tx, user, key, now);
    }
    ledger::insert_debit(tx, record, hash)?;
    gateway::capture(tx, user, key, now)?;
    crate::outbox::insert_transfer_done(tx, record, &body)?;
    Ok(Answer::committed(body))
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
    gateway::settle(tx, user, key, now, Settle::IfDecided)?;
    Ok(Problem::key_in_use().into())
}

/// The stored 402 of a transfer the balance does not cover.
pub(crate) fn insufficient_funds(balance: i64, amount: i64) -> Problem {
    Problem::new(
        StatusCode::PAYMENT_REQUIRED,
        "insufficient_funds",
        format!("balance {balance} is less than amount {amount}"),
    )
}

/// The stored 422 of a transfer that would take the recipient past the highest balance.
pub(crate) fn recipient_balance_limit() -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "recipient_balance_limit",
        "the recipient's balance would exceed the highest balance a wallet may hold",
    )
}

/// Whether crediting `amount` takes a recipient holding `balance` past `max_balance`.
pub(crate) fn recipient_full(balance: i64, amount: i64, max_balance: i64) -> bool {
    balance.checked_add(amount).is_none_or(|b| b > max_balance)
}
