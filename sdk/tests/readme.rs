//! README.md's Rust code, as written there: `scripts/check-readme` keeps each README block identical
//! to the marked region below, and these tests run it against the real server-mock on loopback.

use std::error::Error;
use std::time::Duration;

use serde_json::{json, Value};
use server_mock::{RunningServer, ServerConfig};

// --- README.md, app developers, Rust ---------------------------------------------------------------
use std::sync::Arc;

use sendonce::{Sdk, SdkConfig, SdkError, Transfer, TransferListener, TransferRequest};

/// The screen's history, told of every change of every transfer (on the SDK's thread).
struct History;
impl TransferListener for History {
    fn on_transfer_changed(&self, t: Transfer) {
        println!("{}: {:?}", t.local_id, t.state);
    }
}

async fn pay_rent(url: &str, db: &str, token: &str, landlord: &str) -> Result<Transfer, SdkError> {
    // Open: one instance per process; transfers a killed app left unfinished resume here.
    let sdk = Sdk::shared(SdkConfig::builder(url, db).access_token(token).build()?)?;
    // Observe: every change of every transfer.
    sdk.add_listener(Arc::new(History));
    // Send: the key is minted and the transfer committed before the first byte leaves.
    let request = TransferRequest {
        to_user_id: landlord.into(),
        amount_minor: 50_000, // 500.00 BDT
        currency: "BDT".into(),
        note: None,
    };
    let sent = sdk.send_transfer(request).await?;
    sdk.wait_for_outcome(&sent.local_id).await // Succeeded, Rejected (typed reason), NeedsAttention
}

/// Background: send what is due, return by the deadline; Some(ms) = run again after that.
async fn drain_now(sdk: &Sdk) -> Result<Option<i64>, SdkError> {
    Ok(sdk.drain(Duration::from_secs(25)).await?.next_attempt_in_ms)
}
// ----------------------------------------------------------------------------------------------------

/// The app code above against server-mock: one debit, and nothing left for the background.
#[tokio::test]
async fn the_readme_app_code_runs_as_written() -> Result<(), Box<dyn Error>> {
    let server = server_mock::start(
        ServerConfig {
            db: ":memory:".into(),
            ..Default::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let (alice, bob) = (user(&server, 100_000).await, user(&server, 0).await);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("phone.db").display().to_string();
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        pay_rent(&server.base_url(), &db, &alice.token, &bob.id),
    )
    .await??;
    assert_eq!(done.state, sendonce::TransferState::Succeeded);
    assert_eq!(debits(&server, &done.idempotency_key).await, 1);
    let sdk = Sdk::shared(
        SdkConfig::builder(server.base_url(), &db)
            .access_token(alice.token)
            .build()?,
    )?;
    assert_eq!(drain_now(&sdk).await?, None, "nothing left to send");
    sdk.close();
    server.shutdown().await;
    Ok(())
}

// --- README.md, app developers, Rust: test against train mode ---------------------------------------
use sendonce::{Clock, NetworkProfile, SimClock, SystemClock, TransferState};

#[tokio::test]
async fn rent_moves_once_on_a_train() -> Result<(), Box<dyn Error>> {
    let config = ServerConfig {
        db: ":memory:".into(),
        ..Default::default()
    };
    let server = server_mock::start(config, "127.0.0.1:0".parse()?).await?;
    let (alice, bob) = (user(&server, 100_000).await, user(&server, 0).await); // POST /v1/test/users
    let dir = tempfile::tempdir()?;
    let sdk = Sdk::open(
        SdkConfig::builder(server.base_url(), dir.path().join("phone.db"))
            .access_token(alice.token)
            .clock(Arc::new(SimClock::new(SystemClock.now_ms(), 50.0))) // minutes of train in seconds
            .build()?,
    )?;
    sdk.set_network_profile(NetworkProfile::Train, 7)?; // tunnels, lost answers, replays
    let request = TransferRequest {
        to_user_id: bob.id,
        amount_minor: 5_000,
        currency: "BDT".into(),
        note: None,
    };
    let sent = sdk.send_transfer(request).await?;
    let done = sdk.wait_for_outcome(&sent.local_id).await?;
    assert_eq!(done.state, TransferState::Succeeded);
    assert_eq!(debits(&server, &sent.idempotency_key).await, 1); // once, whatever the train did
    server.shutdown().await;
    Ok(())
}
// ----------------------------------------------------------------------------------------------------

/// A user of server-mock's test API.
struct User {
    id: String,
    token: String,
}

/// Creates a user with `balance` through `POST /v1/test/users`.
async fn user(server: &RunningServer, balance: i64) -> User {
    let v: Value = reqwest::Client::new()
        .post(format!("{}/v1/test/users", server.base_url()))
        .json(&json!({"display_name": "u", "balance_minor": balance, "currency": "BDT"}))
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

/// The server ledger's debits under `key` (`GET /v1/test/ledger`).
async fn debits(server: &RunningServer, key: &str) -> usize {
    let v: Value = reqwest::Client::new()
        .get(format!("{}/v1/test/ledger", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entries = match v {
        Value::Array(a) => a,
        other => other["entries"].as_array().cloned().unwrap_or_default(),
    };
    entries
        .iter()
        .filter(|e| e["kind"] == "debit" && e["idempotency_key"] == key)
        .count()
}
