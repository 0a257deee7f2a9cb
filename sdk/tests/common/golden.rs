//! The store files older SDKs wrote (`tests/golden/`, each made by its version's own code: see its README).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sendonce::{Sdk, TransferState};

use super::scripted::{base_config, serve, wait, Script, Shared};

/// A copy of `tests/golden/<file>` in `dir` (as `device.db`), for a test to open and change.
pub fn copy(file: &str, dir: &Path) -> PathBuf {
    let db = dir.join("device.db");
    std::fs::copy(
        format!("{}/tests/golden/{file}", env!("CARGO_MANIFEST_DIR")),
        &db,
    )
    .unwrap_or_else(|e| panic!("tests/golden/{file}: {e}"));
    db
}

/// One transfer row as the file holds it.
pub struct Row {
    pub key: String,
    pub body: Vec<u8>,
    pub state: String,
}

/// Every transfer of the file by local id.
pub fn rows(db: &std::path::Path) -> HashMap<String, Row> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT local_id, idem_key, body, state FROM transfers")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            Row {
                key: r.get(1)?,
                body: r.get(2)?,
                state: r.get(3)?,
            },
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// `tests/golden/store-v2-states.db` (or what a killed migration left of it), opened by this SDK: each
/// transfer finishes under the key and bytes committed then — the pending, retrying and mid-request ones
/// sent again, the one waiting for a token once the app gives one, the one that gave up by a status
/// look-up — never under a new key.
pub async fn every_state_finishes(db: &Path) {
    let before = rows(db);
    let mut states: Vec<&str> = before.values().map(|r| r.state.as_str()).collect();
    states.sort_unstable();
    assert_eq!(
        states,
        [
            "auth_required",
            "needs_attention",
            "pending",
            "retrying",
            "sending",
            "succeeded"
        ]
    );
    let script: Shared = Arc::new(Mutex::new(Script {
        lookup: Some(super::scripted::Answer(
            200,
            vec![super::scripted::JSON],
            super::scripted::OK,
        )),
        ..Default::default()
    }));
    let url = serve(script.clone()).await;
    let sdk = Sdk::open(base_config(&url, db).build().unwrap()).unwrap();
    // What an app does once its user has signed in again.
    sdk.set_access_token(Some("tok-2".into())).unwrap();
    for (id, row) in &before {
        // `wait` also returns for NeedsAttention (handed to the user): the given-up one is resolved by
        // the SDK's own look-up a moment later, so it is awaited until it has its outcome.
        if row.state == "needs_attention" {
            super::scripted::until("the look-up resolved the given-up transfer", || {
                sdk.transfer(id).unwrap().state != TransferState::NeedsAttention
            })
            .await;
        }
        let t = wait(&sdk, id).await;
        assert_eq!(
            t.state,
            TransferState::Succeeded,
            "{} {id}: {t:?}",
            row.state
        );
        assert_eq!(
            t.idempotency_key, row.key,
            "{}: the key minted by the old SDK",
            row.state
        );
    }
    let (arrivals, lookups) = {
        let s = script.lock().unwrap();
        (s.arrivals.clone(), s.lookups)
    };
    for a in &arrivals {
        let row = before
            .values()
            .find(|r| r.key == a.key)
            .expect("every request under a key the old SDK minted");
        assert!(
            matches!(
                row.state.as_str(),
                "pending" | "retrying" | "sending" | "auth_required"
            ),
            "sent again: {}",
            row.state
        );
        assert_eq!(
            a.body, row.body,
            "{}: the exact bytes committed by the old SDK",
            row.state
        );
    }
    assert_eq!(
        arrivals.len(),
        4,
        "one attempt each for the four still to send"
    );
    assert!(
        lookups >= 1,
        "the one that gave up is resolved by a look-up"
    );
    sdk.close();
}
