//! Store files written by older SDKs (`tests/golden/`, each made by its version's own code: see its
//! README) open with this SDK, migrate to schema 3, and their transfers finish with the keys and the
//! exact bytes committed then. `store-v1.db` and `store-v2.db` hold one succeeded transfer, one retrying
//! after a 503 and two pending while offline; `store-v1-states.db` and `store-v2-states.db` one
//! transfer in every state.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::golden::{rows, Row};
use common::scripted::{base_config, serve, wait, Script, Shared};
use sendonce::{RejectionReason, Sdk, TransferState};

fn user_version(db: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_version_2_store_opens_migrates_and_finishes_with_the_same_keys_and_bytes() {
    opens_migrates_and_finishes("store-v2.db", 2).await;
}

/// The same of a file written by the schema-1 SDK (`f9a6de3~1`, `make_store_v1.rs.txt`).
#[tokio::test]
async fn a_version_1_store_opens_migrates_and_finishes_with_the_same_keys_and_bytes() {
    opens_migrates_and_finishes("store-v1.db", 1).await;
}

async fn opens_migrates_and_finishes(file: &str, version: i64) {
    let dir = tempfile::tempdir().unwrap();
    let db = common::golden::copy(file, dir.path());
    assert_eq!(
        user_version(&db),
        version,
        "the golden file is the old schema"
    );
    let before = rows(&db);
    assert_eq!(before.len(), 4);
    let script: Shared = Arc::new(Mutex::new(Script::default()));
    let url = serve(script.clone()).await;
    let sdk = Sdk::open(base_config(&url, &db).build().unwrap()).unwrap();
    for (id, row) in &before {
        let t = wait(&sdk, id).await;
        assert_eq!(t.state, TransferState::Succeeded, "{id}: {t:?}");
        assert_eq!(t.idempotency_key, row.key, "the key minted by the old SDK");
        assert_eq!(t.operation_type, "transfer");
    }
    let arrivals = script.lock().unwrap().arrivals.clone();
    let unfinished: Vec<&Row> = before.values().filter(|r| r.state != "succeeded").collect();
    assert_eq!(
        arrivals.len(),
        unfinished.len(),
        "one attempt each, nothing for the finished one"
    );
    for row in unfinished {
        let sent = arrivals
            .iter()
            .find(|a| a.key == row.key)
            .expect("every unfinished transfer was sent under its old key");
        assert_eq!(
            sent.body, row.body,
            "the exact bytes committed by the old SDK"
        );
    }
    // The old succeeded transfer kept its server id, and its history reads as before.
    let done = before
        .iter()
        .find(|(_, r)| r.state == "succeeded")
        .unwrap()
        .0;
    assert_eq!(
        sdk.transfer(done).unwrap().server_transfer_id.as_deref(),
        Some("t_1")
    );
    assert_eq!(sdk.transfers().unwrap().len(), 4);
    sdk.close();
    drop(sdk);
    assert_eq!(user_version(&db), 3);
    // Opening again migrates nothing twice and changes nothing.
    let sdk = Sdk::open(base_config(&url, &db).build().unwrap()).unwrap();
    assert!(sdk.unfinished_transfers().unwrap().is_empty());
    sdk.close();
}

#[test]
fn a_rejection_written_before_reasons_were_stored_reads_with_server_mocks_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::golden::copy("store-v2.db", dir.path());
    {
        // As the old SDK recorded a 402: a code, no reason column.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE transfers SET state='rejected', reject_code='insufficient_funds', reject_detail='', \
             reject_status=402, next_attempt_at_ms=NULL WHERE state <> 'succeeded'",
            [],
        )
        .unwrap();
    }
    let sdk = Sdk::open(
        sendonce::SdkConfig::builder("http://127.0.0.1:9", &db)
            .build()
            .unwrap(),
    )
    .unwrap();
    let rejected: Vec<_> = sdk
        .transfers()
        .unwrap()
        .into_iter()
        .filter(|t| t.state == TransferState::Rejected)
        .collect();
    assert_eq!(rejected.len(), 3);
    for t in rejected {
        assert_eq!(
            t.rejection.unwrap().reason,
            RejectionReason::InsufficientFunds
        );
    }
    sdk.close();
}

#[test]
fn a_file_of_a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::golden::copy("store-v2.db", dir.path());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA user_version=4")
        .unwrap();
    let bytes = std::fs::read(&db).unwrap();
    let err = Sdk::open(
        sendonce::SdkConfig::builder("http://127.0.0.1:9", &db)
            .build()
            .unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            sendonce::SdkError::StorageFromNewerVersion {
                found: 4,
                supported: 3
            }
        ),
        "a newer file is not corrupt: {err:?}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "every byte untouched");
    for side in ["-wal", "-shm", "-journal"] {
        let mut path = db.clone().into_os_string();
        path.push(side);
        assert!(
            !Path::new(&path).exists(),
            "no {side} file made beside a file this SDK must not touch"
        );
    }
    assert_eq!(user_version(&db), 4);
}

/// `tests/golden/store-v2-states.db` (written by the code at 006aa8f, `make_store_v2_states.rs.txt`): one
/// transfer in every state a phone holds when its app is upgraded. Each finishes with this SDK under the
/// key and bytes committed then: the pending, retrying and mid-request ones are sent again, the one waiting
/// for a token once the app gives one, the one that gave up by a status look-up — never under a new key.
#[tokio::test]
async fn every_state_of_a_version_2_store_finishes_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::golden::copy("store-v2-states.db", dir.path());
    assert_eq!(user_version(&db), 2);
    common::golden::every_state_finishes(&db).await;
}

/// `tests/golden/store-v1-states.db` (written by the code at f3d2c21, schema 1,
/// `make_store_v1_states.rs.txt`): the same six states from the oldest schema phones hold; two
/// migration steps later each finishes under the key and bytes committed then.
#[tokio::test]
async fn every_state_of_a_version_1_store_finishes_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::golden::copy("store-v1-states.db", dir.path());
    assert_eq!(user_version(&db), 1);
    common::golden::every_state_finishes(&db).await;
}
