//! Operations of the app's own API as uniffi records (Kotlin data classes, Swift structs), converted
//! to the core's builder. The response contract that reads the server is the core's own type
//! (`sendonce::ResponseContract`, a uniffi record under the core's `uniffi` feature), re-exported.

use crate::error::{Result, SendOnceError};
use crate::foreign::HttpHeader;

pub use sendonce::{
    ActionRule, Locator, LookupRoute, ProblemFormat, RefusalCode, ResponseContract,
};

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

/// Checks a contract without opening an SDK (an app's unit test of its own contract).
#[uniffi::export]
pub fn validate_contract(contract: ResponseContract) -> Result<()> {
    contract.validate().map_err(SendOnceError::from)
}
