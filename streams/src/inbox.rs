//! Each consumer's inbox: one row per transfer and event kind it acted on, inserted in the
//! same local transaction as the effect, kept for a window that must cover what the
//! broker can still deliver (`horizon`).
//!
//! The key is the transfer id (a UUIDv7 the server draws; a restore or a failover of the
//! server's database can hand an outbox event id out again, never a transfer id), with
//! the event's kind, since one transfer brings a consumer more than one event (a
//! recipient's and a payer's SMS).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, Transaction};

/// Errors of the local database.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// The process's clock: the wall clock plus a test-only offset (simulated days).
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock {
    /// Added to the wall clock.
    pub offset: Duration,
}

impl Clock {
    /// Milliseconds since the epoch, offset included.
    pub fn now_ms(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            + self.offset;
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Opens (and creates) a consumer's database: WAL, full fsync, `inbox` plus `schema`.
pub fn open(path: &Path, schema: &str) -> Result<Connection, InboxError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;",
    )?;
    // An inbox of the earlier shape was keyed on event ids: it is dropped (the effects'
    // own guards, keyed on the transfer, cover what it remembered).
    let keyed_on_event_ids: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('inbox') WHERE name = 'event_id'",
        [],
        |r| r.get(0),
    )?;
    if keyed_on_event_ids {
        conn.execute_batch("DROP TABLE inbox;")?;
    }
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS inbox (
             transfer_id     TEXT NOT NULL,
             kind            TEXT NOT NULL,
             processed_at_ms INTEGER NOT NULL,
             PRIMARY KEY (transfer_id, kind)
         ) WITHOUT ROWID;
         CREATE INDEX IF NOT EXISTS inbox_age ON inbox (processed_at_ms);
         -- Redeliveries the inbox absorbed: tests read it to see a kill really redelivered.
         CREATE TABLE IF NOT EXISTS inbox_absorbed (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             n  INTEGER NOT NULL
         );
         -- Redeliveries the inbox had forgotten and the effect's own guard absorbed.
         CREATE TABLE IF NOT EXISTS guard_absorbed (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             n  INTEGER NOT NULL
         );",
    )?;
    conn.execute_batch(schema)?;
    Ok(conn)
}

/// Records `(transfer_id, kind)` in the inbox; false when it is there already (a
/// redelivery).
pub fn claim(
    tx: &Transaction<'_>,
    transfer_id: &str,
    kind: &str,
    now_ms: i64,
) -> Result<bool, InboxError> {
    let fresh = tx
        .prepare_cached(
            "INSERT INTO inbox (transfer_id, kind, processed_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (transfer_id, kind) DO NOTHING",
        )?
        .execute(params![transfer_id, kind, now_ms])?
        == 1;
    if !fresh {
        count(tx, "inbox_absorbed")?;
    }
    Ok(fresh)
}

/// Counts a redelivery the inbox had forgotten and the effect's guard absorbed.
pub fn guard_absorbed(tx: &Transaction<'_>) -> Result<(), InboxError> {
    count(tx, "guard_absorbed")
}

fn count(tx: &Transaction<'_>, table: &str) -> Result<(), InboxError> {
    tx.prepare_cached(&format!(
        "INSERT INTO {table} (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1"
    ))?
    .execute([])?;
    Ok(())
}

/// Forgets events handled longer than `window` ago; returns how many.
pub fn prune(conn: &Connection, window: Duration, now_ms: i64) -> Result<usize, InboxError> {
    let cutoff = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
    Ok(conn.execute(
        "DELETE FROM inbox WHERE processed_at_ms < ?1",
        params![cutoff],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_is_once_and_prune_forgets() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db"), "").unwrap();
        let tx = conn.transaction().unwrap();
        assert!(claim(&tx, "tr_7", "TransferDone", 1_000).unwrap());
        assert!(!claim(&tx, "tr_7", "TransferDone", 2_000).unwrap());
        assert!(
            claim(&tx, "tr_7", "LargeTransfer", 2_000).unwrap(),
            "another kind"
        );
        tx.commit().unwrap();
        assert_eq!(prune(&conn, Duration::from_millis(500), 1_400).unwrap(), 0);
        assert_eq!(prune(&conn, Duration::from_millis(500), 1_600).unwrap(), 1);
        let tx = conn.transaction().unwrap();
        assert!(
            claim(&tx, "tr_7", "TransferDone", 3_000).unwrap(),
            "forgotten: the effect's own guard must hold"
        );
    }
}
