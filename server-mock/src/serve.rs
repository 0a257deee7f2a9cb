//! The accept loop: HTTP/1.1 connections that a handler can drop without any answer, with
//! a header-read timeout (slow and idle clients are closed) and a bound on open connections.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};

use crate::config::Limits;
use tower::ServiceExt;

/// How long open connections get to finish after shutdown starts.
const DRAIN: Duration = Duration::from_secs(5);

/// Request extension that closes the request's TCP connection without a response.
///
/// This is why the server has its own accept loop: the "response lost after commit"
/// fault needs the client to see a dead connection, not a status line.
#[derive(Clone, Debug)]
pub struct ConnKill(Arc<Notify>);

impl ConnKill {
    /// Drops the connection; the handler's answer is never written.
    pub fn kill(&self) {
        self.0.notify_one();
    }
}

/// What a connection beyond `max_connections` gets before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
retry-after: 1\r\nconnection: close\r\ncontent-length: 95\r\n\r\n\
{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503,\"code\":\"too_many_connections\"}";

/// Serves `router` on `listener` until `shutdown` flips, then drains open connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (mut stream, _peer) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Usually EMFILE: back off instead of spinning.
                        tracing::warn!(%e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    // Full: say so and close, rather than let the accept loop or the file
                    // table fill up. Never waits on the client for long.
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(BUSY)).await;
                    });
                    continue;
                };
                let kill = Arc::new(Notify::new());
                let handle = ConnKill(Arc::clone(&kill));
                let router = router.clone();
                let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                    let mut req = req.map(Body::new);
                    req.extensions_mut().insert(handle.clone());
                    router.clone().oneshot(req)
                });
                // The header-read timer runs from the moment hyper waits for a request head, so
                // it also closes keep-alive connections that sit idle.
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_read_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _slot = slot; // released when the connection ends
                    tokio::select! {
                        result = conn => {
                            if let Err(e) = result {
                                tracing::debug!(%e, "connection ended with an error");
                            }
                        }
                        _ = kill.notified() => tracing::info!("connection dropped by fault injection"),
                    }
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(DRAIN) => tracing::warn!("connections still open after the drain period"),
    }
}
