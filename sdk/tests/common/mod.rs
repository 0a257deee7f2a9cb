//! Test harness: the real server-mock on loopback with a real SQLite file, and SDK instances on temp files.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use sendonce::{Sdk, SdkConfig, TransferRequest};
use serde_json::{json, Value};

/// A running server-mock plus an HTTP client for its test API.
pub struct Server {
    pub running: Option<server_mock::RunningServer>,
    pub url: String,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A user created through the test API.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub token: String,
}

impl Server {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = server_mock::ServerConfig {
            db: dir.path().join("server.db").display().to_string(),
            gateway_delay: Duration::from_millis(2),
            ..Default::default()
        };
        let running = server_mock::start(config, "127.0.0.1:0".parse::<SocketAddr>().unwrap())
            .await
            .unwrap();
        let url = running.base_url();
        Self {
            running: Some(running),
            url,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    pub async fn user(&self, name: &str, balance: i64) -> User {
        let v: Value = self
            .http
            .post(format!("{}/v1/test/users", self.url))
            .json(&json!({"display_name": name, "balance_minor": balance, "currency": "BDT"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        User {
            id: v["user_id"].as_str().unwrap().into(),
            token: v["token"].as_str().unwrap().into(),
        }
    }

    /// Every debit on the server ledger for this idempotency key.
    pub async fn debits_with_key(&self, key: &str) -> usize {
        self.ledger()
            .await
            .iter()
            .filter(|e| e["kind"] == "debit" && e["idempotency_key"] == key)
            .count()
    }

    pub async fn ledger(&self) -> Vec<Value> {
        let v: Value = self
            .http
            .get(format!("{}/v1/test/ledger", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        match v {
            Value::Array(a) => a,
            other => other["entries"].as_array().cloned().unwrap_or_default(),
        }
    }

    pub async fn faults(&self, faults: Value) {
        let r = self
            .http
            .put(format!("{}/v1/test/faults", self.url))
            .json(&faults)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "faults rejected: {}", r.status());
    }
}

/// A server, a payer with `balance`, a payee, and a folder for device files.
pub struct Parties {
    pub server: Server,
    pub alice: User,
    pub bob: User,
    pub dir: tempfile::TempDir,
}

pub async fn parties(balance: i64) -> Parties {
    let server = Server::start().await;
    let alice = server.user("alice", balance).await;
    let bob = server.user("bob", 0).await;
    Parties {
        server,
        alice,
        bob,
        dir: tempfile::tempdir().unwrap(),
    }
}

/// An SDK config on `db` for `user`, with short timeouts and fast retries suitable for tests.
pub fn config(url: &str, db: &Path, user: &User) -> sendonce::SdkConfigBuilder {
    SdkConfig::builder(url, db)
        .access_token(user.token.clone())
        .retry_base(Duration::from_millis(20))
        .retry_cap(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(5))
}

pub fn open(url: &str, db: &Path, user: &User) -> Sdk {
    Sdk::open(config(url, db, user).build().unwrap()).unwrap()
}

pub fn request(to: &User, amount: i64) -> TransferRequest {
    TransferRequest {
        to_user_id: to.id.clone(),
        amount_minor: amount,
        currency: "BDT".into(),
        note: Some("test".into()),
    }
}

/// Bounded wait for an outcome: a hung test fails instead of hanging CI.
pub async fn outcome(sdk: &Sdk, id: &str) -> sendonce::Transfer {
    tokio::time::timeout(Duration::from_secs(30), sdk.wait_for_outcome(id))
        .await
        .expect("no outcome within 30 s")
        .unwrap()
}
pub mod bank;
pub mod golden;
pub mod logs;
pub mod scripted;
pub mod tmpfs;
