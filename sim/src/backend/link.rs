//! One HTTP exchange with the ride's server: over a socket (reqwest), or by calling its router.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
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
            let response = self
                .client
                .request(method, format!("{}{path}", self.base))
                .headers(header_map(headers)?)
                .body(body)
                .send()
                .await
                .map_err(connection)?;
            let head = (response.status(), response.headers().clone());
            answer(head, response.bytes().await)
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
                .header("host", "localhost")
                .body(Body::from(body))
                .map_err(connection)?;
            request.headers_mut().extend(header_map(headers)?);
            let response = match self.0.clone().oneshot(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let (head, body) = response.into_parts();
            // A body that fails is the server dropping the connection (a fault it injects).
            answer(
                (head.status, head.headers),
                axum::body::to_bytes(body, usize::MAX).await,
            )
        })
    }
}

/// The request's headers; one that is not a valid header fails the exchange before it starts.
fn header_map(headers: Vec<(String, String)>) -> Result<HeaderMap, TransportError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (n, v) in headers {
        let name = HeaderName::try_from(n).map_err(connection)?;
        map.append(name, HeaderValue::try_from(v).map_err(connection)?);
    }
    Ok(map)
}

fn connection(e: impl std::fmt::Display) -> TransportError {
    TransportError::Connection(e.to_string())
}

/// The answer, or the connection error a failed body is.
fn answer<E: std::fmt::Display>(
    (status, headers): (StatusCode, HeaderMap),
    body: Result<axum::body::Bytes, E>,
) -> Result<HttpResponse, TransportError> {
    Ok(HttpResponse {
        status: status.as_u16(),
        headers: headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
        body: body.map_err(connection)?.to_vec(),
    })
}

/// A phone's transport over a [`ServerLink`] (the SDK's requests carry absolute URLs).
pub struct LinkTransport(pub Arc<dyn ServerLink>);

impl Transport for LinkTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        let method = match request.method {
            sendonce::transport::Method::Get => Method::GET,
            sendonce::transport::Method::Post => Method::POST,
            sendonce::transport::Method::Put => Method::PUT,
            sendonce::transport::Method::Patch => Method::PATCH,
            sendonce::transport::Method::Delete => Method::DELETE,
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
