//! Client of the mock server's test API: users, wallets, ledger, SMS, settle.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::backend::ServerLink;

/// A user created for the ride.
#[derive(Debug, Clone, Deserialize)]
pub struct NewUser {
    /// Server user id.
    pub user_id: String,
    /// Bearer token.
    pub token: String,
}

/// One ledger row.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Entry {
    /// Row id.
    pub entry_id: i64,
    /// Whose balance it changes.
    pub user_id: String,
    /// `deposit`, `debit` or `credit`.
    pub kind: String,
    /// Always positive; the kind gives the sign.
    pub amount_minor: i64,
    /// Transfer it belongs to.
    pub transfer_id: Option<String>,
    /// Sender's key.
    pub idempotency_key: Option<String>,
}

/// One notification.
#[derive(Debug, Clone, Deserialize)]
pub struct Sms {
    /// Its id (listings are paged by it).
    pub sms_id: i64,
    /// Recipient of the SMS.
    pub user_id: String,
    /// Transfer it announces.
    pub transfer_id: String,
}

/// What `/v1/test/settle` reports.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct Stats {
    /// Events not yet published (0 once drained).
    pub outbox_pending: i64,
    /// Keys still `in_progress`.
    pub keys_in_progress: i64,
}

#[derive(Deserialize)]
struct Wallet {
    balance_minor: i64,
}

/// Test API of one server.
#[derive(Clone)]
pub struct TestApi {
    link: Arc<dyn ServerLink>,
}

impl TestApi {
    /// A client of the server behind `link`.
    pub fn new(link: Arc<dyn ServerLink>) -> Self {
        Self { link }
    }

    /// A client of the server at `base` (`http://host:port`) over real HTTP.
    pub fn http(base: impl Into<String>) -> Result<Self> {
        Ok(Self::new(Arc::new(crate::backend::HttpLink::new(
            base.into(),
        )?)))
    }

    /// `method path` with an optional JSON body and bearer token; the answer's JSON if 2xx.
    async fn call<T: for<'de> Deserialize<'de>>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        token: Option<&str>,
    ) -> Result<T> {
        let mut headers = Vec::new();
        if let Some(token) = token {
            headers.push(("authorization".into(), format!("Bearer {token}")));
        }
        let body = match body {
            Some(b) => {
                headers.push(("content-type".into(), "application/json".into()));
                serde_json::to_vec(b)?
            }
            None => Vec::new(),
        };
        let what = format!("{method} {path}");
        let response = self
            .link
            .call(method, path.to_string(), headers, body)
            .await
            .with_context(|| what.clone())?;
        if !(200..300).contains(&response.status) {
            bail!("{what} answered {}", response.status);
        }
        let body = if response.body.is_empty() {
            b"null".as_slice()
        } else {
            &response.body
        };
        serde_json::from_slice(body).with_context(|| format!("{what}: body"))
    }

    async fn get<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> Result<T> {
        self.call(Method::GET, path, None, token).await
    }

    async fn post<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<T> {
        self.call(Method::POST, path, Some(&body), None).await
    }

    /// Creates a user with an opening balance.
    pub async fn create_user(
        &self,
        name: &str,
        balance_minor: i64,
        currency: &str,
    ) -> Result<NewUser> {
        self.post(
            "/v1/test/users",
            json!({"display_name": name, "balance_minor": balance_minor, "currency": currency}),
        )
        .await
    }

    /// The user's balance (the sum of its ledger).
    pub async fn balance(&self, token: &str) -> Result<i64> {
        Ok(self
            .get::<Wallet>("/v1/wallet", Some(token))
            .await?
            .balance_minor)
    }

    /// Every ledger entry (page by page).
    pub async fn ledger(&self) -> Result<Vec<Entry>> {
        self.all_pages("/v1/test/ledger", |e: &Entry| e.entry_id)
            .await
    }

    /// Every SMS sent (page by page).
    pub async fn sms(&self) -> Result<Vec<Sms>> {
        self.all_pages("/v1/test/sms", |s: &Sms| s.sms_id).await
    }

    /// Follows a paged test listing (`?after=ID&limit=N`) to its end.
    async fn all_pages<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        id: impl Fn(&T) -> i64,
    ) -> Result<Vec<T>> {
        const LIMIT: usize = 5_000;
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let page: Vec<T> = self
                .get(&format!("{path}?after={after}&limit={LIMIT}"), None)
                .await?;
            let done = page.len() < LIMIT;
            if let Some(last) = page.last() {
                after = id(last);
            }
            all.extend(page);
            if done {
                return Ok(all);
            }
        }
    }

    /// Switches the server's own faults on: 503s, responses dropped after commit, duplicate deliveries.
    pub async fn set_faults(&self, rate: f64, seed: u64) -> Result<()> {
        self.put_faults(&json!({
            "error_503_rate": rate,
            "drop_response_after_commit_rate": rate,
            "duplicate_delivery_rate": rate,
            "seed": seed,
        }))
        .await
    }

    /// Merges `patch` into the server's fault switches.
    pub async fn put_faults(&self, body: &serde_json::Value) -> Result<()> {
        let _: serde_json::Value = self
            .call(Method::PUT, "/v1/test/faults", Some(body), None)
            .await?;
        Ok(())
    }

    /// Switches every server fault off.
    pub async fn clear_faults(&self) -> Result<()> {
        let _: serde_json::Value = self
            .call(Method::DELETE, "/v1/test/faults", None, None)
            .await?;
        Ok(())
    }

    /// Moves the server's wall clock by `ms` (either way).
    pub async fn jump_clock(&self, ms: i64) -> Result<()> {
        let _: serde_json::Value = self
            .post("/v1/test/clock", json!({ "advance_ms": ms }))
            .await?;
        Ok(())
    }

    /// Runs one reaper pass now.
    pub async fn reap(&self) -> Result<()> {
        let _: serde_json::Value = self.post("/v1/test/reap", json!({})).await?;
        Ok(())
    }

    /// Waits until the outbox is drained (every credit and SMS done).
    pub async fn settle(&self) -> Result<Stats> {
        self.post("/v1/test/settle", json!({})).await
    }
}
