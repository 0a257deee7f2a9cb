//! The SQLite store: the database handle with its group-commit writer ([`Db`]), the key
//! table's SQL ([`keys`]), and how one unit of work runs as one transaction on a connection
//! ([`atomically`]).

use rusqlite::Connection;

use super::DbError;

mod contract;
mod db;
mod group;
pub mod inbox;
pub mod keys;
pub mod outbox;
pub mod relay;
mod sql;

pub use contract::{expire_buckets, SqliteKeys, Work};
pub use db::{Db, Durability, Schema};

/// Runs `f` as one transaction: its own on a connection outside any (a bare connection),
/// or as part of the caller's — a group job is rolled back as a whole when it fails (see
/// server-mock's group commit), so no SAVEPOINT, and no sub-journal copy of every page it touches, is needed.
/// Callers that run `f` inside their own transaction must roll back when it fails.
pub fn atomically<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Connection) -> Result<T, DbError>,
) -> Result<T, DbError> {
    if !conn.is_autocommit() {
        return f(conn);
    }
    let tx = conn.transaction()?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
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
