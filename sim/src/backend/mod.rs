//! Where a ride's server runs, and how the phones and the test API reach it.
//!
//! A backend is one module behind [`Backend`]: `simulated` (in this process, its router called
//! without a socket, on the ride's paused clock: deterministic), `loopback` (in this process over
//! real HTTP, real time), `child` (a child process the ride SIGKILLs) and `balanced` (several
//! instances on one PostgreSQL database behind a balancer, real time; child processes the ride
//! SIGKILLs one at a time when it kills servers). `kafka` is the consumer side
//! of a relay to a real broker (`--broker`), beside any real-time backend. `bank` is the second
//! backend: a bank's own API (`--api bank`), in this process, deterministic or over loopback.

mod balanced;
mod bank;
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

/// How the phones and the test API reach a backend.
pub struct Entry {
    base_url: String,
    link: Arc<dyn ServerLink>,
    /// Whether the phones go through `link` too (else each SDK instance has its own HTTP client).
    phones_share_link: bool,
}

impl Entry {
    /// Real HTTP to `http://addr`: the phones have their own clients.
    pub fn http(addr: std::net::SocketAddr) -> Result<Self> {
        let base_url = format!("http://{addr}");
        Ok(Self {
            link: Arc::new(HttpLink::new(base_url.clone())?),
            base_url,
            phones_share_link: false,
        })
    }

    /// `link` for everyone, phones included, under the base URL `base_url`.
    pub fn shared(base_url: &str, link: Arc<dyn ServerLink>) -> Self {
        Self {
            base_url: base_url.into(),
            link,
            phones_share_link: true,
        }
    }
}

/// A server the ride can reach and break.
pub trait Backend: Send {
    /// How it is reached.
    fn entry(&self) -> &Entry;
    /// Base URL the phones are configured with.
    fn base_url(&self) -> String {
        self.entry().base_url.clone()
    }
    /// The way to the server for the test API and the dashboard.
    fn link(&self) -> Arc<dyn ServerLink> {
        self.entry().link.clone()
    }
    /// A fresh transport under a phone's wire tap (`None`: real HTTP, one client per SDK instance).
    fn phone_link(&self) -> Option<Arc<dyn ServerLink>> {
        let entry = self.entry();
        entry.phones_share_link.then(|| entry.link.clone())
    }
    /// Whether this backend replays a seed.
    fn determinism(&self) -> Determinism;
    /// SIGKILLs the server (one instance of several) and starts it again on the same
    /// database; a no-op where nothing can be killed.
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
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
    /// Instances on a fresh PostgreSQL database behind a round-robin balancer (`--db`,
    /// `--instances`): child processes SIGKILLed now and then with `--server-kill-rate`.
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
    if faults.relay_marks_unacked && (kind != Kind::Loopback || broker.is_none()) {
        bail!("--unsafe-relay-marks-unacked needs --broker and a server in this process (no kills, no --db)");
    }
    let config = faults.server_config(db, broker)?;
    Ok(match (kind, &faults.postgres) {
        (Kind::Balanced, Some(cluster)) => {
            Box::new(balanced::Balanced::start(cluster, faults, config).await?)
        }
        (_, Some(_)) => bail!("a ride on PostgreSQL runs on the balanced backend"),
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

/// Starts the bank (`--api bank`): deterministic in this process, or over loopback with `real_time`.
pub async fn start_bank(seed: u64, real_time: bool) -> Result<Box<dyn Backend>> {
    Ok(Box::new(bank::BankBackend::start(seed, real_time).await?))
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
