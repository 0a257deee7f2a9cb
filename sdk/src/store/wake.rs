//! Background wake-ups: transfers waiting to be sent get a spread-out time for their next request.

use rusqlite::params;

use super::Store;
use crate::error::Result;

impl Store {
    /// Transfers waiting to be sent (pending or retrying): local id, key and next attempt time.
    pub fn waiting(&self) -> Result<Vec<(String, String, i64)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT local_id, idem_key, coalesce(next_attempt_at_ms, 0) FROM transfers \
             WHERE state IN ('pending','retrying')",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Sets the next attempt of each waiting transfer, in one transaction; a transfer that started an
    /// attempt meanwhile keeps its own state. Returns the ids that moved.
    pub fn reschedule(&self, times: &[(String, i64)], now_ms: i64) -> Result<Vec<String>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut moved = Vec::new();
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE transfers SET next_attempt_at_ms=?2, updated_at_ms=?3 \
                 WHERE local_id=?1 AND state IN ('pending','retrying')",
            )?;
            for (id, at) in times {
                if stmt.execute(params![id, at, now_ms])? > 0 {
                    moved.push(id.clone());
                }
            }
        }
        tx.commit()?;
        self.committed();
        Ok(moved)
    }
}
