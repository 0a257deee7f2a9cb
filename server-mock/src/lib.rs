//! Mock payments server that enforces the sendonce idempotency contract.
//!
//! `start` opens the SQLite database, starts the relay and the reaper, and serves the
//! HTTP API; see README.md for the endpoints.

pub mod auth;
pub mod authorization;
pub mod config;
pub mod consumers;
pub mod faults;
pub mod gateway;
mod http;
pub mod ledger;
pub mod outbox;
pub mod problem;
pub mod quota;
pub mod reaper;
pub mod relay;
pub mod retention;
pub mod schema;
pub mod serve;
pub mod store;
mod text;
pub mod transfer;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

pub use config::{parse_duration, Secret, ServerConfig};
pub use http::MAX_BODY_BYTES;

use faults::Faults;
use sendonce_server::clock::Clock;
use sendonce_server::store::DbError;
use sendonce_server::Engine;
use store::contract::Backend;
use store::{Instance, SharedFixtures, SharedStore};

/// Shared state of one server instance.
pub struct AppState {
    /// Configuration it was started with.
    pub config: ServerConfig,
    /// The storage backend (SQLite or PostgreSQL), chosen by `config.db`.
    pub store: SharedStore,
    /// The same backend as the test API and the bench endpoints see it.
    pub fixtures: SharedFixtures,
    /// The one clock (shared with the store, which publishes it for expiry).
    pub clock: Arc<Clock>,
    /// Injected faults.
    pub faults: Faults,
    /// Who this server process is: key locks it holds carry its id, and lock ages are
    /// measured from its start, never from the wall clock.
    pub instance: Instance,
    /// Per-user request and key quotas.
    pub quotas: quota::Quotas,
    /// Largest transfer amount accepted now (the test API can lower it).
    max_amount_minor: AtomicI64,
    /// Wakes the relay (a transfer committed, a replay was requested).
    pub relay_wake: Notify,
    /// Wakes the reaper (the clock moved).
    pub reaper_wake: Notify,
    /// The contract's engine over the same backend: runs each transfer request
    /// ([`transfer::execute`]) and keeps the newest claim expiry goes by.
    pub engine: Engine<Backend>,
}

/// Handle to the shared state.
pub type App = Arc<AppState>;

impl AppState {
    /// Opens the database and builds the state (no background tasks yet).
    pub async fn open(config: ServerConfig) -> Result<App, ServerError> {
        let instance = Instance::new();
        let (opened, clock) = match config.simulated_start_ms {
            Some(start) => (
                store::open_inline(&config.db, instance.clone())?,
                Arc::new(Clock::simulated(start)),
            ),
            None => {
                let clock = Arc::new(Clock::default());
                let opened = store::open(
                    &config.db,
                    config.db_pool,
                    config.db_timeouts,
                    instance.clone(),
                    clock.clone(),
                )
                .await?;
                (opened, clock)
            }
        };
        let backend = Backend::new(opened.store.clone(), instance.clone(), clock.clone());
        let engine = Engine::new(backend)
            .clock(clock.clone())
            .key_window(config.key_window);
        Ok(Arc::new(Self {
            faults: Faults::new(config.gateway_delay),
            quotas: quota::Quotas::new(config.quotas),
            instance,
            max_amount_minor: AtomicI64::new(transfer::MAX_AMOUNT_MINOR),
            config,
            store: opened.store,
            fixtures: opened.fixtures,
            clock,
            relay_wake: Notify::new(),
            reaper_wake: Notify::new(),
            engine,
        }))
    }

    /// The time key expiry goes by: this clock's now, but never later than the newest claim
    /// this process made plus the monotonic time since (`None` before its first claim:
    /// nothing to expire by yet). A wall clock stepped forward expires nothing by itself:
    /// only elapsed time, or claims stamped by the new time, move expiry on. (A process
    /// cannot tell a step from elapsed time once it serves claims at the stepped time; on
    /// PostgreSQL the other live instances' clocks bound it too, see the store's `expire`.)
    pub fn expiry_now(&self) -> Option<i64> {
        self.engine.expiry_now()
    }

    /// Largest amount a transfer may move now.
    pub fn max_amount_minor(&self) -> i64 {
        self.max_amount_minor.load(Ordering::SeqCst)
    }

    /// Sets the amount limit (test API), clamped to 1..=[`transfer::MAX_AMOUNT_MINOR`].
    pub fn set_max_amount_minor(&self, limit: i64) -> i64 {
        let limit = limit.clamp(1, transfer::MAX_AMOUNT_MINOR);
        self.max_amount_minor.store(limit, Ordering::SeqCst);
        limit
    }

    /// What the money transaction enforces for a request the gateway did (or did not) authorise.
    pub(crate) fn rules(
        &self,
        authorised: transfer::decide::Authorised,
    ) -> transfer::decide::Rules {
        transfer::decide::Rules {
            fenced: self.fenced(),
            authorised,
            max_balance: self.config.max_balance_minor,
        }
    }

    /// Whether the debit transaction checks the lock (always, unless a test-only build
    /// switched the fence off to show what it prevents).
    pub fn fenced(&self) -> bool {
        #[cfg(feature = "unfenced")]
        if self.config.unfenced {
            return false;
        }
        true
    }

    /// The key window in milliseconds.
    pub fn key_window_ms(&self) -> i64 {
        i64::try_from(self.config.key_window.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The database could not be opened or migrated.
    #[error("database: {0}")]
    Db(#[from] DbError),
    /// The listen address could not be bound.
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    /// The configuration is unsafe on this address.
    #[error("{0}")]
    Refused(String),
}

/// The HTTP router for `app` (without the connection-dropping accept loop).
pub fn router(app: App) -> axum::Router {
    http::router(app)
}

/// A server running in the background of the current tokio runtime.
pub struct RunningServer {
    /// The bound address (the real port when started on port 0).
    pub addr: SocketAddr,
    app: App,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// `http://IP:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The shared state, for in-process inspection.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Stops accepting, drains open connections, stops the relay and the reaper.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            if let Err(e) = task.await {
                tracing::warn!(%e, "server task ended abnormally");
            }
        }
    }
}

impl Drop for RunningServer {
    /// A server dropped without `shutdown` still stops accepting and stops its tasks.
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

/// A server without a socket, whose router the caller calls in-process (deterministic rides).
pub struct InProcessServer {
    /// The shared state.
    pub app: App,
    /// The HTTP router (the one a socket would serve).
    pub router: axum::Router,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl InProcessServer {
    /// Stops the relay and the reaper.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

/// Opens the database and starts the relay and the reaper on the current runtime, with no socket.
pub async fn start_in_process(config: ServerConfig) -> Result<InProcessServer, ServerError> {
    let app = AppState::open(config).await?;
    let (shutdown, rx) = watch::channel(false);
    let relay = relay::spawn(app.clone(), rx.clone()).await?;
    let tasks = vec![relay, tokio::spawn(reaper::run(app.clone(), rx))];
    Ok(InProcessServer {
        router: router(app.clone()),
        app,
        shutdown,
        tasks,
    })
}

/// Opens the database, binds `listen` (port 0 allowed) and serves until `shutdown`.
pub async fn start(config: ServerConfig, listen: SocketAddr) -> Result<RunningServer, ServerError> {
    if let Some(why) = config.refuse_listen(listen) {
        return Err(ServerError::Refused(why));
    }
    config.retention.check().map_err(ServerError::Refused)?;
    let app = AppState::open(config).await?;
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let (shutdown, rx) = watch::channel(false);
    let relay = relay::spawn(app.clone(), rx.clone()).await?;
    let tasks = vec![
        tokio::spawn(serve::serve(
            listener,
            router(app.clone()),
            app.config.limits,
            rx.clone(),
        )),
        relay,
        tokio::spawn(reaper::run(app.clone(), rx)),
    ];
    tracing::info!(%addr, backend = app.store.backend(), "server-mock started");
    Ok(RunningServer {
        addr,
        app,
        shutdown,
        tasks,
    })
}
