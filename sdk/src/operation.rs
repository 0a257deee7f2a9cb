//! An operation: the app's own request (method, path, headers, exact body), committed at confirm and
//! sent byte for byte under one idempotency key until the server ends it.
//!
//! A transfer to server-mock is one operation among others ([`Operation::transfer`]); a bank's payout,
//! bill payment or top-up is described the same way, with the bank's paths, headers and body.

use std::sync::Arc;

use crate::error::{Result, SdkError};
use crate::model::TransferRequest;
use crate::transport::Method;

/// Largest body an operation may commit (the store keeps it for every attempt).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Operation type name of [`Operation::transfer`] (and of every transfer written before operations existed).
pub const TRANSFER_TYPE: &str = "transfer";

/// Header names the SDK owns: the app may neither commit nor provide them.
const RESERVED_HEADERS: &[&str] = &[
    "idempotency-key",
    "authorization",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
];

/// What the history and the composer show of an operation: the user's line, not the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperationSummary {
    /// Who receives the money (a user id, an account, a biller); shown, never sent by the SDK.
    pub counterparty: String,
    /// Amount in minor units (0 when the operation has none).
    pub amount_minor: i64,
    /// ISO 4217 code, or empty.
    pub currency: String,
    /// Free text.
    pub note: Option<String>,
}

/// Turns an app's typed value into the body bytes, once, at confirm.
///
/// The bytes it returns are committed with the key and sent unchanged by every attempt; the codec is
/// never asked again for the same operation, so it may embed a nonce or a timestamp.
pub trait BodyCodec<T>: Send + Sync {
    /// The content type of the bytes (committed as a header of the operation).
    fn content_type(&self) -> String {
        "application/json".into()
    }
    /// The body bytes of `value`; an error refuses the confirm (`InvalidOperation`).
    fn encode(&self, value: &T) -> std::result::Result<Vec<u8>, String>;
}

/// The JSON codec of any `serde::Serialize` value.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonCodec;

impl<T: serde::Serialize> BodyCodec<T> for JsonCodec {
    fn encode(&self, value: &T) -> std::result::Result<Vec<u8>, String> {
        serde_json::to_vec(value).map_err(|e| e.to_string())
    }
}

/// The default codec of a [`TransferRequest`]: server-mock's wire format, byte for byte as before.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransferCodec;

impl BodyCodec<TransferRequest> for TransferCodec {
    fn encode(&self, value: &TransferRequest) -> std::result::Result<Vec<u8>, String> {
        Ok(value.body_bytes())
    }
}

type Encode = Box<dyn FnOnce() -> std::result::Result<(String, Vec<u8>), String> + Send>;

enum Body {
    Bytes(Vec<u8>),
    Encoded(Encode),
}

/// The app's request, as it will be committed at confirm.
///
/// ```
/// use sendonce::{Operation, OperationSummary};
/// use sendonce::transport::Method;
/// let payout = Operation::new("payout", Method::Post, "/v2/payouts")
///     .header("x-channel", "mobile")
///     .body("application/json", br#"{"source_account":"acc_1","amount":"12.50"}"#.to_vec())
///     .summary(OperationSummary { counterparty: "acc_9".into(), amount_minor: 1250,
///         currency: "EUR".into(), note: None });
/// assert_eq!(payout.type_name(), "payout");
/// ```
pub struct Operation {
    type_name: String,
    method: Method,
    path: String,
    headers: Vec<(String, String)>,
    body: Body,
    summary: OperationSummary,
    transfer: Option<TransferRequest>,
}

impl std::fmt::Debug for Operation {
    // The body and headers may hold personal data: only their shape is printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("type_name", &self.type_name)
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

impl Operation {
    /// An operation of type `type_name` (stored and in events; `[a-z0-9_.-]`, 1–64 characters) sent
    /// as `method path` (the path is appended to the configured base URL).
    pub fn new(type_name: impl Into<String>, method: Method, path: impl Into<String>) -> Self {
        Self {
            type_name: type_name.into(),
            method,
            path: path.into(),
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
            summary: OperationSummary::default(),
            transfer: None,
        }
    }

    /// A transfer in server-mock's wire format: what `send_transfer` sends.
    pub fn transfer(request: TransferRequest) -> Self {
        let summary = OperationSummary {
            counterparty: request.to_user_id.clone(),
            amount_minor: request.amount_minor,
            currency: request.currency.clone(),
            note: request.note.clone(),
        };
        let mut op = Self::new(TRANSFER_TYPE, Method::Post, "/v1/transfers")
            .encoded(request.clone(), Arc::new(TransferCodec))
            .summary(summary);
        op.transfer = Some(request);
        op
    }

    /// A static header, committed with the operation and sent with every attempt.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .push((name.into().to_ascii_lowercase(), value.into()));
        self
    }

    /// The exact body bytes and their content type.
    pub fn body(mut self, content_type: impl Into<String>, bytes: Vec<u8>) -> Self {
        self.set_content_type(content_type.into());
        self.body = Body::Bytes(bytes);
        self
    }

    /// A typed value that `codec` turns into the body bytes once, at confirm.
    pub fn encoded<T: Send + 'static>(mut self, value: T, codec: Arc<dyn BodyCodec<T>>) -> Self {
        self.body = Body::Encoded(Box::new(move || {
            let bytes = codec.encode(&value)?;
            Ok((codec.content_type(), bytes))
        }));
        self
    }

    /// What the history and the composer show.
    pub fn summary(mut self, summary: OperationSummary) -> Self {
        self.summary = summary;
        self
    }

    /// The operation type name.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    fn set_content_type(&mut self, content_type: String) {
        self.headers.retain(|(n, _)| n != "content-type");
        if !content_type.is_empty() {
            self.headers.push(("content-type".into(), content_type));
        }
    }

    /// Checks the operation and produces its bytes: called once, at confirm, before anything is persisted.
    pub(crate) fn commit(mut self) -> Result<Committed> {
        if let Some(request) = &self.transfer {
            request.validate()?;
        }
        check_type_name(&self.type_name)?;
        check_path(&self.path)?;
        if self.method == Method::Get {
            return Err(invalid(
                "GET reads; an operation changes something (POST, PUT, PATCH or DELETE)",
            ));
        }
        let body = match std::mem::replace(&mut self.body, Body::Bytes(Vec::new())) {
            Body::Bytes(bytes) => bytes,
            Body::Encoded(encode) => {
                let (content_type, bytes) = encode().map_err(|e| invalid(format!("codec: {e}")))?;
                self.set_content_type(content_type);
                bytes
            }
        };
        if body.len() > MAX_BODY_BYTES {
            return Err(invalid(format!(
                "body of {} bytes is above {MAX_BODY_BYTES}",
                body.len()
            )));
        }
        for (name, value) in &self.headers {
            check_header(name, value)?;
        }
        check_summary(&self.summary)?;
        Ok(Committed {
            type_name: self.type_name,
            method: self.method,
            path: self.path,
            headers: self.headers,
            body,
            summary: self.summary,
        })
    }
}

/// An operation whose bytes are fixed: what the store commits with the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Committed {
    pub type_name: String,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub summary: OperationSummary,
}

fn invalid(why: impl Into<String>) -> SdkError {
    SdkError::InvalidOperation(why.into())
}

fn check_type_name(name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "type name {name:?} must be 1-64 characters of a-z 0-9 _ . -"
        )))
    }
}

/// A path is appended to the configured base URL: it can never name another origin.
fn check_path(path: &str) -> Result<()> {
    let ok = path.starts_with('/')
        && !path.starts_with("//")
        && path.len() <= 2048
        && !path.contains('#')
        && path.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "path {path:?} must start with one '/', be at most 2048 visible ASCII characters, no fragment"
        )))
    }
}

/// Header names are HTTP tokens, values visible ASCII and spaces (no line break can split a header).
pub(crate) fn check_header(name: &str, value: &str) -> Result<()> {
    let token = !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
        });
    if !token {
        return Err(invalid(format!(
            "header name {name:?} is not a lower-case HTTP token"
        )));
    }
    if is_reserved(name) {
        return Err(invalid(format!(
            "header {name:?} is set by the SDK, not the app"
        )));
    }
    if value.len() > 8192 || !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "value of header {name:?} must be visible ASCII, at most 8 KiB"
        )));
    }
    Ok(())
}

/// True for a header the SDK sets itself.
pub(crate) fn is_reserved(name: &str) -> bool {
    RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

fn check_summary(s: &OperationSummary) -> Result<()> {
    if s.amount_minor < 0 {
        return Err(invalid("summary amount must not be negative"));
    }
    if s.counterparty.chars().count() > 128 || s.counterparty.chars().any(char::is_control) {
        return Err(invalid(
            "summary counterparty: at most 128 characters, no control characters",
        ));
    }
    if s.currency.len() > 8 {
        return Err(invalid("summary currency: at most 8 characters"));
    }
    if let Some(note) = &s.note {
        if note.chars().count() > 140 || note.chars().any(char::is_control) {
            return Err(invalid(
                "summary note: at most 140 characters, no control characters",
            ));
        }
    }
    Ok(())
}

/// Who is asked, before every attempt, for headers that change per attempt (a request signature, a
/// device attestation, a trace id). Implementable from Kotlin and Swift.
///
/// These headers are not committed; the committed headers and the SDK's own always win over them.
pub trait HeaderProvider: Send + Sync {
    /// Headers for this attempt.
    fn headers(&self, attempt: &AttemptInfo) -> Vec<(String, String)>;
}

/// What a [`HeaderProvider`] is told about the attempt it provides headers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptInfo {
    /// The operation's local id.
    pub local_id: String,
    /// Its type name.
    pub operation_type: String,
    /// Its idempotency key (the same for every attempt).
    pub idempotency_key: String,
    /// Which attempt (from 1).
    pub attempt: u32,
}
