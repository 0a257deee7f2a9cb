//! Client of the mock server's test API: users, wallets, ledger, SMS, settle.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

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
#[derive(Debug, Clone)]
pub struct TestApi {
    http: reqwest::Client,
    base: String,
}

impl TestApi {
    /// A client for the server at `base` (`http://host:port`).
    pub fn new(base: impl Into<String>) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?;
        Ok(Self {
            http,
            base: base.into(),
        })
    }

    async fn get<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> Result<T> {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        if !response.status().is_success() {
            bail!("GET {path} answered {}", response.status());
        }
        response
            .json()
            .await
            .with_context(|| format!("GET {path}: body"))
    }

    async fn post<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> Result<T> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        if !response.status().is_success() {
            bail!("POST {path} answered {}", response.status());
        }
        response
            .json()
            .await
            .with_context(|| format!("POST {path}: body"))
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
        let response = self
            .http
            .put(format!("{}/v1/test/faults", self.base))
            .json(&body)
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("PUT /v1/test/faults answered {}", response.status());
        }
        Ok(())
    }

    /// Switches every server fault off.
    pub async fn clear_faults(&self) -> Result<()> {
        let response = self
            .http
            .delete(format!("{}/v1/test/faults", self.base))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("DELETE /v1/test/faults answered {}", response.status());
        }
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
