//! Helpers shared by the integration tests: a server on a real database, a client.
//!
//! One suite, two backends: with `SENDONCE_TEST_POSTGRES` set to a PostgreSQL URL (what
//! `scripts/pg start` prints), every server of the suite runs on a fresh database of that
//! cluster; without it, on a fresh SQLite file.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use server_mock::{start, RunningServer, ServerConfig};

/// A server on a fresh SQLite file in a temp dir.
pub struct TestServer {
    pub server: RunningServer,
    pub url: String,
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A user created through the test API.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub token: String,
}

/// One HTTP answer, body kept as exact bytes.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_string()
    }
    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }
    pub fn content_type(&self) -> String {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

/// The PostgreSQL cluster the suite runs on, if any.
pub fn postgres() -> Option<String> {
    std::env::var("SENDONCE_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
}

/// A fresh, empty database: a new database of the PostgreSQL cluster, or the SQLite file
/// `name` in `dir`.
pub async fn fresh_db(dir: &std::path::Path, name: &str) -> String {
    let Some(url) = postgres() else {
        return dir.join(name).to_string_lossy().into_owned();
    };
    server_mock::store::postgres::fresh_database(&url, "t")
        .await
        .expect("a fresh database of SENDONCE_TEST_POSTGRES")
}

pub async fn start_with(tune: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig {
        db: fresh_db(dir.path(), "mock.db").await,
        ..ServerConfig::default()
    };
    tune(&mut config);
    let server = start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("server starts");
    TestServer {
        url: server.base_url(),
        server,
        client: client(),
        _dir: dir,
    }
}

pub async fn start_default() -> TestServer {
    start_with(|_| {}).await
}

pub fn transfer_body(to: &str, amount: i64) -> String {
    json!({"to_user_id": to, "amount_minor": amount, "currency": "BDT", "note": "rent"}).to_string()
}

pub async fn to_resp(r: reqwest::Response) -> Resp {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.bytes().await.expect("body").to_vec();
    Resp {
        status,
        headers,
        body,
    }
}

impl TestServer {
    pub async fn user(&self, name: &str, balance: i64) -> User {
        let v = self
            .post_json(
                "/v1/test/users",
                &json!({"display_name": name, "balance_minor": balance, "currency": "BDT"}),
            )
            .await;
        assert_eq!(v.status, 201, "create user: {:?}", v.json());
        let j = v.json();
        User {
            id: j["user_id"].as_str().unwrap().to_string(),
            token: j["token"].as_str().unwrap().to_string(),
        }
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Resp {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .json(body)
            .send()
            .await
            .expect("send");
        to_resp(r).await
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> Resp {
        let r = self
            .client
            .put(format!("{}{path}", self.url))
            .json(body)
            .send()
            .await
            .expect("send");
        to_resp(r).await
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Resp {
        let mut req = self.client.get(format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        to_resp(req.send().await.expect("send")).await
    }

    /// Sends a transfer; `Err` on a connection-level failure.
    pub async fn try_transfer(
        &self,
        token: &str,
        key: Option<&str>,
        body: &str,
    ) -> Result<Resp, reqwest::Error> {
        let mut req = self
            .client
            .post(format!("{}/v1/transfers", self.url))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let r = req.send().await?;
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.bytes().await?.to_vec();
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    /// Starts a POST whose answer is collected later.
    pub fn post_in_background(
        &self,
        user: &User,
        key: &str,
        body: &str,
    ) -> tokio::task::JoinHandle<Resp> {
        let (client, url, token, key, body) = (
            self.client.clone(),
            self.url.clone(),
            user.token.clone(),
            key.to_string(),
            body.to_string(),
        );
        tokio::spawn(async move {
            let r = client
                .post(format!("{url}/v1/transfers"))
                .bearer_auth(token)
                .header("idempotency-key", key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("send");
            to_resp(r).await
        })
    }

    pub async fn transfer(&self, token: &str, key: Option<&str>, body: &str) -> Resp {
        self.try_transfer(token, key, body).await.expect("transfer")
    }

    /// Retries like the SDK does (same key, same bytes) until a definitive answer; a key
    /// that never gets one fails naming the last answers it got.
    pub async fn transfer_until_done(&self, token: &str, key: &str, body: &str) -> Resp {
        let mut last = Vec::new();
        for _ in 0..400 {
            match self.try_transfer(token, Some(key), body).await {
                Ok(r) if r.status == 409 || r.status >= 500 => {
                    last.push(format!("{} {}", r.status, r.code()));
                }
                Ok(r) => return r,
                Err(e) => {
                    last.push(format!("err {e}"));
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let n = last.len();
        panic!(
            "transfer with key {key} never finished: {:?}",
            &last[n.saturating_sub(12)..]
        );
    }

    pub async fn ledger(&self) -> Vec<Value> {
        let r = self.get("/v1/test/ledger", None).await;
        assert_eq!(r.status, 200);
        r.json().as_array().cloned().unwrap_or_default()
    }

    pub async fn debits_for(&self, user: &User, key: &str) -> usize {
        self.ledger()
            .await
            .iter()
            .filter(|e| {
                e["kind"] == "debit"
                    && e["user_id"] == user.id.as_str()
                    && e["idempotency_key"] == key
            })
            .count()
    }

    pub async fn balance(&self, user: &User) -> i64 {
        let r = self.get("/v1/wallet", Some(&user.token)).await;
        assert_eq!(r.status, 200, "wallet: {:?}", r.json());
        r.json()["balance_minor"].as_i64().unwrap()
    }

    pub async fn settle(&self) -> Value {
        let r = self.post_json("/v1/test/settle", &json!({})).await;
        assert_eq!(r.status, 200);
        let s = r.json();
        assert_eq!(s["outbox_pending"], 0, "outbox did not drain: {s}");
        s
    }

    pub async fn faults(&self, patch: Value) {
        let r = self.put_json("/v1/test/faults", &patch).await;
        assert_eq!(r.status, 200, "faults: {:?}", r.json());
    }

    pub async fn stop(self) {
        self.server.shutdown().await;
    }
}
