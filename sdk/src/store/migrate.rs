//! Schema migrations: each version's step on its own transaction with its version bump, idempotent,
//! never deleting data.
//!
//! `SCHEMA` creates a new file at the newest version; these steps bring an older file there. A file
//! created by `SCHEMA` already has every column, so each step adds only what is missing.

use rusqlite::Connection;

use crate::error::Result;

/// Columns of version 3 (operations): an old row is a transfer to server-mock, sent as it always was.
const V3_COLUMNS: &[(&str, &str)] = &[
    ("op_type", "TEXT NOT NULL DEFAULT 'transfer'"),
    ("method", "TEXT NOT NULL DEFAULT 'POST'"),
    ("path", "TEXT NOT NULL DEFAULT '/v1/transfers'"),
    ("headers", "TEXT NOT NULL DEFAULT '[]'"),
    ("reject_reason", "TEXT"),
    ("action_code", "TEXT"),
    ("action_url", "TEXT"),
    ("action_challenge", "TEXT"),
];

fn has_column(conn: &Connection, column: &str) -> rusqlite::Result<bool> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('transfers') WHERE name = ?1",
        [column],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// Version 1 to 2, in one transaction with the version bump: its transfers start with no measured
/// sending time and no known contact. Returns the file's version after the step.
pub(super) fn to_v2(conn: &mut Connection, found_version: i64) -> Result<i64> {
    if found_version >= 2 {
        return Ok(found_version);
    }
    let tx = conn.transaction()?;
    for (column, ddl) in [
        (
            "elapsed_ms",
            "ALTER TABLE transfers ADD COLUMN elapsed_ms INTEGER NOT NULL DEFAULT 0",
        ),
        (
            "contact",
            "ALTER TABLE transfers ADD COLUMN contact INTEGER NOT NULL DEFAULT 0",
        ),
    ] {
        if !has_column(&tx, column)? {
            tx.execute_batch(ddl)?;
        }
    }
    tx.execute_batch("PRAGMA user_version=2")?;
    crash_point("v2-before-commit");
    tx.commit()?;
    crash_point("v2-committed");
    Ok(2)
}

/// Version 2 to 3, in one transaction with the version bump: a crash in the middle leaves a version-2
/// file that the next open migrates again, never a file with half the columns and either version.
pub(super) fn to_v3(conn: &mut Connection, found_version: i64) -> Result<()> {
    if found_version >= 3 {
        return Ok(());
    }
    let tx = conn.transaction()?;
    let mut added = 0;
    for (column, ty) in V3_COLUMNS {
        if !has_column(&tx, column)? {
            tx.execute_batch(&format!("ALTER TABLE transfers ADD COLUMN {column} {ty}"))?;
            added += 1;
        }
    }
    tx.execute_batch("PRAGMA user_version=3")?;
    crash_point("v3-before-commit");
    tx.commit()?;
    crash_point("v3-committed");
    if added > 0 {
        tracing::info!(from = found_version, added, "store migrated to schema 3");
    }
    Ok(())
}

/// Test builds with `crash-points` only: the process SIGKILLs itself here when `SENDONCE_CRASH_AT` names
/// this point, so a test can show that a migration killed between any two of its writes leaves a file the
/// next open finishes (`tests/migration_kills.rs`); the open's own writes around the steps have
/// points too (`open-…`, in `Store::open_with`). Compiled out of every other build.
pub(super) fn crash_point(_name: &str) {
    #[cfg(feature = "crash-points")]
    if std::env::var("SENDONCE_CRASH_AT").as_deref() == Ok(_name) {
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        // `kill` delivers before it returns; never go on past a crash point.
        std::process::abort();
    }
}
