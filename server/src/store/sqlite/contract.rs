//! [`Claims`] and [`Keys`] on SQLite: each phase of the engine as one call on the database handle — reads
//! on the reader connection, writes through the group-commit writer.

use std::sync::Arc;

use rusqlite::Connection;

use super::{atomically, keys, outbox, relay, Db, Durability, Schema};
use crate::answer::Answer;
use crate::decision::{Claim, KeyRow};
use crate::lease::{Instance, Lease};
use crate::outcome::Outcome;
use crate::problem::Problem;
use crate::store::{
    Claims, DbError, Fence, Fut, Keys, NewKey, Publishing, Reap, Relay, RelayRound, Stuck,
};

/// Key rows removed per expiry transaction: between chunks the requests' commits go
/// through, so a big bucket never stalls them.
const EXPIRE_CHUNK: usize = 1_000;

/// The application's fenced unit of work on SQLite: runs on the writer connection inside
/// the transaction that checked the fence. It may run more than once (a group commit that
/// is retried runs its jobs again), so it must act on the connection only.
pub type Work = Box<dyn FnMut(&Connection) -> Result<Outcome, DbError> + Send>;

/// The engine's store on one SQLite file (or `:memory:`).
#[derive(Clone)]
pub struct SqliteKeys {
    db: Db,
    instance: Instance,
    /// Held through a relay round (claim, publish, mark), so two relays of this store never
    /// publish the same batch.
    relaying: Arc<tokio::sync::Mutex<()>>,
}

impl SqliteKeys {
    /// Opens `path` with the key table, the outbox and the application's `schema`.
    pub fn open(path: &str, schema: Schema) -> Result<Self, DbError> {
        Ok(Self::on(Db::open(path, schema)?))
    }

    /// The engine's store on a database the application already opened.
    pub fn on(db: Db) -> Self {
        Self {
            db,
            instance: Instance::new(),
            relaying: Arc::default(),
        }
    }

    /// The database handle, for the application's own reads and writes.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Claims for SqliteKeys {
    type Work = Work;

    fn instance(&self) -> &Instance {
        &self.instance
    }

    fn read<'a>(&'a self, scope: &'a str, key: &'a str) -> Fut<'a, Option<KeyRow>> {
        let (scope, key) = (scope.to_string(), key.to_string());
        Box::pin(self.db.read(move |c| keys::read(c, &scope, &key)))
    }

    fn claim<'a>(&'a self, new: NewKey<'a>) -> Fut<'a, Claim> {
        let (user, key, hash, lock) = (
            new.user_id.to_string(),
            new.key.to_string(),
            new.hash.to_vec(),
            new.lock_id.to_string(),
        );
        let (instance, mono_ms) = (new.lease.instance.to_string(), new.lease.mono_ms);
        let (body, now_ms, width) = (new.body.to_vec(), new.now_ms, new.bucket_width_ms);
        // A claim moves nothing: a power loss that forgets it is repaired by the retry.
        Box::pin(self.db.write(Durability::Normal, move |c| {
            let k = NewKey {
                user_id: &user,
                key: &key,
                hash: &hash,
                lock_id: &lock,
                lease: Lease {
                    instance: &instance,
                    mono_ms,
                },
                body: &body,
                now_ms,
                bucket_width_ms: width,
            };
            keys::claim(c, &k)
        }))
    }

    fn commit<'a>(&'a self, fence: &'a Fence, mut work: Work) -> Fut<'a, Answer> {
        let f = fence.clone();
        Box::pin(self.db.write(Durability::Full, move |c| {
            atomically(c, |tx| commit_in(tx, &f, &mut work))
        }))
    }

    fn release<'a>(&'a self, fence: &'a Fence) -> Fut<'a, ()> {
        let f = fence.clone();
        Box::pin(self.db.write(Durability::Normal, move |c| {
            keys::release(c, &f.scope, &f.key, &f.lock_id).map(drop)
        }))
    }
}

impl Reap for SqliteKeys {
    fn stuck(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        // One process per file: a lock held by another instance id is a dead process's,
        // out at once; one of ours after lock_timeout of our own monotonic time.
        let me = self.instance.id.to_string();
        let cutoff = self.instance.mono_ms().saturating_sub(lock_timeout_ms);
        Box::pin(self.db.read(move |c| keys::stuck(c, &me, cutoff)))
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        Box::pin(expire_buckets(&self.db, now_ms, key_window_ms))
    }
}

impl Relay for SqliteKeys {
    fn relay_round<'a>(
        &'a self,
        limit: usize,
        now_ms: i64,
        publish: Publishing<'a>,
    ) -> Fut<'a, RelayRound> {
        Box::pin(relay::round(
            &self.db,
            &self.relaying,
            limit,
            now_ms,
            publish,
        ))
    }
}

impl Keys for SqliteKeys {
    fn close_unexecuted<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        now_ms: i64,
        bucket_width_ms: i64,
        not_found: Vec<u8>,
    ) -> Fut<'a, Option<KeyRow>> {
        let (scope, key) = (scope.to_string(), key.to_string());
        Box::pin(self.db.write(Durability::Full, move |c| {
            keys::close_unexecuted(c, &scope, &key, now_ms, bucket_width_ms, &not_found)
        }))
    }
}

/// Removes whole expired key buckets, a chunk per group-commit job: between chunks the
/// requests' commits go through, so a 100k-row bucket never stalls them. Returns the rows
/// removed.
pub async fn expire_buckets(db: &Db, now_ms: i64, key_window_ms: i64) -> Result<usize, DbError> {
    let mut expired = 0;
    loop {
        let n = db
            .write(Durability::Full, move |c| {
                keys::expire_chunk(c, now_ms, key_window_ms, EXPIRE_CHUNK)
            })
            .await?;
        expired += n;
        if n < EXPIRE_CHUNK {
            return Ok(expired);
        }
    }
}

/// The fence, the application's work, its events and its stored answer: one transaction.
fn commit_in(tx: &Connection, f: &Fence, work: &mut Work) -> Result<Answer, DbError> {
    if !keys::holds(tx, &f.scope, &f.key, &f.lock_id)? {
        tracing::warn!(key = %f.key, "lock lost before the unit of work: nothing ran");
        return Ok(Problem::key_in_use().into());
    }
    let outcome = work(tx)?;
    outbox::insert(tx, &f.scope, &f.key, f.claimed_at_ms, &outcome.events)?;
    keys::complete(
        tx,
        &f.scope,
        &f.key,
        &f.lock_id,
        outcome.status,
        &outcome.body,
    )?;
    Ok(outcome.answer())
}
