//! A second backend for rides (`sendonce-sim ride --api bank`): a bank's own payments API, not
//! server-mock's. Other paths, its own key header (`X-Request-Key`), a body with a source account
//! and metadata, the key and the order id in response headers, its own error media type and codes,
//! and strong customer authentication (428 `SCA_REQUIRED`) above a threshold, which the phone's user
//! approves in the banking app before the app calls `action_completed`.
//!
//! The phones send it [`Operation`]s under [`contract`]; the ride's checker holds it to the same
//! invariants as server-mock.

mod server;

use std::sync::Arc;

use anyhow::{bail, Result};
use reqwest::Method;
use sendonce::transport::Method as SdkMethod;
use sendonce::{
    ActionRule, Locator, LookupRoute, Operation, OperationSummary, ProblemFormat, RefusalCode,
    RejectionReason, ResponseContract, TransferRequest,
};
use serde_json::{json, Value};

pub use server::Bank;

use crate::backend::ServerLink;

/// Where payment orders are created.
pub const ORDERS: &str = "/api/v2/payment-orders";
/// The bank's idempotency key header (requests and successful answers).
pub const KEY_HEADER: &str = "x-request-key";
/// Where a success names the order.
pub const OPERATION_ID_HEADER: &str = "x-operation-id";
/// Marks a stored answer given again.
pub const REPLAYED_HEADER: &str = "x-replayed";
/// Orders of at least this amount wait for strong customer authentication.
pub const SCA_THRESHOLD_MINOR: i64 = 150_000;
/// Operation type of a payment order in the phone's store.
pub const OPERATION_TYPE: &str = "payment_order";

/// The bank's response contract, as the app configures the SDK with it.
pub fn contract() -> ResponseContract {
    let codes = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    ResponseContract {
        key_header: KEY_HEADER.into(),
        key_echo: Some(Locator::Header(KEY_HEADER.into())),
        operation_id: Locator::Header(OPERATION_ID_HEADER.into()),
        replayed_header: Some(REPLAYED_HEADER.into()),
        problem: ProblemFormat {
            content_type: server::ERROR_TYPE.into(),
            code: "/error/code".into(),
            detail: "/error/message".into(),
        },
        refusals: vec![
            RefusalCode::new("FUNDS_INSUFFICIENT", RejectionReason::InsufficientFunds),
            RefusalCode::new("ACCOUNT_UNKNOWN", RejectionReason::RecipientNotFound),
            RefusalCode::new("VALIDATION_FAILED", RejectionReason::InvalidRequest),
        ],
        other_codes_refuse: false,
        key_in_use: codes(&["REQUEST_IN_PROGRESS"]),
        key_reused: codes(&["REQUEST_KEY_CONFLICT"]),
        auth: codes(&["TOKEN_EXPIRED"]),
        action_required: Some(ActionRule {
            codes: codes(&["SCA_REQUIRED"]),
            url: Some(Locator::Body("/error/sca/redirect_url".into())),
            challenge_id: Some(Locator::Body("/error/sca/challenge_id".into())),
        }),
        lookup: LookupRoute {
            path: format!("{ORDERS}/by-key/{{key}}"),
            not_found_codes: codes(&["ORDER_NOT_FOUND"]),
        },
    }
}

/// A payment order as the bank reads it from the request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// The payee's account.
    pub destination: String,
    /// Minor units.
    pub amount_minor: i64,
}

impl Order {
    /// The order in `body`, sent by `user` (whose account must be the source).
    pub fn parse(body: &[u8], user: &str) -> std::result::Result<Self, String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("body: {e}"))?;
        let text = |p: &str| v.pointer(p).and_then(Value::as_str);
        if text("/source_account") != Some(user) {
            return Err("source_account is not an account of this customer".into());
        }
        let destination = text("/destination/account").filter(|d| !d.is_empty());
        let destination = destination.ok_or("destination.account missing")?;
        if text("/amount/currency").is_none_or(|c| c.len() != 3) {
            return Err("amount.currency must be an ISO 4217 code".into());
        }
        let value = text("/amount/value").ok_or("amount.value missing")?;
        let amount_minor = parse_amount(value).ok_or("amount.value must be like 12.50")?;
        Ok(Self {
            destination: destination.to_string(),
            amount_minor,
        })
    }
}

/// `"12.50"` → 1250: a positive decimal with exactly two fraction digits.
fn parse_amount(value: &str) -> Option<i64> {
    let (units, cents) = value.split_once('.')?;
    let digits =
        |s: &str, n: usize| s.len() <= n && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(units, 12) || cents.len() != 2 || !digits(cents, 2) {
        return None;
    }
    let minor = units.parse::<i64>().ok()? * 100 + cents.parse::<i64>().ok()?;
    (minor > 0).then_some(minor)
}

/// The ride's transfer `request` of `user` as the bank's payment order: its bytes, once, at confirm.
pub fn operation(user: &str, request: &TransferRequest) -> Operation {
    let amount = request.amount_minor;
    let body = json!({
        "source_account": user,
        "destination": {"account": request.to_user_id},
        "amount": {"value": format!("{}.{:02}", amount / 100, amount % 100), "currency": request.currency},
        "metadata": {"note": request.note, "channel": "sendonce-sim"},
    });
    Operation::new(OPERATION_TYPE, SdkMethod::Post, ORDERS)
        .header("x-channel", "mobile")
        .body("application/json", body.to_string().into_bytes())
        .summary(OperationSummary {
            counterparty: request.to_user_id.clone(),
            amount_minor: amount,
            currency: request.currency.clone(),
            note: request.note.clone(),
        })
}

/// The customer passes challenge `challenge` in the banking app (outside the SDK's network).
pub async fn approve(link: &Arc<dyn ServerLink>, token: &str, challenge: &str) -> Result<()> {
    let path = format!("/api/v2/sca/{challenge}/approve");
    let auth = vec![("authorization".to_string(), format!("Bearer {token}"))];
    let answer = link.call(Method::POST, path, auth, Vec::new()).await?;
    if answer.status != 204 {
        bail!("approving {challenge}: {}", answer.status);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_the_bank_reads() {
        assert_eq!(parse_amount("12.50"), Some(1250));
        assert_eq!(parse_amount("0.01"), Some(1));
        for bad in [
            "12.5", "12", ".50", "-1.00", "0.00", "1.000", "1e3.00", "", "1.5a",
        ] {
            assert_eq!(parse_amount(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_order_round_trips_and_belongs_to_its_sender() {
        let request = TransferRequest {
            to_user_id: "acc-2".into(),
            amount_minor: 123_405,
            currency: "BDT".into(),
            note: Some("ride s1 u0 t0".into()),
        };
        let body = json!({
            "source_account": "acc-1",
            "destination": {"account": "acc-2"},
            "amount": {"value": "1234.05", "currency": "BDT"},
        });
        let order = Order::parse(body.to_string().as_bytes(), "acc-1").unwrap();
        assert_eq!(order.amount_minor, request.amount_minor);
        assert!(Order::parse(body.to_string().as_bytes(), "acc-3").is_err());
        assert_eq!(operation("acc-1", &request).type_name(), OPERATION_TYPE);
    }

    #[test]
    fn its_contract_is_one_the_sdk_accepts() {
        contract().validate().unwrap();
    }
}
