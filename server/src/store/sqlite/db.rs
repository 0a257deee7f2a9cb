//! The SQLite database: pragmas, group commit and a panic-safe handle for async code. The
//! key table is the library's (`keys.rs`); the application's tables come from the schema
//! function it opens the database with.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

pub use super::group::Durability;
use super::group::{self, lock, GroupJob, Job, Write};
use super::{inbox, keys, outbox};
use crate::store::DbError;

/// Creates (idempotently) and migrates the application's own tables on the writer connection,
/// after the library's key table.
pub type Schema = fn(&Connection) -> Result<(), DbError>;

/// Shared handle to the database: one writer connection and one reader connection.
///
/// Writes go either through [`Db::write`] (group commit: a writer thread runs every job
/// that is queued in one transaction, each job in its own SAVEPOINT, and answers only
/// after the COMMIT) or through [`Db::call`] (the closure alone on the connection, outside
/// any transaction, for code that manages its own transactions).
///
/// One writer serialises every write, so SQLite never answers `SQLITE_BUSY` to ourselves;
/// correctness still comes from constraints (primary and unique keys) and transactions,
/// not from this mutex, so the same code is right with a pool. The reader lets hot reads
/// (auth, replays, look-ups) proceed while the writer waits on an fsync: WAL readers see
/// the last committed state and never block the writer. `:memory:` has one connection.
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
    reader: Arc<Mutex<Connection>>,
    /// Authentication's own reader: a long read (a test listing) never delays it.
    auth: Arc<Mutex<Connection>>,
    /// The writer thread's queue; `None`: every call runs inline (deterministic rides).
    jobs: Option<mpsc::SyncSender<Job>>,
}

/// Write jobs that may wait for the writer (a few seconds of peak load).
const WRITE_QUEUE: usize = 4_096;

impl Db {
    /// Opens (creating if needed) the database at `path` or in memory for `:memory:`, with
    /// the key table and the application's `schema`.
    pub fn open(path: &str, schema: Schema) -> Result<Self, DbError> {
        Self::open_with_queue(path, schema, WRITE_QUEUE)
    }

    /// Like [`Db::open`], with at most `queue` write jobs waiting for the writer: beyond
    /// that, [`Db::write`] fails at once with [`DbError::Busy`] (back-pressure, not memory).
    pub fn open_with_queue(path: &str, schema: Schema, queue: usize) -> Result<Self, DbError> {
        let mut db = Self::open_inline(path, schema)?;
        let (jobs, queue) = mpsc::sync_channel(queue.max(1));
        let writer = Arc::clone(&db.conn);
        std::thread::Builder::new()
            .name("db-writer".into())
            .spawn(move || group::group_writer(&writer, &queue))
            .map_err(|e| DbError::Task(e.to_string()))?;
        db.jobs = Some(jobs);
        Ok(db)
    }

    /// Like [`Db::open`], but every call runs on the caller's thread (a group of one job per
    /// write): a deterministic ride has one thread, and a writer thread or the blocking pool
    /// would make the order of events depend on the OS.
    pub fn open_inline(path: &str, schema: Schema) -> Result<Self, DbError> {
        let (conn, reader, auth) = if path == ":memory:" {
            let conn = Arc::new(Mutex::new(Self::configure(
                Connection::open_in_memory()?,
                schema,
            )?));
            (Arc::clone(&conn), Arc::clone(&conn), conn)
        } else {
            create_private(path)?;
            let conn = Self::configure(Connection::open(path)?, schema)?;
            let reader = || -> Result<_, DbError> {
                let r = Connection::open_with_flags(
                    path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                r.busy_timeout(std::time::Duration::from_secs(5))?;
                r.set_prepared_statement_cache_capacity(64);
                Ok(Arc::new(Mutex::new(r)))
            };
            (Arc::new(Mutex::new(conn)), reader()?, reader()?)
        };
        Ok(Self {
            conn,
            reader,
            auth,
            jobs: None,
        })
    }

    /// Pragmas, the key table and the application's `schema` for the writer connection.
    pub fn configure(conn: Connection, schema: Schema) -> Result<Connection, DbError> {
        // WAL: readers never block the writer and a crash never corrupts the file.
        // synchronous=FULL: a commit is on disk before we answer 201. With NORMAL a power
        // loss could forget a debit whose success the client already saw and stored, so a
        // confirmed transfer would be silently lost — the one thing this server must not do.
        // The bench endpoint shares this connection and so pays the same fsync, which keeps
        // the comparison honest.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // Statement and savepoint journals (group commit: one SAVEPOINT per job) in memory
        // instead of temp files: they only serve a rollback inside a live transaction, which
        // a crash discards anyway, so nothing durable depends on them.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // Checkpoint every ~10,000 WAL pages (~40 MB) instead of 1,000: a page rewritten by
        // many commits between two checkpoints is copied to the database once, and fewer
        // commits pay the checkpoint. Durability is unchanged (it is the WAL's fsync).
        conn.pragma_update(None, "wal_autocheckpoint", 10_000)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        keys::create(&conn)?;
        outbox::create(&conn)?;
        inbox::create(&conn)?;
        schema(&conn)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    /// Runs `f` with the writer connection on the blocking pool.
    pub async fn call<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        self.run(&self.conn, f).await
    }

    /// Runs `f` with the writer connection inside a group transaction (group commit).
    ///
    /// Every job queued while the writer is busy runs in the next transaction: an `Err` (or
    /// a panic) from `f` rolls back `f`'s writes only, and the other jobs still commit. The
    /// result is delivered only after the COMMIT, with the requested durability; if the
    /// COMMIT fails every job of the group gets the error. `f` must not BEGIN/COMMIT itself
    /// (nested SAVEPOINTs are fine), and it may run more than once (see the `group` module): only
    /// its last run's writes and result count, so it must act on the connection only.
    pub async fn write<R, F>(&self, durability: Durability, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnMut(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, DbError>>();
        let job: Box<dyn GroupJob> = Box::new(Write::new(f, tx));
        match &self.jobs {
            Some(jobs) => jobs.try_send((durability, job)).map_err(|e| match e {
                mpsc::TrySendError::Full(_) => DbError::Busy,
                mpsc::TrySendError::Disconnected(_) => {
                    DbError::Task("database writer stopped".into())
                }
            })?,
            None => group::run_group(&mut lock(&self.conn), durability, vec![job]),
        }
        rx.await
            .map_err(|_| DbError::Task("database writer dropped the job".into()))?
    }

    /// Runs read-only `f` on authentication's own reader connection.
    pub async fn read_auth<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        self.run(&self.auth, f).await
    }

    /// Runs read-only `f` with the reader connection (never waits for a writer's fsync).
    pub async fn read<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        self.run(&self.reader, f).await
    }

    async fn run<R, F>(&self, conn: &Arc<Mutex<Connection>>, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        if self.jobs.is_none() {
            let mut guard = lock(conn);
            return catch_unwind(AssertUnwindSafe(|| f(&mut guard)))
                .unwrap_or_else(|_| Err(DbError::Task("database call panicked".into())));
        }
        let conn = Arc::clone(conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = lock(&conn);
            f(&mut guard)
        })
        .await
        .map_err(|e| DbError::Task(e.to_string()))?
    }
}

/// Creates the database file readable by its owner only (0600) before SQLite opens it:
/// it holds every user's ledger and token hashes, and SQLite gives the `-wal` and `-shm`
/// files the main file's mode. An existing file keeps the mode its owner gave it.
fn create_private(path: &str) -> Result<(), DbError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(DbError::Task(format!("cannot create {path}: {e}"))),
    }
}

#[cfg(test)]
mod writer_tests;
