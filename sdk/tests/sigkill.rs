//! A real child process, killed with SIGKILL at random moments, 200 times, against the real server-mock:
//! zero double debits, zero lost transfers.
//!
//! The child is this same test binary re-run with `--ignored --exact child_process_sends`.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{open, outcome, Server, User};
use sendonce::schedule::splitmix64;
use sendonce::TransferState;

#[test]
#[ignore = "runs only as the child of killed_at_random_moments_nothing_moves_twice_nothing_is_lost"]
fn child_process_sends() {
    let Ok(url) = std::env::var("SENDONCE_KILL_URL") else {
        return;
    };
    let db = std::env::var("SENDONCE_KILL_DB").unwrap();
    let user = User {
        id: std::env::var("SENDONCE_KILL_FROM").unwrap(),
        token: std::env::var("SENDONCE_KILL_TOKEN").unwrap(),
    };
    let to = User {
        id: std::env::var("SENDONCE_KILL_TO").unwrap(),
        token: String::new(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sdk = open(&url, std::path::Path::new(&db), &user);
        for i in 0..2 {
            sdk.send_transfer(common::request(&to, 100 + i))
                .await
                .unwrap();
        }
        for t in sdk.unfinished_transfers().unwrap() {
            outcome(&sdk, &t.local_id).await;
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_nothing_moves_twice_nothing_is_lost() {
    let iterations: u64 = std::env::var("SENDONCE_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let server = Server::start().await;
    let (alice, bob) = (
        server.user("alice", 1_000_000_000).await,
        server.user("bob", 0).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("device.db");
    let exe = std::env::current_exe().unwrap();
    let mut completed_children = 0;
    for i in 0..iterations {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_process_sends",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SENDONCE_KILL_URL", &server.url)
            .env("SENDONCE_KILL_DB", &db)
            .env("SENDONCE_KILL_FROM", &alice.id)
            .env("SENDONCE_KILL_TOKEN", &alice.token)
            .env("SENDONCE_KILL_TO", &bob.id)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Seeded, so a failing moment can be replayed.
        let delay = splitmix64(0x5EED ^ i) % 60;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if child.try_wait().unwrap().is_some() {
            completed_children += 1;
        }
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
    }

    // The app is opened one last time and left to finish.
    let sdk = open(&server.url, &db, &alice);
    let transfers = sdk.transfers().unwrap();
    for t in &transfers {
        let done = outcome(&sdk, &t.local_id).await;
        assert_eq!(done.state, TransferState::Succeeded, "{done:?}");
    }
    let ledger = server.ledger().await;
    let mut debits: HashMap<String, usize> = HashMap::new();
    for e in ledger.iter().filter(|e| e["kind"] == "debit") {
        *debits
            .entry(e["idempotency_key"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let device_keys: HashMap<_, _> = transfers
        .iter()
        .map(|t| (t.idempotency_key.clone(), t))
        .collect();
    for (key, n) in &debits {
        assert_eq!(*n, 1, "key {key} debited {n} times");
        assert!(
            device_keys.contains_key(key),
            "server debited key {key} that the device has lost"
        );
    }
    for t in &transfers {
        assert_eq!(
            debits.get(&t.idempotency_key),
            Some(&1),
            "transfer {} not debited exactly once",
            t.local_id
        );
    }
    let resent = transfers.iter().filter(|t| t.attempts >= 2).count();
    eprintln!(
        "{iterations} kills: {} transfers confirmed, {} debits, {resent} sent again after a kill, {completed_children} children finished before the kill",
        transfers.len(),
        debits.len()
    );
    assert!(!transfers.is_empty());
    // The kills must actually land mid-request for the test to mean anything.
    assert!(
        iterations < 50 || resent > 0,
        "no kill landed between persist and answer"
    );
}
