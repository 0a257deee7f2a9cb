//! The orders service, started as a real process, checked by the conformance kit with its
//! operation profile (`conformance.json`): on a SQLite file, and on a fresh PostgreSQL
//! database when `SENDONCE_TEST_POSTGRES` names a cluster (scripts/test-all's postgres stage).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use clap::Parser;
use sendonce_conformance::report::Status;
use sendonce_conformance::Args;

/// The service process, killed when the test ends however it ends.
struct Orders(Child);

impl Drop for Orders {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `orders` on `db` with seeded customers; returns it, its URL and the fixtures file.
fn start(db: &str, dir: &tempfile::TempDir) -> (Orders, String, String) {
    let fixtures = dir
        .path()
        .join("fixtures.json")
        .to_string_lossy()
        .into_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_orders"))
        .args(["--listen", "127.0.0.1:0", "--db", db, "--seed", &fixtures])
        // Slow enough that duplicates sent meanwhile overlap the first (replay.in-flight).
        .args(["--card-delay-ms", "300"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "orders said {line:?}");
    (Orders(child), url, fixtures)
}

async fn passes_every_check(db: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_orders, url, fixtures) = start(db, &dir);
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance.json");
    let args = Args::try_parse_from([
        "sendonce-conformance",
        "--base-url",
        &url,
        "--fixtures",
        &fixtures,
        "--operation",
        profile,
        "--soak",
        "20",
    ])
    .unwrap();
    let mut out = Vec::new();
    let report = sendonce_conformance::run(&args, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    eprintln!("{text}");
    assert_eq!(report.count(Status::Fail), 0, "{text}");
    assert_eq!(report.count(Status::Skip), 0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_on_sqlite_passes_the_conformance_kit() {
    let dir = tempfile::tempdir().unwrap();
    passes_every_check(&dir.path().join("orders.db").to_string_lossy()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_on_postgres_passes_the_conformance_kit() {
    let Ok(cluster) = std::env::var("SENDONCE_TEST_POSTGRES") else {
        eprintln!("SENDONCE_TEST_POSTGRES not set: the PostgreSQL run is the postgres stage's");
        return;
    };
    let db = sendonce_server::store::postgres::schema::fresh_database(&cluster, "orders")
        .await
        .unwrap();
    passes_every_check(&db).await;
}

/// The profile shown in conformance/README.md is this service's, field for field.
#[test]
fn the_profile_in_the_kits_readme_is_this_one() {
    let readme = include_str!("../../../conformance/README.md");
    let block = readme
        .split("### Your operation")
        .nth(1)
        .and_then(|s| s.split("```json\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a json block under \"Your operation\"");
    let shown: serde_json::Value = serde_json::from_str(block).unwrap();
    let used: serde_json::Value =
        serde_json::from_str(include_str!("../conformance.json")).unwrap();
    assert_eq!(shown, used);
}
