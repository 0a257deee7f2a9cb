//! How requests leave the device: a small trait so the network simulator can wrap any transport.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future (the trait must stay object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// HTTP methods the SDK uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Read.
    Get,
    /// Create.
    Post,
    /// Replace (an operation the app describes).
    Put,
    /// Change (an operation the app describes).
    Patch,
    /// Remove (an operation the app describes).
    Delete,
}

impl Method {
    /// The method of its stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "GET" => Self::Get,
            "POST" => Self::Post,
            "PUT" => Self::Put,
            "PATCH" => Self::Patch,
            "DELETE" => Self::Delete,
            _ => return None,
        })
    }
}

/// One request, fully materialised so it can be replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Method.
    pub method: Method,
    /// Absolute URL.
    pub url: String,
    /// Header pairs.
    pub headers: Vec<(String, String)>,
    /// Body bytes (empty for GET).
    pub body: Vec<u8>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header pairs, names lower case.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// First header with this (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why no answer came back. Every variant means: the outcome is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// No network at all.
    #[error("offline")]
    Offline,
    /// No answer in time (the request may have arrived and committed).
    #[error("timed out")]
    Timeout,
    /// The connection could not be made or broke.
    #[error("connection error: {0}")]
    Connection(String),
}

/// Sends one request and returns the answer.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request`.
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>>;
}

/// The real network, through reqwest with rustls (the `reqwest-transport` feature, on by default).
#[cfg(feature = "reqwest-transport")]
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
}

#[cfg(feature = "reqwest-transport")]
impl HttpTransport {
    /// A client with these timeouts.
    pub fn new(
        request_timeout: std::time::Duration,
        connect_timeout: std::time::Duration,
    ) -> Result<Self, TransportError> {
        let client = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(connect_timeout)
            // Retries belong to the SDK's schedule; a hidden library retry would be invisible to it.
            .retry(reqwest::retry::never())
            // A 3xx is no answer about the transfer: following it would resend the key and the body
            // to another origin (or turn a POST into a portal's GET); the sender treats it as unknown.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("sendonce/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TransportError::Connection(e.to_string()))?;
        Ok(Self { client })
    }
}

#[cfg(feature = "reqwest-transport")]
impl Transport for HttpTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            let mut builder = match request.method {
                Method::Get => self.client.get(&request.url),
                Method::Post => self.client.post(&request.url).body(request.body),
                Method::Put => self.client.put(&request.url).body(request.body),
                Method::Patch => self.client.patch(&request.url).body(request.body),
                Method::Delete => self.client.delete(&request.url).body(request.body),
            };
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            let response = builder.send().await.map_err(map_error)?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = response.bytes().await.map_err(map_error)?.to_vec();
            Ok(HttpResponse {
                status,
                headers,
                body,
            })
        })
    }
}

#[cfg(feature = "reqwest-transport")]
fn map_error(e: reqwest::Error) -> TransportError {
    if e.is_timeout() {
        TransportError::Timeout
    } else {
        TransportError::Connection(e.to_string())
    }
}
