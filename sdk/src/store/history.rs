//! The history of finished transfers: listed in stable pages, pruned once past the retention.

use rusqlite::{params, OptionalExtension};

use super::{exec, read_transfer, Store, COLUMNS, UNFINISHED};
use crate::error::{Result, SdkError};
use crate::model::Transfer;

/// Most transfers in one page.
pub const MAX_PAGE: u32 = 500;
/// Rows deleted per prune transaction: a writer (a confirm) never waits behind a long delete.
const PRUNE_BATCH: i64 = 500;
/// Batches per prune call; whatever is left goes in the next call.
const PRUNE_BATCHES: usize = 20;

/// States that are final: the only ones pruning may delete.
const FINISHED: &str = "('succeeded','rejected','failed')";

impl Store {
    /// All transfers, newest first; only the unfinished ones if asked.
    pub fn list(&self, unfinished_only: bool) -> Result<Vec<Transfer>> {
        let conn = self.conn();
        let filter = if unfinished_only {
            format!("WHERE state IN {UNFINISHED}")
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM transfers {filter} ORDER BY created_at_ms DESC, local_id DESC"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], read_transfer)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Up to `limit` transfers (at most [`MAX_PAGE`]) in the order of [`Store::list`], after the one
    /// with local id `after` (from the start when `None`).
    ///
    /// The position is the `(created_at_ms, local_id)` of `after`, a total order: a transfer inserted
    /// while the user pages moves nothing already listed, so no page repeats or skips one.
    pub fn page(&self, after: Option<&str>, limit: u32) -> Result<Vec<Transfer>> {
        let limit = i64::from(limit.min(MAX_PAGE));
        let conn = self.conn();
        let rows = match after {
            None => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM transfers ORDER BY created_at_ms DESC, local_id DESC LIMIT ?1"
                );
                let mut stmt = conn.prepare_cached(&sql)?;
                let rows = stmt.query_map([limit], read_transfer)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
            }
            Some(after) => {
                let at: Option<i64> = conn
                    .prepare_cached("SELECT created_at_ms FROM transfers WHERE local_id = ?1")?
                    .query_row([after], |r| r.get(0))
                    .optional()?;
                // A cursor that was pruned in the meantime: the caller starts again from the top.
                let at = at.ok_or_else(|| SdkError::NotFound(after.into()))?;
                let sql = format!(
                    "SELECT {COLUMNS} FROM transfers WHERE (created_at_ms, local_id) < (?1, ?2) \
                     ORDER BY created_at_ms DESC, local_id DESC LIMIT ?3"
                );
                let mut stmt = conn.prepare_cached(&sql)?;
                let rows = stmt.query_map(params![at, after, limit], read_transfer)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
            }
        };
        Ok(rows)
    }

    /// Deletes finished transfers that ended before `ended_before_ms`, in small batches; returns how
    /// many, and whether some are left for the next call. Never touches an unfinished one: its key
    /// and bytes are what makes sending it safe.
    pub fn prune(&self, ended_before_ms: i64) -> Result<(usize, bool)> {
        let sql = format!(
            "DELETE FROM transfers WHERE rowid IN (SELECT rowid FROM transfers \
             WHERE state IN {FINISHED} AND updated_at_ms < ?1 LIMIT ?2)"
        );
        let mut pruned = 0;
        for _ in 0..PRUNE_BATCHES {
            let deleted = exec(&self.conn(), &sql, params![ended_before_ms, PRUNE_BATCH])?;
            self.committed();
            pruned += deleted;
            if (deleted as i64) < PRUNE_BATCH {
                return Ok((pruned, false));
            }
        }
        Ok((pruned, true))
    }
}
