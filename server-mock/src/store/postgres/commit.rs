//! Phase 3 on PostgreSQL: the fenced debit, and the ledger reads its last guard and the
//! look-ups rest on. The decision is `ledger::decide`, the one SQLite's
//! `store::sqlite::commit::commit_transfer` asks too; this file holds how PostgreSQL reads for it, on
//! rows locked `FOR UPDATE`, and writes its verdict.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::gateway::settle;
use super::ledger::debit_by_key;
use super::transaction::{Open, BEGIN};
use super::{in_transaction, is_conflict, opt, retrying, sqlstate, PgStore};
use crate::authorization::Settle;
use crate::ledger::decide::{self, Authorised, KeyWrite, Rules, Verdict};
use crate::ledger::{MoneyReads, TransferRecord};
use sendonce_server::store::postgres::keys::{self, complete, hold, release, HOLD};
use sendonce_server::store::postgres::outbox;
use sendonce_server::store::DbError;
use sendonce_server::Answer;
use sendonce_server::Problem;

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

/// Phase 3 in one transaction (`tx`, already open): the fence, then the money decision
/// (`ledger::decide`), then the debit.
pub(super) async fn commit_in<C: GenericClient>(
    tx: &C,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    match decide(tx, record, hash, lock_id, rules, None).await? {
        Decision::Answer(answer) => Ok(answer),
        Decision::Debit => {
            if debit(tx, record, hash, lock_id).await? {
                Ok(Answer::committed(record.to_json()))
            } else {
                lost_race(tx, record, hash, lock_id).await
            }
        }
    }
}

/// A first request's phase 3. The common case — the pre-check expects a debit — is one
/// autocommit statement ([`FAST_DEBIT`]); anything else it meets, it leaves unwritten to
/// [`decided`], which takes every decision as [`commit_in`] does.
pub(super) async fn commit(
    store: &PgStore,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    let body = record.to_json();
    if rules.fenced
        && rules.authorised == Authorised::Yes
        && fast_debit(store, record, &body, hash, lock_id, rules.max_balance).await?
    {
        return Ok(Answer::committed(body));
    }
    decided(store, record, hash, lock_id, rules).await
}

/// The fence, the sender's balance row (both locked, in that order: the order of
/// [`decide()`] and the reaper), the checks of [`decide()`] that let a debit go ahead, then
/// the debit, its event and the completed key — all in one statement, so the transaction
/// costs no `BEGIN`/`COMMIT` of its own. When any check fails it inserts nothing and
/// [`decide()`] answers; the statement never stores an answer but a debit's 201.
///
/// In the one statement, the sender's balance is the locked row's latest version; the
/// recipient's balance is read on the statement's snapshot, as in [`POSITION`]. The
/// ledger guard is the one-debit-per-key index itself, with no `ON CONFLICT` and no look-up
/// of its own: an earlier debit for this key (a rare case: a lost race, a reaper's
/// resolution) fails the whole statement (23505), which then wrote nothing.
static FAST_DEBIT: LazyLock<String> = LazyLock::new(|| {
    format!("WITH fence AS ({}),", keys::hold_sql("$1", "$4", "$12"))
        + "
     sender AS (
         SELECT b.balance_minor FROM balances b, fence WHERE b.user_id = $1
         FOR UPDATE OF b),
     go AS (
         SELECT 1 FROM sender
         WHERE sender.balance_minor >= $2
           AND COALESCE((SELECT balance_minor FROM balances WHERE user_id = $6), 0) <= $13 - $2),
     debit AS (
         INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                             counterparty, currency, note, created_at_ms)
         SELECT $1, 'debit', $2, $3, $4, $5, $6, $7, $8, $9 FROM go
         RETURNING 1),"
        + &after_debit()
});

/// [`FAST_DEBIT`]: whether it debited (`false`: it wrote nothing).
pub(super) async fn fast_debit(
    store: &PgStore,
    record: &TransferRecord,
    body: &[u8],
    hash: &[u8],
    lock_id: &str,
    max_balance: i64,
) -> Result<bool, DbError> {
    let c = store.client().await?;
    let debited = run_debit(
        &c,
        &FAST_DEBIT,
        record,
        body,
        hash,
        lock_id,
        &[&max_balance],
    )
    .await;
    match debited {
        Ok(debited) => Ok(debited),
        // A debit for this key that committed after our snapshot, or a lock cycle: the
        // statement rolled back whole, and the full path decides.
        Err(e) if is_conflict(&e) || sqlstate(&e) == Some(&SqlState::UNIQUE_VIOLATION) => {
            tracing::debug!(%e, "fast debit wrote nothing; deciding in full");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Phase 3 with every decision on one connection in two round trips: BEGIN travels with
/// the fence and the balances, COMMIT with the debit (pipelined, see below). The
/// decisions are [`commit_in`]'s; only where the transaction opens and closes differs.
pub(super) async fn decided(
    store: &PgStore,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
) -> Result<Answer, DbError> {
    retrying(store, || async {
        let open = Open::new(store.client().await?);
        let c = open.client();
        let decided = decide(c, record, hash, lock_id, rules, Some(BEGIN)).await;
        let answer = match decided {
            Err(e) => {
                open.close("ROLLBACK").await?;
                return Err(e);
            }
            Ok(Decision::Answer(answer)) => answer,
            Ok(Decision::Debit) => {
                // An error in the debit aborts the transaction: the COMMIT after it rolls
                // back, and the connection is idle again either way.
                // Prepared first, so the debit is sent before the COMMIT (a statement
                // still being prepared would let the COMMIT overtake it).
                c.prepare_cached(&DEBIT).await?;
                let end = async { Ok::<_, DbError>(c.batch_execute("COMMIT").await?) };
                let (inserted, ()) = tokio::try_join!(debit(c, record, hash, lock_id), end)
                    .inspect_err(|_| open.closed())?;
                open.closed();
                if inserted {
                    return Ok(Answer::committed(record.to_json()));
                }
                // Nothing was written (the debit's ON CONFLICT): the guard's own transaction.
                return in_transaction!(store, |tx| lost_race(&tx, record, hash, lock_id).await?);
            }
        };
        open.close("COMMIT").await?;
        Ok(answer)
    })
    .await
}

/// What the fence and the balances decide before any write.
enum Decision {
    /// Answered without a debit (lock lost, replay, 402, 422, unauthorised).
    Answer(Answer),
    /// Every check passed: the debit may go ahead.
    Debit,
}

/// The fence, then the money decision (`ledger::decide`, the one SQLite's
/// `commit_transfer` asks too) on the locked balances, and its writes; `begin` (if any) is
/// sent in the same flush as the fence.
async fn decide<C: GenericClient>(
    tx: &C,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
    rules: Rules,
    begin: Option<&str>,
) -> Result<Decision, DbError> {
    let (user, key) = (
        record.from_user_id.as_str(),
        record.idempotency_key.as_str(),
    );
    // The fence's row lock, then the balances, in one round trip (pipelined, see above):
    // both statements prepared first, so each future sends its query on its first poll,
    // in this order. Reading the balances of a request that lost its lock costs nothing.
    tx.prepare_cached(HOLD).await?;
    tx.prepare_cached(POSITION).await?;
    let open = async {
        match begin {
            Some(begin) => Ok::<_, DbError>(tx.batch_execute(begin).await?),
            None => Ok(()),
        }
    };
    let fence = async { Ok::<_, DbError>(!rules.fenced || hold(tx, user, key, lock_id).await?) };
    let ((), held, pos) =
        tokio::try_join!(open, fence, position(tx, user, &record.to_user_id, key))?;
    let now = record.created_at_ms;
    if !held {
        tracing::warn!(key, "lock lost before the debit: nothing moved");
        // A late authorisation of a key another request decided (see `authorization::Settle`).
        settle(tx, user, key, now, Settle::IfDecided).await?;
        return Ok(Decision::Answer(Problem::key_in_use().into()));
    }
    // The debit itself is read only when the position says there is one (rare).
    let debit = match pos.debited {
        true => debit_by_key(tx, user, key).await?,
        false => None,
    };
    let reads = MoneyReads {
        debit,
        balance: pos.balance,
        recipient_balance: pos.recipient,
    };
    match decide::decide(&reads, record, hash, rules) {
        Verdict::Debit => Ok(Decision::Debit),
        Verdict::Unmoved(unmoved) => {
            write_key(tx, user, key, lock_id, unmoved.write).await?;
            if unmoved.void_authorisation {
                settle(tx, user, key, now, Settle::UnlessHeld).await?;
            }
            Ok(Decision::Answer(unmoved.answer))
        }
    }
}

/// Completes or releases the key we hold, as a verdict without a debit says.
async fn write_key<C: GenericClient>(
    tx: &C,
    user: &str,
    key: &str,
    lock_id: &str,
    write: KeyWrite,
) -> Result<(), DbError> {
    match write {
        KeyWrite::Complete { status, body } => {
            complete(tx, user, key, lock_id, status, &body).await
        }
        KeyWrite::Release => release(tx, user, key, lock_id).await,
    }
}

/// What follows the `debit` CTE in both debit statements: the gateway's authorisation
/// captured, the outbox event (the library's `outbox::INSERT_INTO`) and the completed key,
/// only if the debit was inserted; the statement returns how many were.
fn after_debit() -> String {
    format!(
        "
         captured AS (
             UPDATE gateway_authorizations SET captured_at_ms = $9
             WHERE user_id = $1 AND idem_key = $4 AND captured_at_ms IS NULL
               AND EXISTS (SELECT 1 FROM debit)),
         event AS (
             {} SELECT $1, $4, '{}', $10, $9 FROM debit),
         done AS ({})
         SELECT COUNT(*) FROM debit",
        outbox::INSERT_INTO,
        crate::outbox::TRANSFER_DONE,
        keys::complete_sql(
            "$1",
            "$4",
            "$12",
            "201",
            "$11",
            "AND EXISTS (SELECT 1 FROM debit)"
        )
    )
}

/// The debit, its outbox event and the completed key (see [`debit`]).
static DEBIT: LazyLock<String> = LazyLock::new(|| {
    "WITH debit AS (
             INSERT INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                                 counterparty, currency, note, created_at_ms)
             VALUES ($1, 'debit', $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (user_id, idem_key) WHERE kind = 'debit' DO NOTHING
             RETURNING 1),"
        .to_string()
        + &after_debit()
});

/// The debit, its outbox event and the completed key in one statement; the ON CONFLICT
/// of the one-debit-per-key index makes it all or nothing. Whether it debited.
async fn debit<C: GenericClient>(
    tx: &C,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
) -> Result<bool, DbError> {
    run_debit(tx, &DEBIT, record, &record.to_json(), hash, lock_id, &[]).await
}

/// Runs one of the debit statements, $1–$12 as [`DEBIT`] numbers them, then `extra`;
/// whether it debited.
async fn run_debit<C: GenericClient>(
    c: &C,
    sql: &str,
    record: &TransferRecord,
    body: &[u8],
    hash: &[u8],
    lock_id: &str,
    extra: &[&(dyn ToSql + Sync)],
) -> Result<bool, DbError> {
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &record.from_user_id,
        &record.amount_minor,
        &record.transfer_id,
        &record.idempotency_key,
        &hash,
        &record.to_user_id,
        &record.currency,
        &record.note,
        &record.created_at_ms,
        &body,
        &body,
        &lock_id,
    ];
    params.extend_from_slice(extra);
    Ok(opt(c, sql, &params)
        .await?
        .is_some_and(|r| r.get::<_, i64>(0) == 1))
}

/// The debit inserted nothing: a concurrent debit for this key committed after our
/// read (only without the fence), and the ledger's guard answers from it, as
/// `ledger::decide::already_debited` says (the authorisation was captured by that debit).
async fn lost_race<C: GenericClient>(
    tx: &C,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
) -> Result<Answer, DbError> {
    let (user, key) = (
        record.from_user_id.as_str(),
        record.idempotency_key.as_str(),
    );
    let Some((existing, stored_hash)) = debit_by_key(tx, user, key).await? else {
        return Ok(Problem::key_in_use().into());
    };
    let unmoved = decide::already_debited(&existing, &stored_hash, hash);
    write_key(tx, user, key, lock_id, unmoved.write).await?;
    Ok(unmoved.answer)
}
