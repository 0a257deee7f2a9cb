//! The engine: one idempotent request from its key to its stored answer, the same on every
//! store. The application brings three typed parts ([`Operation`]): validation, an
//! optional external step between claim and commit, and the fenced unit of work — and may
//! hook phase 0's read, an admission check and the claim where it needs to.
//!
//! The phases, top to bottom ([`Engine::run`]):
//! 0. a key already seen answers from its row — the stored answer replayed, 409 while it
//!    runs, 422 for another body — before any validation;
//! 1. validation (a refusal here is not stored: the key stays free), then the
//!    application's admission (a quota; a refusal is not stored either);
//! 2. the claim: the key row inserted `IN_PROGRESS` under a fresh lock id (the primary key
//!    decides a race; a lost race answers from the winner's row, 422 included);
//! 3. the external step, if any (its failure releases the key: the retry runs again);
//! 4. one transaction: the fence (the row still ours), the unit of work, its outbox events,
//!    its outcome stored under the key. A lost fence moves nothing and answers 409.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;

use crate::answer::Answer;
use crate::clock::Clock;
use crate::decision::{Claim, KeyRow};
use crate::expiry::{bucket_width_ms, Anchor};
use crate::fingerprint::request_hash;
use crate::problem::Problem;
use crate::store::{Claims, DbError, Fence, NewKey, Stuck};

pub mod extract;
mod lookup;
mod reaper;
mod relay;
mod service;
mod tokens;

pub use extract::{Idempotent, LookupKey, Principal};
pub use reaper::{interval as reaper_interval, Pass, Recovery};
pub use relay::{Publish, BATCH};
pub use service::{bearer, Authenticate, Background, LogPublisher, RELAY_IDLE};
pub use tokens::{token_hash, TokenTable};

/// Keys live this long unless configured: longer than any client's retry window (24 h).
pub const DEFAULT_KEY_WINDOW: Duration = Duration::from_secs(48 * 3600);

/// What an application brings to one kind of idempotent request, on the store `S`.
pub trait Operation<S: Claims>: Send + Sync + 'static {
    /// The request once validated.
    type Input: Send + Sync + 'static;
    /// What the external step produced (`()` when there is none).
    type Step: Send + 'static;

    /// Parses and validates the exact body bytes for `scope` (the principal). A refusal is
    /// answered and not stored: the key stays free. Runs only for a key not seen before.
    fn validate(
        &self,
        scope: &str,
        body: &[u8],
    ) -> impl Future<Output = Result<Self::Input, Problem>> + Send;

    /// Phase 0 and validation: the key's row, or — for a key not seen before — what
    /// validation made of the request. By default the row is read first and validation runs
    /// only when there is none; an application whose validation reads the database may
    /// override it to read both in one visit (the row must still decide when there is one:
    /// a finished key replays even a body that would no longer validate).
    fn look<'a>(
        &'a self,
        store: &'a S,
        req: &'a Request,
    ) -> impl Future<Output = Result<Look<Self::Input>, DbError>> + Send + 'a {
        async move {
            if let Some(row) = store.read(&req.scope, &req.key).await? {
                return Ok(Look::Seen(row));
            }
            Ok(Look::New(self.validate(&req.scope, &req.body).await))
        }
    }

    /// Between validation and the claim: may `scope` open one more key now (a quota)? A
    /// refusal is answered and not stored: the key stays free, and the retry with the same
    /// key is a first request again. By default: yes.
    fn admit(&self, scope: &str) -> Result<(), Problem> {
        let _ = scope;
        Ok(())
    }

    /// The claim, and anything the application reads beside it into its input (an
    /// advisory balance the step may act on; the unit of work must decide again, under
    /// the fence). By default the store's claim alone; an override must still claim `new`
    /// through the store (`store.claim`, or a call of its own that inserts the same row in
    /// the same visit) and return what that claim found.
    fn claim<'a>(
        &'a self,
        store: &'a S,
        new: NewKey<'a>,
        input: Self::Input,
    ) -> impl Future<Output = Result<(Claim, Self::Input), DbError>> + Send + 'a {
        async move { Ok((store.claim(new).await?, input)) }
    }

    /// The external step between claim and commit (a card authorisation), idempotent on
    /// the key: after a crash or a released key it runs again for the same key and must
    /// give the same result. A `Problem` here is answered and not stored (the key is
    /// released, the client's retry runs the request again).
    fn step(
        &self,
        fence: &Fence,
        input: &Self::Input,
    ) -> impl Future<Output = Result<Self::Step, Problem>> + Send;

    /// The unit of work for the commit: runs only while the fence holds, inside the
    /// transaction that stores its [`crate::outcome::Outcome`] under the key.
    fn work(&self, fence: &Fence, input: Self::Input, step: Self::Step) -> S::Work;

    /// The reaper's question for a key whose holder died or stalled past its lease: did
    /// the external step happen (is there an authorisation for this key)? Answer
    /// [`Recovery::Finish`] to complete the request from its stored body
    /// (`stuck.body`), [`Recovery::Release`] when nothing happened outside the database,
    /// [`Recovery::Hold`] when it cannot tell yet. By default: release (right for an
    /// operation without an external step, whose work and key commit together).
    fn recover(
        &self,
        stuck: &Stuck,
    ) -> impl Future<Output = Result<Recovery<Self::Input, Self::Step>, Problem>> + Send {
        let _ = stuck;
        reaper::release()
    }
}

/// One request under the contract: who sends it, its key, its fingerprint, its bytes.
#[derive(Debug, Clone)]
pub struct Request {
    /// The principal: keys are scoped per principal.
    pub scope: String,
    /// The normalised `Idempotency-Key`.
    pub key: String,
    /// Fingerprint of method, path and body.
    pub hash: Vec<u8>,
    /// The exact body bytes.
    pub body: Vec<u8>,
}

impl Request {
    /// Reads the key from `headers` (400 `idempotency_key_missing` / `_invalid`) and
    /// fingerprints `method`, `path` and `body`.
    pub fn new(
        scope: impl Into<String>,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        body: impl Into<Vec<u8>>,
    ) -> Result<Self, Problem> {
        let key = crate::key::from_headers(headers)?;
        let body = body.into();
        Ok(Self {
            scope: scope.into(),
            key,
            hash: request_hash(method, path, &body),
            body,
        })
    }
}

/// What phase 0 found ([`Operation::look`]).
#[derive(Debug)]
pub enum Look<I> {
    /// The key was seen before: its row answers.
    Seen(KeyRow),
    /// A key not seen before: the validated input, or the refusal to answer (not stored).
    New(Result<I, Problem>),
}

/// The contract's engine over the store `S`.
pub struct Engine<S> {
    store: S,
    clock: Arc<Clock>,
    key_window_ms: i64,
    /// The newest claim's time: what expiry goes by (a clock step alone expires nothing).
    expiry: Anchor,
}

impl<S: Claims> Engine<S> {
    /// An engine on `store` (whose process identity its locks carry), the system clock,
    /// and [`DEFAULT_KEY_WINDOW`].
    pub fn new(store: S) -> Self {
        Self {
            store,
            clock: Arc::new(Clock::default()),
            key_window_ms: duration_ms(DEFAULT_KEY_WINDOW),
            expiry: Anchor::default(),
        }
    }

    /// How long a key is kept (and so answers its stored response); must exceed the
    /// clients' retry window.
    pub fn key_window(mut self, window: Duration) -> Self {
        self.key_window_ms = duration_ms(window).max(1);
        self
    }

    /// The clock all server time goes through (tests move it).
    pub fn clock(mut self, clock: Arc<Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The time key expiry goes by: the clock's now, but never later than the newest claim
    /// this engine made plus the monotonic time since (`None` before its first claim). A
    /// wall clock stepped forward expires nothing by itself.
    pub fn expiry_now(&self) -> Option<i64> {
        self.expiry.now(self.clock.now_ms())
    }

    /// The store, for the application's own reads and writes.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Runs `req` to its answer. A database error answers 503 `busy` when a retry with the
    /// same key will do, else 500.
    pub async fn run<O: Operation<S>>(&self, op: &O, req: &Request) -> Answer {
        match self.phases(op, req).await {
            Ok(answer) => answer,
            Err(e) => e.into_problem().into(),
        }
    }

    /// Like [`Engine::run`], on a task of its own: a client that hangs up mid-request
    /// (its handler future dropped) never leaves the work half done.
    pub async fn run_detached<O: Operation<S>>(
        self: &Arc<Self>,
        op: &Arc<O>,
        req: Request,
    ) -> Answer {
        let (engine, op) = (Arc::clone(self), Arc::clone(op));
        tokio::spawn(async move { engine.run(&*op, &req).await })
            .await
            .unwrap_or_else(|e| Problem::internal(e).into())
    }

    async fn phases<O: Operation<S>>(&self, op: &O, req: &Request) -> Result<Answer, DbError> {
        // (0) A key already seen answers from its row, before any validation: its outcome
        // was decided when it ran. (1) Validation.
        let input = match op.look(&self.store, req).await? {
            Look::Seen(row) => return Ok(row.into_existing(&req.hash).answer()),
            Look::New(Ok(input)) => input,
            // A concurrent first request may have claimed the key meanwhile: its row decides.
            Look::New(Err(problem)) => {
                let row = self.store.read(&req.scope, &req.key).await?;
                return Ok(row.map_or_else(
                    || problem.into(),
                    |row| row.into_existing(&req.hash).answer(),
                ));
            }
        };
        if let Err(problem) = op.admit(&req.scope) {
            return Ok(problem.into());
        }
        // (2) The claim.
        let fence = Fence {
            scope: req.scope.clone(),
            key: req.key.clone(),
            lock_id: uuid::Uuid::new_v4().simple().to_string(),
            hash: req.hash.clone(),
            claimed_at_ms: self.clock.now_ms(),
        };
        let new = NewKey {
            user_id: &fence.scope,
            key: &fence.key,
            hash: &fence.hash,
            lock_id: &fence.lock_id,
            lease: self.store.instance().lease(),
            body: &req.body,
            now_ms: fence.claimed_at_ms,
            bucket_width_ms: bucket_width_ms(self.key_window_ms),
        };
        let input = match op.claim(&self.store, new, input).await? {
            (Claim::Acquired, input) => input,
            (Claim::Exists(seen), _) => return Ok(seen.answer()),
        };
        self.expiry.note_claim(fence.claimed_at_ms);
        // (3) The external step; (4) the fenced commit. Nothing committed on either
        // failure: the key is freed now rather than left to its lease.
        let step = match op.step(&fence, &input).await {
            Ok(step) => step,
            Err(problem) => {
                self.release(&fence).await;
                return Ok(problem.into());
            }
        };
        match self
            .store
            .commit(&fence, op.work(&fence, input, step))
            .await
        {
            Ok(answer) => Ok(answer),
            Err(e) => {
                self.release(&fence).await;
                Err(e)
            }
        }
    }

    async fn release(&self, fence: &Fence) {
        if let Err(e) = self.store.release(fence).await {
            tracing::warn!(%e, key = %fence.key, "could not release the key; its lease will");
        }
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
