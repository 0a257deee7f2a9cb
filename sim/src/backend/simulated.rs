//! The deterministic backend: server-mock in this process, its router called without a socket,
//! its database inline and its clock tokio's (paused) one.

use std::sync::Arc;

use anyhow::{Context, Result};
use sendonce::transport::BoxFuture;
use server_mock::{InProcessServer, ServerConfig};

use super::{Backend, Determinism, RouterLink, ServerLink};

/// Base URL of the simulated server: no port, nothing listens.
const BASE_URL: &str = "http://localhost";

/// The in-process server and the link to its router.
pub struct Simulated {
    server: InProcessServer,
    link: Arc<dyn ServerLink>,
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
        let link: Arc<dyn ServerLink> = Arc::new(RouterLink(server.router.clone()));
        Ok(Self { server, link })
    }
}

impl Backend for Simulated {
    fn base_url(&self) -> String {
        BASE_URL.into()
    }
    fn link(&self) -> Arc<dyn ServerLink> {
        self.link.clone()
    }
    fn phone_link(&self) -> Option<Arc<dyn ServerLink>> {
        Some(self.link.clone())
    }
    fn determinism(&self) -> Determinism {
        Determinism::Deterministic
    }
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.server.shutdown())
    }
}
