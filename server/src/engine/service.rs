//! A service's wiring, each piece in the shape axum users expect: who is calling
//! ([`Authenticate`] + [`bearer`], a `middleware::from_fn_with_state` layer), an idempotent
//! resource as one route ([`Engine::endpoint`]), and the engine's background loops on tasks
//! that stop with their handle ([`Engine::spawn_background`]).
//!
//! ```ignore
//! let engine = Arc::new(Engine::new(store));
//! let _background = engine.spawn_background(&op, |id, event: &Event| deliver(id, event), lock_timeout);
//! let app = Router::new()
//!     .route("/v1/orders", engine.endpoint(&op, not_found))
//!     .layer(middleware::from_fn_with_state(tokens, bearer::<Tokens>));
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request as HttpRequest, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use tokio::task::JoinHandle;

use super::extract::{Idempotent, LookupKey, Principal};
use super::relay::Publish;
use super::{Engine, Operation};
use crate::outcome::Event;
use crate::problem::Problem;
use crate::store::Keys;

/// Your credential check: the principal a bearer token belongs to, `None` for a token that
/// belongs to no one (answered 401 `unauthenticated`).
pub trait Authenticate: Clone + Send + Sync + 'static {
    /// Who holds `token`. A `Problem` is answered as it is (a database that is down: 503).
    fn principal(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<String>, Problem>> + Send;
}

/// The authentication layer: `Authorization: Bearer <token>` checked by `auth`, its
/// [`Principal`] put in the request's extensions (where [`Idempotent`] and your handlers read
/// it); 401 `unauthenticated` before any handler runs otherwise. Wire it as
/// `.layer(middleware::from_fn_with_state(auth, bearer::<A>))`.
pub async fn bearer<A: Authenticate>(
    State(auth): State<A>,
    mut req: HttpRequest,
    next: Next,
) -> Response {
    let token = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let principal = match token {
        Some(token) => auth.principal(token).await,
        None => Ok(None),
    };
    match principal {
        Ok(Some(user)) => {
            req.extensions_mut().insert(Principal(user));
            next.run(req).await
        }
        Ok(None) => Problem::unauthenticated().into_response(),
        Err(problem) => problem.into_response(),
    }
}

/// Delivers events one at a time, oldest first, with a plain function (an in-process
/// consumer, a log): those before the first failure are acknowledged, the rest tried again.
impl<F> Publish for F
where
    F: Fn(i64, &Event) -> Result<(), String> + Send + Sync,
{
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        let mut acked = Vec::with_capacity(events.len());
        for (id, event) in &events {
            match self(*id, event) {
                Ok(()) => acked.push(*id),
                Err(e) if acked.is_empty() => return Err(e),
                Err(e) => {
                    tracing::warn!(%e, event = id, "delivery stopped; the rest are tried again");
                    break;
                }
            }
        }
        Ok(acked)
    }
}

/// A publisher that writes each event to the log (`tracing`, at info: its id, topic and size)
/// and acknowledges it — for a service whose consumers are not wired yet, or a demo. Events
/// are still relayed and marked exactly as with a real destination.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogPublisher;

impl Publish for LogPublisher {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        for (id, e) in &events {
            tracing::info!(event = id, topic = %e.topic, bytes = e.payload.len(), "event published to the log");
        }
        Ok(events.into_iter().map(|(id, _)| id).collect())
    }
}

/// The engine's background tasks: aborted when this handle is dropped (keep it as long as
/// the service runs).
#[must_use = "the background tasks stop when this handle is dropped"]
pub struct Background(Vec<JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// How long the relay waits after a round that found nothing to publish.
pub const RELAY_IDLE: Duration = Duration::from_millis(200);

impl<S: Keys> Engine<S> {
    /// The route of one idempotent resource: `POST` runs `op` once per key
    /// ([`Engine::run_detached`]: a client that hangs up never leaves it half done), and
    /// `GET ?idempotency_key=K` answers what happened to `K` ([`Engine::lookup`], with
    /// `not_found`, a 404 problem, when nothing ran). Both need a [`Principal`] (see
    /// [`bearer`]); without one they answer 401.
    pub fn endpoint<O: Operation<S>, T>(
        self: &Arc<Self>,
        op: &Arc<O>,
        not_found: Problem,
    ) -> MethodRouter<T>
    where
        T: Clone + Send + Sync + 'static,
    {
        let (engine, op) = (Arc::clone(self), Arc::clone(op));
        let create = move |Idempotent(req): Idempotent| {
            let (engine, op) = (Arc::clone(&engine), Arc::clone(&op));
            async move { engine.run_detached(&op, req).await }
        };
        let engine = Arc::clone(self);
        let lookup = move |Principal(user): Principal, LookupKey(key): LookupKey| {
            let (engine, not_found) = (Arc::clone(&engine), not_found.clone());
            async move { engine.lookup(&user, &key, not_found).await }
        };
        post(create).get(lookup)
    }

    /// Starts the reaper ([`Engine::reap_forever`]: stuck keys resolved by asking `op`, expired
    /// key buckets dropped) and the relay ([`Engine::relay_forever`]: outbox events to
    /// `publisher`, at least once, idle [`RELAY_IDLE`]), each on a task of its own.
    pub fn spawn_background<O, P>(
        self: &Arc<Self>,
        op: &Arc<O>,
        publisher: P,
        lock_timeout: Duration,
    ) -> Background
    where
        O: Operation<S>,
        P: Publish + 'static,
    {
        let (reaper, op) = (Arc::clone(self), Arc::clone(op));
        let relay = Arc::clone(self);
        Background(vec![
            tokio::spawn(async move { reaper.reap_forever(&*op, lock_timeout).await }),
            tokio::spawn(async move { relay.relay_forever(&publisher, RELAY_IDLE).await }),
        ])
    }
}
