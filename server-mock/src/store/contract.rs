//! server-mock's store as the engine sees it ([`Claims`] for the request path, [`Reap`] for
//! the reaper, [`Relay`] for the broker relay): the key read, the claim, the fenced commit and the release are the
//! [`Store`](super::Store)'s own calls, so the money transaction stays one transaction (on
//! PostgreSQL, one statement on its fast path) and a release voids the key's authorisation
//! in the same transaction that frees it.

use std::sync::Arc;

use sendonce_server::clock::Clock;
use sendonce_server::store::{
    Claims, DbError, Fence, Fut, NewKey, Publishing, Reap, Relay, RelayRound, Stuck,
};
use sendonce_server::{Answer, Claim, Instance, KeyRow};

use super::{NewClaim, SharedStore};
use crate::ledger::decide::Rules;
use crate::ledger::TransferRecord;

/// The fenced unit of work of a transfer: the debit (or the stored refusal) that
/// [`Store::commit`](super::Store::commit) decides under the fence. `Err`: the commit failed
/// before its transaction ran (nothing committed; the engine releases the key).
pub type Work = Result<Debit, DbError>;

/// What the money transaction is asked to do.
#[derive(Debug, Clone)]
pub struct Debit {
    /// The transfer to record.
    pub record: TransferRecord,
    /// The request's fingerprint (kept with the debit: the ledger outlives the key row).
    pub hash: Vec<u8>,
    /// What the transaction enforces.
    pub rules: Rules,
}

/// The engine's store: server-mock's backend, this process's identity and its clock.
pub struct Backend {
    store: SharedStore,
    instance: Instance,
    clock: Arc<Clock>,
    /// The test-only fault that fails a request's commit before its transaction runs
    /// (`fail_commit_rate`); never the reaper's ([`Reap::commit_stuck`]).
    fail_commit: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Backend {
    /// The engine's view of `store`, opened for `instance`, on `clock`; `fail_commit` says
    /// when a request's commit fails before it runs (a test fault; `|| false` for none).
    pub fn new(
        store: SharedStore,
        instance: Instance,
        clock: Arc<Clock>,
        fail_commit: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            store,
            instance,
            clock,
            fail_commit: Box::new(fail_commit),
        }
    }

    /// The backend itself, for the calls only server-mock makes.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }
}

/// The claim as server-mock's store takes it (the store adds its own lease: this process's).
pub fn new_claim(new: &NewKey<'_>) -> NewClaim {
    NewClaim {
        user_id: new.user_id.to_string(),
        key: new.key.to_string(),
        hash: new.hash.to_vec(),
        lock_id: new.lock_id.to_string(),
        body: new.body.to_vec(),
        now_ms: new.now_ms,
        bucket_width_ms: new.bucket_width_ms,
    }
}

impl Claims for Backend {
    type Work = Work;

    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>> {
        self.store.key_row(scope.to_string(), key.to_string())
    }

    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim> {
        self.store.claim(new_claim(&new))
    }

    fn commit<'a>(&'a self, fence: &'a Fence, work: Work) -> Fut<'a, Answer> {
        match work {
            // A database error before the transaction ran: nothing committed.
            Ok(_) if (self.fail_commit)() => Box::pin(async {
                Err(DbError::Task(
                    "fault fail_commit_rate: the commit failed".into(),
                ))
            }),
            Ok(d) => self
                .store
                .commit(d.record, d.hash, fence.lock_id.clone(), d.rules),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        let (user, key, lock) = (
            fence.scope.clone(),
            fence.key.clone(),
            fence.lock_id.clone(),
        );
        self.store.release(user, key, lock, self.clock.now_ms())
    }
}

/// The reaper's view: server-mock's own stuck-key selection and expiry (which also removes
/// the gateway's old records), so [`sendonce_server::Engine::reap`] resolves its keys.
impl Reap for Backend {
    fn stuck(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        self.store.stuck_keys(lock_timeout_ms)
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        self.store.expire(now_ms, key_window_ms)
    }

    /// The reaper's commit: [`Store::finish`](super::Store::finish) (a brief wait for rows
    /// a stalled session holds), and never the request's `fail_commit` fault.
    fn commit_stuck<'a>(&'a self, fence: &'a Fence, work: Work) -> Fut<'a, Answer> {
        match work {
            Ok(d) => self
                .store
                .finish(d.record, d.hash, fence.lock_id.clone(), d.rules),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn release_stuck<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        let (user, key, lock) = (
            fence.scope.clone(),
            fence.key.clone(),
            fence.lock_id.clone(),
        );
        self.store
            .release_stuck(user, key, lock, self.clock.now_ms())
    }
}

/// The relay's view: server-mock's outbox (claimed per round on PostgreSQL, so the relays
/// of several instances take disjoint batches), so [`sendonce_server::Engine::relay`]
/// publishes its events to a broker.
impl Relay for Backend {
    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: Publishing<'a>,
    ) -> Fut<'a, RelayRound> {
        self.store.relay_round(limit, now_ms, publish)
    }
}
