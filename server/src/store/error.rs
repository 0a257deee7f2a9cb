//! The one error type of every store: what went wrong talking to the database, in the
//! terms a caller decides on (retry with the same key, or fail).

use deadpool_postgres::PoolError;

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
    /// The SQLite file's disk is full: the transaction rolled back, and the same writes can
    /// succeed once space returns.
    #[error("the database's disk is full")]
    DiskFull,
}

impl DbError {
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
