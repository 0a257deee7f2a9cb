//! A full disk under server-mock's SQLite file (issue 32 part 3): while nothing can be written the
//! answers stay true — 503 `busy` with `Retry-After`, never a stored failure for a request that may
//! have committed, never a 201 that is not in the ledger — and once space returns every key ends
//! in exactly one debit with the same key and bytes.

use std::time::Duration;

use crate::common::{self, start_with, transfer_body};

#[path = "../../../sdk/tests/common/tmpfs.rs"]
mod tmpfs;

#[tokio::test]
async fn a_full_disk_answers_503_and_every_key_finishes_once_space_returns() {
    if common::postgres().is_some() {
        // This is the SQLite file's disk; PostgreSQL's is the cluster's (and its own tests').
        return;
    }
    let Some(disk) = tmpfs::SmallDisk::mount("8m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root; CI runs as root)");
        return;
    };
    let db = disk.path.join("mock.db").to_string_lossy().into_owned();
    let s = start_with(|c| c.db = db).await;
    let alice = s.user("alice", 1_000_000).await;
    let bob = s.user("bob", 0).await;
    let body = transfer_body(&bob.id, 100);
    let first = s.transfer(&alice.token, Some("before"), &body).await;
    assert_eq!(first.status, 201, "{:?}", first.json());

    let filler = disk.fill();
    let keys: Vec<String> = (0..8).map(|i| format!("full-{i}")).collect();
    let mut answered = Vec::new();
    for key in &keys {
        let r = s.transfer(&alice.token, Some(key), &body).await;
        // 201 only if SQLite still found room for it (then it is in the ledger, checked below).
        assert!(
            r.status == 503 || r.status == 201,
            "{key}: {} {:?}: a full disk is 'busy, retry', never another answer",
            r.status,
            r.json()
        );
        if r.status == 503 {
            assert!(
                r.headers.contains_key("retry-after"),
                "{key}: no Retry-After"
            );
            assert_eq!(r.code(), "busy");
        }
        answered.push((key.clone(), r.status));
    }
    assert!(
        answered.iter().any(|(_, status)| *status == 503),
        "the disk was full, yet every request was written: {answered:?}"
    );
    // Retried with the same key while the disk is still full: still busy, nothing stored.
    let again = s.transfer(&alice.token, Some(&keys[0]), &body).await;
    assert!(matches!(again.status, 503 | 201), "{:?}", again.json());

    std::fs::remove_file(filler).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for key in keys.iter().chain(std::iter::once(&"before".to_string())) {
        let r = s.transfer_until_done(&alice.token, key, &body).await;
        assert_eq!(r.status, 201, "{key} after space returned: {:?}", r.json());
        assert_eq!(
            s.debits_for(&alice, key).await,
            1,
            "{key}: exactly one debit"
        );
    }
    assert_eq!(
        s.balance(&alice).await,
        1_000_000 - 100 * (keys.len() as i64 + 1)
    );
    s.settle().await;
    s.stop().await;
}
