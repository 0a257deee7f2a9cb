//! The transfer operation on the engine ([`sendonce_server::Engine::run`]): phase 0 reads the
//! key row and the recipient's currency in one visit, validation, the new-key quota, the
//! claim with the sender's balance beside it, the gateway step, one fenced ledger
//! transaction — and the reaper's question ([`sendonce_server::Engine::reap`]) for a key
//! whose holder died or stalled: a debit or an authorisation finishes it, nothing releases it.

use crate::app::App;
use crate::gateway;
use crate::ledger::TransferRecord;
use crate::store::contract::{self, Backend, Debit};
use sendonce_server::engine::Recovery;
use sendonce_server::store::{DbError, Fence, NewKey, Stuck};
use sendonce_server::{Answer, Claim, Look, Operation, Problem, Request};

mod validate;

use crate::ledger::decide::Authorised;

pub use crate::auth::Caller;
pub use crate::ledger::body::TransferBody;
pub use validate::{check_body, parse, validate, ValidTransfer, MAX_AMOUNT_MINOR, MAX_NOTE_CHARS};

/// Runs one transfer request (`req`, scoped to `caller`) to its answer. Spawned by the
/// handler so a client that hangs up mid-request never leaves the work half done.
pub async fn execute(app: App, caller: Caller, req: Request) -> Answer {
    let transfer = Transfer {
        app: app.clone(),
        caller: Some(caller),
    };
    let answer = app.engine.run(&transfer, &req).await;
    if answer.committed {
        app.relay_wake.notify_one();
    }
    answer
}

/// One caller's transfer request, as the engine runs it; or, without a caller, the
/// transfers the reaper resolves ([`Transfer::reaper`]).
pub struct Transfer {
    app: App,
    /// The authenticated sender (`None`: the reaper's, which validates nothing: a stuck
    /// key's body was validated when it was claimed).
    caller: Option<Caller>,
}

impl Transfer {
    /// The operation the reaper asks about stuck keys: it recovers and commits, and never
    /// validates a request.
    pub fn reaper(app: App) -> Self {
        Self { app, caller: None }
    }

    fn caller(&self) -> Result<&Caller, Problem> {
        self.caller
            .as_ref()
            .ok_or_else(|| Problem::internal("the reaper's transfer validates no request"))
    }
}

/// A validated transfer, and whether the balance read beside the claim covered it.
pub struct Pending {
    transfer: ValidTransfer,
    /// `false`: the advisory pre-check found the balance short, so the gateway is skipped
    /// and the commit may only store the 402 (it reads the balance again under the fence).
    covered: bool,
}

impl Pending {
    /// A transfer not yet checked against the balance (the claim's read decides).
    fn new(transfer: ValidTransfer) -> Self {
        Self {
            transfer,
            covered: true,
        }
    }
}

impl Operation<Backend> for Transfer {
    type Input = Pending;
    type Step = Authorised;

    /// Validation on its own, as the engine's default `look` would run it after the key
    /// read; this operation's `look` runs the same checks on the recipient's currency read
    /// beside the key row instead.
    async fn validate(&self, _: &str, body: &[u8]) -> Result<Pending, Problem> {
        validate::validate(&self.app, self.caller()?, body)
            .await
            .map(Pending::new)
    }

    /// A finished key replays its stored answer even if the same body would no longer
    /// validate (recipient gone, limit lowered): the outcome was decided when it ran. The
    /// recipient's currency, which validation needs, is read in the same visit.
    async fn look(&self, backend: &Backend, req: &Request) -> Result<Look<Pending>, DbError> {
        let parsed = validate::parse(&req.body);
        let recipient = parsed.as_ref().ok().map(|p| p.to_user_id.clone());
        let (row, currency) = backend
            .store()
            .key_row_and_currency(req.scope.clone(), req.key.clone(), recipient)
            .await?;
        if let Some(row) = row {
            return Ok(Look::Seen(row));
        }
        let checked = self.caller().and_then(|caller| {
            parsed.and_then(|p| validate::check(&self.app, caller, p, currency))
        });
        Ok(Look::New(checked.map(Pending::new)))
    }

    /// A key not seen before counts against the user's keys per hour (nothing is stored
    /// when it runs out: the retry, with the same key, is a first request again).
    fn admit(&self, user_id: &str) -> Result<(), Problem> {
        self.app.quotas.new_key(user_id).map_err(|wait| {
            Problem::rate_limited("too many new keys from this user this hour", wait)
        })
    }

    /// The balance pre-check is read beside the claim (SQLite: on the reader connection
    /// while the claim waits for the writer; PostgreSQL: in the claim's own statement). It
    /// is advisory either way — the fenced commit reads the balance again and decides — so
    /// reading it a little earlier changes no outcome; a lost claim only wasted the read.
    async fn claim(
        &self,
        backend: &Backend,
        new: NewKey<'_>,
        mut input: Pending,
    ) -> Result<(Claim, Pending), DbError> {
        let claim = contract::new_claim(&new);
        let (claimed, balance) = backend.store().claim_with_balance(claim).await?;
        input.covered = balance >= input.transfer.amount_minor;
        Ok((claimed, input))
    }

    /// (2) The gateway, idempotent on the key and persisted: repeating it after a crash or
    /// a reaper release gets the same authorisation back. A definitive 402 never costs a
    /// gateway call: a balance that does not cover the amount goes straight to the commit,
    /// which stores the 402 (or, if a credit arrived meanwhile, moves nothing unauthorised
    /// and asks for a retry).
    async fn step(&self, fence: &Fence, input: &Pending) -> Result<Authorised, Problem> {
        let faults = &self.app.faults;
        if faults.crash_after_key_insert() {
            // A real crash between the phases: no unwinding, no cleanup, no response.
            tracing::error!(key = %fence.key, "fault crash_after_key_insert: aborting the process");
            std::process::abort();
        }
        if !input.covered {
            return Ok(Authorised::No);
        }
        let now_ms = self.app.clock.now_ms();
        let store = self.app.store().as_ref();
        let auth = gateway::authorize(
            store,
            faults.gateway_delay(),
            &fence.scope,
            &fence.key,
            now_ms,
        )
        .await
        .map_err(DbError::into_problem)?;
        tracing::debug!(key = %fence.key, auth = %auth.authorization_id, calls = auth.calls, "gateway authorised");
        if faults.crash_after_gateway() {
            tracing::error!(key = %fence.key, "fault crash_after_gateway: aborting the process");
            std::process::abort();
        }
        Ok(Authorised::Yes)
    }

    /// (3) The money transaction, fenced by the claim's lock.
    fn work(&self, fence: &Fence, input: Pending, authorised: Authorised) -> contract::Work {
        let transfer = input.transfer;
        let record = TransferRecord {
            transfer_id: format!("tr_{}", uuid::Uuid::now_v7().simple()),
            from_user_id: fence.scope.clone(),
            to_user_id: transfer.to_user_id,
            amount_minor: transfer.amount_minor,
            currency: transfer.currency,
            note: transfer.note,
            created_at_ms: self.app.clock.now_ms(),
            idempotency_key: fence.key.clone(),
        };
        Ok(Debit {
            record,
            hash: fence.hash.clone(),
            rules: self.app.rules(authorised),
        })
    }

    /// The reaper's question for a key whose holder died or stalled past its lease. A
    /// debit under the key (money moved) or a live authorisation (the gateway said yes)
    /// finishes it through the same fenced commit — which completes the key from the debit
    /// when there is one (the ledger's guard), else debits with the authorisation — so the
    /// key is never released into a second authorisation. Neither: released, and the
    /// client's retry runs the transfer once. The holder, if still alive, is fenced out.
    async fn recover(&self, stuck: &Stuck) -> Result<Recovery<Pending, Authorised>, Problem> {
        let f = &stuck.fence;
        let traced = self.app.store().traces(f.scope.clone(), f.key.clone());
        let traced = traced.await.map_err(DbError::into_problem)?;
        // A claimed key's body always parses (a key claimed before the body column existed
        // has none: released, and its retry meets the ledger's guard).
        match (traced, validate::parse(&stuck.body)) {
            (true, Ok(body)) => {
                let transfer = ValidTransfer {
                    to_user_id: body.to_user_id,
                    amount_minor: body.amount_minor,
                    currency: body.currency,
                    note: body.note,
                };
                Ok(Recovery::Finish(Pending::new(transfer), Authorised::Yes))
            }
            _ => Ok(Recovery::Release),
        }
    }
}
