//! Users, wallets, beneficiaries and the test API's listings on PostgreSQL.

use deadpool_postgres::{GenericClient, Transaction};

use super::{exec, opt, rows, PgStore};
use crate::auth::Caller;
use crate::ledger::EntryJson;
use crate::store::{
    Beneficiary, BeneficiaryOutcome, NewBeneficiary, NewUser, PlainRow, Sms, Stats, UserChange,
};
use sendonce_server::clock::rfc3339;
use sendonce_server::store::postgres::{inbox, keys, outbox};
use sendonce_server::store::DbError;

/// The user a token hash belongs to, if still valid.
pub(super) async fn caller(
    store: &PgStore,
    token_hash: String,
    now_ms: i64,
) -> Result<Option<Caller>, DbError> {
    let row = opt(
        &store.client().await?,
        "SELECT user_id, currency FROM users WHERE token = $1
             AND (token_expires_at_ms IS NULL OR token_expires_at_ms > $2)",
        &[&token_hash, &now_ms],
    )
    .await?;
    Ok(row.map(|r| Caller {
        user_id: r.get(0),
        currency: r.get(1),
    }))
}

/// A user's wallet currency.
pub(super) async fn user_currency(
    store: &PgStore,
    user_id: String,
) -> Result<Option<String>, DbError> {
    let row = opt(
        &store.client().await?,
        "SELECT currency FROM users WHERE user_id = $1",
        &[&user_id],
    )
    .await?;
    Ok(row.map(|r| r.get(0)))
}

/// A user's balance (the trigger-kept sum of their ledger).
pub(super) async fn balance<C: GenericClient>(c: &C, user_id: &str) -> Result<i64, DbError> {
    Ok(opt(
        c,
        "SELECT balance_minor FROM balances WHERE user_id = $1",
        &[&user_id],
    )
    .await?
    .map_or(0, |r| r.get(0)))
}

/// Sets a display name.
pub(super) async fn set_display_name(
    store: &PgStore,
    user_id: String,
    name: String,
) -> Result<(), DbError> {
    exec(
        &store.client().await?,
        "UPDATE users SET display_name = $2 WHERE user_id = $1",
        &[&user_id, &name],
    )
    .await?;
    Ok(())
}

/// Adds a beneficiary (the unique (user, phone) decides), within the per-user cap.
pub(super) async fn add_beneficiary(
    tx: &Transaction<'_>,
    b: &NewBeneficiary,
) -> Result<BeneficiaryOutcome, DbError> {
    let counts = opt(
        tx,
        "SELECT COUNT(*), COALESCE(BOOL_OR(phone = $2), FALSE) FROM beneficiaries
         WHERE user_id = $1",
        &[&b.user_id, &b.phone],
    )
    .await?;
    let (count, exists): (i64, bool) = counts.map_or((0, false), |r| (r.get(0), r.get(1)));
    if count >= b.max_per_user && !exists {
        return Ok(None);
    }
    let inserted = exec(
        tx,
        "INSERT INTO beneficiaries (beneficiary_id, user_id, phone, name, created_at_ms)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, phone) DO NOTHING",
        &[&b.beneficiary_id, &b.user_id, &b.phone, &b.name, &b.now_ms],
    )
    .await?;
    let row = opt(
        tx,
        "SELECT beneficiary_id, phone, name, created_at_ms FROM beneficiaries
         WHERE user_id = $1 AND phone = $2",
        &[&b.user_id, &b.phone],
    )
    .await?
    .map(|r| Beneficiary {
        beneficiary_id: r.get(0),
        phone: r.get(1),
        name: r.get(2),
        created_at: rfc3339(r.get(3)),
    });
    Ok(Some((inserted == 1, row)))
}

/// Creates a user; the opening balance is a ledger deposit.
pub(super) async fn create_user(tx: &Transaction<'_>, u: &NewUser) -> Result<(), DbError> {
    exec(
        tx,
        "INSERT INTO users (user_id, token, display_name, currency, created_at_ms,
                            token_expires_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &u.user_id,
            &u.token_hash,
            &u.display_name,
            &u.currency,
            &u.now_ms,
            &u.token_expires_at_ms,
        ],
    )
    .await?;
    if u.balance_minor > 0 {
        exec(
            tx,
            "INSERT INTO ledger (user_id, kind, amount_minor, currency, created_at_ms)
             VALUES ($1, 'deposit', $2, $3, $4)",
            &[&u.user_id, &u.balance_minor, &u.currency, &u.now_ms],
        )
        .await?;
    }
    Ok(())
}

/// Removes a user or revokes their token.
pub(super) async fn change_user(
    store: &PgStore,
    change: UserChange,
    user_id: String,
) -> Result<usize, DbError> {
    let sql = match change {
        UserChange::Remove => "DELETE FROM users WHERE user_id = $1",
        UserChange::Revoke => "UPDATE users SET token_expires_at_ms = 0 WHERE user_id = $1",
    };
    let n = exec(&store.client().await?, sql, &[&user_id]).await?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Ledger entries after `after`, oldest first.
pub(super) async fn ledger_page(
    store: &PgStore,
    after: i64,
    limit: i64,
) -> Result<Vec<EntryJson>, DbError> {
    Ok(rows(
        &store.client().await?,
        "SELECT entry_id, user_id, kind, amount_minor, transfer_id, idem_key, created_at_ms
         FROM ledger WHERE entry_id > $1 ORDER BY entry_id LIMIT $2",
        &[&after, &limit],
    )
    .await?
    .iter()
    .map(|r| EntryJson {
        entry_id: r.get(0),
        user_id: r.get(1),
        kind: r.get(2),
        amount_minor: r.get(3),
        transfer_id: r.get(4),
        idempotency_key: r.get(5),
        created_at: rfc3339(r.get(6)),
    })
    .collect())
}

/// SMS after `after`, oldest first.
pub(super) async fn sms_page(store: &PgStore, after: i64, limit: i64) -> Result<Vec<Sms>, DbError> {
    Ok(rows(
        &store.client().await?,
        "SELECT sms_id, user_id, transfer_id, text FROM sms
         WHERE sms_id > $1 ORDER BY sms_id LIMIT $2",
        &[&after, &limit],
    )
    .await?
    .iter()
    .map(|r| Sms {
        sms_id: r.get(0),
        user_id: r.get(1),
        transfer_id: r.get(2),
        text: r.get(3),
    })
    .collect())
}

/// The test API's counters, from one snapshot (a read-only repeatable-read transaction), so
/// a caller comparing them mid-load never sees a debit without its key or its event; the
/// four reads go out pipelined on the one connection.
pub(super) async fn stats(store: &PgStore) -> Result<Stats, DbError> {
    let mut client = store.client().await?;
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let counters = opt(
        &tx,
        "SELECT
            (SELECT COUNT(*) FROM ledger),
            (SELECT COUNT(*) FROM sms),
            (SELECT COUNT(*) FROM ledger WHERE kind = 'credit'),
            (SELECT COUNT(*) FROM gateway_authorizations)
                + (SELECT COUNT(*) FROM gateway_voids),
            (SELECT COALESCE(SUM(calls), 0)::BIGINT FROM gateway_authorizations)
                + (SELECT COALESCE(SUM(calls), 0)::BIGINT FROM gateway_voids),
            (SELECT COUNT(*) FROM gateway_authorizations WHERE captured_at_ms IS NOT NULL),
            (SELECT COUNT(*) FROM gateway_voids)",
        &[],
    );
    let ((outbox_rows, outbox_pending), inbox_rows, (idempotency_keys, keys_in_progress), row) = tokio::try_join!(
        outbox::counts(&tx),
        inbox::count(&tx),
        keys::counts(&tx),
        counters
    )?;
    let row = row.ok_or_else(|| DbError::Task("stats returned no row".into()))?;
    tx.commit().await?;
    Ok(Stats {
        idempotency_keys,
        keys_in_progress,
        outbox_pending,
        ledger_entries: row.get(0),
        sms_sent: row.get(1),
        credits: row.get(2),
        gateway_authorizations: row.get(3),
        gateway_calls: row.get(4),
        gateway_captures: row.get(5),
        gateway_voids: row.get(6),
        outbox_rows,
        inbox_rows,
    })
}

/// The bench baseline: one plain insert, committed like a debit (synchronous).
pub(super) async fn bench_plain(store: &PgStore, p: PlainRow) -> Result<i64, DbError> {
    let row = opt(
        &store.client().await?,
        "INSERT INTO bench_plain (user_id, to_user_id, amount_minor, currency, note, created_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[
            &p.user_id,
            &p.to_user_id,
            &p.amount_minor,
            &p.currency,
            &p.note,
            &p.now_ms,
        ],
    )
    .await?
    .ok_or_else(|| DbError::Task("insert returned no id".into()))?;
    Ok(row.get(0))
}
