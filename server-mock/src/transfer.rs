//! The transfer pipeline: answer a known key, validate, claim the key, gateway step, one
//! fenced ledger transaction.

use crate::gateway;
use crate::ledger::TransferRecord;
use crate::store::NewClaim;
use crate::App;
use sendonce_server::expiry::bucket_width_ms;
use sendonce_server::store::DbError;
use sendonce_server::Problem;
use sendonce_server::{Answer, Claim};

pub mod body;
pub mod decide;
mod validate;

use decide::Authorised;

pub use crate::auth::Caller;
pub use body::{record_from_body, TransferBody};
pub use validate::{check_body, parse, validate, ValidTransfer, MAX_AMOUNT_MINOR, MAX_NOTE_CHARS};

/// Runs one transfer request to its answer. Spawned by the handler so a client that hangs
/// up mid-request never leaves the work half done.
pub async fn execute(
    app: App,
    caller: Caller,
    key: String,
    body: Vec<u8>,
    hash: Vec<u8>,
) -> Answer {
    match run(&app, &caller, &key, &body, &hash).await {
        Ok(answer) => answer,
        Err(e) => crate::problem::from_db(e).into(),
    }
}

/// The phases of one request, top to bottom: (0) a key already seen answers from its row,
/// before any validation; validate; (1) claim; (2) gateway; (3) the fenced commit.
async fn run(
    app: &App,
    caller: &Caller,
    key: &str,
    body: &[u8],
    hash: &[u8],
) -> Result<Answer, DbError> {
    // (0) A finished key replays its stored answer even if the same body would no longer
    // validate (recipient gone, limit lowered): the outcome was decided when it ran. The
    // recipient's currency, which validation needs, is read in the same visit.
    let parsed = validate::parse(body);
    let recipient = parsed.as_ref().ok().map(|p| p.to_user_id.clone());
    let (row, currency) = app
        .store
        .key_row_and_currency(caller.user_id.clone(), key.to_string(), recipient)
        .await?;
    if let Some(row) = row {
        return Ok(row.into_existing(hash).answer());
    }
    let transfer = match parsed.and_then(|p| validate::check(app, caller, p, currency)) {
        Ok(t) => t,
        // A concurrent first request may have claimed the key meanwhile: its row decides.
        Err(problem) => {
            return Ok(answer_from_row(app, caller, key, hash)
                .await?
                .unwrap_or_else(|| problem.into()))
        }
    };
    // A key not seen before counts against the user's keys per hour (nothing is stored
    // when it runs out: the retry, with the same key, is a first request again).
    if let Err(wait) = app.quotas.new_key(&caller.user_id) {
        return Ok(
            Problem::rate_limited("too many new keys from this user this hour", wait).into(),
        );
    }
    let lock_id = uuid::Uuid::new_v4().simple().to_string();
    // The balance pre-check is read beside the claim (SQLite: on the reader connection
    // while the claim waits for the writer; PostgreSQL: in the claim's own statement). It
    // is advisory either way — the fenced commit reads the balance again and decides — so
    // reading it a little earlier changes no outcome; a lost claim only wasted the read.
    let claimed_at = app.clock.now_ms();
    let (claimed, balance) = claim(app, caller, key, body, hash, &lock_id, claimed_at).await?;
    match claimed {
        Claim::Acquired => app.note_claim(claimed_at),
        Claim::Exists(existing) => return Ok(existing.answer()),
    }

    if app.faults.crash_after_key_insert() {
        // A real crash between the phases: no unwinding, no cleanup, no response.
        tracing::error!(key, "fault crash_after_key_insert: aborting the process");
        std::process::abort();
    }

    // A definitive 402 never costs a gateway call: a balance that does not cover the amount
    // now goes straight to the commit, which stores the 402 (or, if a credit arrived
    // meanwhile, moves nothing unauthorised and asks for a retry).
    if balance < transfer.amount_minor {
        return commit(app, caller, key, hash, &transfer, &lock_id, Authorised::No).await;
    }

    // (2) Gateway step, idempotent on the key and persisted: repeating it after a crash or
    // a reaper release gets the same authorisation back.
    let auth = gateway::authorize(
        &*app.store,
        app.faults.gateway_delay(),
        &caller.user_id,
        key,
        app.clock.now_ms(),
    )
    .await;
    let result = match auth {
        Ok(auth) => {
            tracing::debug!(key, auth = %auth.authorization_id, calls = auth.calls, "gateway authorised");
            if app.faults.crash_after_gateway() {
                tracing::error!(key, "fault crash_after_gateway: aborting the process");
                std::process::abort();
            }
            commit(app, caller, key, hash, &transfer, &lock_id, Authorised::Yes).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(answer) => {
            if answer.committed {
                app.relay_wake.notify_one();
            }
            Ok(answer)
        }
        Err(e) => {
            // Nothing committed: release the key now rather than after the lock timeout,
            // and void its authorisation in the same transaction (the retry, if any, gets a
            // fresh one). If that fails too, the key stays ours until the reaper finishes it.
            let released = app
                .store
                .release(
                    caller.user_id.clone(),
                    key.to_string(),
                    lock_id,
                    app.clock.now_ms(),
                )
                .await;
            if let Err(re) = released {
                tracing::warn!(%re, "could not release key after a failed commit; the reaper will");
            }
            Err(e)
        }
    }
}

/// The answer a key row already gives, if there is one (read from the reader
/// connection, without waiting for the writer): a claim that raced our validation.
async fn answer_from_row(
    app: &App,
    caller: &Caller,
    key: &str,
    hash: &[u8],
) -> Result<Option<Answer>, DbError> {
    let row = app
        .store
        .key_row(caller.user_id.clone(), key.to_string())
        .await?;
    Ok(row.map(|r| r.into_existing(hash).answer()))
}

/// (1) Claims the key (the primary key decides a race, no read-then-write), and reads the
/// sender's balance beside it.
async fn claim(
    app: &App,
    caller: &Caller,
    key: &str,
    body: &[u8],
    hash: &[u8],
    lock_id: &str,
    now_ms: i64,
) -> Result<(Claim, i64), DbError> {
    app.store
        .claim_with_balance(NewClaim {
            user_id: caller.user_id.clone(),
            key: key.to_string(),
            hash: hash.to_vec(),
            lock_id: lock_id.to_string(),
            body: body.to_vec(),
            now_ms,
            bucket_width_ms: bucket_width_ms(app.key_window_ms()),
        })
        .await
}

/// (3) The money transaction, fenced by `lock_id`.
async fn commit(
    app: &App,
    caller: &Caller,
    key: &str,
    hash: &[u8],
    transfer: &ValidTransfer,
    lock_id: &str,
    authorised: Authorised,
) -> Result<Answer, DbError> {
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
    let rules = app.rules(authorised);
    if app.faults.fail_commit() {
        // A database error before the transaction ran: nothing committed.
        return Err(DbError::Task(
            "fault fail_commit_rate: the commit failed".into(),
        ));
    }
    app.store
        .commit(record, hash.to_vec(), lock_id.to_string(), rules)
        .await
}
