//! The operation under test: server-mock's transfers by default, or any idempotent POST of
//! the backend described in a JSON profile (`--operation FILE`), so the kit checks a
//! service whose request is not a transfer (examples/orders: an order paid by card).
//!
//! A profile names the paths and codes, and a body template whose string values may hold
//! placeholders: `"{amount}"` (the whole string: replaced by the number), `{target}` (the
//! fixtures' `recipient_id`: who or what the operation is directed at), `{currency}` (the
//! payer's), `{note}` (a text unique to the check).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::fixtures::User;

/// A status and a problem `code`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Expected {
    /// HTTP status.
    pub status: u16,
    /// The problem+json `code`.
    pub code: String,
}

/// The operation the checks send, and how the backend answers about it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// Path of the idempotent POST.
    pub path: String,
    /// Path of the by-key look-up, with `{key}` for the (escaped) key.
    pub lookup: String,
    /// `code` of the look-up's 404 for a key nothing ran under.
    pub not_found_code: String,
    /// Path of `GET` that answers the caller's `user_id`, `currency` and `balance_minor`.
    pub account_path: String,
    /// The body template.
    pub body: Value,
    /// What the backend answers when `{target}` names nothing (not stored).
    pub unknown_target: Expected,
    /// The field of a success (and of the look-up's 200) that names the operation.
    pub id_field: String,
    /// Fields of the body a success must carry back as sent.
    pub echo: Vec<String>,
}

impl Default for Operation {
    /// server-mock's transfers.
    fn default() -> Self {
        Self {
            path: "/v1/transfers".into(),
            lookup: "/v1/transfers?idempotency_key={key}".into(),
            not_found_code: "transfer_not_found".into(),
            account_path: "/v1/wallet".into(),
            body: json!({"to_user_id": "{target}", "amount_minor": "{amount}",
                         "currency": "{currency}", "note": "{note}"}),
            unknown_target: Expected {
                status: 404,
                code: "recipient_not_found".into(),
            },
            id_field: "transfer_id".into(),
            echo: ["to_user_id", "amount_minor", "currency"]
                .map(String::from)
                .to_vec(),
        }
    }
}

impl Operation {
    /// Reads a profile.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let op: Self =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if op.render(&json!(0), "t", "c", "n") == op.render(&json!(1), "t", "c", "n") {
            return Err(format!(
                "{}: the body template has no \"{{amount}}\"",
                path.display()
            ));
        }
        Ok(op)
    }

    /// The exact body bytes for `user`, moving `amount` to `target`.
    pub fn body(&self, user: &User, target: &str, amount: i64, note: &str) -> Vec<u8> {
        self.render(&json!(amount), target, &user.currency, note)
            .to_string()
            .into_bytes()
    }

    /// The look-up path for `escaped_key`.
    pub fn lookup_path(&self, escaped_key: &str) -> String {
        self.lookup.replace("{key}", escaped_key)
    }

    fn render(&self, amount: &Value, target: &str, currency: &str, note: &str) -> Value {
        fn walk(v: &Value, f: &dyn Fn(&str) -> Value) -> Value {
            match v {
                Value::String(s) => f(s),
                Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, f)).collect()),
                Value::Object(m) => {
                    Value::Object(m.iter().map(|(k, x)| (k.clone(), walk(x, f))).collect())
                }
                other => other.clone(),
            }
        }
        walk(&self.body, &|s| {
            if s == "{amount}" {
                return amount.clone();
            }
            let s = s
                .replace("{target}", target)
                .replace("{currency}", currency)
                .replace("{note}", note);
            Value::String(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> User {
        User {
            name: "A",
            token: "t".into(),
            user_id: "u".into(),
            currency: "BDT".into(),
            allowance_minor: 10,
        }
    }

    #[test]
    fn the_default_is_server_mocks_transfer_byte_for_byte() {
        let body = Operation::default().body(&user(), "u_r", 5, "hi");
        let want = json!({"to_user_id": "u_r", "amount_minor": 5, "currency": "BDT", "note": "hi"});
        assert_eq!(body, want.to_string().into_bytes());
    }

    #[test]
    fn a_profile_without_an_amount_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("op.json");
        let mut op = serde_json::to_value(Operation::default()).unwrap();
        op["body"] = json!({"sku": "{target}"});
        std::fs::write(&p, op.to_string()).unwrap();
        assert!(Operation::load(&p).unwrap_err().contains("{amount}"));
    }
}
