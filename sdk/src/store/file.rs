//! The file itself: is it ours (checked without writing a byte), and the lock that makes one instance its sender.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::encryption::{self, EncryptionKey};
use crate::error::{Result, SdkError};

use super::SCHEMA_VERSION;

/// `PRAGMA application_id` of a sendonce file ("SndO"), so another app's SQLite file is told apart.
pub(super) const APPLICATION_ID: i64 = 0x536E_644F;

/// Refuses a file that is not a sendonce database, reading it without writing a byte.
///
/// `immutable=1` makes SQLite skip locks, journals, `-wal` and `-shm` entirely, so nothing is created
/// next to the file either. A WAL of ours that was never checkpointed is invisible here; it can only
/// hold our own schema, so the file then looks empty and the full checks after opening still apply.
pub(super) fn check_is_ours(path: &Path, key: Option<&EncryptionKey>) -> Result<()> {
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
    let identity = match read_identity_settled(path, key) {
        Ok(identity) => identity,
        Err(e) if has_wal(path) => {
            // Our own file killed mid-checkpoint is inconsistent without its WAL, which only a normal
            // open replays; the checks after that open decide. (A foreign app's WAL file is normally gone
            // once that app closed it cleanly.)
            tracing::debug!(error = %e, "file unreadable without its WAL; checked again after opening");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if identity.application_id != 0 && identity.application_id != APPLICATION_ID {
        return Err(SdkError::StorageCorrupt(format!(
            "file belongs to another application (application_id {:#x})",
            identity.application_id
        )));
    }
    if identity.version > SCHEMA_VERSION {
        return Err(SdkError::StorageFromNewerVersion {
            found: identity.version,
            supported: SCHEMA_VERSION,
        });
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

/// [`read_identity`], read again under the instance lock when it fails as a half-written file would.
///
/// The immutable read takes no lock, so a checkpoint of ours in progress (another instance in this
/// process that is closing, or the `:worker` process) can make it see a torn page and fail with
/// `SQLITE_CORRUPT` although the file is fine, and a `TRUNCATE` checkpoint may have emptied the WAL by
/// the time the error is looked at. Such a file whose lock a live instance holds is that instance's
/// (`AlreadyOpen`). Once this call holds the lock no instance of ours is writing, so a second read
/// tells a live file from a broken one at once. (Waiting for the read to succeed instead cost a file
/// killed mid-checkpoint 200 ms at every open until one got through: sdk/tests/sigkill.rs's children,
/// killed within 60 ms, then never sent again.)
fn read_identity_settled(path: &Path, key: Option<&EncryptionKey>) -> Result<Identity> {
    match read_identity(path, key) {
        Ok(identity) => Ok(identity),
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => {
            // With a key: this key cannot read it (typed, the file untouched); without: not ours.
            Err(key
                .and_then(|_| encryption::wrong_key(&e))
                .unwrap_or_else(|| e.into()))
        }
        Err(_) => {
            let _quiet = take_instance_lock(path)?;
            Ok(read_identity(path, key)?)
        }
    }
}

/// Application id, schema version and tables, read through an immutable connection.
fn read_identity(path: &Path, key: Option<&EncryptionKey>) -> rusqlite::Result<Identity> {
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let conn = Connection::open_with_flags(
        &uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    if let Some(key) = key {
        // Keyed before the first read; a build without encryption never gets here (the config refuses).
        encryption::key_connection(&conn, key)?;
    }
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

/// Creates the database file readable and writable by this app only, before SQLite opens it: SQLite
/// gives `-wal` and `-shm` the mode of the main file. A file (or `-wal`/`-shm`) of ours with a wider
/// mode, from an older SDK, is narrowed. Elsewhere than Unix the platform's app sandbox decides.
pub(super) fn make_private(db_path: &Path) -> Result<()> {
    let unavailable =
        |p: &Path, e: std::io::Error| SdkError::StorageUnavailable(format!("{}: {e}", p.display()));
    match private_options().create_new(true).write(true).open(db_path) {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unavailable(db_path, e)),
    }
    #[cfg(unix)]
    for suffix in ["", "-wal", "-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let mut path = db_path.as_os_str().to_owned();
        path.push(suffix);
        let path = PathBuf::from(path);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| unavailable(&path, e))?;
        }
    }
    Ok(())
}

/// Open options that create a file with mode 0600 (on Unix).
fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

pub(super) fn take_instance_lock(db_path: &Path) -> Result<File> {
    let mut lock_path = db_path.as_os_str().to_owned();
    lock_path.push(".lock");
    let file = private_options()
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
