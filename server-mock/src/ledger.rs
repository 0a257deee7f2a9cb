//! The ledger: deposits, debits and credits; a balance is the sum of a user's entries.

pub mod body;
pub mod decide;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use sendonce_server::clock::rfc3339;
use sendonce_server::store::DbError;

/// A transfer as recorded by its ledger debit; its JSON is the 201 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRecord {
    /// Server-assigned id.
    pub transfer_id: String,
    /// Sender.
    pub from_user_id: String,
    /// Recipient.
    pub to_user_id: String,
    /// Amount in minor units.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Optional free text.
    pub note: Option<String>,
    /// Server time of the debit.
    pub created_at_ms: i64,
    /// The sender's idempotency key.
    pub idempotency_key: String,
}

#[derive(Serialize)]
struct TransferJson<'a> {
    transfer_id: &'a str,
    status: &'static str,
    from_user_id: &'a str,
    to_user_id: &'a str,
    amount_minor: i64,
    currency: &'a str,
    note: Option<&'a str>,
    created_at: String,
    idempotency_key: &'a str,
}

impl TransferRecord {
    /// The response body: a pure function of the record, so a body rebuilt from the
    /// ledger (reaper, expired key, look-up) is byte-identical to the first answer.
    pub fn to_json(&self) -> Vec<u8> {
        let json = TransferJson {
            transfer_id: &self.transfer_id,
            status: "completed",
            from_user_id: &self.from_user_id,
            to_user_id: &self.to_user_id,
            amount_minor: self.amount_minor,
            currency: &self.currency,
            note: self.note.as_deref(),
            created_at: rfc3339(self.created_at_ms),
            idempotency_key: &self.idempotency_key,
        };
        serde_json::to_vec(&json).unwrap_or_default()
    }

    fn from_debit_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            transfer_id: r.get("transfer_id")?,
            from_user_id: r.get("user_id")?,
            to_user_id: r.get("counterparty")?,
            amount_minor: r.get("amount_minor")?,
            currency: r.get("currency")?,
            note: r.get("note")?,
            created_at_ms: r.get("created_at_ms")?,
            idempotency_key: r.get("idem_key")?,
        })
    }
}

/// The columns [`TransferRecord::from_debit_row`] reads, as a literal: each query's text is
/// then a `concat!` constant, not a string formatted on every call.
macro_rules! debit_columns {
    () => {
        "transfer_id, user_id, counterparty, amount_minor, currency, note, created_at_ms, idem_key"
    };
}

/// Balance of a user: the sum of their ledger, read from the `balances` row that the
/// ledger triggers keep equal to that sum (same transaction as every entry).
pub fn balance(conn: &Connection, user_id: &str) -> Result<i64, DbError> {
    Ok(conn
        .prepare_cached("SELECT balance_minor FROM balances WHERE user_id = ?1")?
        .query_row(params![user_id], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// What the money transaction reads before it decides, in one statement: the debit already
/// made under (`user`, `key`) if any (with its request fingerprint), the sender's balance
/// and the recipient's.
pub struct MoneyReads {
    /// The debit of this key and its request hash: money already moved.
    pub debit: Option<(TransferRecord, Vec<u8>)>,
    /// The sender's balance.
    pub balance: i64,
    /// The recipient's balance.
    pub recipient_balance: i64,
}

/// Reads [`MoneyReads`] for a transfer from `user` to `recipient` under `key`.
pub fn money_reads(
    conn: &Connection,
    user: &str,
    key: &str,
    recipient: &str,
) -> Result<MoneyReads, DbError> {
    // One row always: the balances are point reads in subqueries, the debit a LEFT JOIN
    // (its columns NULL when there is none).
    Ok(conn
        .prepare_cached(concat!(
            "SELECT ",
            debit_columns!(),
            ", request_hash,
                    COALESCE((SELECT balance_minor FROM balances WHERE user_id = ?1), 0) AS balance,
                    COALESCE((SELECT balance_minor FROM balances WHERE user_id = ?3), 0) AS recipient
             FROM (SELECT 1) LEFT JOIN ledger
               ON kind = 'debit' AND user_id = ?1 AND idem_key = ?2"
        ))?
        .query_row(params![user, key, recipient], |r| {
            // `user_id` is NOT NULL in the ledger: NULL here means no debit joined.
            let debit = match r.get_ref(1)? {
                rusqlite::types::ValueRef::Null => None,
                _ => Some((
                    TransferRecord::from_debit_row(r)?,
                    r.get::<_, Option<Vec<u8>>>(8)?.unwrap_or_default(),
                )),
            };
            Ok(MoneyReads {
                debit,
                balance: r.get(9)?,
                recipient_balance: r.get(10)?,
            })
        })?)
}

/// Balance of a user summed over their whole ledger (the definition; for checks).
pub fn balance_from_ledger(conn: &Connection, user_id: &str) -> Result<i64, DbError> {
    Ok(conn.prepare_cached(
        "SELECT COALESCE(SUM(CASE kind WHEN 'debit' THEN -amount_minor ELSE amount_minor END), 0)
         FROM ledger WHERE user_id = ?1",
    )?
    .query_row(params![user_id], |r| r.get(0))?)
}

/// Users whose cached balance differs from the sum of their ledger (must be none).
pub fn balance_mismatches(conn: &Connection) -> Result<Vec<(String, i64, i64)>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.user_id, COALESCE(b.balance_minor, 0), s.total FROM
           (SELECT user_id,
                   SUM(CASE kind WHEN 'debit' THEN -amount_minor ELSE amount_minor END) AS total
            FROM ledger GROUP BY user_id) AS s
         LEFT JOIN balances AS b ON b.user_id = s.user_id
         WHERE COALESCE(b.balance_minor, 0) != s.total
         UNION ALL
         SELECT b.user_id, b.balance_minor, 0 FROM balances AS b
         WHERE b.balance_minor != 0
           AND NOT EXISTS (SELECT 1 FROM ledger AS l WHERE l.user_id = b.user_id)",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records an opening balance.
pub fn deposit(
    conn: &Connection,
    user_id: &str,
    amount: i64,
    currency: &str,
    now_ms: i64,
) -> Result<(), DbError> {
    check_room(conn, user_id, amount)?;
    conn.prepare_cached(
        "INSERT INTO ledger (user_id, kind, amount_minor, currency, created_at_ms)
         VALUES (?1, 'deposit', ?2, ?3, ?4)",
    )?
    .execute(params![user_id, amount, currency, now_ms])?;
    Ok(())
}

/// Inserts the debit; fails with a UNIQUE violation if this (user, key) already debited.
pub fn insert_debit(conn: &Connection, t: &TransferRecord, hash: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR ROLLBACK INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, request_hash,
                             counterparty, currency, note, created_at_ms)
         VALUES (?1, 'debit', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        t.from_user_id,
        t.amount_minor,
        t.transfer_id,
        t.idempotency_key,
        hash,
        t.to_user_id,
        t.currency,
        t.note,
        t.created_at_ms
    ])?;
    Ok(())
}

/// Refuses an entry that would take `user_id`'s balance past i64 (SQLite would silently
/// store the sum as a float, and every later read of the balance would fail).
fn check_room(conn: &Connection, user_id: &str, amount: i64) -> Result<(), DbError> {
    match balance(conn, user_id)?.checked_add(amount) {
        Some(_) => Ok(()),
        None => Err(DbError::Task(format!(
            "refused: the balance of {user_id} would overflow"
        ))),
    }
}

/// Credits the recipient of a transfer (the wallet consumer's effect).
pub fn insert_credit(conn: &Connection, t: &TransferRecord, now_ms: i64) -> Result<(), DbError> {
    check_room(conn, &t.to_user_id, t.amount_minor)?;
    conn.prepare_cached(
        "INSERT OR ROLLBACK INTO ledger (user_id, kind, amount_minor, transfer_id, idem_key, counterparty,
                             currency, note, created_at_ms)
         VALUES (?1, 'credit', ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        t.to_user_id,
        t.amount_minor,
        t.transfer_id,
        t.idempotency_key,
        t.from_user_id,
        t.currency,
        t.note,
        now_ms
    ])?;
    Ok(())
}

/// The debit (and its request fingerprint) for a sender's key, if money moved.
pub fn debit_by_key(
    conn: &Connection,
    user_id: &str,
    key: &str,
) -> Result<Option<(TransferRecord, Vec<u8>)>, DbError> {
    Ok(conn
        .prepare_cached(concat!(
            "SELECT ",
            debit_columns!(),
            ", request_hash FROM ledger
             WHERE kind = 'debit' AND user_id = ?1 AND idem_key = ?2"
        ))?
        .query_row(params![user_id, key], |r| {
            Ok((
                TransferRecord::from_debit_row(r)?,
                r.get::<_, Option<Vec<u8>>>("request_hash")?
                    .unwrap_or_default(),
            ))
        })
        .optional()?)
}

/// The sender's debit for a transfer id.
pub fn debit_by_transfer(
    conn: &Connection,
    user_id: &str,
    transfer_id: &str,
) -> Result<Option<TransferRecord>, DbError> {
    Ok(conn
        .prepare_cached(concat!(
            "SELECT ",
            debit_columns!(),
            " FROM ledger
             WHERE kind = 'debit' AND user_id = ?1 AND transfer_id = ?2"
        ))?
        .query_row(
            params![user_id, transfer_id],
            TransferRecord::from_debit_row,
        )
        .optional()?)
}

/// One ledger entry as the test API shows it.
#[derive(Debug, Serialize)]
pub struct EntryJson {
    /// Row id.
    pub entry_id: i64,
    /// Whose balance it changes.
    pub user_id: String,
    /// `deposit`, `debit` or `credit`.
    pub kind: String,
    /// Always positive; the kind gives the sign.
    pub amount_minor: i64,
    /// Transfer it belongs to (none for deposits).
    pub transfer_id: Option<String>,
    /// Sender's key (none for deposits).
    pub idempotency_key: Option<String>,
    /// RFC 3339 time.
    pub created_at: String,
}

/// Ledger entries after `after` (an entry id), oldest first, at most `limit`.
pub fn entries_page(conn: &Connection, after: i64, limit: i64) -> Result<Vec<EntryJson>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT entry_id, user_id, kind, amount_minor, transfer_id, idem_key, created_at_ms
         FROM ledger WHERE entry_id > ?1 ORDER BY entry_id LIMIT ?2",
    )?;
    let rows = stmt.query_map(rusqlite::params![after, limit], |r| {
        Ok(EntryJson {
            entry_id: r.get(0)?,
            user_id: r.get(1)?,
            kind: r.get(2)?,
            amount_minor: r.get(3)?,
            transfer_id: r.get(4)?,
            idempotency_key: r.get(5)?,
            created_at: rfc3339(r.get(6)?),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
