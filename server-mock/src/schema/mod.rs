//! The server's tables, indexes and triggers, and the one-time migrations of older files.

mod migrate;

use rusqlite::Connection;

use sendonce_server::store::DbError;

pub(crate) const SCHEMA: &str = r#"
-- `token` holds "sha256:" + the hex SHA-256 of the bearer token, never the token itself.
CREATE TABLE IF NOT EXISTS users (
    user_id             TEXT PRIMARY KEY,
    token               TEXT NOT NULL UNIQUE,
    display_name        TEXT NOT NULL,
    currency            TEXT NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    token_expires_at_ms INTEGER
);

-- The simulated gateway's own records: one authorisation per (user, key), kept across
-- restarts, so a repeated gateway step gets the same authorisation back. `captured_at_ms`
-- is set by the debit's transaction (files made before it get it from `migrate_gateway`).
CREATE TABLE IF NOT EXISTS gateway_authorizations (
    user_id          TEXT NOT NULL,
    idem_key         TEXT NOT NULL,
    authorization_id TEXT NOT NULL,
    calls            INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    captured_at_ms   INTEGER,
    PRIMARY KEY (user_id, idem_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS gateway_authorizations_age ON gateway_authorizations (created_at_ms);

-- Authorisations voided (the key's outcome did not use them), moved out of
-- `gateway_authorizations` in the transaction that decided it, once each.
CREATE TABLE IF NOT EXISTS gateway_voids (
    authorization_id TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL,
    idem_key         TEXT NOT NULL,
    calls            INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    voided_at_ms     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS gateway_voids_age ON gateway_voids (voided_at_ms);

-- Append-only, so a plain rowid (max + 1) never reuses an id either; AUTOINCREMENT would
-- cost a read and a write of sqlite_sequence per entry (files made before keep it). The
-- same holds for `sms` and `bench_plain`; not for the outbox, whose ids the inboxes keep.
CREATE TABLE IF NOT EXISTS ledger (
    entry_id      INTEGER PRIMARY KEY,
    user_id       TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind = 'deposit' OR kind = 'debit' OR kind = 'credit'),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    transfer_id   TEXT,
    idem_key      TEXT,
    request_hash  BLOB,
    counterparty  TEXT,
    currency      TEXT NOT NULL,
    note          TEXT,
    created_at_ms INTEGER NOT NULL
);
-- The last guard: one debit per (user, key), even after the key row has expired.
CREATE UNIQUE INDEX IF NOT EXISTS ledger_one_debit_per_key
    ON ledger (user_id, idem_key) WHERE kind = 'debit';
CREATE INDEX IF NOT EXISTS ledger_user ON ledger (user_id);
CREATE INDEX IF NOT EXISTS ledger_transfer ON ledger (transfer_id);

-- Balance cache: always the sum of the user's ledger, maintained by triggers in the same
-- transaction as every ledger change, so a transfer reads one row instead of summing the
-- sender's whole history.
CREATE TABLE IF NOT EXISTS balances (
    user_id       TEXT PRIMARY KEY,
    balance_minor INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS balances_meta (name TEXT PRIMARY KEY) WITHOUT ROWID;
-- Insert the row if missing, then add: not DO UPDATE, because an upsert's DO UPDATE always
-- checks its constraints with ABORT, which makes SQLite keep a statement journal (a copy of
-- every page the ledger insert touches) for each insert; the group writer's inserts run
-- `OR ROLLBACK` (see db/group.rs) and need none. (Replaces `ledger_balance_insert`.)
DROP TRIGGER IF EXISTS ledger_balance_insert;
CREATE TRIGGER IF NOT EXISTS ledger_balance_add AFTER INSERT ON ledger BEGIN
    INSERT INTO balances (user_id, balance_minor) VALUES (NEW.user_id, 0)
    ON CONFLICT (user_id) DO NOTHING;
    UPDATE balances
    SET balance_minor = balance_minor
        + CASE NEW.kind WHEN 'debit' THEN -NEW.amount_minor ELSE NEW.amount_minor END
    WHERE user_id = NEW.user_id;
END;
CREATE TRIGGER IF NOT EXISTS ledger_balance_delete AFTER DELETE ON ledger BEGIN
    UPDATE balances
    SET balance_minor = balance_minor
        - CASE OLD.kind WHEN 'debit' THEN -OLD.amount_minor ELSE OLD.amount_minor END
    WHERE user_id = OLD.user_id;
END;
CREATE TRIGGER IF NOT EXISTS ledger_balance_update
AFTER UPDATE OF user_id, kind, amount_minor ON ledger BEGIN
    UPDATE balances
    SET balance_minor = balance_minor
        - CASE OLD.kind WHEN 'debit' THEN -OLD.amount_minor ELSE OLD.amount_minor END
    WHERE user_id = OLD.user_id;
    INSERT INTO balances (user_id, balance_minor)
    VALUES (NEW.user_id,
            CASE NEW.kind WHEN 'debit' THEN -NEW.amount_minor ELSE NEW.amount_minor END)
    ON CONFLICT (user_id) DO UPDATE SET balance_minor = balance_minor + excluded.balance_minor;
END;

-- The outbox and the consumers' inbox are the library's (`sendonce_outbox`, `sendonce_inbox`:
-- `sendonce_server::store::sqlite::{outbox, inbox}`); files made before keep their events
-- (`migrate_outbox`).

CREATE TABLE IF NOT EXISTS sms (
    sms_id        INTEGER PRIMARY KEY,
    user_id       TEXT NOT NULL,
    transfer_id   TEXT NOT NULL,
    text          TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS beneficiaries (
    beneficiary_id TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL,
    phone          TEXT NOT NULL,
    name           TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    UNIQUE (user_id, phone)
);

-- Benchmark baseline: the same kind of row a transfer writes, with no idempotency at all.
CREATE TABLE IF NOT EXISTS bench_plain (
    id            INTEGER PRIMARY KEY,
    user_id       TEXT NOT NULL,
    to_user_id    TEXT NOT NULL,
    amount_minor  INTEGER NOT NULL,
    currency      TEXT NOT NULL,
    note          TEXT,
    created_at_ms INTEGER NOT NULL
);

-- Benchmark peer: the record table of a Powertools-style idempotency layer (store/sqlite/peer.rs).
CREATE TABLE IF NOT EXISTS bench_peer_keys (
    user_id               TEXT NOT NULL,
    idem_key              TEXT NOT NULL,
    status                TEXT NOT NULL,
    payload_hash          BLOB NOT NULL,
    expiry_ms             INTEGER NOT NULL,
    in_progress_expiry_ms INTEGER NOT NULL,
    response              BLOB,
    PRIMARY KEY (user_id, idem_key)
) WITHOUT ROWID;
"#;

/// Creates every table of server-mock (idempotent) and runs the migrations; the key table is
/// the library's, created before this runs (`Db::open(path, schema::create)`).
pub fn create(conn: &Connection) -> Result<(), DbError> {
    migrate::token_hashes(conn)?;
    migrate::gateway(conn)?;
    conn.execute_batch(SCHEMA)?;
    migrate::outbox(conn)?;
    migrate::balances(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger;
    use sendonce_server::store::sqlite::{Db, Durability};

    #[tokio::test]
    async fn a_failed_group_job_rolls_back_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("g.db").to_str().unwrap(), create).unwrap();
        let ins = |db: &Db, user: &'static str, fail: bool| {
            let db = db.clone();
            async move {
                db.write(Durability::Full, move |c| {
                    ledger::deposit(c, user, 5, "BDT", 0)?;
                    if fail {
                        return Err(DbError::Task("job failed".into()));
                    }
                    ledger::deposit(c, user, 7, "BDT", 0)?;
                    Ok(())
                })
                .await
            }
        };
        let (a, b, c, d) = tokio::join!(
            ins(&db, "a", false),
            ins(&db, "b", true),
            ins(&db, "c", false),
            db.write(Durability::Normal, |_| -> Result<(), DbError> {
                panic!("job panics")
            }),
        );
        assert!(a.is_ok() && c.is_ok());
        assert!(b.is_err() && d.is_err());
        let balances = db
            .read(|c| {
                Ok((
                    ledger::balance(c, "a")?,
                    ledger::balance(c, "b")?,
                    ledger::balance(c, "c")?,
                    ledger::balance_mismatches(c)?,
                ))
            })
            .await
            .unwrap();
        assert_eq!(balances, (12, 0, 12, vec![]));
        // The writer is still usable, and a bare-connection call still works.
        db.call(|c| {
            let tx = c.transaction()?;
            ledger::deposit(&tx, "b", 1, "BDT", 0)?;
            tx.commit()?;
            Ok(())
        })
        .await
        .unwrap();
        let sync: i64 = db
            .call(|c| Ok(c.query_row("PRAGMA synchronous", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(sync, 2, "FULL restored after a NORMAL group");
    }
}
