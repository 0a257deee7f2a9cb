//! Mock payments server that enforces the sendonce idempotency contract.
//!
//! `start` opens the SQLite database, starts the relay and the reaper, and serves the
//! HTTP API; see README.md for the endpoints.

pub mod app;
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

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use app::{App, AppState, ServerError};
pub use config::{parse_duration, Secret, ServerConfig};
pub use http::MAX_BODY_BYTES;

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
    tracing::info!(%addr, backend = app.store().backend(), "server-mock started");
    Ok(RunningServer {
        addr,
        app,
        shutdown,
        tasks,
    })
}
