//! The on-device store: one SQLite file (WAL, synchronous=FULL) that outlives the app.
//!
//! Every function is one visible transaction; the sender calls them in order.

mod account;
mod file;
mod history;
mod insert;
mod migrate;
mod wake;

pub use account::Wiped;
pub use insert::NewTransfer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::encryption::EncryptionKey;
use crate::error::{Result, SdkError};
use crate::model::{Rejection, RejectionReason, RequiredAction, Transfer, TransferState};
use file::{check_is_ours, make_private, take_instance_lock, APPLICATION_ID};

/// 2: `elapsed_ms`, the sending time measured on a monotonic clock, and `contact`, how far an attempt
/// got (issue 13). The history and retention indexes need no new version: an older SDK reads a file
/// that has them, and opening with this one adds them to an older file.
/// 3: operations (issue 35): `op_type`, `method`, `path`, `headers` (the app's request, committed with
/// the body), `reject_reason` (the contract's typed reason) and the parked action (`action_*`). An
/// older SDK must not open such a file: it would send a payout to `/v1/transfers`.
pub(crate) const SCHEMA_VERSION: i64 = 3;

/// Commits between two WAL checkpoints (~7 pages each: a WAL of ~14 MB at most between them). A
/// confirmation that arrives while one runs waits for it, so they are kept rare (1 in 500, out of the p99).
const CHECKPOINT_EVERY: u64 = 500;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS transfers (
    local_id           TEXT PRIMARY KEY,
    idem_key           TEXT NOT NULL UNIQUE,
    to_user_id         TEXT NOT NULL,
    amount_minor       INTEGER NOT NULL,
    currency           TEXT NOT NULL,
    note               TEXT,
    body               BLOB NOT NULL,
    state              TEXT NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    last_attempt_at_ms INTEGER,
    next_attempt_at_ms INTEGER,
    last_error         TEXT,
    server_transfer_id TEXT,
    reject_code        TEXT,
    reject_detail      TEXT,
    reject_status      INTEGER,
    replayed           INTEGER NOT NULL DEFAULT 0,
    response_body      BLOB,
    elapsed_ms         INTEGER NOT NULL DEFAULT 0,
    contact            INTEGER NOT NULL DEFAULT 0,
    op_type            TEXT NOT NULL DEFAULT 'transfer',
    method             TEXT NOT NULL DEFAULT 'POST',
    path               TEXT NOT NULL DEFAULT '/v1/transfers',
    headers            TEXT NOT NULL DEFAULT '[]',
    reject_reason      TEXT,
    action_code        TEXT,
    action_url         TEXT,
    action_challenge   TEXT
);
CREATE INDEX IF NOT EXISTS transfers_due ON transfers(state, next_attempt_at_ms);
CREATE INDEX IF NOT EXISTS transfers_history ON transfers(created_at_ms, local_id);
CREATE INDEX IF NOT EXISTS transfers_finished ON transfers(state, updated_at_ms);
";

const COLUMNS: &str = "local_id, idem_key, to_user_id, amount_minor, currency, note, state, attempts, created_at_ms, \
    updated_at_ms, last_attempt_at_ms, next_attempt_at_ms, last_error, server_transfer_id, reject_code, reject_detail, \
    reject_status, replayed, op_type, reject_reason, action_code, action_url, action_challenge";

/// States the sender still works on (or that wait for the app).
const UNFINISHED: &str =
    "('pending','sending','retrying','auth_required','needs_attention','requires_action')";

/// What an attempt sends: everything committed at confirm.
#[derive(Debug, Clone)]
pub struct Wire {
    /// The idempotency key.
    pub key: String,
    /// The exact body bytes.
    pub body: Vec<u8>,
    /// Method name (`POST`, `PUT`, `PATCH`, `DELETE`).
    pub method: String,
    /// Path below the base URL.
    pub path: String,
    /// The committed headers.
    pub headers: Vec<(String, String)>,
    /// The operation type name.
    pub op_type: String,
}

/// How an attempt ended, as written back to the store.
#[derive(Debug, Clone)]
pub enum Update {
    /// Final success.
    Succeeded {
        server_transfer_id: Option<String>,
        replayed: bool,
        response_body: Vec<u8>,
    },
    /// Final rejection or failure.
    Ended {
        state: TransferState,
        rejection: Rejection,
    },
    /// Try again at `next_attempt_at_ms`.
    Retry {
        next_attempt_at_ms: i64,
        error: String,
    },
    /// Wait for a token.
    AuthRequired { error: String },
    /// Parked until the customer completes a step (`action_completed`).
    RequiresAction { action: RequiredAction },
    /// Give-up horizon reached; resolved by look-ups from `next_attempt_at_ms` on.
    NeedsAttention {
        next_attempt_at_ms: i64,
        error: String,
    },
}

/// The SQLite file plus the lock that makes this instance its only sender.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    commits_since_checkpoint: AtomicU64,
    lock: Mutex<Option<File>>,
}

impl Store {
    /// Opens (or creates) the file, takes the instance lock and migrates the schema. Never deletes data.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, None)
    }

    /// [`Store::open`] of a file encrypted with `key` (or created encrypted); `None`: in clear.
    pub fn open_with(path: &Path, key: Option<&EncryptionKey>) -> Result<Self> {
        crate::probe::io(crate::probe::IoKind::Store);
        // Before the lock file, the WAL switch or any other write: another app's file stays exactly as found.
        check_is_ours(path, key)?;
        let lock = take_instance_lock(path)?;
        make_private(path)?;
        let mut conn = Connection::open(path)?;
        crate::encryption::apply(&conn, key)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // WAL + FULL: a committed transfer survives a crash or power loss before the first byte is sent.
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(SdkError::StorageUnavailable(format!(
                "could not enable WAL (journal_mode={mode})"
            )));
        }
        migrate::crash_point("open-after-wal");
        // Checkpoints run between commits (`checkpoint_if_due`), not inside whichever commit crosses the
        // auto-checkpoint threshold: otherwise every few hundred confirmations one tap pays for a checkpoint.
        // A WAL that grew in a burst is cut back to 16 MiB when it restarts (bounded storage).
        conn.execute_batch(
            "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=0; \
             PRAGMA journal_size_limit=16777216;",
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(SdkError::StorageFromNewerVersion {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == 0 {
            let has_tables: i64 = conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name <> 'transfers'",
                [],
                |r| r.get(0),
            )?;
            let has_transfers: i64 = conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name='transfers'",
                [],
                |r| r.get(0),
            )?;
            if has_tables > 0 && has_transfers == 0 {
                return Err(SdkError::StorageCorrupt(
                    "file is a SQLite database of something else".into(),
                ));
            }
        }
        conn.execute_batch(SCHEMA)?;
        migrate::crash_point("open-after-schema");
        let version = migrate::to_v2(&mut conn, version)?;
        migrate::to_v3(&mut conn, version)?;
        // Each pragma write is a commit (an fsync): at every open after the first they are already set.
        let app_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
        if version != SCHEMA_VERSION || app_id != APPLICATION_ID {
            migrate::crash_point("open-before-ids");
            conn.execute_batch(&format!(
                "PRAGMA user_version={SCHEMA_VERSION}; PRAGMA application_id={APPLICATION_ID};"
            ))?;
            migrate::crash_point("open-after-ids");
        }
        Ok(Self {
            conn: Mutex::new(conn),
            commits_since_checkpoint: AtomicU64::new(0),
            path: path.to_path_buf(),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// Lets another instance open the file (on close).
    pub fn release_lock(&self) {
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        crate::probe::io(crate::probe::IoKind::Store);
        // A panic while holding the lock cannot leave a half-written row: SQLite rolls the transaction back.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn committed(&self) {
        self.commits_since_checkpoint
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Whether enough commits piled up for [`Store::checkpoint_if_due`] to checkpoint.
    pub fn checkpoint_due(&self) -> bool {
        self.commits_since_checkpoint.load(Ordering::Relaxed) >= CHECKPOINT_EVERY
    }

    /// Copies the WAL back into the file once enough commits piled up, so the WAL is reused from its
    /// start instead of growing.
    ///
    /// On the writer connection, under its lock: no write can begin while the checkpoint runs, so the
    /// next one always restarts the WAL. (A checkpoint from a second connection, concurrent with
    /// writes, almost never lets it restart under steady load: the WAL then only grows, and every
    /// commit's fsync also pays for the file's new size.) Called between commits by the store thread and
    /// the sender, never inside a confirmation.
    pub fn checkpoint_if_due(&self) -> Result<()> {
        if !self.checkpoint_due() {
            return Ok(());
        }
        let conn = self.conn();
        self.commits_since_checkpoint.store(0, Ordering::Relaxed);
        let (busy, log, done): (i64, i64, i64) =
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        tracing::debug!(busy, log, done, "WAL checkpoint");
        Ok(())
    }

    /// One transfer.
    pub fn get(&self, local_id: &str) -> Result<Option<Transfer>> {
        let conn = self.conn();
        let sql = format!("SELECT {COLUMNS} FROM transfers WHERE local_id = ?1");
        let transfer = conn
            .prepare_cached(&sql)?
            .query_row([local_id], read_transfer)
            .optional()?;
        Ok(transfer)
    }

    /// Sending time persisted for a transfer (ms of monotonic time) and how far its attempts got.
    pub fn progress(&self, local_id: &str) -> Result<(i64, i64)> {
        let conn = self.conn();
        let progress = conn
            .prepare_cached("SELECT elapsed_ms, contact FROM transfers WHERE local_id = ?1")?
            .query_row([local_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        progress.ok_or_else(|| SdkError::NotFound(local_id.into()))
    }

    /// Raises how far an attempt got (never lowers it); written at most twice in a transfer's life.
    pub fn raise_contact(&self, local_id: &str, contact: i64) -> Result<()> {
        exec(
            &self.conn(),
            "UPDATE transfers SET contact = ?2 WHERE local_id = ?1 AND contact < ?2",
            params![local_id, contact],
        )?;
        self.committed();
        Ok(())
    }

    /// The exact request to send for an operation: key, bytes, method, path, headers.
    pub fn wire(&self, local_id: &str) -> Result<Wire> {
        let conn = self.conn();
        let wire = conn
            .prepare_cached(
                "SELECT idem_key, body, method, path, headers, op_type FROM transfers WHERE local_id = ?1",
            )?
            .query_row([local_id], |r| {
                let headers: String = r.get(4)?;
                Ok(Wire {
                    key: r.get(0)?,
                    body: r.get(1)?,
                    method: r.get(2)?,
                    path: r.get(3)?,
                    headers: serde_json::from_str(&headers).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into())
                    })?,
                    op_type: r.get(5)?,
                })
            })
            .optional()?;
        wire.ok_or_else(|| SdkError::NotFound(local_id.into()))
    }

    /// Transfers whose next step is due, oldest first.
    ///
    /// No schedule ever sets a time more than `cap_ms` ahead, so a later time means the clock went
    /// backwards: such a transfer is due now rather than stalled for as long as the jump.
    pub fn due(&self, now_ms: i64, cap_ms: i64, limit: usize) -> Result<Vec<DueStep>> {
        // Ids and states only: the attempt reads its transfer when it runs, so a pass over many due
        // transfers holds neither their bodies nor their headers.
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT local_id, state = 'needs_attention' FROM transfers \
             WHERE state IN ('pending','retrying','needs_attention') \
             AND next_attempt_at_ms IS NOT NULL AND (next_attempt_at_ms <= ?1 OR next_attempt_at_ms > ?1 + ?3) \
             ORDER BY next_attempt_at_ms LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now_ms, limit as i64, cap_ms], |r| {
            Ok(DueStep {
                local_id: r.get(0)?,
                look_up: r.get(1)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Earliest step scheduled after `now_ms`. Steps due already are being worked on (or queued for a
    /// send slot); their tasks wake the sender when done, so counting them here would make it spin.
    pub fn next_due_after(&self, now_ms: i64) -> Result<Option<i64>> {
        let conn = self.conn();
        let at = conn
            .prepare_cached(
                "SELECT min(next_attempt_at_ms) FROM transfers \
                 WHERE state IN ('pending','retrying','needs_attention') AND next_attempt_at_ms > ?1",
            )?
            .query_row([now_ms], |r| r.get(0))?;
        Ok(at)
    }

    /// Phase "attempt": count it and mark it on the wire before the request leaves, with the sending
    /// time measured so far.
    pub fn begin_attempt(
        &self,
        local_id: &str,
        now_ms: i64,
        elapsed_ms: i64,
    ) -> Result<Option<Transfer>> {
        let changed = exec(
            &self.conn(),
            "UPDATE transfers SET state='sending', attempts=attempts+1, last_attempt_at_ms=?2, updated_at_ms=?2, \
             next_attempt_at_ms=NULL, elapsed_ms=max(elapsed_ms, ?3) WHERE local_id=?1 AND state IN ('pending','retrying')",
            params![local_id, now_ms, elapsed_ms],
        )?;
        self.committed();
        if changed == 0 {
            return Ok(None);
        }
        self.get(local_id)
    }

    /// Debug-only key rotation used by `unsafe_new_key_per_retry`.
    pub fn rotate_key(&self, local_id: &str, new_key: &str) -> Result<()> {
        self.conn()
            .prepare_cached("UPDATE transfers SET idem_key=?2 WHERE local_id=?1")?
            .execute(params![local_id, new_key])?;
        self.committed();
        Ok(())
    }

    /// Phase "end of attempt": writes the outcome, only if the transfer is still in one of `from`.
    ///
    /// The guard is what keeps a final state final: a late look-up or a late attempt that lost the race
    /// changes nothing, and the current row is returned instead.
    pub fn record(
        &self,
        local_id: &str,
        update: &Update,
        now_ms: i64,
        from: &[TransferState],
    ) -> Result<Transfer> {
        let allowed = from
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect::<Vec<_>>()
            .join(",");
        let guard = format!("WHERE local_id=?1 AND state IN ({allowed})");
        let changed = {
            let conn = self.conn();
            match update {
                Update::Succeeded { server_transfer_id, replayed, response_body } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state='succeeded', server_transfer_id=?2, replayed=?3, response_body=?4, \
                         next_attempt_at_ms=NULL, last_error=NULL, updated_at_ms=?5 {guard}"
                    ),
                    params![local_id, server_transfer_id, replayed, response_body, now_ms],
                )?,
                Update::Ended { state, rejection } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state=?2, reject_code=?3, reject_detail=?4, reject_status=?5, \
                         next_attempt_at_ms=NULL, updated_at_ms=?6, reject_reason=?7 {guard}"
                    ),
                    params![local_id, state.as_str(), rejection.code, rejection.detail, rejection.http_status, now_ms,
                        rejection.reason.to_stored()],
                )?,
                Update::RequiresAction { action } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state='requires_action', next_attempt_at_ms=NULL, last_error=?2, \
                         action_code=?2, action_url=?3, action_challenge=?4, updated_at_ms=?5 {guard}"
                    ),
                    params![local_id, action.code, action.url, action.challenge_id, now_ms],
                )?,
                Update::Retry { next_attempt_at_ms, error } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state='retrying', next_attempt_at_ms=?2, last_error=?3, updated_at_ms=?4 {guard}"
                    ),
                    params![local_id, next_attempt_at_ms, error, now_ms],
                )?,
                Update::AuthRequired { error } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state='auth_required', next_attempt_at_ms=NULL, last_error=?2, \
                         updated_at_ms=?3 {guard}"
                    ),
                    params![local_id, error, now_ms],
                )?,
                Update::NeedsAttention { next_attempt_at_ms, error } => exec(&conn,
                    &format!(
                        "UPDATE transfers SET state='needs_attention', next_attempt_at_ms=?2, last_error=?3, \
                         updated_at_ms=?4 {guard}"
                    ),
                    params![local_id, next_attempt_at_ms, error, now_ms],
                )?,
            }
        };
        self.committed();
        if changed == 0 {
            tracing::debug!(
                local_id,
                ?update,
                "outcome not recorded: the transfer moved on"
            );
        }
        self.get(local_id)?
            .ok_or_else(|| SdkError::NotFound(local_id.into()))
    }

    /// Start-up recovery: a transfer that was on the wire when the app died has an unknown outcome; send it again now.
    pub fn recover_in_flight(&self, now_ms: i64) -> Result<Vec<String>> {
        self.move_to_due("state = 'sending'", now_ms)
    }

    /// Transfers marked on the wire (the caller tells which of them no attempt of its own holds).
    pub fn sending_ids(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT local_id FROM transfers WHERE state = 'sending'")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Network is back: every waiting retry is due now.
    pub fn wake_retries(&self, now_ms: i64) -> Result<Vec<String>> {
        self.move_to_due("state = 'retrying' AND next_attempt_at_ms > ?1", now_ms)
    }

    /// A new token arrived: transfers held for credentials are due now.
    pub fn resume_auth(&self, now_ms: i64) -> Result<Vec<String>> {
        self.move_to_due("state = 'auth_required'", now_ms)
    }

    /// The customer completed the step: the parked operation is due now (same key, same bytes).
    /// Returns false when it was not parked.
    pub fn resume_action(&self, local_id: &str, now_ms: i64) -> Result<bool> {
        let changed = exec(
            &self.conn(),
            "UPDATE transfers SET state='retrying', next_attempt_at_ms=?2, updated_at_ms=?2, \
             last_error='the customer completed the required action' \
             WHERE local_id=?1 AND state='requires_action'",
            params![local_id, now_ms],
        )?;
        self.committed();
        Ok(changed > 0)
    }

    /// Persists the sending time measured so far (a parked operation's clock stops here).
    pub fn save_elapsed(&self, local_id: &str, elapsed_ms: i64) -> Result<()> {
        exec(
            &self.conn(),
            "UPDATE transfers SET elapsed_ms = max(elapsed_ms, ?2) WHERE local_id = ?1",
            params![local_id, elapsed_ms],
        )?;
        self.committed();
        Ok(())
    }

    fn move_to_due(&self, filter: &str, now_ms: i64) -> Result<Vec<String>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let ids = {
            let mut stmt = tx.prepare_cached(&format!(
                "UPDATE transfers SET state='retrying', next_attempt_at_ms=?1, updated_at_ms=?1 WHERE {filter} RETURNING local_id"
            ))?;
            let rows = stmt.query_map([now_ms], |r| r.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        self.committed();
        Ok(ids)
    }
}

/// Runs one statement through the statement cache (parsing is most of a small write's CPU cost).
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

fn read_transfer(r: &Row<'_>) -> rusqlite::Result<Transfer> {
    let state: String = r.get(6)?;
    let reject_code: Option<String> = r.get(14)?;
    let state = TransferState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            6,
            rusqlite::types::Type::Text,
            format!("unknown state {state}").into(),
        )
    })?;
    let action_code: Option<String> = r.get(20)?;
    let required_action = match action_code {
        Some(code) if state == TransferState::RequiresAction => Some(RequiredAction {
            code,
            url: r.get(21)?,
            challenge_id: r.get(22)?,
        }),
        _ => None,
    };
    Ok(Transfer {
        local_id: r.get(0)?,
        operation_type: r.get(18)?,
        idempotency_key: r.get(1)?,
        to_user_id: r.get(2)?,
        amount_minor: r.get(3)?,
        currency: r.get(4)?,
        note: r.get(5)?,
        state,
        attempts: r.get(7)?,
        created_at_ms: r.get(8)?,
        updated_at_ms: r.get(9)?,
        last_attempt_at_ms: r.get(10)?,
        next_attempt_at_ms: r.get(11)?,
        last_error: r.get(12)?,
        server_transfer_id: r.get(13)?,
        rejection: match reject_code {
            Some(code) => Some(Rejection {
                // A row written before reasons were stored: server-mock's codes, as they were read then.
                reason: match r.get::<_, Option<String>>(19)? {
                    Some(stored) => RejectionReason::from_stored(&stored),
                    None => RejectionReason::of_code(&code),
                },
                code,
                detail: r.get::<_, Option<String>>(15)?.unwrap_or_default(),
                http_status: r.get(16)?,
            }),
            None => None,
        },
        replayed: r.get(17)?,
        required_action,
    })
}

/// A transfer whose next step is due: which one, and whether that step is a status look-up
/// (it needs attention) rather than a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueStep {
    /// The transfer.
    pub local_id: String,
    /// The step is a look-up by key.
    pub look_up: bool,
}
