//! The SQLite backend: one process, one file (or `:memory:`), group commit through
//! [`Db`]. The same files as the PostgreSQL backend's folder for the same jobs: this one
//! runs each unit of work on the right connection with the right durability, `commit.rs`
//! is phase 3 (the fenced money transaction), `fixtures.rs` the test API's and the bench's
//! needs, `floor.rs` and `peer.rs` the bench's baselines. The key table's SQL is
//! sendonce-server's; the application tables' SQL stays with the modules that own those
//! tables (`ledger`, `gateway`, `outbox`, `consumers`, `reaper`).

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use crate::auth::Caller;
use crate::authorization::{Authorization, Settle};
use crate::ledger::decide::Rules;
use crate::ledger::{self, TransferRecord};
use crate::outbox;
use crate::store::{
    Beneficiary, BeneficiaryOutcome, Fut, Instance, Lookup, NewBeneficiary, NewClaim, Publishing,
    RelayRound, Store, Stuck,
};
use sendonce_server::store::sqlite::keys as lib_keys;
use sendonce_server::store::sqlite::{outbox as lib_outbox, relay, Db, Durability};
use sendonce_server::store::DbError;
use sendonce_server::store::NewKey;
use sendonce_server::Answer;
use sendonce_server::{Claim, KeyRow, Lease};

pub(crate) mod commit;
mod fixtures;
mod floor;
pub(crate) mod gateway;
mod peer;

/// Key rows removed per expiry transaction (between chunks other writes go through).
const EXPIRE_CHUNK: usize = 1_000;

/// The SQLite store.
pub struct SqliteStore {
    /// The database handle (also used directly by in-crate tests).
    pub db: Db,
    pub(super) instance: Instance,
    /// Held through a broker relay round, so two relays of this process never publish the
    /// same batch (see `sendonce_server::store::sqlite::relay`).
    relaying: tokio::sync::Mutex<()>,
}

impl SqliteStore {
    /// Opens (creating if needed) the file at `path`, or memory for `:memory:`.
    pub fn open(path: &str, instance: Instance) -> Result<Self, DbError> {
        Ok(Self {
            db: Db::open(path, crate::schema::create)?,
            instance,
            relaying: tokio::sync::Mutex::default(),
        })
    }

    /// Like [`SqliteStore::open`], every call inline on the caller's thread (deterministic rides).
    pub fn open_inline(path: &str, instance: Instance) -> Result<Self, DbError> {
        Ok(Self {
            db: Db::open_inline(path, crate::schema::create)?,
            instance,
            relaying: tokio::sync::Mutex::default(),
        })
    }
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn caller(&self, token_hash: String, now_ms: i64) -> Fut<'_, Option<Caller>> {
        Box::pin(self.db.read_auth(move |c| {
            Ok(c.prepare_cached(
                "SELECT user_id, currency FROM users WHERE token = ?1
                     AND (token_expires_at_ms IS NULL OR token_expires_at_ms > ?2)",
            )?
            .query_row(params![token_hash, now_ms], |r| {
                Ok(Caller {
                    user_id: r.get(0)?,
                    currency: r.get(1)?,
                })
            })
            .optional()?)
        }))
    }

    fn user_currency(&self, user_id: String) -> Fut<'_, Option<String>> {
        Box::pin(self.db.read(move |c| currency_of(c, &user_id)))
    }

    fn balance(&self, user_id: String) -> Fut<'_, i64> {
        Box::pin(self.db.read(move |c| ledger::balance(c, &user_id)))
    }

    fn set_display_name(&self, user_id: String, name: String) -> Fut<'_, ()> {
        Box::pin(self.db.call(move |c| {
            c.execute(
                "UPDATE users SET display_name = ?2 WHERE user_id = ?1",
                params![user_id, name],
            )?;
            Ok(())
        }))
    }

    fn add_beneficiary(&self, b: NewBeneficiary) -> Fut<'_, BeneficiaryOutcome> {
        Box::pin(self.db.call(move |c| {
            // A cap per user, so beneficiaries cannot grow without bound; a repeat of an
            // existing phone is still answered with its record.
            let (count, exists): (i64, bool) = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(phone = ?2), 0) > 0 FROM beneficiaries WHERE user_id = ?1",
                params![b.user_id, b.phone],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            if count >= b.max_per_user && !exists {
                return Ok(None);
            }
            // The unique constraint decides; the select only reads the winner.
            let inserted = c.execute(
                "INSERT INTO beneficiaries (beneficiary_id, user_id, phone, name, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (user_id, phone) DO NOTHING",
                params![b.beneficiary_id, b.user_id, b.phone, b.name, b.now_ms],
            )?;
            let row = c
                .query_row(
                    "SELECT beneficiary_id, phone, name, created_at_ms FROM beneficiaries
                     WHERE user_id = ?1 AND phone = ?2",
                    params![b.user_id, b.phone],
                    |r| {
                        Ok(Beneficiary {
                            beneficiary_id: r.get(0)?,
                            phone: r.get(1)?,
                            name: r.get(2)?,
                            created_at: sendonce_server::clock::rfc3339(r.get(3)?),
                        })
                    },
                )
                .optional()?;
            Ok(Some((inserted == 1, row)))
        }))
    }

    fn key_row(&self, user_id: String, key: String) -> Fut<'_, Option<KeyRow>> {
        Box::pin(self.db.read(move |c| lib_keys::read(c, &user_id, &key)))
    }

    fn key_row_and_currency(
        &self,
        user_id: String,
        key: String,
        recipient: Option<String>,
    ) -> Fut<'_, (Option<KeyRow>, Option<String>)> {
        // One visit to the one reader connection (two would only queue on its lock, each
        // paying a blocking task's hand-off), and one statement.
        Box::pin(self.db.read(move |c| match recipient {
            Some(r) => lib_keys::read_beside(c, &user_id, &key, &CURRENCY_BESIDE, &r),
            None => Ok((lib_keys::read(c, &user_id, &key)?, None)),
        }))
    }

    fn claim(&self, k: NewClaim) -> Fut<'_, Claim> {
        Box::pin(async move { Ok(self.claim_with_balance(k).await?.0) })
    }

    fn claim_with_balance(&self, k: NewClaim) -> Fut<'_, (Claim, i64)> {
        let instance = self.instance.clone();
        // The claim commits with synchronous=NORMAL (group commit, no fsync of its own).
        // Safe because a claim moves no money: it only has to be durable before money
        // moves, and the debit transaction is FULL — in WAL mode its fsync also makes this
        // earlier commit durable. A process crash (abort, SIGKILL) keeps a NORMAL commit; a
        // power loss before the debit commit may forget the IN_PROGRESS row, and then the
        // client's retry claims again and repeats the gateway step, which is idempotent on
        // the key (same authorisation, no second charge). Any answer given meanwhile from
        // this row is 409 / 422, never a 201: completed rows are only written by FULL commits.
        // The pre-check's balance is read in the same job (one point read on the writer
        // costs less than a visit to the reader connection beside it).
        Box::pin(self.db.write(Durability::Normal, move |c| {
            let claimed = lib_keys::claim(
                c,
                &NewKey {
                    user_id: &k.user_id,
                    key: &k.key,
                    hash: &k.hash,
                    lock_id: &k.lock_id,
                    // Taken inside the job: the lease starts when the row is written.
                    lease: Lease {
                        instance: &instance.id,
                        mono_ms: instance.mono_ms(),
                    },
                    body: &k.body,
                    now_ms: k.now_ms,
                    bucket_width_ms: k.bucket_width_ms,
                },
            )?;
            Ok(match claimed {
                Claim::Acquired => (Claim::Acquired, ledger::balance(c, &k.user_id)?),
                taken => (taken, 0),
            })
        }))
    }

    fn authorize(
        &self,
        user_id: String,
        key: String,
        fresh_id: String,
        now_ms: i64,
    ) -> Fut<'_, Authorization> {
        // NORMAL: it survives a process crash (the case the reaper handles), and the FULL
        // debit commit that follows makes it durable too.
        Box::pin(self.db.write(Durability::Normal, move |c| {
            gateway::record(c, &user_id, &key, &fresh_id, now_ms)
        }))
    }

    fn commit(
        &self,
        record: TransferRecord,
        hash: Vec<u8>,
        lock_id: String,
        rules: Rules,
    ) -> Fut<'_, Answer> {
        Box::pin(self.db.write(Durability::Full, move |c| {
            commit::commit_transfer(c, &record, &hash, &lock_id, rules)
        }))
    }

    fn release(&self, user_id: String, key: String, lock_id: String, now_ms: i64) -> Fut<'_, ()> {
        Box::pin(self.db.write(Durability::Full, move |c| {
            lib_keys::release(c, &user_id, &key, &lock_id)?;
            gateway::settle(c, &user_id, &key, now_ms, Settle::UnlessHeld)?;
            Ok(())
        }))
    }

    fn lookup(&self, user_id: String, key: String) -> Fut<'_, Lookup> {
        Box::pin(self.db.read(move |c| lookup(c, &user_id, &key)))
    }

    fn close_unexecuted(
        &self,
        user_id: String,
        key: String,
        now_ms: i64,
        bucket_width_ms: i64,
        body: Vec<u8>,
    ) -> Fut<'_, Lookup> {
        Box::pin(self.db.write(Durability::Full, move |c| {
            if let Some((record, _)) = ledger::debit_by_key(c, &user_id, &key)? {
                return Ok(Ok(record));
            }
            let closed =
                lib_keys::close_unexecuted(c, &user_id, &key, now_ms, bucket_width_ms, &body)?;
            // "Not executed" is final: an authorisation a lost request left is voided.
            gateway::settle(c, &user_id, &key, now_ms, Settle::UnlessHeld)?;
            Ok(Err(closed))
        }))
    }

    fn debit_by_transfer(
        &self,
        user_id: String,
        transfer_id: String,
    ) -> Fut<'_, Option<TransferRecord>> {
        Box::pin(
            self.db
                .read(move |c| ledger::debit_by_transfer(c, &user_id, &transfer_id)),
        )
    }

    fn stuck_keys(&self, lock_timeout_ms: i64) -> Fut<'_, Vec<Stuck>> {
        // One process per file: a lock held by another instance id is a dead process's,
        // out at once; one of ours after lock_timeout of our own monotonic time.
        let me = self.instance.id.to_string();
        let cutoff = self.instance.mono_ms().saturating_sub(lock_timeout_ms);
        Box::pin(self.db.read(move |c| lib_keys::stuck(c, &me, cutoff)))
    }

    fn traces(&self, user_id: String, key: String) -> Fut<'_, bool> {
        Box::pin(self.db.read(move |c| {
            Ok(ledger::debit_by_key(c, &user_id, &key)?.is_some()
                || gateway::lookup(c, &user_id, &key)?.is_some())
        }))
    }

    fn expire(&self, now_ms: i64, key_window_ms: i64) -> Fut<'_, usize> {
        Box::pin(async move {
            let expired =
                sendonce_server::store::sqlite::expire_buckets(&self.db, now_ms, key_window_ms)
                    .await?;
            let before = now_ms.saturating_sub(key_window_ms);
            while self
                .db
                .write(Durability::Normal, move |c| {
                    gateway::expire_chunk(c, before, now_ms, EXPIRE_CHUNK)
                })
                .await?
                == EXPIRE_CHUNK
            {}
            Ok(expired)
        })
    }

    fn trim(&self, cut: crate::retention::Cutoffs) -> Fut<'_, crate::retention::Trimmed> {
        Box::pin(self.db.write(Durability::Normal, move |c| {
            crate::retention::trim_chunk(c, cut)
        }))
    }

    fn outbox_pending(&self) -> Fut<'_, bool> {
        // An idle poll only reads (reader connection): no write transaction when the
        // outbox is drained. A commit happens before its wake-up, so the reader sees it.
        Box::pin(self.db.read(|c| lib_outbox::any_unpublished(c)))
    }

    fn publish_batch(&self, now_ms: i64) -> Fut<'_, usize> {
        // One group-commit job: both consumers' transactions (SAVEPOINTs) and the
        // `published` mark commit together, with the other queued writes.
        //
        // NORMAL (no fsync of its own): every event in the batch is already durable — its
        // outbox row was written by the FULL debit commit — and this transaction only derives
        // from those rows. A process crash (abort, SIGKILL) keeps a NORMAL commit. A power
        // loss may forget the whole batch, atomically: credit, SMS, their inbox rows and the
        // `published` mark go together, so the events are unpublished again and the relay
        // delivers them once more, exactly once (no inbox row survived to deduplicate against,
        // and no effect either). Nothing anyone was answered depends on the batch: the client
        // holds a 201 for its debit, which the FULL commit made durable; and a recipient who
        // spends a credit does so through a FULL debit commit, whose fsync makes every earlier
        // WAL frame — this batch included — durable first. Crash test: recovery.rs
        // `sigkill_after_relay_batch_keeps_the_credit_once`.
        Box::pin(self.db.write(Durability::Normal, move |c| {
            outbox::publish_batch(c, now_ms)
        }))
    }

    fn replay_outbox(&self, from_event: i64) -> Fut<'_, usize> {
        Box::pin(
            self.db
                .call(move |c| lib_outbox::replay_from(c, from_event)),
        )
    }

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

/// The ledger first (it outlives the key row: window expiry), then the key row.
fn lookup(c: &Connection, user: &str, key: &str) -> Result<Lookup, DbError> {
    if let Some((record, _)) = ledger::debit_by_key(c, user, key)? {
        return Ok(Ok(record));
    }
    Ok(Err(lib_keys::read(c, user, key)?))
}

/// A user's currency, as [`lib_keys::read_beside`] reads it beside a key row (`?3`: the user).
static CURRENCY_BESIDE: LazyLock<lib_keys::ReadBeside> =
    LazyLock::new(|| lib_keys::ReadBeside::new("SELECT currency FROM users WHERE user_id = ?3"));

/// A user's wallet currency (`None`: no such user).
fn currency_of(c: &Connection, user_id: &str) -> Result<Option<String>, DbError> {
    Ok(
        c.prepare_cached("SELECT currency FROM users WHERE user_id = ?1")?
            .query_row(params![user_id], |r| r.get(0))
            .optional()?,
    )
}
