//! An intermediary between the phone and the server that now and then answers in the
//! server's place after the server has answered: a captive portal's `200` HTML page or a
//! proxy's `404` text page, on POSTs and look-ups alike. Only the server's own answers may
//! end a transfer (DESIGN.md invariant 7); the checker holds the phones to that.

use std::sync::Mutex;

use sendonce::transport::{BoxFuture, HttpRequest, HttpResponse, Transport, TransportError};

use crate::rng::Rng;
use crate::tap::SharedWireLog;

/// Wraps the transport to the server (the wire tap, so the tap still sees the real answer).
pub struct GarbageProxy<T> {
    inner: T,
    rate: f64,
    rng: Mutex<Rng>,
    log: SharedWireLog,
}

impl<T: Transport> GarbageProxy<T> {
    /// Replaces each answer with garbage with probability `rate`, seeded.
    pub fn new(inner: T, log: SharedWireLog, rate: f64, seed: u64, stream: u64) -> Self {
        Self {
            inner,
            rate,
            rng: Mutex::new(Rng::new(seed, 50_000 + stream)),
            log,
        }
    }

    /// `None`, or the page the intermediary shows instead.
    fn garbage(&self) -> Option<HttpResponse> {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        if !rng.chance(self.rate) {
            return None;
        }
        Some(if rng.chance(0.5) {
            page(200, "text/html", "<html><body><h1>Welcome to Train Wi-Fi</h1><a href=\"/login\">Log in</a></body></html>")
        } else {
            page(404, "text/plain", "Not Found")
        })
    }
}

fn page(status: u16, content_type: &str, body: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), content_type.into())],
        body: body.as_bytes().to_vec(),
    }
}

impl<T: Transport> Transport for GarbageProxy<T> {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            let answer = self.inner.send(request).await;
            match (answer, self.garbage()) {
                (Ok(_), Some(garbage)) => {
                    self.log.lock().unwrap_or_else(|p| p.into_inner()).garbage += 1;
                    Ok(garbage)
                }
                (answer, _) => answer,
            }
        })
    }
}
