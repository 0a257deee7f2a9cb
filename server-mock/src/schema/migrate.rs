//! The one-time migrations of files made by older server-mocks, each idempotent: run at every
//! open, a file already migrated is left as it is.

use rusqlite::Connection;

use sendonce_server::store::sqlite::{inbox as lib_inbox, outbox as lib_outbox};
use sendonce_server::store::DbError;

/// Moves the events and inbox records of a file made when server-mock had its own `outbox`
/// and `inbox` tables into the library's, keeping every event id (the inbox records name
/// them) and whether it was published, then drops the old tables — one transaction, so a
/// crash midway leaves the old tables whole and the next start moves them again.
pub(super) fn outbox(conn: &Connection) -> Result<(), DbError> {
    let old: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('outbox', 'inbox')",
        [],
        |r| r.get(0),
    )?;
    if old == 0 {
        return Ok(());
    }
    let tx = conn.unchecked_transaction()?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS outbox (event_id INTEGER PRIMARY KEY, kind TEXT NOT NULL,
             transfer_id TEXT NOT NULL, payload TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
             published INTEGER NOT NULL DEFAULT 0);
         CREATE TABLE IF NOT EXISTS inbox (consumer TEXT NOT NULL, event_id INTEGER NOT NULL,
             processed_at_ms INTEGER NOT NULL, PRIMARY KEY (consumer, event_id));",
    )?;
    let events: Vec<(i64, String, String, i64, bool)> = conn
        .prepare("SELECT event_id, kind, payload, created_at_ms, published FROM outbox")?
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<Result<_, _>>()?;
    let events: Vec<_> = events
        .into_iter()
        .map(|(id, kind, payload, at, published)| {
            crate::outbox::imported(id, kind, payload, at, published)
        })
        .collect();
    lib_outbox::import(conn, &events)?;
    let records: Vec<(String, i64, i64)> = conn
        .prepare("SELECT consumer, event_id, processed_at_ms FROM inbox")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (consumer, id, at) in records {
        lib_inbox::import(conn, &consumer, id, at)?;
    }
    conn.execute_batch("DROP TABLE outbox; DROP TABLE inbox;")?;
    tx.commit()?;
    Ok(())
}

/// Adds `captured_at_ms` to a gateway table made before it, marking captured every
/// authorisation whose key has a debit (it was captured when that debit committed).
pub(super) fn gateway(conn: &Connection) -> Result<(), DbError> {
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('gateway_authorizations')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if cols.is_empty() || cols.iter().any(|c| c == "captured_at_ms") {
        return Ok(()); // a new file (SCHEMA makes it), or done already
    }
    conn.execute_batch(
        "ALTER TABLE gateway_authorizations ADD COLUMN captured_at_ms INTEGER;
         UPDATE gateway_authorizations SET captured_at_ms = created_at_ms
         WHERE EXISTS (SELECT 1 FROM ledger l WHERE l.kind = 'debit'
                         AND l.user_id = gateway_authorizations.user_id
                         AND l.idem_key = gateway_authorizations.idem_key);",
    )?;
    Ok(())
}

/// Files made before tokens were hashed: adds the expiry column and replaces every
/// plaintext token by its hash (the tokens keep working; the file no longer holds them).
pub(super) fn token_hashes(conn: &Connection) -> Result<(), DbError> {
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('users')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if cols.is_empty() {
        return Ok(()); // a new file: SCHEMA creates the table as it should be
    }
    if !cols.iter().any(|c| c == "token_expires_at_ms") {
        conn.execute_batch("ALTER TABLE users ADD COLUMN token_expires_at_ms INTEGER")?;
    }
    let plain: Vec<(String, String)> = conn
        .prepare("SELECT user_id, token FROM users WHERE token NOT LIKE 'sha256:%'")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (user, token) in plain {
        conn.execute(
            "UPDATE users SET token = ?2 WHERE user_id = ?1",
            rusqlite::params![user, crate::auth::token_hash(&token)],
        )?;
    }
    Ok(())
}

/// Creates the balance cache for a database made before it existed: one row per user with
/// the sum of their ledger, kept equal to that sum by the `ledger_balance` trigger.
pub(super) fn balances(conn: &Connection) -> Result<(), DbError> {
    let tx = conn.unchecked_transaction()?;
    let filled: i64 = tx.query_row(
        "SELECT COUNT(*) FROM balances_meta WHERE name = 'backfilled'",
        [],
        |r| r.get(0),
    )?;
    if filled == 0 {
        tx.execute_batch(
            "DELETE FROM balances;
             INSERT INTO balances (user_id, balance_minor)
                 SELECT user_id,
                        SUM(CASE kind WHEN 'debit' THEN -amount_minor ELSE amount_minor END)
                 FROM ledger GROUP BY user_id;
             INSERT INTO balances_meta (name) VALUES ('backfilled');",
        )?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::create;
    use super::*;
    use crate::ledger;
    use sendonce_server::store::sqlite::Db;

    /// A file from when server-mock kept its own `outbox` and `inbox`: every event moves to the
    /// library's outbox under its id, published or not as it was, every inbox record moves
    /// with it, and the relay then delivers exactly what was not delivered — once.
    #[test]
    fn a_file_with_the_old_outbox_keeps_its_events_and_their_inbox_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE outbox (event_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
                 transfer_id TEXT NOT NULL, payload TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
                 published INTEGER NOT NULL DEFAULT 0);
             CREATE TABLE inbox (consumer TEXT NOT NULL, event_id INTEGER NOT NULL,
                 processed_at_ms INTEGER NOT NULL, PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;",
        )
        .unwrap();
        let event = |n: i64| {
            format!(
                r#"{{"transfer_id":"tr_{n}","from_user_id":"u1","to_user_id":"u2","amount_minor":{n},"currency":"BDT","idempotency_key":"k{n}"}}"#
            )
        };
        // 1: delivered and published; 2: not yet; 3: credited, not yet texted.
        for (n, published) in [(1, 1), (2, 0), (3, 0)] {
            old.execute(
                "INSERT INTO outbox (kind, transfer_id, payload, created_at_ms, published)
                 VALUES ('TransferDone', ?1, ?2, ?3, ?4)",
                rusqlite::params![format!("tr_{n}"), event(n), 10 * n, published],
            )
            .unwrap();
        }
        for (consumer, id) in [("wallet_credit", 1), ("sms", 1), ("wallet_credit", 3)] {
            old.execute(
                "INSERT INTO inbox VALUES (?1, ?2, 5)",
                rusqlite::params![consumer, id],
            )
            .unwrap();
        }
        drop(old);
        let mut c = Db::configure(Connection::open(&path).unwrap(), create).unwrap();
        let tables: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('outbox', 'inbox')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "the old tables are gone");
        assert_eq!(lib_outbox::counts(&c).unwrap(), (3, 2));
        assert_eq!(lib_inbox::count(&c).unwrap(), 3);
        let pending = lib_outbox::unpublished(&c, 10).unwrap();
        let ids: Vec<i64> = pending.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [2, 3]);
        assert_eq!(pending[0].1.topic, "TransferDone");
        assert_eq!(pending[0].1.payload, event(2).into_bytes());
        // Delivered once: event 2 credited and texted, event 3 only texted.
        assert_eq!(crate::outbox::publish_batch(&mut c, 100).unwrap(), 2);
        let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            count("SELECT COUNT(*) FROM ledger WHERE kind = 'credit'"),
            1
        );
        assert_eq!(count("SELECT COUNT(*) FROM sms"), 2);
        assert_eq!(lib_outbox::counts(&c).unwrap(), (3, 0));
        // A new event never takes an id an inbox already holds.
        let next = lib_outbox::insert_one(&c, "u1", "k4", 200, "TransferDone", b"{}").unwrap();
        assert_eq!(next, 4);
        // Opening again moves nothing twice.
        drop(c);
        let c = Db::configure(Connection::open(&path).unwrap(), create).unwrap();
        assert_eq!(lib_outbox::counts(&c).unwrap(), (4, 1));
        assert_eq!(lib_inbox::count(&c).unwrap(), 6);
    }

    #[test]
    fn balances_equal_the_ledger_sum_and_are_backfilled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let c = Connection::open(&path).unwrap();
        let c = Db::configure(c, create).unwrap();
        ledger::deposit(&c, "u1", 100, "BDT", 0).unwrap();
        ledger::deposit(&c, "u2", 50, "BDT", 0).unwrap();
        let t = ledger::TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor: 30,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 1,
            idempotency_key: "k".into(),
        };
        ledger::insert_debit(&c, &t, b"h").unwrap();
        ledger::insert_credit(&c, &t, 2).unwrap();
        for u in ["u1", "u2", "nobody"] {
            assert_eq!(
                ledger::balance(&c, u).unwrap(),
                ledger::balance_from_ledger(&c, u).unwrap()
            );
        }
        assert_eq!(ledger::balance(&c, "u1").unwrap(), 70);
        // The money transaction's one read: the debit of the key (or none), and both sides'
        // balances, in either order, for a user with no balance row, and to oneself.
        let reads = ledger::money_reads(&c, "u1", "k", "u2").unwrap();
        let (debit, hash) = reads.debit.expect("u1's debit under k");
        assert_eq!(
            (debit.transfer_id.as_str(), hash.as_slice()),
            ("tr_1", &b"h"[..])
        );
        assert_eq!((debit.amount_minor, debit.to_user_id.as_str()), (30, "u2"));
        for (a, key, b, want) in [
            ("u1", "k", "u2", (70, 80)),
            ("u2", "k", "u1", (80, 70)),
            ("u1", "other", "nobody", (70, 0)),
            ("nobody", "k", "u2", (0, 80)),
            ("u1", "other", "u1", (70, 70)),
        ] {
            let reads = ledger::money_reads(&c, a, key, b).unwrap();
            let got = (reads.balance, reads.recipient_balance);
            assert_eq!(got, want, "{a}, {b}");
            assert_eq!(reads.debit.is_some(), (a, key) == ("u1", "k"), "{a}, {key}");
        }
        c.execute(
            "UPDATE ledger SET amount_minor = 40 WHERE kind = 'credit'",
            [],
        )
        .unwrap();
        c.execute("DELETE FROM ledger WHERE kind = 'debit'", [])
            .unwrap();
        assert!(ledger::balance_mismatches(&c).unwrap().is_empty());
        assert_eq!(ledger::balance(&c, "u2").unwrap(), 90);
        // A database from before the cache: rebuilt from the ledger when opened.
        c.execute_batch("DELETE FROM balances; DELETE FROM balances_meta;")
            .unwrap();
        drop(c);
        let c = Db::configure(Connection::open(&path).unwrap(), create).unwrap();
        assert!(ledger::balance_mismatches(&c).unwrap().is_empty());
        assert_eq!(ledger::balance(&c, "u1").unwrap(), 100);
    }
}
