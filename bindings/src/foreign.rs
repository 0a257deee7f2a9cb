//! What the app plugs in: its token provider and its own HTTP stack (OkHttp, URLSession), as async
//! foreign traits, and the adapters that hand them to the SDK.
//!
//! The network simulator (train mode) wraps a foreign transport exactly as it wraps the built-in one:
//! the SDK only ever sees a `sendonce::transport::Transport`.

use std::sync::Arc;
use std::time::Duration;

use sendonce::transport::{BoxFuture, Method, TransportError};

/// Why the token provider could not give a token now (anything it throws arrives as this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum TokenError {
    /// No token now; the transfers that need one park in AuthRequired.
    #[error("token provider failed: {detail}")]
    Failed { detail: String },
}

impl From<uniffi::UnexpectedUniFFICallbackError> for TokenError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        Self::Failed { detail: e.reason }
    }
}

/// The app's source of access tokens (Kotlin interface with a `suspend fun`, Swift protocol with an
/// `async` method). Asked once for a fresh token when the server answers 401, bounded by the
/// config's `token_timeout`; a provider that fails or hangs holds up no other transfer.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait AccessTokenProvider: Send + Sync {
    /// A token for the signed-in account (`force_refresh` when the server refused the current one);
    /// `None` when signed out.
    async fn token(&self, force_refresh: bool) -> Result<Option<String>, TokenError>;
}

pub(crate) struct TokenProviderAdapter(pub Arc<dyn AccessTokenProvider>);

impl sendonce::AccessTokenProvider for TokenProviderAdapter {
    fn token(&self, force_refresh: bool) -> BoxFuture<'_, Result<Option<String>, String>> {
        Box::pin(async move { self.0.token(force_refresh).await.map_err(|e| e.to_string()) })
    }
}

/// One header.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct HttpHeader {
    /// Name (lower case in answers).
    pub name: String,
    /// Value.
    pub value: String,
}

/// The headers of a request: a list like any other, except that its printed forms (Rust `Debug`, the
/// Kotlin `toString` and Swift `description` of `HttpRequest`, through the `RedactedHeaders` types of
/// both packages) show the value of `authorization` as `<redacted>`: a transport that logs the request
/// it was handed never leaks the bearer token.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RequestHeaders(pub Vec<HttpHeader>);

uniffi::custom_type!(RequestHeaders, Vec<HttpHeader>, {
    lower: |headers| headers.0,
    try_lift: |headers| Ok(RequestHeaders(headers)),
});

impl std::ops::Deref for RequestHeaders {
    type Target = Vec<HttpHeader>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for RequestHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|h| {
                let secret = h.name.eq_ignore_ascii_case("authorization");
                (
                    &h.name,
                    if secret {
                        "<redacted>"
                    } else {
                        h.value.as_str()
                    },
                )
            }))
            .finish()
    }
}

/// One request, fully materialised: send exactly these bytes, never retry, never follow a redirect.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct HttpRequest {
    /// `GET` or `POST`.
    pub method: String,
    /// Absolute URL.
    pub url: String,
    /// Headers to send as they are (the bearer token among them; never printed).
    pub headers: RequestHeaders,
    /// Body bytes (empty for GET).
    pub body: Vec<u8>,
}

/// One answer, whatever its status (a 3xx is handed back, not followed).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: Vec<HttpHeader>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// Why no answer came back; every variant means "outcome unknown" (anything a transport throws
/// arrives as `Connection`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum TransportFailure {
    /// No network at all.
    #[error("offline")]
    Offline,
    /// No answer in time.
    #[error("timed out")]
    Timeout,
    /// The connection could not be made or broke (TLS and certificate-pin failures too).
    #[error("connection error: {detail}")]
    Connection { detail: String },
}

impl From<uniffi::UnexpectedUniFFICallbackError> for TransportFailure {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        Self::Connection { detail: e.reason }
    }
}

/// The app's HTTP client (OkHttp, URLSession, ...): the bindings ship both adapters.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait HttpTransport: Send + Sync {
    /// Sends `request` once and returns the answer.
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportFailure>;
}

/// A foreign transport as the SDK's transport, bounded by the config's request timeout (the
/// foreign client's own timeouts may be longer or missing).
pub(crate) struct TransportAdapter {
    pub transport: Arc<dyn HttpTransport>,
    pub timeout: Duration,
}

impl sendonce::transport::Transport for TransportAdapter {
    fn send(
        &self,
        request: sendonce::transport::HttpRequest,
    ) -> BoxFuture<'_, Result<sendonce::transport::HttpResponse, TransportError>> {
        let request = HttpRequest {
            method: match request.method {
                Method::Get => "GET".into(),
                Method::Post => "POST".into(),
                Method::Put => "PUT".into(),
                Method::Patch => "PATCH".into(),
                Method::Delete => "DELETE".into(),
            },
            url: request.url,
            headers: RequestHeaders(
                request
                    .headers
                    .into_iter()
                    .map(|(name, value)| HttpHeader { name, value })
                    .collect(),
            ),
            body: request.body,
        };
        Box::pin(async move {
            let answer = tokio::time::timeout(self.timeout, self.transport.send(request))
                .await
                .map_err(|_| TransportError::Timeout)?;
            match answer {
                Ok(r) => Ok(sendonce::transport::HttpResponse {
                    status: r.status,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|h| (h.name.to_ascii_lowercase(), h.value))
                        .collect(),
                    body: r.body,
                }),
                Err(TransportFailure::Offline) => Err(TransportError::Offline),
                Err(TransportFailure::Timeout) => Err(TransportError::Timeout),
                Err(TransportFailure::Connection { detail }) => {
                    Err(TransportError::Connection(detail))
                }
            }
        })
    }
}
