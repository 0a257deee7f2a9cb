//! Group commit on the one writer connection: every queued write job in one transaction,
//! each answered only after the COMMIT.
//!
//! A group runs its jobs back to back, without a SAVEPOINT per job: a SAVEPOINT makes SQLite
//! copy every page a job touches into the sub-journal before changing it, which was ~15 % of
//! a first request's instructions (callgrind: `subjournalPageIfRequired`,
//! `sqlite3BtreeSavepoint` and the parsing of the nested SAVEPOINTs). Failures are rare (an
//! I/O error, a bug, a panic), so they pay instead: when a job fails, the group rolls back and
//! runs again with each job in its own SAVEPOINT, so a failed job still rolls back only
//! itself. A job may therefore run twice; only its last run's writes commit and only that
//! run's result is delivered, so a job acts on the connection and nowhere else.
//!
//! The hot inserts say `OR ROLLBACK` for the same reason: with the default `ABORT`, SQLite
//! keeps a statement journal for every statement that writes several b-trees (a copy of each
//! page before it changes) so that a failing statement can undo only itself. Here a failing
//! statement fails its job anyway, so the whole transaction may go: the group runs again
//! without that job.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::store::DbError;

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

/// Locks the connection; a poisoned lock is recovered because every write runs in a
/// transaction that rolled back when the panicking code dropped it.
pub(super) fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs one cached statement without parameters.
fn exec(c: &Connection, sql: &str) -> Result<(), rusqlite::Error> {
    c.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Most jobs run in one group transaction.
const MAX_GROUP: usize = 128;

/// A queued write: runs inside a group transaction, perhaps more than once.
pub(super) trait GroupJob: Send {
    /// Runs the job's writes and keeps its result; false if it failed (its writes must go).
    fn run(&mut self, c: &mut Connection) -> bool;
    /// Delivers the last run's result once the group's commit outcome is known.
    fn deliver(self: Box<Self>, committed: Result<(), Failure>);
}

/// Why a group's writes did not commit (every job of the group gets a copy).
#[derive(Debug, Clone)]
pub(super) struct Failure {
    message: String,
    /// SQLite found the disk full: nothing of the group is stored, and the same writes can
    /// succeed once space returns (the caller answers "busy", not "failed").
    disk_full: bool,
}

impl Failure {
    fn of(e: &rusqlite::Error) -> Self {
        Self {
            message: e.to_string(),
            disk_full: e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull),
        }
    }

    fn rolled_back() -> Self {
        Self {
            message: "SQLite rolled back the transaction during this job".into(),
            disk_full: false,
        }
    }

    fn into_error(self) -> DbError {
        match self.disk_full {
            true => DbError::DiskFull,
            false => DbError::Task(format!("group commit failed: {}", self.message)),
        }
    }
}

/// A job and the durability its caller asked for.
pub(super) type Job = (Durability, Box<dyn GroupJob>);

/// `Db::write`'s job: the closure, its last result and where that result goes.
pub(super) struct Write<R, F> {
    f: F,
    result: Option<Result<R, DbError>>,
    to: oneshot::Sender<Result<R, DbError>>,
}

impl<R, F> Write<R, F> {
    /// A job that will send its result to `to`.
    pub(super) fn new(f: F, to: oneshot::Sender<Result<R, DbError>>) -> Self {
        Self {
            f,
            result: None,
            to,
        }
    }
}

impl<R, F> GroupJob for Write<R, F>
where
    R: Send,
    F: FnMut(&mut Connection) -> Result<R, DbError> + Send,
{
    fn run(&mut self, c: &mut Connection) -> bool {
        let f = &mut self.f;
        let result = catch_unwind(AssertUnwindSafe(|| f(c)))
            .unwrap_or_else(|_| Err(DbError::Task("write job panicked".into())));
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn deliver(self: Box<Self>, committed: Result<(), Failure>) {
        let out = match (committed, self.result) {
            (Ok(()), Some(r)) => r,
            // The job's own error says more than the group's.
            (Err(_), Some(Err(e))) => Err(e),
            (Err(failure), _) => Err(failure.into_error()),
            (Ok(()), None) => Err(DbError::Task("write job never ran".into())),
        };
        let _ = self.to.send(out);
    }
}

/// The writer thread: takes every queued job, runs them in group transactions and
/// delivers their results after the commit. Ends when every `Db` handle is dropped.
pub(super) fn group_writer(conn: &Mutex<Connection>, queue: &mpsc::Receiver<Job>) {
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
        let mut c = lock(conn);
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

/// How a group transaction ended.
enum Outcome {
    /// Committed (a lone job that failed was rolled back: its own error is its answer).
    Committed,
    /// A job failed among others: rolled back, to run again job by job.
    JobFailed,
    /// SQLite rolled the whole transaction back during this job (an `OR ROLLBACK`
    /// constraint, an I/O error, a full disk): the group runs again without it.
    RolledBackBy(usize),
    /// The transaction itself failed: every job gets this error.
    Failed(Failure),
}

/// One group transaction; every job's result is delivered before it returns.
pub(super) fn run_group(
    c: &mut Connection,
    durability: Durability,
    mut jobs: Vec<Box<dyn GroupJob>>,
) {
    if durability == Durability::Normal {
        // Cached like BEGIN and COMMIT: NORMAL groups (claims, gateway records, relay
        // batches) are most groups, and parsing the pragma twice per group was ~2 % of a
        // first request's instructions (callgrind).
        if let Err(e) = exec(c, "PRAGMA synchronous = NORMAL") {
            tracing::warn!(%e, "cannot lower synchronous; committing with FULL");
        }
    }
    let mut dropped = vec![false; jobs.len()];
    let mut outcome = transaction(c, &mut jobs, &dropped, false);
    // Each pass after the first isolates the jobs; one that rolls the whole transaction
    // back is left out of the next, so this ends after at most one pass per job.
    let committed = loop {
        match outcome {
            Outcome::Committed => break Ok(()),
            Outcome::Failed(e) => break Err(e),
            Outcome::JobFailed => {}
            Outcome::RolledBackBy(i) => dropped[i] = true,
        }
        outcome = transaction(c, &mut jobs, &dropped, true);
    };
    if durability == Durability::Normal {
        if let Err(e) = exec(c, "PRAGMA synchronous = FULL") {
            tracing::error!(%e, "cannot restore synchronous=FULL");
        }
    }
    for (job, dropped) in jobs.into_iter().zip(dropped) {
        let committed = match dropped {
            true => Err(Failure::rolled_back()),
            false => committed.clone(),
        };
        job.deliver(committed);
    }
}

/// Runs every job not `dropped` in one transaction, each in its own SAVEPOINT if `isolated`.
fn transaction(
    c: &mut Connection,
    jobs: &mut [Box<dyn GroupJob>],
    dropped: &[bool],
    isolated: bool,
) -> Outcome {
    let lone = jobs.len() == 1;
    let ran = (|| -> Result<Outcome, rusqlite::Error> {
        exec(c, "BEGIN IMMEDIATE")?;
        for (i, job) in jobs.iter_mut().enumerate() {
            if dropped[i] {
                continue;
            }
            if isolated {
                exec(c, "SAVEPOINT group_job")?;
            }
            let ok = job.run(c);
            if c.is_autocommit() {
                // The jobs before this one are gone with it (nothing was delivered yet).
                return Ok(match isolated || lone {
                    true => Outcome::RolledBackBy(i),
                    false => Outcome::JobFailed,
                });
            }
            match (ok, isolated) {
                (true, true) => exec(c, "RELEASE group_job")?,
                (false, true) => {
                    exec(c, "ROLLBACK TO group_job")?;
                    exec(c, "RELEASE group_job")?;
                }
                (true, false) => {}
                (false, false) => {
                    exec(c, "ROLLBACK")?;
                    // Nothing else in the group: rolling it back rolled back the job.
                    return Ok(match lone {
                        true => Outcome::Committed,
                        false => Outcome::JobFailed,
                    });
                }
            }
        }
        exec(c, "COMMIT")?;
        Ok(Outcome::Committed)
    })();
    ran.unwrap_or_else(|e| {
        tracing::warn!(%e, "group transaction failed; rolling back");
        if !c.is_autocommit() {
            let _ = c.execute_batch("ROLLBACK");
        }
        Outcome::Failed(Failure::of(&e))
    })
}

#[cfg(test)]
mod tests;
