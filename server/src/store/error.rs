//! The one error type of every store: what went wrong talking to the database, in the
//! terms a caller decides on (retry with the same key, or fail).

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::problem::Problem;

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
    /// Application SQL through [`crate::store::sql`] was wrong for it: a parameter missing, a
    /// column of a type it does not read, a unit of work that awaited something else.
    #[error("sql: {0}")]
    Sql(String),
    /// The SQLite file's disk is full: the transaction rolled back, and the same writes can
    /// succeed once space returns.
    #[error("the database's disk is full")]
    DiskFull,
}

impl DbError {
    /// Whether the connection to the database was lost (closed, reset, or never made) rather
    /// than the database answering: the call's fate is unknown, and the same fenced call on
    /// another connection may well succeed at once.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            DbError::Postgres(e) => {
                e.is_closed()
                    || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
            }
            _ => false,
        }
    }

    /// Whether this is SQLite's disk running full, however it was reported.
    pub fn is_disk_full(&self) -> bool {
        match self {
            DbError::DiskFull => true,
            DbError::Sqlite(e) => e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull),
            _ => false,
        }
    }
}

/// A pool that gave no connection in time is busy (503, retry); one that could not open a
/// session reports PostgreSQL's own error.
impl From<PoolError> for DbError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Timeout(_) => DbError::Busy,
            PoolError::Backend(e) => DbError::Postgres(e),
            other => DbError::Task(format!("connection pool: {other}")),
        }
    }
}

impl DbError {
    /// How this error answers a client: 503 `busy` with `Retry-After` when retrying with
    /// the same key will do — the writer's queue is full, no pooled connection came free,
    /// SQLite's disk is full, PostgreSQL gave up waiting (a lock or statement timeout, a
    /// session it ended: the transaction rolled back, or — a session lost during its COMMIT
    /// — its outcome is for the retry with the same key to find), the connection lost
    /// ([`DbError::is_connection_lost`], the same); else 500
    /// ([`Problem::internal`], the cause logged, never sent).
    pub fn into_problem(self) -> Problem {
        match self {
            DbError::Postgres(ref pg) if postgres_gave_up(pg) => {
                tracing::warn!(%self, "PostgreSQL gave up waiting; answering 503");
                Problem::busy()
            }
            DbError::Busy | DbError::Conflict(_) => Problem::busy(),
            // A connection reset or refused (a network cut, a failover): the transaction
            // rolled back, or — lost during its COMMIT — its outcome is the key row's, for the
            // retry with the same key to find.
            ref lost if lost.is_connection_lost() => {
                tracing::warn!(%self, "the database connection was lost; answering 503");
                Problem::busy()
            }
            // The transaction rolled back, nothing of it is stored, and the same request
            // succeeds once space returns.
            ref full if full.is_disk_full() => {
                tracing::warn!(%self, "the database's disk is full; answering 503");
                Problem::busy()
            }
            other => Problem::internal(other),
        }
    }
}

/// So a handler or an operation can answer a database error with `?`
/// ([`DbError::into_problem`]).
impl From<DbError> for Problem {
    fn from(e: DbError) -> Self {
        e.into_problem()
    }
}

/// PostgreSQL giving up on a wait rather than answering (`store::postgres::is_transient`):
/// written here, beside the answer it decides, so the error type needs nothing of a store.
pub(crate) fn postgres_gave_up(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        // The session was ended (a frozen instance's, by `idle_in_transaction_session_timeout`).
        return true;
    }
    matches!(
        e.code(),
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE
            || *c == SqlState::QUERY_CANCELED
            || *c == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
            || *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::T_R_SERIALIZATION_FAILURE
            || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}
