//! How a database error answers: 503 `busy` when retrying with the same key will do,
//! else 500. The contract's problem answers themselves are the library's ([`Problem`]).

use sendonce_server::Problem;

/// 503 `busy` with `Retry-After` when the writer's queue is full, no pooled connection
/// came free, SQLite's disk is full, or PostgreSQL gave up waiting (a lock or statement timeout, a session it
/// ended: the transaction rolled back, or — a session lost during its COMMIT — its
/// outcome is for the retry with the same key to find); else [`Problem::internal`].
pub fn from_db(e: sendonce_server::store::DbError) -> Problem {
    match e {
        sendonce_server::store::DbError::Postgres(ref pg)
            if sendonce_server::store::postgres::is_transient(pg) =>
        {
            tracing::warn!(%e, "PostgreSQL gave up waiting; answering 503");
            Problem::busy()
        }
        sendonce_server::store::DbError::Busy | sendonce_server::store::DbError::Conflict(_) => {
            Problem::busy()
        }
        // The SQLite file's disk is full (reported by the group's commit, or by a statement):
        // the transaction rolled back, nothing of it is stored, and the same request succeeds
        // once space returns.
        ref full if full.is_disk_full() => {
            tracing::warn!(%e, "the database's disk is full; answering 503");
            Problem::busy()
        }
        other => Problem::internal(other),
    }
}
