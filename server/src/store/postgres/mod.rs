//! The PostgreSQL store's shared parts: leases judged across instances ([`lease`],
//! [`heartbeat`]), the key table partitioned by day and expired by dropping a partition
//! ([`partitions`]), what an error means for a retry ([`is_conflict`], [`is_transient`]),
//! the key table's shared statements ([`keys`]), and cached statements ([`rows`], [`opt`],
//! [`exec`]). The claim and the engine's transactions are still inside server-mock
//! (`store/postgres/`) and move next.

use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::DbError;

mod contract;
pub mod heartbeat;
pub mod inbox;
pub mod keys;
pub mod lease;
pub mod outbox;
pub mod partitions;
pub mod relay;
pub mod schema;
mod sql;

pub use contract::{work, PgKeys, Work, WorkFut};

/// Whether `e` is worth running the transaction again: 40001 or 40P01.
pub fn is_conflict(e: &DbError) -> bool {
    match e {
        DbError::Postgres(e) => matches!(
            e.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        ),
        _ => false,
    }
}

/// Whether `e` is PostgreSQL giving up on a wait (a lock or statement timeout, a session
/// ended by the server) rather than answering: the transaction rolled back (or, for a
/// session lost during its COMMIT, its outcome is for the retry to find through the key
/// row and the ledger), and the request may be retried as it is, with the same key.
pub fn is_transient(e: &tokio_postgres::Error) -> bool {
    super::error::postgres_gave_up(e)
}

/// The SQLSTATE of a PostgreSQL error, if `e` is one.
pub fn sqlstate(e: &DbError) -> Option<&SqlState> {
    match e {
        DbError::Postgres(e) => e.code(),
        _ => None,
    }
}

/// Runs a cached statement, returning its rows.
pub async fn rows<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, DbError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query(&st, params).await?)
}

/// Runs a cached statement, returning at most one row.
pub async fn opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, DbError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&st, params).await?)
}

/// Runs a cached statement, returning the rows it changed.
pub async fn exec<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, DbError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.execute(&st, params).await?)
}
