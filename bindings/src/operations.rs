//! Operations of the app's own API and the response contract that reads its server, as uniffi
//! records (Kotlin data classes, Swift structs), converted to the core's types.

use crate::error::{Result, SendOnceError};
use crate::foreign::HttpHeader;
use crate::types::RejectionReason;

/// Method of an operation (GET reads; an operation changes something).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum OperationMethod {
    Post,
    Put,
    Patch,
    Delete,
}

/// The app's request: committed at confirm with its key, sent byte for byte by every attempt.
/// Prints without its body, header values, counterparty and note (`crate::redact`).
#[derive(Clone, PartialEq, Eq, uniffi::Record)]
#[uniffi::export(Debug, Display)]
pub struct OperationRequest {
    /// Stored and in events (`payout`, `bill_payment`); `[a-z0-9_.-]`, 1-64 characters.
    pub operation_type: String,
    /// Method.
    pub method: OperationMethod,
    /// Path below the configured base URL, e.g. `/api/v2/payment-orders`.
    pub path: String,
    /// Static headers, committed and sent with every attempt.
    #[uniffi(default = [])]
    pub headers: Vec<HttpHeader>,
    /// Content type of `body`.
    #[uniffi(default = "application/json")]
    pub content_type: String,
    /// The exact body bytes (the app's codec ran once, before this call).
    pub body: Vec<u8>,
    /// Shown in the history and the composer: who receives it.
    #[uniffi(default = "")]
    pub counterparty: String,
    /// Shown: amount in minor units (0 when none).
    #[uniffi(default = 0)]
    pub amount_minor: i64,
    /// Shown: ISO 4217 code, or empty.
    #[uniffi(default = "")]
    pub currency: String,
    /// Shown: free text.
    #[uniffi(default = None)]
    pub note: Option<String>,
}

impl From<OperationRequest> for sendonce::Operation {
    fn from(r: OperationRequest) -> Self {
        use sendonce::transport::Method as M;
        let method = match r.method {
            OperationMethod::Post => M::Post,
            OperationMethod::Put => M::Put,
            OperationMethod::Patch => M::Patch,
            OperationMethod::Delete => M::Delete,
        };
        let mut op = sendonce::Operation::new(r.operation_type, method, r.path);
        for h in r.headers {
            op = op.header(h.name, h.value);
        }
        op.body(r.content_type, r.body)
            .summary(sendonce::OperationSummary {
                counterparty: r.counterparty,
                amount_minor: r.amount_minor,
                currency: r.currency,
                note: r.note,
            })
    }
}

/// Where a value is found in an answer.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum AnswerLocator {
    /// A JSON pointer into the body, e.g. `/data/id`.
    Body { pointer: String },
    /// A response header.
    Header { name: String },
}

impl From<AnswerLocator> for sendonce::Locator {
    fn from(l: AnswerLocator) -> Self {
        match l {
            AnswerLocator::Body { pointer } => Self::Body(pointer),
            AnswerLocator::Header { name } => Self::Header(name),
        }
    }
}

/// A problem code that is a definitive refusal, and the typed reason the app switches over.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RefusalCode {
    pub code: String,
    pub reason: RejectionReason,
}

/// How to read the server's answers; `None` in the config is server-mock's contract. Refused at
/// `open` (`InvalidConfig`) if it cannot tell the server's answer from an intermediary's.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ResponseContract {
    /// Request header carrying the idempotency key.
    #[uniffi(default = "idempotency-key")]
    pub key_header: String,
    /// Where a success names the key (required: the proof that it is the server's answer to this request).
    pub key_echo: Option<AnswerLocator>,
    /// Where a success names the operation's id.
    pub operation_id: AnswerLocator,
    /// Header marking a replayed answer.
    #[uniffi(default = None)]
    pub replayed_header: Option<String>,
    /// Media type of the server's errors (`+json` or a vendor type).
    pub problem_content_type: String,
    /// JSON pointer to an error's stable code.
    pub problem_code: String,
    /// JSON pointer to an error's detail.
    pub problem_detail: String,
    /// Codes that are definitive refusals.
    pub refusals: Vec<RefusalCode>,
    /// Any other code of the server's own 4xx refuses too (`Other`); false: retried as unknown.
    #[uniffi(default = false)]
    pub other_codes_refuse: bool,
    /// Codes meaning "the first attempt is still running".
    #[uniffi(default = [])]
    pub key_in_use: Vec<String>,
    /// Codes meaning "this key was used with another body".
    #[uniffi(default = [])]
    pub key_reused: Vec<String>,
    /// Codes meaning "credentials" (besides 401/403).
    #[uniffi(default = [])]
    pub auth: Vec<String>,
    /// Codes meaning "the customer must complete a step".
    #[uniffi(default = [])]
    pub action_required: Vec<String>,
    /// Where an action-required answer names the URL to open.
    #[uniffi(default = None)]
    pub action_url: Option<AnswerLocator>,
    /// Where an action-required answer names the challenge id.
    #[uniffi(default = None)]
    pub action_challenge_id: Option<AnswerLocator>,
    /// Look-up path with `{key}`.
    pub lookup_path: String,
    /// The server's own "no operation with this key" codes.
    pub lookup_not_found: Vec<String>,
}

impl From<ResponseContract> for sendonce::ResponseContract {
    fn from(c: ResponseContract) -> Self {
        Self {
            key_header: c.key_header,
            key_echo: c.key_echo.map(Into::into),
            operation_id: c.operation_id.into(),
            replayed_header: c.replayed_header,
            problem: sendonce::ProblemFormat {
                content_type: c.problem_content_type,
                code: c.problem_code,
                detail: c.problem_detail,
            },
            refusals: c
                .refusals
                .into_iter()
                .map(|r| (r.code, r.reason.into()))
                .collect(),
            other_codes_refuse: c.other_codes_refuse,
            key_in_use: c.key_in_use,
            key_reused: c.key_reused,
            auth: c.auth,
            action_required: (!c.action_required.is_empty()).then(|| sendonce::ActionRule {
                codes: c.action_required,
                url: c.action_url.map(Into::into),
                challenge_id: c.action_challenge_id.map(Into::into),
            }),
            lookup: sendonce::LookupRoute {
                path: c.lookup_path,
                not_found_codes: c.lookup_not_found,
            },
        }
    }
}

/// Checks a contract without opening an SDK (an app's unit test of its own contract).
#[uniffi::export]
pub fn validate_contract(contract: ResponseContract) -> Result<()> {
    sendonce::ResponseContract::from(contract)
        .validate()
        .map_err(SendOnceError::from)
}
