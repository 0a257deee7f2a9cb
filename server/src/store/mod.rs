//! Where the contract's tables live: one folder per database, the same jobs under the same
//! file names, all the SQL of the engine's tables inside it (`keys.rs`: the key table;
//! `outbox.rs`: the events; `contract.rs`: [`Claims`] and [`Keys`] for the engine). The engine
//! ([`crate::engine`]) talks to a store only through those two traits.

mod error;
pub mod postgres;
pub mod sql;
pub mod sqlite;

pub use error::DbError;

use std::future::Future;
use std::pin::Pin;

use crate::answer::Answer;
use crate::decision::{Claim, KeyRow};
use crate::lease::{Instance, Lease};
use crate::outcome::Event;

/// A store call in flight.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, DbError>> + Send + 'a>>;

/// Everything needed to insert a key row.
pub struct NewKey<'a> {
    /// Owner of the key (keys are scoped per user).
    pub user_id: &'a str,
    /// The normalised key.
    pub key: &'a str,
    /// Fingerprint of the request.
    pub hash: &'a [u8],
    /// Random id of this attempt, so only the owner can complete the row.
    pub lock_id: &'a str,
    /// The lease: which server process holds the lock, and when it took it.
    pub lease: Lease<'a>,
    /// The exact request body (the reaper finishes an authorised transfer from it).
    pub body: &'a [u8],
    /// Server time now.
    pub now_ms: i64,
    /// Expiry bucket width.
    pub bucket_width_ms: i64,
}

/// A key this request holds: what the fence checks before the unit of work runs.
#[derive(Debug, Clone)]
pub struct Fence {
    /// Owner of the key (the principal).
    pub scope: String,
    /// The normalised key.
    pub key: String,
    /// This attempt's lock id: only its holder may complete or release the row.
    pub lock_id: String,
    /// The request's fingerprint (a unit of work that keeps it — a ledger that outlives the
    /// key row — reads it here, on the request path and the reaper's alike).
    pub hash: Vec<u8>,
    /// Server time when the key was claimed.
    pub claimed_at_ms: i64,
}

/// A key `IN_PROGRESS` whose lease ran out, as the reaper finds it.
#[derive(Debug, Clone)]
pub struct Stuck {
    /// The key, the lock it is held under and the stored fingerprint (the reaper acts as
    /// its holder, fenced).
    pub fence: Fence,
    /// The stored request body (so the reaper can finish what the external step began).
    pub body: Vec<u8>,
}

/// What a request asks of a store: one call per phase of [`crate::Engine::run`], each one
/// transaction (or one read). Implemented by [`sqlite::SqliteKeys`] and
/// [`postgres::PgKeys`]; an application whose own tables ride in the same transactions
/// (server-mock's ledger) may implement it over its store and keep its own unit of work.
pub trait Claims: Send + Sync + 'static {
    /// The application's fenced unit of work on this store: it runs inside the transaction
    /// that checked the fence and that stores its [`crate::Outcome`] under the key.
    type Work: Send + 'static;

    /// This server process, as its locks name it (and, on PostgreSQL, its heartbeat).
    fn instance(&self) -> &Instance;

    /// The key row for (scope, key), if any (a read; never waits for a writer).
    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>>;
    /// Inserts the key row `IN_PROGRESS`, or finds the row already there (the primary key
    /// decides a race, never a read-then-write).
    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim>;
    /// One transaction: the fence (the row is still ours), then `work`, its events into
    /// the outbox and its outcome stored under the key. A lost fence runs nothing and
    /// answers 409 `idempotency_key_in_use` (whoever holds the key now decides).
    fn commit<'a>(&'a self, fence: &'a Fence, work: Self::Work) -> Fut<'a, Answer>;
    /// Deletes the row we hold (nothing committed), so a retry runs from scratch.
    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()>;
}

/// What the reaper asks of a store: the keys whose holder died or stalled, and expiry.
/// Implemented by [`sqlite::SqliteKeys`] and [`postgres::PgKeys`]; an application that
/// implements [`Claims`] over its own store (server-mock) implements this too, and its
/// stuck keys are resolved by [`crate::Engine::reap`] like any other.
pub trait Reap: Claims {
    /// Keys `IN_PROGRESS` whose lease ran out (`lock_timeout_ms` of their holder's
    /// monotonic time, or a holder that stopped beating), as this process judges it.
    fn stuck(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>>;
    /// Removes whole expired key buckets (SQLite: a chunk per transaction; PostgreSQL:
    /// drops day partitions, by a time no single instance's clock step can move forward);
    /// returns the key rows removed.
    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize>;
    /// The reaper's release of a stuck key ([`crate::engine::Recovery::Release`]): by
    /// default [`Claims::release`]. A store whose request-path release may wait long for
    /// the locks of a stalled session (a connection cut mid-transaction that the database
    /// has not noticed yet) answers sooner here: the reaper goes on to the other keys and
    /// tries this one again next pass, instead of holding the whole pass up.
    fn release_stuck<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        self.release(fence)
    }
    /// The reaper's fenced commit of a stuck key ([`crate::engine::Recovery::Finish`]): by
    /// default [`Claims::commit`]. A store may bound it as [`Reap::release_stuck`] (a brief
    /// wait for the locks of a stalled session), and an application may tell the reaper's
    /// commit from a request's here — the store chooses, not the unit of work.
    fn commit_stuck<'a>(&'a self, fence: &'a Fence, work: Self::Work) -> Fut<'a, Answer> {
        self.commit(fence, work)
    }
}

/// What the relay asks of a store: one claimed round. Implemented by
/// [`sqlite::SqliteKeys`] and [`postgres::PgKeys`] (each with its store's `relay::round`); an
/// application with a store of its own (server-mock) implements it with the same round on its
/// connections, and [`crate::Engine::relay`] publishes the events.
pub trait Relay: Send + Sync + 'static {
    /// One relay round: claims up to `limit` unpublished events, oldest first, hands them
    /// to `publish` and marks the ids it acknowledges published (at `now_ms`). A claimed
    /// batch is no other relay's while it is published (PostgreSQL: the rows locked `FOR
    /// UPDATE SKIP LOCKED` until the mark commits, so the relays of several instances take
    /// disjoint batches; SQLite, one process per file: one round at a time per store).
    /// A failed publish marks nothing: the batch is free again for the next round.
    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: Publishing<'a>,
    ) -> Fut<'a, RelayRound>;
}

/// What the rest of the engine asks of a store: the by-key look-up's closing (besides the
/// reaper's and the relay's calls). Implemented by [`sqlite::SqliteKeys`] and
/// [`postgres::PgKeys`].
pub trait Keys: Reap + Relay {
    /// Closes a key never seen as not executed: stores `not_found` under it (404) in the
    /// transaction that checks no row exists, so no late first request can run after the
    /// look-up said it did not. Returns the row found instead, if there was one.
    fn close_unexecuted<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        now_ms: i64,
        bucket_width_ms: i64,
        not_found: Vec<u8>,
    ) -> Fut<'a, Option<KeyRow>>;
}

/// A relay round's hand-off: the claimed `(event_id, event)`s in, the acknowledged ids out
/// (or why none).
pub type Publishing<'a> = Box<
    dyn FnOnce(
            Vec<(i64, Event)>,
        ) -> Pin<Box<dyn Future<Output = Result<Vec<i64>, String>> + Send + 'a>>
        + Send
        + 'a,
>;

/// What one relay round did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RelayRound {
    /// Events claimed and handed to the publisher.
    pub claimed: usize,
    /// Events marked published (the acknowledged ones).
    pub marked: usize,
    /// Why the publish failed, if it did (nothing was marked).
    pub failed: Option<String>,
}

impl RelayRound {
    /// `claimed` events published, `marked` of them acknowledged and marked.
    pub fn marked(claimed: usize, marked: usize) -> Self {
        Self {
            claimed,
            marked,
            failed: None,
        }
    }

    /// `claimed` events handed to a publish that failed: nothing marked.
    pub fn failed(claimed: usize, why: String) -> Self {
        Self {
            claimed,
            marked: 0,
            failed: Some(why),
        }
    }

    /// The middle of every store's round: the claimed `events` handed to `publish`. `Ok` is
    /// the acknowledged ids, for the store to mark; `Err` is the round's whole answer when
    /// there is nothing to mark (nothing claimed, or the publish failed).
    pub async fn hand_over(
        events: Vec<(i64, Event)>,
        publish: Publishing<'_>,
    ) -> Result<Vec<i64>, RelayRound> {
        let claimed = events.len();
        if claimed == 0 {
            return Err(RelayRound::default());
        }
        publish(events)
            .await
            .map_err(|why| RelayRound::failed(claimed, why))
    }
}

/// An event moved in from an older outbox table by an application's one-time migration
/// (`sqlite::outbox::import`, `postgres::outbox::import`): it keeps its id, since the inboxes
/// know it by it, and whether it was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedEvent {
    /// Its id in the old table, kept.
    pub event_id: i64,
    /// The principal whose key wrote it.
    pub scope: String,
    /// The idempotency key that wrote it.
    pub key: String,
    /// Its topic and payload.
    pub event: Event,
    /// When it was written.
    pub created_at_ms: i64,
    /// When it was published, if it was.
    pub published_at_ms: Option<i64>,
}
