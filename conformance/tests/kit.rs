//! The kit against a fresh in-process server-mock (SQLite): everything passes, through
//! the library and through the binary (its lines, exit codes and report files).

mod mutants;

use std::process::Command;

use clap::Parser;
use sendonce_conformance::report::{Report, Status};
use sendonce_conformance::Args;
use serde_json::{json, Value};
use server_mock::ServerConfig;

const BIN: &str = env!("CARGO_BIN_EXE_sendonce-conformance");

async fn server(dir: &tempfile::TempDir) -> server_mock::RunningServer {
    let config = ServerConfig {
        db: dir.path().join("mock.db").to_string_lossy().into_owned(),
        ..Default::default()
    };
    server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn lines(r: &Report) -> String {
    r.checks
        .iter()
        .map(|c| c.line())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the binary off the runtime (the server it talks to runs on the runtime).
async fn bin(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        (
            out.status.code().unwrap_or(-1),
            text(out.stdout),
            text(out.stderr),
        )
    })
    .await
    .unwrap()
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_mock_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(&dir).await;
    let args = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &srv.base_url(),
        "--test-api",
    ])
    .unwrap();
    let mut out = Vec::new();
    let report = sendonce_conformance::run(&args, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    eprintln!("{text}");
    assert_eq!(report.count(Status::Fail), 0, "{}", lines(&report));
    assert_eq!(report.count(Status::Skip), 0, "{}", lines(&report));
    assert!(text.starts_with("plan: "), "the money plan comes first");
    assert!(text.trim_end().ends_with(&report.summary()));
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_prints_lines_writes_reports_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(&dir).await;
    let (json_path, junit_path) = (dir.path().join("r.json"), dir.path().join("r.xml"));
    let (code, stdout, stderr) = bin(vec![
        "--base-url".into(),
        srv.base_url(),
        "--test-api".into(),
        "--only".into(),
        "key.".into(),
        "--only".into(),
        "lookup.".into(),
        "--json".into(),
        json_path.to_string_lossy().into(),
        "--junit".into(),
        junit_path.to_string_lossy().into(),
    ])
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap().starts_with("plan: "));
    let body: Vec<&str> = lines.collect();
    let (summary, rest) = body.split_last().unwrap();
    let (moved, checks) = rest.split_last().unwrap();
    assert_eq!(
        *summary,
        format!("{} passed, 0 failed, 0 skipped", checks.len())
    );
    assert!(moved.starts_with("moved: "), "{moved}");
    for l in checks {
        let mut parts = l.splitn(3, ' ');
        assert_eq!(parts.next(), Some("PASS"), "{l}");
        let id = parts.next().unwrap();
        assert!(id.starts_with("key.") || id.starts_with("lookup."), "{l}");
        assert!(!parts.next().unwrap_or("").is_empty(), "evidence on {l}");
    }
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(report["passed"], checks.len());
    assert_eq!(report["failed"], 0);
    let xml = std::fs::read_to_string(&junit_path).unwrap();
    assert!(
        xml.contains(&format!("tests=\"{}\" failures=\"0\"", checks.len())),
        "{xml}"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_exits_1_on_a_failed_check_and_keeps_its_exchanges() {
    let dir = tempfile::tempdir().unwrap();
    let base = mutants::start(mutants::Mutation::NoReplayHeader).await;
    let (json_path, junit_path) = (dir.path().join("r.json"), dir.path().join("r.xml"));
    let (code, stdout, _) = bin(vec![
        "--base-url".into(),
        base,
        "--test-api".into(),
        "--only".into(),
        "replay.identical".into(),
        "--json".into(),
        json_path.to_string_lossy().into(),
        "--junit".into(),
        junit_path.to_string_lossy().into(),
    ])
    .await;
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("\nFAIL replay.identical "), "{stdout}");
    assert!(
        stdout.trim_end().ends_with("0 passed, 1 failed, 0 skipped"),
        "{stdout}"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let exchanges = report["checks"][0]["exchanges"].as_array().unwrap();
    assert!(exchanges
        .iter()
        .any(|e| e["request"]["method"] == "POST" && e["answer"]["status"] == 201));
    let xml = std::fs::read_to_string(&junit_path).unwrap();
    assert!(xml.contains("<failure message=\"POST key"), "{xml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_exits_2_when_it_cannot_run() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, _, stderr) = bin(strings(&[
        "--base-url",
        &format!("http://127.0.0.1:{port}"),
        "--test-api",
    ]))
    .await;
    assert_eq!(code, 2, "unreachable: {stderr}");
    assert!(stderr.contains("unreachable"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("fixtures.json");
    std::fs::write(
        &bad,
        r#"{"users":[{"token":"t","currency":"BDT","allowance_minor":5}],"recipient_id":"r"}"#,
    )
    .unwrap();
    let (code, _, stderr) = bin(strings(&[
        "--base-url",
        "http://127.0.0.1:9",
        "--fixtures",
        &bad.to_string_lossy(),
    ]))
    .await;
    assert_eq!(code, 2, "one user: {stderr}");
    assert!(stderr.contains("at least two users"), "{stderr}");

    let (code, _, _) = bin(strings(&["--base-url", "http://127.0.0.1:9"])).await;
    assert_eq!(code, 2, "neither --test-api nor --fixtures");
}

/// Users made the way a staging team would have them: tokens handed over in a file.
async fn fixtures_file(base: &str, dir: &tempfile::TempDir, allowance: i64) -> std::path::PathBuf {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let user = |balance: i64| {
        let http = http.clone();
        async move {
            let body =
                json!({"display_name": "fixture", "balance_minor": balance, "currency": "BDT"});
            let r = http
                .post(format!("{base}/v1/test/users"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            serde_json::from_slice::<Value>(&r.bytes().await.unwrap()).unwrap()
        }
    };
    let (a, b, broke, to) = (
        user(100_000).await,
        user(100_000).await,
        user(0).await,
        user(0).await,
    );
    let fixtures = json!({
        "users": [
            {"token": a["token"], "currency": "BDT", "allowance_minor": allowance},
            {"token": b["token"], "currency": "BDT", "allowance_minor": allowance},
        ],
        "recipient_id": to["user_id"],
        "broke_token": broke["token"],
    });
    let path = dir.path().join("fixtures.json");
    std::fs::write(&path, fixtures.to_string()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_without_the_test_api_pass_and_stay_within_the_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(&dir).await;
    let path = fixtures_file(&srv.base_url(), &dir, 2_000).await;
    let args = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &srv.base_url(),
        "--fixtures",
        &path.to_string_lossy(),
    ])
    .unwrap();
    let mut out = Vec::new();
    let report = sendonce_conformance::run(&args, &mut out).await.unwrap();
    assert_eq!(report.count(Status::Fail), 0, "{}", lines(&report));
    // Without the test API the in-flight check races instead of slowing the gateway.
    for c in &report.checks {
        assert!(
            c.status == Status::Pass || c.id == "replay.in-flight",
            "{}",
            c.line()
        );
    }
    assert!(report.plan.contains("soak lowered"), "{}", report.plan);
    let (a, b) = report.moved_minor.expect("balances readable");
    assert!(
        a > 0 && a <= 2_000 && b > 0 && b <= 2_000,
        "moved {a} / {b}, allowance 2000 each"
    );

    let args = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &srv.base_url(),
        "--fixtures",
        &path.to_string_lossy(),
        "--amount-minor",
        "500",
    ])
    .unwrap();
    let err = sendonce_conformance::run(&args, &mut std::io::sink())
        .await
        .unwrap_err();
    assert!(
        matches!(err, sendonce_conformance::SetupError::Allowance(_)),
        "{err}"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_api_behind_a_token_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        db: dir.path().join("mock.db").to_string_lossy().into_owned(),
        test_api_token: Some(server_mock::Secret::new("s3cret")),
        ..Default::default()
    };
    let srv = server_mock::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let base = srv.base_url();
    let without =
        Args::try_parse_from(["sendonce-conformance", "--base-url", &base, "--test-api"]).unwrap();
    let err = sendonce_conformance::run(&without, &mut std::io::sink())
        .await
        .unwrap_err();
    assert!(
        matches!(err, sendonce_conformance::SetupError::TestApi(_)),
        "{err}"
    );
    let with = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &base,
        "--test-api",
        "--test-api-token",
        "s3cret",
        "--only",
        "replay.in-flight",
    ])
    .unwrap();
    let report = sendonce_conformance::run(&with, &mut std::io::sink())
        .await
        .unwrap();
    assert_eq!(
        report.get("replay.in-flight").unwrap().status,
        Status::Pass,
        "{}",
        lines(&report)
    );
    srv.shutdown().await;
}
