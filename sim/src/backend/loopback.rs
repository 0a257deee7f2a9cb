//! server-mock in this process over real loopback HTTP, in real time (`--real-time`, `--broker`).

use anyhow::{Context, Result};
use sendonce::transport::BoxFuture;
use server_mock::{RunningServer, ServerConfig};

use super::{Backend, Determinism, Entry};

/// The running server and an HTTP client to it.
pub struct Loopback {
    server: RunningServer,
    entry: Entry,
    why: &'static str,
}

impl Loopback {
    /// Starts the server on a free loopback port; `why` is the ride's reason for real time.
    pub async fn start(config: ServerConfig, why: &'static str) -> Result<Self> {
        let server = server_mock::start(config, "127.0.0.1:0".parse()?)
            .await
            .context("starting server-mock")?;
        let entry = Entry::http(server.addr)?;
        Ok(Self { server, entry, why })
    }
}

impl Backend for Loopback {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn determinism(&self) -> Determinism {
        Determinism::RealTime(self.why.into())
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.server.shutdown())
    }
}
