//! The storage interface every phase calls, and its two backends: SQLite (the embedded
//! default, one process) and PostgreSQL (several server instances on one database).
//!
//! The pipeline (claim → gateway → fenced commit → reaper → relay → consumers) is written
//! once against [`Store`]; a backend is chosen once, by the `--db` value ([`open`]).
//! Each method is one visible unit of work: one transaction (or one read) on the backend.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use crate::auth::Caller;
use crate::authorization::Authorization;
use crate::ledger::decide::Rules;
use crate::ledger::TransferRecord;
use sendonce_server::store::DbError;
pub use sendonce_server::store::Stuck;
pub use sendonce_server::Instance;
use sendonce_server::{Answer, Claim, KeyRow};

pub mod contract;
mod fixtures;
pub mod postgres;
pub mod sqlite;

pub use fixtures::{Fixtures, NewUser, PlainRow, SharedFixtures, Sms, Stats, UserChange};
pub(crate) use fixtures::{FloorTransfer, PEER_EXPIRES_AFTER_MS, PEER_IN_PROGRESS_MS};

/// A store call in flight.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, DbError>> + Send + 'a>>;

pub use sendonce_server::store::{Publishing, RelayRound};

/// What a look-up by key found: the debit (money moved), else the key row if any.
pub type Lookup = Result<TransferRecord, Option<KeyRow>>;

/// A key claim as the transfer pipeline asks for it (the store adds the lease).
#[derive(Debug, Clone)]
pub struct NewClaim {
    /// Owner of the key.
    pub user_id: String,
    /// The normalised key.
    pub key: String,
    /// Fingerprint of the request.
    pub hash: Vec<u8>,
    /// Random id of this attempt.
    pub lock_id: String,
    /// The exact request body.
    pub body: Vec<u8>,
    /// Server time now.
    pub now_ms: i64,
    /// Expiry bucket width.
    pub bucket_width_ms: i64,
}

/// A beneficiary to add (unique per user and phone).
#[derive(Debug, Clone)]
pub struct NewBeneficiary {
    /// Id for a new record.
    pub beneficiary_id: String,
    /// Owner.
    pub user_id: String,
    /// Normalised phone.
    pub phone: String,
    /// Display name.
    pub name: String,
    /// Server time now.
    pub now_ms: i64,
    /// Most beneficiaries a user may keep.
    pub max_per_user: i64,
}

/// A beneficiary as answered.
#[derive(Debug, Clone, Serialize)]
pub struct Beneficiary {
    /// Id.
    pub beneficiary_id: String,
    /// Phone.
    pub phone: String,
    /// Name.
    pub name: String,
    /// RFC 3339 creation time.
    pub created_at: String,
}

/// What adding a beneficiary did: `None` when the user is at the limit.
pub type BeneficiaryOutcome = Option<(bool, Option<Beneficiary>)>;

/// Everything the contract needs of the database, behind one interface (one implementation
/// per database). The test API and the bench endpoints ask for more, through [`Fixtures`].
pub trait Store: Send + Sync {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// The user a token hash belongs to, if the token is still valid at `now_ms`.
    fn caller(&self, token_hash: String, now_ms: i64) -> Fut<'_, Option<Caller>>;
    /// A user's wallet currency (`None`: no such user).
    fn user_currency(&self, user_id: String) -> Fut<'_, Option<String>>;
    /// A user's balance: the sum of their ledger.
    fn balance(&self, user_id: String) -> Fut<'_, i64>;
    /// Sets a display name (a SET: repeating it changes nothing).
    fn set_display_name(&self, user_id: String, name: String) -> Fut<'_, ()>;
    /// Adds a beneficiary, or returns the one already stored for that phone.
    fn add_beneficiary(&self, b: NewBeneficiary) -> Fut<'_, BeneficiaryOutcome>;

    /// The key row for (user, key), if any.
    fn key_row(&self, user_id: String, key: String) -> Fut<'_, Option<KeyRow>>;
    /// Phase 0's read and validation's look-up in one visit: the key row for (user, key),
    /// and the wallet currency of `recipient` (`None`: no such user, or none asked for).
    /// By default two reads at once; a store that reads both in one visit says so.
    fn key_row_and_currency(
        &self,
        user_id: String,
        key: String,
        recipient: Option<String>,
    ) -> Fut<'_, (Option<KeyRow>, Option<String>)> {
        Box::pin(async move {
            let currency = async {
                match recipient {
                    Some(r) => self.user_currency(r).await,
                    None => Ok(None),
                }
            };
            tokio::try_join!(self.key_row(user_id, key), currency)
        })
    }
    /// Phase 1: inserts the key row `IN_PROGRESS` under this process's lease.
    fn claim(&self, claim: NewClaim) -> Fut<'_, Claim>;
    /// Phase 1 and the sender's balance for the advisory pre-check (0 when the key was
    /// taken). By default two reads at once; a store that reads both in one visit says so.
    fn claim_with_balance(&self, claim: NewClaim) -> Fut<'_, (Claim, i64)> {
        Box::pin(async move {
            let user_id = claim.user_id.clone();
            let (claimed, balance) = tokio::join!(self.claim(claim), self.balance(user_id));
            Ok(match claimed? {
                Claim::Acquired => (Claim::Acquired, balance?),
                taken => (taken, 0),
            })
        })
    }
    /// Phase 2's record: the gateway's authorisation for (user, key), idempotently.
    fn authorize(
        &self,
        user_id: String,
        key: String,
        fresh_id: String,
        now_ms: i64,
    ) -> Fut<'_, Authorization>;
    /// Phase 3: the fenced money transaction.
    fn commit(
        &self,
        record: TransferRecord,
        hash: Vec<u8>,
        lock_id: String,
        rules: Rules,
    ) -> Fut<'_, Answer>;
    /// Releases a key we hold (nothing committed), so a retry executes from scratch, and
    /// voids its authorisation in the same transaction (the retry gets a fresh one).
    fn release(&self, user_id: String, key: String, lock_id: String, now_ms: i64) -> Fut<'_, ()>;
    /// The reaper's [`Store::release`] of a stuck key: waiting only briefly for rows a
    /// stalled session holds (the key is tried again next pass, and the pass goes on).
    fn release_stuck(
        &self,
        user_id: String,
        key: String,
        lock_id: String,
        now_ms: i64,
    ) -> Fut<'_, ()> {
        self.release(user_id, key, lock_id, now_ms)
    }
    /// The ledger first (it outlives the key row), then the key row.
    fn lookup(&self, user_id: String, key: String) -> Fut<'_, Lookup>;
    /// Like [`Store::lookup`], but a key with neither a debit nor a row is closed as not
    /// executed (its 404 stored), in the same transaction that checks the ledger again.
    /// `Err(None)` means this call closed it.
    fn close_unexecuted(
        &self,
        user_id: String,
        key: String,
        now_ms: i64,
        bucket_width_ms: i64,
        body: Vec<u8>,
    ) -> Fut<'_, Lookup>;
    /// The sender's debit for a transfer id.
    fn debit_by_transfer(
        &self,
        user_id: String,
        transfer_id: String,
    ) -> Fut<'_, Option<TransferRecord>>;

    /// Keys `IN_PROGRESS` whose lease ran out, as this process judges it.
    fn stuck_keys(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>>;
    /// The reaper's question about a stuck key (a read): did its request leave a trace
    /// outside the key row — a debit under the key (money moved) or a live authorisation
    /// from the gateway? Only a key with neither may be released.
    fn traces(&self, user_id: String, key: String) -> Fut<'_, bool>;
    /// The reaper's fenced commit of a stuck key: [`Store::commit`], but waiting only
    /// briefly for rows a stalled session holds (the key is tried again next pass, and the
    /// pass goes on to the others meanwhile).
    fn finish(
        &self,
        record: TransferRecord,
        hash: Vec<u8>,
        lock_id: String,
        rules: Rules,
    ) -> Fut<'_, Answer> {
        self.commit(record, hash, lock_id, rules)
    }
    /// Removes whole expired key buckets and old gateway records; returns key rows removed.
    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize>;
    /// Removes one chunk of each kind of row past its retention (`crate::retention`): never
    /// an unpublished event, never an inbox row whose event is still in the outbox.
    fn trim(&self, cut: crate::retention::Cutoffs) -> Fut<'_, crate::retention::Trimmed>;

    /// Whether any outbox event waits to be published (a read).
    fn outbox_pending(&self) -> Fut<'_, bool>;
    /// Delivers one batch of unpublished events to the in-process consumers and marks it
    /// published; returns how many events it handled (0: nothing pending).
    fn publish_batch(&self, now_ms: i64) -> Fut<'_, usize>;
    /// Marks every event from `from_event` on unpublished again (a broker replay).
    fn replay_outbox(&self, from_event: i64) -> Fut<'_, usize>;
    /// One broker relay round: up to `limit` unpublished events, claimed so that no other
    /// relay publishes them meanwhile, handed to `publish`, and what it acknowledged marked
    /// published at `now_ms` (the library's round on each store: `store::*::relay::round`).
    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: Publishing<'a>,
    ) -> Fut<'a, RelayRound>;
}

/// Shared handle to the store.
pub type SharedStore = Arc<dyn Store>;

/// One opened backend, seen through both of its interfaces: the contract's ([`Store`]) and
/// server-mock's own test API and bench endpoints ([`Fixtures`]).
#[derive(Clone)]
pub struct Opened {
    /// What the pipeline, the reaper and the relays use.
    pub store: SharedStore,
    /// What only the test API and the bench endpoints use.
    pub fixtures: SharedFixtures,
}

impl Opened {
    fn of<S: Store + Fixtures + 'static>(backend: S) -> Self {
        let backend = Arc::new(backend);
        Self {
            store: backend.clone(),
            fixtures: backend,
        }
    }
}

/// Whether `db` names a PostgreSQL database (`postgres://`, `postgresql://`, or the
/// key-value form with `host=`); anything else is a SQLite path or `:memory:`.
pub fn is_postgres(db: &str) -> bool {
    let lower = db.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://")
        || lower.starts_with("postgresql://")
        || (lower.contains("host=") && lower.contains("dbname="))
}

/// Opens the backend `db` names, for the server process `instance` (`pool_size`: most
/// connections a PostgreSQL store opens, each under `timeouts`; `clock`: the instance's
/// wall clock, which a PostgreSQL store publishes for the agreed expiry time).
pub async fn open(
    db: &str,
    pool_size: usize,
    timeouts: crate::config::DbTimeouts,
    instance: Instance,
    clock: Arc<sendonce_server::clock::Clock>,
) -> Result<Opened, DbError> {
    if is_postgres(db) {
        Ok(Opened::of(
            postgres::PgStore::open(db, pool_size, timeouts, instance, clock).await?,
        ))
    } else {
        let db = db.to_string();
        let store = tokio::task::spawn_blocking(move || sqlite::SqliteStore::open(&db, instance))
            .await
            .map_err(|e| DbError::Task(e.to_string()))??;
        Ok(Opened::of(store))
    }
}

/// Opens the SQLite file `db` with every call inline on the caller's thread (deterministic rides:
/// see [`sendonce_server::store::sqlite::Db::open_inline`]). PostgreSQL is refused: its pool, network and leases run in
/// real time, so no simulation replays on it.
pub fn open_inline(db: &str, instance: Instance) -> Result<Opened, DbError> {
    if is_postgres(db) {
        return Err(DbError::Task(
            "a simulated clock needs a SQLite store; PostgreSQL runs in real time".into(),
        ));
    }
    Ok(Opened::of(sqlite::SqliteStore::open_inline(db, instance)?))
}

#[cfg(test)]
mod tests {
    use super::is_postgres;

    #[test]
    fn backend_is_chosen_by_the_db_value() {
        assert!(is_postgres("postgres://u@127.0.0.1:5432/db"));
        assert!(is_postgres("postgresql://u@%2Ftmp%2Fsock:5432/db"));
        assert!(is_postgres("host=/tmp/sock port=5432 dbname=db user=u"));
        assert!(!is_postgres("./mock.db"));
        assert!(!is_postgres(":memory:"));
        assert!(!is_postgres("postgres.db"));
    }
}
