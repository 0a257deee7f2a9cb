//! server-mock serves the contract as OpenAPI 3.1 at `GET /openapi.json`: exactly the
//! checked-in file.

use server_mock::ServerConfig;

const CHECKED_IN: &str = include_str!("../../server-mock/openapi.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_exactly_the_checked_in_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        db: dir.path().join("mock.db").to_string_lossy().into_owned(),
        ..Default::default()
    };
    let srv = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = http
        .get(format!("{}/openapi.json", srv.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body = resp.bytes().await.unwrap();
    assert_eq!(
        &body[..],
        CHECKED_IN.as_bytes(),
        "the route serves the checked-in file byte for byte"
    );
    let spec: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(spec["openapi"], "3.1.0");
    let schemas = &spec["components"]["schemas"];
    assert!(schemas["Problem"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "code"));
    let key = &spec["components"]["parameters"]["IdempotencyKey"];
    assert_eq!(key["name"], "Idempotency-Key");
    assert_eq!(key["in"], "header");
    assert!(spec["components"]["headers"]["IdempotentReplayed"].is_object());
    let created = &spec["paths"]["/v1/transfers"]["post"]["responses"]["201"];
    assert!(created["headers"]["Idempotent-Replayed"].is_object());
    srv.shutdown().await;
}
