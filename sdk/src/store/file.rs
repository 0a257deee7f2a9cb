//! The file itself: is it ours (checked without writing a byte), and the lock that makes one instance its sender.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::error::{Result, SdkError};

use super::SCHEMA_VERSION;

/// `PRAGMA application_id` of a sendonce file ("SndO"), so another app's SQLite file is told apart.
pub(super) const APPLICATION_ID: i64 = 0x536E_644F;

/// Refuses a file that is not a sendonce database, reading it without writing a byte.
///
/// `immutable=1` makes SQLite skip locks, journals, `-wal` and `-shm` entirely, so nothing is created
/// next to the file either. A WAL of ours that was never checkpointed is invisible here; it can only
/// hold our own schema, so the file then looks empty and the full checks after opening still apply.
pub(super) fn check_is_ours(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(SdkError::StorageUnavailable(format!(
                "{}: {e}",
                path.display()
            )))
        }
        // SQLite treats an empty file as an empty database: ours to create.
        Ok(meta) if meta.is_file() && meta.len() == 0 => return Ok(()),
        Ok(_) => {}
    }
    let identity = match read_identity(path) {
        Ok(identity) => identity,
        Err(e) if has_wal(path) => {
            // Our own file killed mid-checkpoint is inconsistent without its WAL, which only a normal
            // open replays; the checks after that open decide. (A foreign app's WAL file is normally gone
            // once that app closed it cleanly.)
            tracing::debug!(error = %e, "file unreadable without its WAL; checked again after opening");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if identity.application_id != 0 && identity.application_id != APPLICATION_ID {
        return Err(SdkError::StorageCorrupt(format!(
            "file belongs to another application (application_id {:#x})",
            identity.application_id
        )));
    }
    if identity.version > SCHEMA_VERSION {
        return Err(SdkError::StorageCorrupt(format!(
            "file has schema version {}, this SDK knows {SCHEMA_VERSION}; refusing to touch it",
            identity.version
        )));
    }
    if identity.tables > 0 && !identity.has_transfers {
        return Err(SdkError::StorageCorrupt(
            "file is a SQLite database of something else".into(),
        ));
    }
    Ok(())
}

/// What the file says about itself.
struct Identity {
    application_id: i64,
    version: i64,
    tables: i64,
    has_transfers: bool,
}

fn has_wal(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).is_ok_and(|m| m.len() > 0)
}

/// Application id, schema version and tables, read through an immutable connection.
fn read_identity(path: &Path) -> rusqlite::Result<Identity> {
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let conn = Connection::open_with_flags(
        &uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let application_id = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let (tables, ours): (i64, i64) = conn.query_row(
        "SELECT count(*), count(*) FILTER (WHERE name = 'transfers') FROM sqlite_master WHERE type = 'table'",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Identity {
        application_id,
        version,
        tables,
        has_transfers: ours > 0,
    })
}

/// The path part of a `file:` URI: every byte that is not unreserved or `/` percent-encoded.
fn uri_path(path: &Path) -> String {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(super) fn take_instance_lock(db_path: &Path) -> Result<File> {
    let mut lock_path = db_path.as_os_str().to_owned();
    lock_path.push(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| {
            SdkError::StorageUnavailable(format!("{}: {e}", PathBuf::from(&lock_path).display()))
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(SdkError::AlreadyOpen(db_path.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(SdkError::StorageUnavailable(e.to_string())),
    }
}
