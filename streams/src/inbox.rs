//! Each consumer's inbox: one row per event it acted on, inserted in the same local
//! transaction as the effect, kept for a window that must cover the topic's retention.

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

/// The consumer refuses to start: its inbox would forget events the topic still holds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "inbox window {} is shorter than the retention of topic {topic} ({}): \
     a replay from the oldest offset would apply again events the inbox has forgotten; \
     set --inbox-window to at least {}",
    human(*window), retention.map_or("forever".to_string(), human), retention.map_or("forever".to_string(), human)
)]
pub struct WindowTooShort {
    /// The consumer's inbox window.
    pub window: Duration,
    /// The topic.
    pub topic: String,
    /// The topic's retention (`None`: kept forever).
    pub retention: Option<Duration>,
}

/// Checks that an inbox keeping `window` (`None`: forever) covers a topic's retention.
pub fn check_window(
    window: Option<Duration>,
    topic: &str,
    retention: Option<Duration>,
) -> Result<(), WindowTooShort> {
    let covered = match (window, retention) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(w), Some(r)) => w >= r,
    };
    if covered {
        return Ok(());
    }
    Err(WindowTooShort {
        window: window.unwrap_or_default(),
        topic: topic.to_string(),
        retention,
    })
}

/// `90000s` → `25h`, `604800s` → `168h (7d)`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s % 86_400 == 0 && s >= 86_400 => format!("{}h ({}d)", s / 3600, s / 86_400),
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s => format!("{s}s"),
    }
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
         PRAGMA synchronous = FULL;
         CREATE TABLE IF NOT EXISTS inbox (
             event_id        INTEGER PRIMARY KEY,
             processed_at_ms INTEGER NOT NULL
         );
         CREATE INDEX IF NOT EXISTS inbox_age ON inbox (processed_at_ms);
         -- Redeliveries the inbox absorbed: tests read it to see a kill really redelivered.
         CREATE TABLE IF NOT EXISTS inbox_absorbed (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             n  INTEGER NOT NULL
         );",
    )?;
    conn.execute_batch(schema)?;
    Ok(conn)
}

/// Records `event_id` in the inbox; false when it is there already (a redelivery).
pub fn claim(tx: &Transaction<'_>, event_id: i64, now_ms: i64) -> Result<bool, InboxError> {
    let fresh = tx
        .prepare_cached(
            "INSERT INTO inbox (event_id, processed_at_ms) VALUES (?1, ?2)
             ON CONFLICT (event_id) DO NOTHING",
        )?
        .execute(params![event_id, now_ms])?
        == 1;
    if !fresh {
        tx.prepare_cached(
            "INSERT INTO inbox_absorbed (id, n) VALUES (1, 1)
             ON CONFLICT (id) DO UPDATE SET n = n + 1",
        )?
        .execute([])?;
    }
    Ok(fresh)
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

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_window_shorter_than_retention_is_refused_naming_both() {
        let err = check_window(Some(DAY), "transfers.approved", Some(7 * DAY)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("inbox window 24h (1d)"), "{text}");
        assert!(text.contains("transfers.approved (168h (7d))"), "{text}");
        assert!(check_window(Some(7 * DAY), "t", Some(7 * DAY)).is_ok());
        assert!(check_window(None, "t", None).is_ok());
        assert!(check_window(Some(365 * DAY), "t", None).is_err());
    }

    #[test]
    fn claim_is_once_and_prune_forgets() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db"), "").unwrap();
        let tx = conn.transaction().unwrap();
        assert!(claim(&tx, 7, 1_000).unwrap());
        assert!(!claim(&tx, 7, 2_000).unwrap());
        tx.commit().unwrap();
        assert_eq!(prune(&conn, Duration::from_millis(500), 1_400).unwrap(), 0);
        assert_eq!(prune(&conn, Duration::from_millis(500), 1_600).unwrap(), 1);
        let tx = conn.transaction().unwrap();
        assert!(claim(&tx, 7, 3_000).unwrap(), "forgotten, so applied again");
    }
}
