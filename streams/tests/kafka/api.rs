//! server-mock's HTTP API as the tests use it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::SETTLE_LIMIT;

/// server-mock over HTTP.
pub struct Api {
    base: String,
    client: reqwest::Client,
}

/// A user: id and token.
pub struct User {
    pub id: String,
    pub token: String,
}

impl Api {
    /// Builds a client of `base` (`http://IP:PORT`).
    pub fn new(base: &str) -> Api {
        Api {
            base: base.to_string(),
            // Shorter than server-mock's idle keep-alive close (10 s): no stale connection.
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .pool_idle_timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
        }
    }

    /// POSTs a test-API call; its JSON answer.
    async fn post(&self, path: &str, body: &Value) -> Value {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .json(body)
            .send();
        r.await.unwrap().json().await.unwrap()
    }

    /// A user with `balance` minor units of BDT.
    pub async fn user(&self, name: &str, balance: i64) -> User {
        let body = json!({"display_name": name, "balance_minor": balance, "currency": "BDT"});
        let v = self.post("/v1/test/users", &body).await;
        User {
            id: v["user_id"].as_str().expect("user_id").to_string(),
            token: v["token"].as_str().unwrap().to_string(),
        }
    }

    /// One transfer, retried with the same key until it has a definitive answer (the
    /// server may be restarting); returns its transfer id.
    pub async fn transfer(&self, from: &User, to: &User, amount: i64, key: &str) -> String {
        let body = json!({"to_user_id": to.id, "amount_minor": amount, "currency": "BDT"});
        let deadline = Instant::now() + SETTLE_LIMIT;
        loop {
            let r = self
                .client
                .post(format!("{}/v1/transfers", self.base))
                .bearer_auth(&from.token)
                .header("idempotency-key", key)
                .json(&body)
                .send()
                .await;
            if let Ok(r) = r {
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                match status {
                    200 | 201 => return v["transfer_id"].as_str().unwrap().to_string(),
                    409 | 429 | 500..=599 => {}
                    other => panic!("transfer {key}: {other} {v}"),
                }
            }
            assert!(Instant::now() < deadline, "transfer {key} never finished");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Marks every outbox event from `from_event` on unpublished (the relay sends them
    /// again); returns how many.
    pub async fn replay_outbox(&self, from_event: i64) -> i64 {
        let body = json!({ "from_event": from_event });
        let v = self.post("/v1/test/outbox/replay", &body).await;
        v["republished"].as_i64().expect("republished")
    }

    /// server-mock's counters.
    pub async fn stats(&self) -> Value {
        match self
            .client
            .get(format!("{}/v1/test/stats", self.base))
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }
}
