//! Where a ride's server runs, and how the phones and the test API reach it.
//!
//! A backend is one module behind [`Backend`]: `simulated` (in this process, its router called
//! without a socket, on the ride's paused clock: deterministic), `loopback` (in this process over
//! real HTTP, real time), `child` (a child process the ride SIGKILLs) and `balanced` (several
//! instances on one PostgreSQL database behind a balancer, real time). `kafka` is the consumer side
//! of a relay to a real broker (`--broker`), beside any real-time backend.

mod balanced;
mod child;
pub mod kafka;
mod link;
mod loopback;
mod simulated;

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};
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

impl Determinism {
    /// This, and one more reason the ride runs in real time.
    pub fn and(self, why: &str) -> Self {
        match self {
            Self::Deterministic => Self::RealTime(why.into()),
            Self::RealTime(first) => Self::RealTime(format!("{first}; {why}")),
        }
    }
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
    /// Instances on a fresh PostgreSQL database behind a round-robin balancer (`--db`, `--instances`).
    Balanced,
}

/// Starts the server `kind` names on the SQLite file `db` (or `faults`' PostgreSQL cluster);
/// `start_ms` is the simulated start time; its relay publishes to `broker` when given.
pub async fn start(
    kind: Kind,
    db: &Path,
    faults: &ServerFaults,
    start_ms: i64,
    broker: Option<&str>,
) -> Result<Box<dyn Backend>> {
    if faults.postgres.is_none() && faults.instances > 1 {
        bail!("--instances needs --db postgres://... (several instances share one database)");
    }
    let config = faults.server_config(db, broker)?;
    Ok(match (kind, &faults.postgres) {
        (Kind::Balanced, Some(cluster)) => {
            Box::new(balanced::Balanced::start(cluster, faults.instances, config).await?)
        }
        (_, Some(_)) => {
            bail!("--server-kill-rate with --db postgres://... is not supported yet")
        }
        (Kind::Simulated, None) => Box::new(simulated::Simulated::start(config, start_ms).await?),
        (Kind::Loopback, None) => {
            // Without --real-time, what put this ride on loopback is the broker.
            let why = match broker {
                Some(_) => {
                    "a relay to a real broker: the server over real HTTP on loopback, in real time"
                }
                None => "--real-time: real HTTP on loopback, thread pools, the OS clock",
            };
            Box::new(loopback::Loopback::start(config, why).await?)
        }
        (Kind::Balanced, None) => bail!("the balanced backend needs --db postgres://..."),
        (Kind::Child, None) => Box::new(child::Child::start(config, faults.unfenced).await?),
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
