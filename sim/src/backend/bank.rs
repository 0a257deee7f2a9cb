//! The bank (`crate::bank`) as a ride's server: in this process, its router called without a
//! socket on the paused clock (deterministic), or over real loopback HTTP (`--real-time`).

use std::sync::Arc;

use anyhow::Result;
use sendonce::transport::BoxFuture;

use super::{Backend, Determinism, Entry, RouterLink};
use crate::bank::Bank;

/// The bank's server and the way to it.
pub struct BankBackend {
    entry: Entry,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl BankBackend {
    /// A fresh bank whose faults and delays follow `seed`; over loopback HTTP when `real_time`.
    pub async fn start(seed: u64, real_time: bool) -> Result<Self> {
        let router = Bank::new(seed).router();
        if !real_time {
            let link = Arc::new(RouterLink(router));
            let entry = Entry::shared("http://localhost", link);
            return Ok(Self {
                entry,
                served: None,
            });
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let entry = Entry::http(listener.local_addr()?)?;
        let served = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!("bank server: {e}");
            }
        });
        Ok(Self {
            entry,
            served: Some(served),
        })
    }
}

impl Backend for BankBackend {
    fn entry(&self) -> &Entry {
        &self.entry
    }
    fn determinism(&self) -> Determinism {
        match self.served {
            None => Determinism::Deterministic,
            Some(_) => Determinism::RealTime(
                "--real-time: real HTTP on loopback, thread pools, the OS clock".into(),
            ),
        }
    }
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        if let Some(served) = &self.served {
            served.abort();
        }
        Box::pin(async {})
    }
}
