//! What the SDK-against-server tests share: a loopback server on a SQLite file, two users
//! and the first one's phone.

// Not every test uses every field.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sendonce::{Sdk, SdkConfig, SystemClock};
use sendonce_sim::testapi::TestApi;
use server_mock::{RunningServer, ServerConfig};

/// The server, its test API, user `a`'s SDK and the user id of `b` (who receives).
pub struct Phone {
    pub server: RunningServer,
    pub api: TestApi,
    pub sdk: Sdk,
    pub to: String,
}

/// Starts `config` (its database becomes a file in `dir`), creates `a` (rich) and `b`, and
/// opens `a`'s SDK retrying between `retry.0` and `retry.1`.
pub async fn start(dir: &Path, config: ServerConfig, retry: (Duration, Duration)) -> Phone {
    let config = ServerConfig {
        db: dir.join("s.db").display().to_string(),
        ..config
    };
    let server = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = TestApi::http(server.base_url()).unwrap();
    let a = api.create_user("a", 1_000_000, "BDT").await.unwrap();
    let b = api.create_user("b", 0, "BDT").await.unwrap();
    let config = SdkConfig::builder(server.base_url(), dir.join("phone.db"))
        .access_token(a.token)
        .clock(Arc::new(SystemClock))
        .retry_base(retry.0)
        .retry_cap(retry.1)
        .build()
        .unwrap();
    let sdk = Sdk::open(config).unwrap();
    Phone {
        server,
        api,
        sdk,
        to: b.user_id,
    }
}
