//! The transfer pipeline: validate, claim the key, gateway step, one ledger transaction.

use axum::http::StatusCode;
use rusqlite::{params, OptionalExtension};
use serde::Deserialize;

use crate::db::{is_unique_violation, DbError, Durability};
use crate::idempotency::{self, Claim, Existing, NewKey};
use crate::ledger::{self, TransferRecord};
use crate::problem::Problem;
use crate::App;

/// Largest amount accepted, in minor units.
pub const MAX_AMOUNT_MINOR: i64 = 1_000_000_000_000;
/// Longest note accepted, in characters.
pub const MAX_NOTE_CHARS: usize = 280;

/// The authenticated user making a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Their id.
    pub user_id: String,
    /// Their wallet currency.
    pub currency: String,
}

/// Body of `POST /v1/transfers` as sent.
#[derive(Debug, Deserialize)]
struct TransferBody {
    to_user_id: String,
    amount_minor: i64,
    currency: String,
    #[serde(default)]
    note: Option<String>,
}

/// A transfer request that passed validation (recipient exists, currencies match).
#[derive(Debug, Clone)]
pub struct ValidTransfer {
    /// Recipient.
    pub to_user_id: String,
    /// Amount in minor units, 1..=10^12.
    pub amount_minor: i64,
    /// Currency of both wallets.
    pub currency: String,
    /// Optional note.
    pub note: Option<String>,
}

/// What the handler sends back.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Exact body bytes.
    pub body: Vec<u8>,
    /// Whether this repeats an earlier outcome (`Idempotent-Replayed: true`).
    pub replayed: bool,
    /// `Retry-After` seconds, if any.
    pub retry_after: Option<u32>,
    /// Whether this request itself committed the money movement.
    pub committed: bool,
}

impl From<Problem> for Answer {
    fn from(p: Problem) -> Self {
        Self {
            status: p.status.as_u16(),
            body: p.body_bytes(),
            replayed: false,
            retry_after: p.retry_after,
            committed: false,
        }
    }
}

impl Answer {
    fn replay(status: u16, body: Vec<u8>) -> Self {
        Self {
            status,
            body,
            replayed: true,
            retry_after: None,
            committed: false,
        }
    }
}

/// Parses and validates a transfer body (shared with the bench endpoint). Nothing is stored.
pub async fn validate(app: &App, caller: &Caller, body: &[u8]) -> Result<ValidTransfer, Problem> {
    let parsed: TransferBody = serde_json::from_slice(body)
        .map_err(|e| Problem::invalid(format!("malformed transfer body: {e}")))?;
    if parsed.amount_minor <= 0 || parsed.amount_minor > MAX_AMOUNT_MINOR {
        return Err(Problem::invalid(format!(
            "amount_minor must be between 1 and {MAX_AMOUNT_MINOR}"
        )));
    }
    if parsed.currency != caller.currency {
        return Err(Problem::invalid(format!(
            "currency {:?} does not match the wallet currency {}",
            parsed.currency, caller.currency
        )));
    }
    if parsed
        .note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return Err(Problem::invalid(format!(
            "note is longer than {MAX_NOTE_CHARS} characters"
        )));
    }
    if parsed.to_user_id == caller.user_id {
        return Err(Problem::invalid("a transfer to yourself is not allowed"));
    }
    let to = parsed.to_user_id.clone();
    let recipient_currency: Option<String> = app
        .db
        .read(move |c| {
            Ok(
                c.prepare_cached("SELECT currency FROM users WHERE user_id = ?1")?
                    .query_row(params![to], |r| r.get(0))
                    .optional()?,
            )
        })
        .await
        .map_err(Problem::internal)?;
    match recipient_currency {
        None => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "recipient_not_found",
            "no user with this to_user_id",
        )),
        Some(c) if c != parsed.currency => Err(Problem::invalid(
            "the recipient's wallet uses another currency",
        )),
        Some(_) => Ok(ValidTransfer {
            to_user_id: parsed.to_user_id,
            amount_minor: parsed.amount_minor,
            currency: parsed.currency,
            note: parsed.note,
        }),
    }
}

/// Runs one transfer request to its answer. Spawned by the handler so a client that hangs
/// up mid-request never leaves the work half done.
pub async fn execute(
    app: App,
    caller: Caller,
    key: String,
    hash: Vec<u8>,
    transfer: ValidTransfer,
) -> Answer {
    match run(&app, &caller, &key, &hash, &transfer).await {
        Ok(answer) => answer,
        Err(e) => Problem::internal(e).into(),
    }
}

async fn run(
    app: &App,
    caller: &Caller,
    key: &str,
    hash: &[u8],
    transfer: &ValidTransfer,
) -> Result<Answer, DbError> {
    // Fast path for a finished key: answered from the reader connection, without waiting
    // for the writer. Only a *completed* row short-cuts; everything else goes to the claim,
    // where the primary key decides.
    let (user, key_owned) = (caller.user_id.clone(), key.to_string());
    if let Some(row) = app
        .db
        .read(move |c| idempotency::read(c, &user, &key_owned))
        .await?
    {
        if let (true, Some(status), Some(body)) = (row.completed, row.status, row.body) {
            return Ok(if row.hash == hash {
                Answer::replay(status, body)
            } else {
                Problem::key_reused().into()
            });
        }
    }

    // (1) Claim the key: the primary key decides a race, no read-then-write.
    let lock_id = uuid::Uuid::new_v4().simple().to_string();
    let claim = {
        let (user, key, hash, lock) = (
            caller.user_id.clone(),
            key.to_string(),
            hash.to_vec(),
            lock_id.clone(),
        );
        let now_ms = app.clock.now_ms();
        let width = idempotency::bucket_width_ms(app.key_window_ms());
        // The claim commits with synchronous=NORMAL (group commit, no fsync of its own).
        // Safe because a claim moves no money: it only has to be durable before money moves,
        // and the debit transaction below is FULL — in WAL mode its fsync also makes this
        // earlier commit durable. A process crash (abort, SIGKILL) keeps a NORMAL commit; a
        // power loss before the debit commit may forget the IN_PROGRESS row, and then the
        // client's retry claims again and repeats the gateway step, which is idempotent on the
        // key (same authorisation, no second charge). Any answer given meanwhile from this row
        // is 409 / 422, never a 201: completed rows are only ever written by FULL commits.
        app.db
            .write(Durability::Normal, move |c| {
                idempotency::claim(
                    c,
                    &NewKey {
                        user_id: &user,
                        key: &key,
                        hash: &hash,
                        lock_id: &lock,
                        now_ms,
                        bucket_width_ms: width,
                    },
                )
            })
            .await?
    };
    match claim {
        Claim::Acquired => {}
        Claim::Exists(Existing::InProgress { same_request: true }) => {
            return Ok(Problem::key_in_use().into())
        }
        Claim::Exists(Existing::Completed {
            same_request: true,
            status,
            body,
        }) => return Ok(Answer::replay(status, body)),
        Claim::Exists(_) => return Ok(Problem::key_reused().into()),
    }

    if app.faults.crash_after_key_insert() {
        // A real crash between the phases: no unwinding, no cleanup, no response.
        tracing::error!(key, "fault crash_after_key_insert: aborting the process");
        std::process::abort();
    }

    // (2) Gateway step, idempotent on the key: repeating it after a crash or a reaper
    // release gets the same authorisation back.
    let auth = app
        .gateway
        .authorize(app.faults.gateway_delay(), &caller.user_id, key)
        .await;
    tracing::debug!(key, auth = %auth.authorization_id, calls = auth.calls, "gateway authorised");

    // (3) One transaction: debit, outbox event, completed key.
    let record = TransferRecord {
        transfer_id: format!("tr_{}", uuid::Uuid::now_v7().simple()),
        from_user_id: caller.user_id.clone(),
        to_user_id: transfer.to_user_id.clone(),
        amount_minor: transfer.amount_minor,
        currency: transfer.currency.clone(),
        note: transfer.note.clone(),
        created_at_ms: app.clock.now_ms(),
        idempotency_key: key.to_string(),
    };
    let (hash_owned, lock) = (hash.to_vec(), lock_id.clone());
    let result = app
        .db
        .write(Durability::Full, move |c| {
            commit_transfer(c, &record, &hash_owned, &lock)
        })
        .await;
    match result {
        Ok(answer) => {
            if answer.committed {
                app.relay_wake.notify_one();
            }
            Ok(answer)
        }
        Err(e) => {
            // Nothing committed: release the key now rather than after the lock timeout.
            let (user, key) = (caller.user_id.clone(), key.to_string());
            let released = app
                .db
                .write(Durability::Full, move |c| {
                    idempotency::release(c, &user, &key, &lock_id)
                })
                .await;
            if let Err(re) = released {
                tracing::warn!(%re, "could not release key after a failed commit; the reaper will");
            }
            Err(e)
        }
    }
}

/// Phase 3 in one transaction (a SAVEPOINT of the group transaction: all or nothing).
fn commit_transfer(
    conn: &mut rusqlite::Connection,
    record: &TransferRecord,
    hash: &[u8],
    lock_id: &str,
) -> Result<Answer, DbError> {
    let mut tx = conn.savepoint()?;
    let (user, key) = (
        record.from_user_id.as_str(),
        record.idempotency_key.as_str(),
    );
    let balance = ledger::balance(&tx, user)?;
    let sp = tx.savepoint()?;
    match ledger::insert_debit(&sp, record, hash) {
        Err(e) if is_unique_violation(&e) => {
            drop(sp);
            // The last guard fired: money already moved for this key (the key row expired
            // or was reaped while an earlier attempt was still running). Answer from the ledger.
            let answer = match ledger::debit_by_key(&tx, user, key)? {
                Some((existing, stored_hash)) if stored_hash == hash => {
                    let body = existing.to_json();
                    idempotency::complete(&tx, user, key, lock_id, 201, &body)?;
                    Answer::replay(201, body)
                }
                _ => {
                    idempotency::release(&tx, user, key, lock_id)?;
                    Problem::key_reused().into()
                }
            };
            tx.commit()?;
            Ok(answer)
        }
        Err(e) => Err(e.into()),
        Ok(()) if balance < record.amount_minor => {
            drop(sp); // rolls the debit back
            let problem = Problem::new(
                StatusCode::PAYMENT_REQUIRED,
                "insufficient_funds",
                format!(
                    "balance {balance} is less than amount {}",
                    record.amount_minor
                ),
            );
            let body = problem.body_bytes();
            idempotency::complete(&tx, user, key, lock_id, 402, &body)?;
            tx.commit()?;
            Ok(problem.into())
        }
        Ok(()) => {
            sp.commit()?;
            let body = record.to_json();
            tx.prepare_cached(
                "INSERT INTO outbox (kind, transfer_id, payload, created_at_ms)
                 VALUES ('TransferDone', ?1, ?2, ?3)",
            )?
            .execute(params![
                record.transfer_id,
                String::from_utf8_lossy(&body),
                record.created_at_ms
            ])?;
            idempotency::complete(&tx, user, key, lock_id, 201, &body)?;
            tx.commit()?;
            Ok(Answer {
                status: 201,
                body,
                replayed: false,
                retry_after: None,
                committed: true,
            })
        }
    }
}
