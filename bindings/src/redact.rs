//! How the records that carry personal data print — Kotlin `toString()`, Swift `description` and
//! `debugDescription`, Rust `{:?}` and `{}`: the recipient, the note, the counterparty, and a
//! request's body and header values show as `<redacted>`, so an app that logs what the SDK hands it
//! (a crash reporter attaching the last transfer, a debug log of a list) leaks none of them. What
//! identifies the operation for support — ids, key, state, amount, currency — still prints.

use std::fmt;

use crate::operations::OperationRequest;
use crate::types::{Transfer, TransferRequest};

const REDACTED: &str = "<redacted>";

/// `<redacted>` for a value that is there, `null` for one that is not (so a log still tells them apart).
fn shown<T>(value: &Option<T>) -> &'static str {
    if value.is_some() {
        REDACTED
    } else {
        "null"
    }
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Transfer(localId={}, idempotencyKey={}, operationType={}, state={:?}, attempts={}, \
             amountMinor={}, currency={}, toUserId={REDACTED}, note={}, serverTransferId={}, \
             replayed={}, rejection={:?}, lastError={:?})",
            self.local_id,
            self.idempotency_key,
            self.operation_type,
            self.state,
            self.attempts,
            self.amount_minor,
            self.currency,
            shown(&self.note),
            self.server_transfer_id.as_deref().unwrap_or("null"),
            self.replayed,
            self.rejection.as_ref().map(|r| &r.reason),
            self.last_error,
        )
    }
}

impl fmt::Display for TransferRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TransferRequest(toUserId={REDACTED}, amountMinor={}, currency={}, note={})",
            self.amount_minor,
            self.currency,
            shown(&self.note)
        )
    }
}

impl fmt::Display for OperationRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|h| h.name.as_str()).collect();
        write!(
            f,
            "OperationRequest(operationType={}, method={:?}, path={}, headers={headers:?} (values \
             {REDACTED}), contentType={}, body={} bytes {REDACTED}, counterparty={REDACTED}, \
             amountMinor={}, currency={}, note={})",
            self.operation_type,
            self.method,
            self.path,
            self.content_type,
            self.body.len(),
            self.amount_minor,
            self.currency,
            shown(&self.note)
        )
    }
}

/// Debug is Display: the same redacted line (Swift's `debugDescription`, Rust's `{:?}`).
macro_rules! debug_is_display {
    ($($t:ty),*) => {$(
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    )*};
}
debug_is_display!(Transfer, TransferRequest, OperationRequest);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foreign::HttpHeader;
    use crate::operations::OperationMethod;

    #[test]
    fn personal_data_never_prints() {
        let request = TransferRequest {
            to_user_id: "u_recipient_secret".into(),
            amount_minor: 500,
            currency: "BDT".into(),
            note: Some("rent for flat 3B".into()),
        };
        let op = OperationRequest {
            operation_type: "payout".into(),
            method: OperationMethod::Post,
            path: "/v2/payouts".into(),
            headers: vec![HttpHeader {
                name: "x-api-key".into(),
                value: "key_secret".into(),
            }],
            content_type: "application/json".into(),
            body: br#"{"iban":"DE00 secret"}"#.to_vec(),
            counterparty: "Jane Secret".into(),
            amount_minor: 500,
            currency: "EUR".into(),
            note: Some("rent for flat 3B".into()),
        };
        for printed in [
            format!("{request}"),
            format!("{request:?}"),
            format!("{op}"),
            format!("{op:?}"),
        ] {
            for secret in ["secret", "flat 3B", "iban"] {
                assert!(!printed.contains(secret), "{secret} leaked: {printed}");
            }
            assert!(printed.contains("<redacted>"), "{printed}");
        }
        assert!(
            format!("{op}").contains("x-api-key"),
            "header names still print"
        );
    }
}
