//! server-mock in this process over real loopback HTTP, in real time (`--real-time`, `--broker`).

use std::sync::Arc;

use anyhow::{Context, Result};
use sendonce::transport::BoxFuture;
use server_mock::{RunningServer, ServerConfig};

use super::{Backend, Determinism, HttpLink, ServerLink};

/// The running server and an HTTP client to it.
pub struct Loopback {
    server: RunningServer,
    link: Arc<dyn ServerLink>,
    why: &'static str,
}

impl Loopback {
    /// Starts the server on a free loopback port; `why` is the ride's reason for real time.
    pub async fn start(config: ServerConfig, why: &'static str) -> Result<Self> {
        let server = server_mock::start(config, "127.0.0.1:0".parse()?)
            .await
            .context("starting server-mock")?;
        let link = Arc::new(HttpLink::new(server.base_url())?);
        Ok(Self { server, link, why })
    }
}

impl Backend for Loopback {
    fn base_url(&self) -> String {
        self.server.base_url()
    }
    fn link(&self) -> Arc<dyn ServerLink> {
        self.link.clone()
    }
    fn phone_link(&self) -> Option<Arc<dyn ServerLink>> {
        None
    }
    fn determinism(&self) -> Determinism {
        Determinism::RealTime(self.why.into())
    }
    fn kill_and_restart(&mut self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.server.shutdown())
    }
}
