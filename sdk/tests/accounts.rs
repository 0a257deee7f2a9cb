//! The store belongs to one account: another account is refused while the first has unfinished
//! transfers; sign-out and `wipe` refuse unfinished work unless forced and leave nothing behind.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::scripted::{created, rig_with, wait};
use sendonce::{Sdk, SdkError, TransferRequest, TransferState};

const ACCOUNT: &str = "acct-zx81-alice";
const RECIPIENT: &str = "u_recipient_zx81";
const NOTE: &str = "note-zx81-secret";

fn request() -> TransferRequest {
    TransferRequest {
        to_user_id: RECIPIENT.into(),
        amount_minor: 4_200,
        currency: "BDT".into(),
        note: Some(NOTE.into()),
    }
}

/// Every byte of the database, its WAL and its shared-memory file.
fn file_bytes(db: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(bytes) = std::fs::read(&p) {
            all.extend(bytes);
        }
    }
    all
}

fn holds(db: &Path, text: &str) -> bool {
    file_bytes(db)
        .windows(text.len())
        .any(|w| w == text.as_bytes())
}

#[tokio::test]
async fn another_account_is_refused_while_the_first_has_unfinished_transfers() {
    let rig = rig_with(vec![created()], |c| c.account_id(ACCOUNT)).await;
    assert_eq!(
        rig.sdk.account_id().unwrap().as_deref(),
        Some(ACCOUNT),
        "bound at first use"
    );
    rig.sdk.set_network_available(false).unwrap();
    let t = rig.sdk.send_transfer(request()).await.unwrap();

    let other = rig.sdk.sign_in("acct-bob", Some("tok-bob".into()));
    assert!(
        matches!(other, Err(SdkError::AccountMismatch(_))),
        "{other:?}"
    );
    // The refused token was not installed; the same account signs in again without trouble.
    assert_eq!(
        rig.sdk.sign_in(ACCOUNT, Some("tok-1b".into())).unwrap(),
        None
    );
    rig.sdk.close();
    let reopened = Sdk::open(
        common::scripted::base_config(&rig.url, &rig.db)
            .account_id("acct-bob")
            .build()
            .unwrap(),
    );
    assert!(
        matches!(reopened, Err(SdkError::AccountMismatch(_))),
        "{reopened:?}"
    );

    let sdk = Sdk::open(
        common::scripted::base_config(&rig.url, &rig.db)
            .account_id(ACCOUNT)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        wait(&sdk, &t.local_id).await.state,
        TransferState::Succeeded
    );
    // Nothing unfinished: the next account may sign in, and sees nothing of the first.
    let report = sdk
        .sign_in("acct-bob", Some("tok-bob".into()))
        .unwrap()
        .expect("a wipe");
    assert_eq!(report.deleted_finished, 1);
    assert!(report.discarded_unfinished.is_empty());
    assert!(sdk.transfers().unwrap().is_empty());
    assert_eq!(sdk.account_id().unwrap().as_deref(), Some("acct-bob"));
    assert!(!holds(&rig.db, RECIPIENT) && !holds(&rig.db, NOTE) && !holds(&rig.db, ACCOUNT));
}

#[tokio::test]
async fn sign_out_refuses_unfinished_work_unless_forced_and_leaves_nothing() {
    let rig = rig_with(vec![created()], |c| c.account_id(ACCOUNT)).await;
    let done = rig.sdk.send_transfer(request()).await.unwrap();
    assert_eq!(
        wait(&rig.sdk, &done.local_id).await.state,
        TransferState::Succeeded
    );
    rig.sdk.set_network_available(false).unwrap();
    let waiting = rig.sdk.send_transfer(request()).await.unwrap();
    assert!(
        holds(&rig.db, RECIPIENT) && holds(&rig.db, NOTE),
        "the check can see them"
    );

    let refused = rig.sdk.sign_out(false);
    assert_eq!(refused, Err(SdkError::UnfinishedTransfers(1)));
    assert_eq!(rig.sdk.transfers().unwrap().len(), 2, "nothing deleted");

    let report = rig.sdk.sign_out(true).unwrap();
    assert_eq!(report.deleted_finished, 1);
    assert_eq!(report.discarded_unfinished.len(), 1);
    assert_eq!(report.discarded_unfinished[0].local_id, waiting.local_id);
    assert!(rig.sdk.transfers().unwrap().is_empty());
    assert_eq!(rig.sdk.account_id().unwrap(), None);
    for secret in [RECIPIENT, NOTE, ACCOUNT, done.idempotency_key.as_str()] {
        assert!(!holds(&rig.db, secret), "{secret} still in the file");
    }
}

#[tokio::test]
async fn wipe_of_a_closed_file_refuses_unless_forced_and_says_busy_while_open() {
    let rig = rig_with(vec![created()], |c| c.account_id(ACCOUNT)).await;
    rig.sdk.set_network_available(false).unwrap();
    rig.sdk.send_transfer(request()).await.unwrap();
    let busy = sendonce::wipe(&rig.db, true);
    assert!(matches!(busy, Err(SdkError::Busy(_))), "{busy:?}");
    rig.sdk.close();

    assert_eq!(
        sendonce::wipe(&rig.db, false),
        Err(SdkError::UnfinishedTransfers(1))
    );
    assert!(holds(&rig.db, RECIPIENT));
    let report = sendonce::wipe(&rig.db, true).unwrap();
    assert_eq!(report.discarded_unfinished.len(), 1);
    for secret in [RECIPIENT, NOTE, ACCOUNT] {
        assert!(!holds(&rig.db, secret), "{secret} still in the file");
    }
    // The wiped file opens as a new, unbound store.
    let sdk = Sdk::open(
        common::scripted::base_config(&rig.url, &rig.db)
            .build()
            .unwrap(),
    )
    .unwrap();
    assert!(sdk.transfers().unwrap().is_empty());
    assert_eq!(sdk.account_id().unwrap(), None);
    let _ = Arc::new(sdk);
    assert_eq!(
        sendonce::wipe(&rig.dir.path().join("none.db"), false).unwrap(),
        Default::default()
    );
}
