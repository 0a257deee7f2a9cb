//! A migration killed (SIGKILL, a real child process) between any two of its writes leaves a file that
//! the next open migrates, and whose transfers all finish with the keys and exact bytes they had
//! (issue 32 part 1).
//!
//! The child is this test binary re-run with `--ignored --exact child_opens`; it opens the file with the
//! `crash-points` build of the SDK, which kills itself at the point `SENDONCE_CRASH_AT` names. Each step
//! is one transaction with its version bump, so the file is always wholly at one version: the old one
//! (killed before the step's commit) or the new one (after it). The files are the golden ones of schema
//! 1 and 2 (`tests/golden/`), written by those SDKs.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::scripted::{base_config, serve, wait, Script, Shared};
use sendonce::{NetworkProfile, Sdk, SdkConfig, TransferState};

/// Every point of every migration step, with the version and a column the file must have after a kill
/// there (the step's columns exist exactly when its version does).
const POINTS: &[(&str, i64)] = &[
    ("v2-before-commit", 1),
    ("v2-committed", 2),
    ("v3-before-commit", 2),
    ("v3-committed", 3),
];

#[test]
#[ignore = "runs only as the child of the kill tests in this file"]
fn child_opens() {
    let Ok(db) = std::env::var("SENDONCE_MIGRATE_DB") else {
        return;
    };
    let config = SdkConfig::builder("http://127.0.0.1:9", Path::new(&db))
        .network_profile(NetworkProfile::Offline)
        .build()
        .unwrap();
    // With a crash point set, the process dies inside this open.
    let sdk = Sdk::open(config).unwrap();
    sdk.close();
}

fn version_and_columns(db: &Path) -> (i64, bool, bool) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let version = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let has = |c: &str| -> bool {
        conn.query_row(
            "SELECT count(*) FROM pragma_table_info('transfers') WHERE name = ?1",
            [c],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            > 0
    };
    (version, has("elapsed_ms"), has("op_type"))
}

/// `(local_id, key, body)` of the unfinished transfers.
fn unfinished(db: &Path) -> Vec<(String, String, Vec<u8>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT local_id, idem_key, body FROM transfers WHERE state <> 'succeeded' ORDER BY local_id")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn kill_child_at(db: &Path, point: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_opens", "--nocapture"])
        .env("SENDONCE_MIGRATE_DB", db)
        .env("SENDONCE_CRASH_AT", point)
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "{point}: the child was killed there ({status:?})"
    );
}

async fn finishes_after_the_kill(db: &Path, point: &str, expected_version: i64, first: i64) {
    let before = unfinished(db);
    assert!(!before.is_empty());
    kill_child_at(db, point);
    let (version, v2_columns, v3_columns) = version_and_columns(db);
    assert_eq!(
        version, expected_version,
        "{point}: the file is wholly at one version"
    );
    assert_eq!(
        v2_columns,
        version >= 2 || first >= 2,
        "{point}: v2 columns iff v2"
    );
    assert_eq!(v3_columns, version >= 3, "{point}: v3 columns iff v3");
    let script: Shared = Arc::new(Mutex::new(Script::default()));
    let url = serve(script.clone()).await;
    let sdk = Sdk::open(base_config(&url, db).build().unwrap()).unwrap();
    for (id, key, _) in &before {
        let t = wait(&sdk, id).await;
        assert_eq!(t.state, TransferState::Succeeded, "{point} {id}: {t:?}");
        assert_eq!(
            &t.idempotency_key, key,
            "{point}: the key written before the upgrade"
        );
    }
    let arrivals = script.lock().unwrap().arrivals.clone();
    assert_eq!(
        arrivals.len(),
        before.len(),
        "{point}: one attempt each, none for the finished"
    );
    for (_, key, body) in &before {
        let sent = arrivals.iter().find(|a| &a.key == key).unwrap();
        assert_eq!(
            &sent.body, body,
            "{point}: the exact bytes written before the upgrade"
        );
    }
    sdk.close();
    drop(sdk);
    assert_eq!(version_and_columns(db), (3, true, true));
}

#[tokio::test]
async fn a_schema_1_file_killed_at_every_point_of_its_migration_finishes_on_the_next_open() {
    for &(point, version) in POINTS {
        let dir = tempfile::tempdir().unwrap();
        let db = common::golden::copy("store-v1.db", dir.path());
        finishes_after_the_kill(&db, point, version, 1).await;
    }
}

#[tokio::test]
async fn the_golden_version_2_file_killed_in_its_migration_finishes_too() {
    for &(point, version) in POINTS.iter().filter(|(p, _)| p.starts_with("v3")) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::golden::copy("store-v2.db", dir.path());
        finishes_after_the_kill(&db, point, version, 2).await;
    }
}

/// The golden file with a transfer in every state (`store-v2-states.db`), killed at each point of its
/// migration: the file is wholly at one version, and every transfer still finishes under its old key
/// and bytes — the one waiting for a token and the one that gave up included.
#[tokio::test]
async fn the_golden_file_of_every_state_killed_in_its_migration_finishes_too() {
    for &(point, version) in POINTS.iter().filter(|(p, _)| p.starts_with("v3")) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::golden::copy("store-v2-states.db", dir.path());
        kill_child_at(&db, point);
        let (found, v2_columns, v3_columns) = version_and_columns(&db);
        assert_eq!((found, v2_columns), (version, true), "{point}");
        assert_eq!(v3_columns, version >= 3, "{point}: v3 columns iff v3");
        common::golden::every_state_finishes(&db).await;
    }
}

/// The schema-1 golden file with a transfer in every state (`store-v1-states.db`), killed at every
/// point of both migration steps: the file is wholly at one version, and every transfer finishes.
#[tokio::test]
async fn the_schema_1_file_of_every_state_killed_at_every_point_finishes_too() {
    for &(point, version) in POINTS {
        let dir = tempfile::tempdir().unwrap();
        let db = common::golden::copy("store-v1-states.db", dir.path());
        kill_child_at(&db, point);
        let (found, v2_columns, v3_columns) = version_and_columns(&db);
        assert_eq!(
            (found, v2_columns, v3_columns),
            (version, version >= 2, version >= 3),
            "{point}"
        );
        common::golden::every_state_finishes(&db).await;
    }
}

/// The open's own writes around the migration steps: the switch to WAL (the golden files are in
/// rollback-journal mode), the schema's `IF NOT EXISTS` objects, and the identity pragmas after the
/// last step. A kill at each leaves a file wholly at one version whose transfers all finish.
const OPEN_POINTS: &[(&str, i64, i64)] = &[
    // (point, the version after a kill there from schema 1, from schema 2)
    ("open-after-wal", 1, 2),
    ("open-after-schema", 1, 2),
    ("open-before-ids", 3, 3),
    ("open-after-ids", 3, 3),
];

#[tokio::test]
async fn a_kill_at_every_write_of_the_open_around_the_migration_leaves_a_file_that_finishes() {
    for &(point, from_v1, from_v2) in OPEN_POINTS {
        for (file, first, version) in [("store-v1.db", 1, from_v1), ("store-v2.db", 2, from_v2)] {
            let dir = tempfile::tempdir().unwrap();
            let db = common::golden::copy(file, dir.path());
            finishes_after_the_kill(&db, point, version, first).await;
        }
    }
}
