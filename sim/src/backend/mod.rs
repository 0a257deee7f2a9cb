//! Where a ride's server runs, and how the phones and the test API reach it.
//!
//! A backend is one module behind [`Backend`]: `simulated` (in this process, its router called
//! without a socket, on the ride's paused clock: deterministic), `loopback` (in this process over
//! real HTTP, real time) and `child` (a child process the ride SIGKILLs). Other topologies (a
//! PostgreSQL store with several instances, a Kafka relay) are further modules.

mod child;
mod link;
mod loopback;
mod simulated;

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use sendonce::transport::{BoxFuture, Transport};

pub use link::{HttpLink, LinkTransport, RouterLink, ServerLink};

use crate::server::ServerFaults;

/// Whether a seed replays the same ride.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Determinism {
    /// One thread, simulated time, no socket: the same seed gives the same report.
    Deterministic,
    /// Real time, threads or processes: the report varies from run to run (the reason says why).
    RealTime(String),
}

/// A server the ride can reach and break.
pub trait Backend: Send {
    /// Base URL the phones are configured with.
    fn base_url(&self) -> String;
    /// The way to the server for the test API and the dashboard.
    fn link(&self) -> Arc<dyn ServerLink>;
    /// A fresh transport under a phone's wire tap (`None`: real HTTP, one client per SDK instance).
    fn phone_link(&self) -> Option<Arc<dyn ServerLink>>;
    /// Whether this backend replays a seed.
    fn determinism(&self) -> Determinism;
    /// SIGKILLs the server and starts it again on the same database (a no-op where nothing can be killed).
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>>;
    /// Stops the server.
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// How a ride wants its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// In this process, no socket, simulated time (the default).
    Simulated,
    /// In this process over loopback HTTP, real time (`--real-time`).
    Loopback,
    /// A child process that is SIGKILLed and restarted (`--server-kill-rate` > 0).
    Child,
}

/// Starts the server `kind` names on the SQLite file `db`; `start_ms` is the simulated start time.
pub async fn start(
    kind: Kind,
    db: &Path,
    faults: &ServerFaults,
    start_ms: i64,
) -> Result<Box<dyn Backend>> {
    let config = faults.server_config(db)?;
    Ok(match kind {
        Kind::Simulated => Box::new(simulated::Simulated::start(config, start_ms).await?),
        Kind::Loopback => Box::new(loopback::Loopback::start(config).await?),
        Kind::Child => Box::new(child::Child::start(config, faults.unfenced).await?),
    })
}

/// Transport for one SDK instance: through the backend's link, or a fresh real HTTP client.
pub fn phone_transport(
    link: Option<&Arc<dyn ServerLink>>,
    timeout: std::time::Duration,
) -> Result<Arc<dyn Transport>> {
    Ok(match link {
        Some(link) => Arc::new(LinkTransport(link.clone())),
        None => Arc::new(
            sendonce::transport::HttpTransport::new(timeout, std::time::Duration::from_secs(5))
                .map_err(|e| anyhow::anyhow!("http client: {e}"))?,
        ),
    })
}
