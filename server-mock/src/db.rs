//! The SQLite database: pragmas, group commit and a panic-safe handle for async code (tables in [`crate::schema`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::schema;

/// Errors from the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The blocking task running the query failed (panicked or was cancelled).
    #[error("database task failed: {0}")]
    Task(String),
    /// The writer's queue is full (SQLite) or no pooled connection came free in time
    /// (PostgreSQL): the caller should answer 503 and let the client retry.
    #[error("the database writer is busy")]
    Busy,
    /// PostgreSQL reported an error.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A transaction kept failing on serialization conflicts or deadlocks.
    #[error("gave up after {0} conflicting attempts")]
    Conflict(u32),
}

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

/// How durable a write must be when its caller gets the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: on disk (WAL fsynced) before the job's result is delivered.
    Full,
    /// `synchronous=NORMAL`: committed and visible, survives a process crash, and becomes
    /// durable with the next FULL commit (in WAL mode an fsync covers every earlier frame),
    /// but a power loss before that may forget it. Only for writes whose loss moves no
    /// money and is repaired by a client retry (the key claim, see `transfer::run`).
    Normal,
}

/// Write jobs that may wait for the writer (a few seconds of peak load).
const WRITE_QUEUE: usize = 4_096;

/// Most jobs run in one group transaction.
const MAX_GROUP: usize = 128;

/// Result of a group job: delivers the job's result once the commit outcome is known.
type Deliver = Box<dyn FnOnce(Result<(), String>) + Send>;
/// A queued group job: runs inside the group transaction and returns its deliverer and
/// whether it succeeded (a failed job's SAVEPOINT is rolled back).
type Job = (
    Durability,
    Box<dyn FnOnce(&mut Connection) -> (bool, Deliver) + Send>,
);

impl Db {
    /// Opens (creating if needed) the database at `path` or in memory for `:memory:`.
    pub fn open(path: &str) -> Result<Self, DbError> {
        Self::open_with_queue(path, WRITE_QUEUE)
    }

    /// Like [`Db::open`], with at most `queue` write jobs waiting for the writer: beyond
    /// that, [`Db::write`] fails at once with [`DbError::Busy`] (back-pressure, not memory).
    pub fn open_with_queue(path: &str, queue: usize) -> Result<Self, DbError> {
        let mut db = Self::open_inline(path)?;
        let (jobs, queue) = mpsc::sync_channel(queue.max(1));
        let writer = Arc::clone(&db.conn);
        std::thread::Builder::new()
            .name("db-writer".into())
            .spawn(move || group_writer(&writer, &queue))
            .map_err(|e| DbError::Task(e.to_string()))?;
        db.jobs = Some(jobs);
        Ok(db)
    }

    /// Like [`Db::open`], but every call runs on the caller's thread (a group of one job per
    /// write): a deterministic ride has one thread, and a writer thread or the blocking pool
    /// would make the order of events depend on the OS.
    pub fn open_inline(path: &str) -> Result<Self, DbError> {
        let (conn, reader, auth) = if path == ":memory:" {
            let conn = Arc::new(Mutex::new(Self::configure(Connection::open_in_memory()?)?));
            (Arc::clone(&conn), Arc::clone(&conn), conn)
        } else {
            create_private(path)?;
            let conn = Self::configure(Connection::open(path)?)?;
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

    /// Pragmas and schema for the writer connection.
    fn configure(conn: Connection) -> Result<Connection, DbError> {
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
        schema::create(&conn)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    /// Locks the connection; a poisoned lock is recovered because every write runs in a
    /// transaction that rolled back when the panicking code dropped it.
    fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
        conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    /// Every job queued while the writer is busy runs in the next transaction, each in its
    /// own SAVEPOINT: an `Err` (or a panic) from `f` rolls back `f`'s writes only, and the
    /// other jobs still commit. The result is delivered only after the COMMIT, with the
    /// requested durability; if the COMMIT fails every job of the group gets the error.
    /// `f` must not BEGIN/COMMIT itself (nested SAVEPOINTs are fine).
    pub async fn write<R, F>(&self, durability: Durability, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, DbError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<R, DbError>>();
        let job = Box::new(move |c: &mut Connection| {
            let result = catch_unwind(AssertUnwindSafe(|| f(c)))
                .unwrap_or_else(|_| Err(DbError::Task("write job panicked".into())));
            let ok = result.is_ok();
            let deliver: Deliver = Box::new(move |committed: Result<(), String>| {
                let out = match (committed, result) {
                    (Ok(()), r) => r,
                    // The job's own error says more than the group's.
                    (Err(_), Err(e)) => Err(e),
                    (Err(e), Ok(_)) => Err(DbError::Task(format!("group commit failed: {e}"))),
                };
                let _ = tx.send(out);
            });
            (ok, deliver)
        });
        match &self.jobs {
            Some(jobs) => jobs.try_send((durability, job)).map_err(|e| match e {
                mpsc::TrySendError::Full(_) => DbError::Busy,
                mpsc::TrySendError::Disconnected(_) => {
                    DbError::Task("database writer stopped".into())
                }
            })?,
            None => run_group(&mut Self::lock(&self.conn), durability, vec![job]),
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
            let mut guard = Self::lock(conn);
            return catch_unwind(AssertUnwindSafe(|| f(&mut guard)))
                .unwrap_or_else(|_| Err(DbError::Task("database call panicked".into())));
        }
        let conn = Arc::clone(conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = Self::lock(&conn);
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

/// The writer thread: takes every queued job, runs them in group transactions and
/// delivers their results after the commit. Ends when every `Db` handle is dropped.
fn group_writer(conn: &Mutex<Connection>, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut normal = Vec::new();
        let mut full = Vec::new();
        let mut next = Some(first);
        while let Some((durability, job)) = next {
            match durability {
                Durability::Normal => normal.push(job),
                Durability::Full => full.push(job),
            }
            next = if normal.len() + full.len() < MAX_GROUP {
                queue.try_recv().ok()
            } else {
                None
            };
        }
        let mut c = Db::lock(conn);
        // NORMAL jobs first, in their own transaction: they are answered without waiting for
        // an fsync, and the FULL commit right after (if any) makes them durable too. Jobs in
        // one queue are concurrent requests, so any order between them is a valid one.
        // (Measured: putting them in the FULL transaction instead makes each claim wait for
        // an fsync and costs ~40 % of first-request throughput.)
        if !normal.is_empty() {
            run_group(&mut c, Durability::Normal, normal);
        }
        if !full.is_empty() {
            run_group(&mut c, Durability::Full, full);
        }
    }
}

type JobFn = Box<dyn FnOnce(&mut Connection) -> (bool, Deliver) + Send>;

/// One group transaction; every job's result is delivered before it returns.
fn run_group(c: &mut Connection, durability: Durability, jobs: Vec<JobFn>) {
    let mut pending: Vec<Deliver> = Vec::with_capacity(jobs.len());
    let mut jobs = jobs.into_iter();
    if durability == Durability::Normal {
        // Cached like BEGIN and COMMIT: NORMAL groups (claims, gateway records, relay
        // batches) are most groups, and parsing the pragma twice per group was ~2 % of a
        // first request's instructions (callgrind).
        if let Err(e) = exec(c, "PRAGMA synchronous = NORMAL") {
            tracing::warn!(%e, "cannot lower synchronous; committing with FULL");
        }
    }
    let outcome = (|| -> Result<(), rusqlite::Error> {
        exec(c, "BEGIN IMMEDIATE")?;
        for job in jobs.by_ref() {
            exec(c, "SAVEPOINT group_job")?;
            let (ok, deliver) = job(c);
            pending.push(deliver);
            if c.is_autocommit() {
                // SQLite rolled the whole transaction back (I/O error, disk full): the jobs
                // before this one are gone too, so the group fails as a whole.
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some("transaction rolled back by SQLite during a job".into()),
                ));
            }
            if !ok {
                exec(c, "ROLLBACK TO group_job")?;
            }
            exec(c, "RELEASE group_job")?;
        }
        exec(c, "COMMIT")
    })();
    let committed = match outcome {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(%e, "group transaction failed; rolling back");
            if !c.is_autocommit() {
                let _ = c.execute_batch("ROLLBACK");
            }
            Err(e.to_string())
        }
    };
    if durability == Durability::Normal {
        if let Err(e) = exec(c, "PRAGMA synchronous = FULL") {
            tracing::error!(%e, "cannot restore synchronous=FULL");
        }
    }
    for deliver in pending {
        deliver(committed.clone());
    }
    // Jobs never started (the group failed before them) are told so.
    for job in jobs {
        drop(job);
    }
}

fn exec(c: &Connection, sql: &str) -> Result<(), rusqlite::Error> {
    c.prepare_cached(sql)?.execute([])?;
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger;

    #[tokio::test]
    async fn a_failed_group_job_rolls_back_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("g.db").to_str().unwrap()).unwrap();
        let ins = |db: &Db, user: &'static str, fail: bool| {
            let db = db.clone();
            async move {
                db.write(Durability::Full, move |c| {
                    ledger::deposit(c, user, 5, "BDT", 0)?;
                    if fail {
                        return Err(DbError::Task("job failed".into()));
                    }
                    ledger::deposit(c, user, 7, "BDT", 0)?;
                    Ok(())
                })
                .await
            }
        };
        let (a, b, c, d) = tokio::join!(
            ins(&db, "a", false),
            ins(&db, "b", true),
            ins(&db, "c", false),
            db.write(Durability::Normal, |_| -> Result<(), DbError> {
                panic!("job panics")
            }),
        );
        assert!(a.is_ok() && c.is_ok());
        assert!(b.is_err() && d.is_err());
        let balances = db
            .read(|c| {
                Ok((
                    ledger::balance(c, "a")?,
                    ledger::balance(c, "b")?,
                    ledger::balance(c, "c")?,
                    ledger::balance_mismatches(c)?,
                ))
            })
            .await
            .unwrap();
        assert_eq!(balances, (12, 0, 12, vec![]));
        // The writer is still usable, and a bare-connection call still works.
        db.call(|c| {
            let tx = c.transaction()?;
            ledger::deposit(&tx, "b", 1, "BDT", 0)?;
            tx.commit()?;
            Ok(())
        })
        .await
        .unwrap();
        let sync: i64 = db
            .call(|c| Ok(c.query_row("PRAGMA synchronous", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(sync, 2, "FULL restored after a NORMAL group");
    }

    #[test]
    fn balances_equal_the_ledger_sum_and_are_backfilled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let c = Connection::open(&path).unwrap();
        let c = Db::configure(c).unwrap();
        ledger::deposit(&c, "u1", 100, "BDT", 0).unwrap();
        ledger::deposit(&c, "u2", 50, "BDT", 0).unwrap();
        let t = ledger::TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor: 30,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 1,
            idempotency_key: "k".into(),
        };
        ledger::insert_debit(&c, &t, b"h").unwrap();
        ledger::insert_credit(&c, &t, 2).unwrap();
        for u in ["u1", "u2", "nobody"] {
            assert_eq!(
                ledger::balance(&c, u).unwrap(),
                ledger::balance_from_ledger(&c, u).unwrap()
            );
        }
        assert_eq!(ledger::balance(&c, "u1").unwrap(), 70);
        c.execute(
            "UPDATE ledger SET amount_minor = 40 WHERE kind = 'credit'",
            [],
        )
        .unwrap();
        c.execute("DELETE FROM ledger WHERE kind = 'debit'", [])
            .unwrap();
        assert!(ledger::balance_mismatches(&c).unwrap().is_empty());
        assert_eq!(ledger::balance(&c, "u2").unwrap(), 90);
        // A database from before the cache: rebuilt from the ledger when opened.
        c.execute_batch("DELETE FROM balances; DELETE FROM balances_meta;")
            .unwrap();
        drop(c);
        let c = Db::configure(Connection::open(&path).unwrap()).unwrap();
        assert!(ledger::balance_mismatches(&c).unwrap().is_empty());
        assert_eq!(ledger::balance(&c, "u1").unwrap(), 100);
    }
}

#[cfg(test)]
mod writer_tests;
