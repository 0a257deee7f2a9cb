//! A transaction opened by hand on a pooled connection, for phase 3's pipelined round trips
//! (`commit::decided`), and why pipelining keeps it safe.

use sendonce_server::store::DbError;

// Pipelined statements: tokio-postgres sends a query when its future is first polled, and
// `try_join!` polls in order, so statements prepared beforehand (no round trip of their
// own) reach PostgreSQL in that order, in one flush, and run one after the other; an error
// in one fails those after it (the transaction is aborted), and that first error is
// returned. Every request of a `try_join!` is sent on its first poll, before any answer
// is awaited, so a caller dropped midway still leaves the whole batch queued: a batch
// ending in COMMIT never leaves its connection inside a transaction.

/// The hot path's BEGIN (the isolation level of `in_transaction!`).
pub(super) const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// A pooled connection inside a transaction this code opened by hand: dropped before
/// [`Open::close`] (a cancelled request), it leaves the pool and its connection closes,
/// so PostgreSQL rolls back — a later request never finds itself inside our transaction.
pub(super) struct Open {
    client: Option<deadpool_postgres::Client>,
    done: std::cell::Cell<bool>,
}

impl Open {
    pub(super) fn new(client: deadpool_postgres::Client) -> Self {
        Self {
            client: Some(client),
            done: std::cell::Cell::new(false),
        }
    }

    pub(super) fn client(&self) -> &deadpool_postgres::Client {
        self.client.as_ref().expect("open until dropped")
    }

    /// The transaction's end was sent (the connection is idle once it has run).
    pub(super) fn closed(&self) {
        self.done.set(true);
    }

    pub(super) async fn close(self, end: &str) -> Result<(), DbError> {
        self.closed();
        Ok(self.client().batch_execute(end).await?)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.done.get() {
            if let Some(client) = self.client.take() {
                drop(deadpool_postgres::Client::take(client));
            }
        }
    }
}
