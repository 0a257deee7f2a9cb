//! The account the file belongs to, and the wipe that leaves nothing of it.
//!
//! The account row lives in a table of its own, created at first use, so files without one (every
//! file before accounts) open unchanged.

use rusqlite::OptionalExtension;

use super::{Store, UNFINISHED};
use crate::error::Result;
use crate::model::Transfer;

const ACCOUNT_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS account (id INTEGER PRIMARY KEY CHECK (id = 1), account_id TEXT NOT NULL)";

/// What a wipe removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wiped {
    /// Unfinished transfers that were discarded.
    pub unfinished: Vec<Transfer>,
    /// Finished transfers deleted.
    pub finished: u32,
}

impl Store {
    /// The account the file is bound to, if any.
    pub fn account(&self) -> Result<Option<String>> {
        let conn = self.conn();
        conn.execute_batch(ACCOUNT_TABLE)?;
        Ok(conn
            .query_row("SELECT account_id FROM account WHERE id = 1", [], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Binds the file to `account_id` (replacing any earlier binding).
    pub fn bind_account(&self, account_id: &str) -> Result<()> {
        let conn = self.conn();
        conn.execute_batch(ACCOUNT_TABLE)?;
        conn.execute(
            "INSERT INTO account (id, account_id) VALUES (1, ?1) \
             ON CONFLICT(id) DO UPDATE SET account_id = excluded.account_id",
            [account_id],
        )?;
        self.committed();
        Ok(())
    }

    /// How many transfers are unfinished.
    pub fn unfinished_count(&self) -> Result<u32> {
        let n: i64 = self.conn().query_row(
            &format!("SELECT count(*) FROM transfers WHERE state IN {UNFINISHED}"),
            [],
            |r| r.get(0),
        )?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Deletes every transfer and the account binding, then rewrites the file (VACUUM) and empties the
    /// WAL, so no page of the file or its WAL still holds a deleted row.
    pub fn wipe(&self) -> Result<Wiped> {
        let unfinished = self.list(true)?;
        let conn = self.conn();
        conn.execute_batch(ACCOUNT_TABLE)?;
        // secure_delete zeroes freed content; VACUUM drops the free pages; TRUNCATE empties the WAL,
        // whose old frames still hold the rows as they were before the delete.
        conn.execute_batch("PRAGMA secure_delete=ON;")?;
        let finished = {
            let tx = conn.unchecked_transaction()?;
            let all = tx.execute("DELETE FROM transfers", [])?;
            tx.execute("DELETE FROM account", [])?;
            tx.commit()?;
            all.saturating_sub(unfinished.len())
        };
        conn.execute_batch("VACUUM;")?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        self.committed();
        Ok(Wiped {
            unfinished,
            finished: u32::try_from(finished).unwrap_or(u32::MAX),
        })
    }
}
