//! The deterministic backend: server-mock in this process, its router called without a socket,
//! its database inline and its clock tokio's (paused) one.

use anyhow::{Context, Result};
use sendonce::transport::BoxFuture;
use server_mock::{InProcessServer, ServerConfig};

use super::{Backend, Determinism, Entry, RouterLink};

/// Base URL of the simulated server: no port, nothing listens.
const BASE_URL: &str = "http://localhost";

/// The in-process server and the link to its router.
pub struct Simulated {
    server: InProcessServer,
    entry: Entry,
}

impl Simulated {
    /// Opens the database and starts the relay and the reaper on the current (paused) runtime.
    pub async fn start(config: ServerConfig, start_ms: i64) -> Result<Self> {
        let config = ServerConfig {
            simulated_start_ms: Some(start_ms),
            ..config
        };
        let server = server_mock::start_in_process(config)
            .await
            .context("starting server-mock")?;
        let link = std::sync::Arc::new(RouterLink(server.router.clone()));
        let entry = Entry::shared(BASE_URL, link);
        Ok(Self { server, entry })
    }
}

impl Backend for Simulated {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn determinism(&self) -> Determinism {
        Determinism::Deterministic
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.server.shutdown())
    }
}
