//! One HTTP exchange with the ride's server: over a socket (reqwest), or by calling its router.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use axum::body::Body;
use reqwest::Method;
use sendonce::transport::{BoxFuture, HttpRequest, HttpResponse, Transport, TransportError};
use tower::ServiceExt;

/// The way to the server.
pub trait ServerLink: Send + Sync + 'static {
    /// Sends `method path_and_query` with these headers and body.
    fn call(
        &self,
        method: Method,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> BoxFuture<'_, Result<HttpResponse, TransportError>>;
}

/// Real HTTP to `base`.
pub struct HttpLink {
    client: reqwest::Client,
    base: String,
}

impl HttpLink {
    /// A client for `http://host:port`.
    pub fn new(base: String) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self { client, base })
    }
}

impl ServerLink for HttpLink {
    fn call(
        &self,
        method: Method,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            let mut request = self.client.request(method, format!("{}{path}", self.base));
            for (n, v) in headers {
                request = request.header(n, v);
            }
            let response = request
                .body(body)
                .send()
                .await
                .map_err(|e| TransportError::Connection(e.to_string()))?;
            let (status, headers) = (response.status(), header_pairs(response.headers()));
            answer(status, headers, response.bytes().await)
        })
    }
}

/// The server's router called in this process: no socket, no port, no I/O thread.
pub struct RouterLink(pub axum::Router);

impl ServerLink for RouterLink {
    fn call(
        &self,
        method: Method,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            // What an HTTP client would add: the test API answers loopback hosts only.
            let mut request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "localhost");
            for (n, v) in headers {
                request = request.header(n, v);
            }
            let request = request
                .body(Body::from(body))
                .map_err(|e| TransportError::Connection(e.to_string()))?;
            let response = match self.0.clone().oneshot(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let (status, headers) = (response.status(), header_pairs(response.headers()));
            // A body that fails is the server dropping the connection (a fault it injects).
            answer(
                status,
                headers,
                axum::body::to_bytes(response.into_body(), usize::MAX).await,
            )
        })
    }
}

/// The answer, or the connection error a failed body is.
fn answer<E: std::fmt::Display>(
    status: axum::http::StatusCode,
    headers: Vec<(String, String)>,
    body: Result<axum::body::Bytes, E>,
) -> Result<HttpResponse, TransportError> {
    let body = body.map_err(|e| TransportError::Connection(e.to_string()))?;
    Ok(HttpResponse {
        status: status.as_u16(),
        headers,
        body: body.to_vec(),
    })
}

fn header_pairs(headers: &axum::http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// A phone's transport over a [`ServerLink`] (the SDK's requests carry absolute URLs).
pub struct LinkTransport(pub Arc<dyn ServerLink>);

impl Transport for LinkTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        let method = match request.method {
            sendonce::transport::Method::Get => Method::GET,
            sendonce::transport::Method::Post => Method::POST,
        };
        let path = path_of(&request.url);
        self.0.call(method, path, request.headers, request.body)
    }
}

/// `/v1/x?y` of `http://host:port/v1/x?y`.
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    match rest.find('/') {
        Some(i) => rest[i..].to_string(),
        None => "/".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_of_an_absolute_url() {
        assert_eq!(super::path_of("http://localhost/v1/t?k=1"), "/v1/t?k=1");
        assert_eq!(super::path_of("http://127.0.0.1:8080"), "/");
    }
}
