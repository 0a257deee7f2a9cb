//! The SQLite database: schema, pragmas and a panic-safe handle for async code.

use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

/// Errors from the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The blocking task running the query failed (panicked or was cancelled).
    #[error("database task failed: {0}")]
    Task(String),
}

/// Shared handle to the database: one writer connection and one reader connection.
///
/// One writer serialises every write, so SQLite never answers `SQLITE_BUSY` to ourselves;
/// correctness still comes from constraints (primary and unique keys) and transactions,
/// not from this mutex, so the same code is right with a pool. The reader lets hot reads
/// (auth, replays, look-ups) proceed while the writer waits on an fsync: WAL readers see
/// the last committed state and never block the writer. `:memory:` has one connection.
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
    reader: Arc<Mutex<Connection>>,
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS users (
    user_id       TEXT PRIMARY KEY,
    token         TEXT NOT NULL UNIQUE,
    display_name  TEXT NOT NULL,
    currency      TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);

-- The primary key decides races between concurrent first requests.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id         TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    request_hash    BLOB NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
    lock_id         TEXT NOT NULL,
    locked_at_ms    INTEGER NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    bucket          INTEGER NOT NULL,
    response_status INTEGER,
    response_body   BLOB,
    PRIMARY KEY (user_id, idem_key)
) WITHOUT ROWID;
-- Expiry deletes whole buckets; the reaper scans stuck keys.
CREATE INDEX IF NOT EXISTS idempotency_keys_bucket ON idempotency_keys (bucket);
CREATE INDEX IF NOT EXISTS idempotency_keys_stuck ON idempotency_keys (state, locked_at_ms);

CREATE TABLE IF NOT EXISTS ledger (
    entry_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('deposit', 'debit', 'credit')),
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

CREATE TABLE IF NOT EXISTS outbox (
    event_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT NOT NULL,
    transfer_id   TEXT NOT NULL,
    payload       TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    published     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox (event_id) WHERE published = 0;

-- One row per (consumer, event) handled; inserted in the same transaction as the effect.
CREATE TABLE IF NOT EXISTS inbox (
    consumer        TEXT NOT NULL,
    event_id        INTEGER NOT NULL,
    processed_at_ms INTEGER NOT NULL,
    PRIMARY KEY (consumer, event_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS sms (
    sms_id        INTEGER PRIMARY KEY AUTOINCREMENT,
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
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       TEXT NOT NULL,
    to_user_id    TEXT NOT NULL,
    amount_minor  INTEGER NOT NULL,
    currency      TEXT NOT NULL,
    note          TEXT,
    created_at_ms INTEGER NOT NULL
);
"#;

impl Db {
    /// Opens (creating if needed) the database at `path` or in memory for `:memory:`.
    pub fn open(path: &str) -> Result<Self, DbError> {
        if path == ":memory:" {
            let conn = Arc::new(Mutex::new(Self::configure(Connection::open_in_memory()?)?));
            return Ok(Self {
                reader: Arc::clone(&conn),
                conn,
            });
        }
        let conn = Self::configure(Connection::open(path)?)?;
        let reader = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        reader.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            reader: Arc::new(Mutex::new(reader)),
        })
    }

    /// Pragmas and schema for the writer connection.
    fn configure(conn: Connection) -> Result<Connection, DbError> {
        // WAL: readers never block the writer and a crash never corrupts the file.
        // synchronous=FULL: a commit is on disk before we answer 201. With NORMAL a power
        // loss could forget a debit whose success the client already saw and stored, so a
        // confirmed transfer would be silently lost — the one thing this server must not do.
        // The bench endpoint shares this connection and so pays the same fsync, which keeps
        // the comparison honest.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(conn)
    }

    /// Locks the connection; a poisoned lock is recovered because every write runs in a
    /// transaction that rolled back when the panicking code dropped it.
    fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
        conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` with the writer connection on the blocking pool.
    pub async fn call<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        Self::run(Arc::clone(&self.conn), f).await
    }

    /// Runs read-only `f` with the reader connection (never waits for a writer's fsync).
    pub async fn read<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        Self::run(Arc::clone(&self.reader), f).await
    }

    async fn run<R, F>(conn: Arc<Mutex<Connection>>, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            let mut guard = Self::lock(&conn);
            f(&mut guard)
        })
        .await
        .map_err(|e| DbError::Task(e.to_string()))?
    }
}

/// True when `e` is a UNIQUE / PRIMARY KEY constraint violation.
pub fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}
