//! The store encrypted at rest (feature `encryption`, SQLCipher): the file's bytes hold no recipient,
//! note or schema; the same key reads every transfer back; another key, no key, or a key for a file
//! kept in clear is a typed error that leaves the file exactly as it was. Run by the test stage:
//! `cargo test -p sendonce --features encryption --test encryption`.
#![cfg(feature = "encryption")]

use std::path::Path;

use sendonce::{EncryptionKey, NetworkProfile, Sdk, SdkConfig, SdkError, TransferRequest};

const RECIPIENT: &str = "u_recipient_0451";
const NOTE: &str = "rent for flat 3B";

fn key(byte: u8) -> EncryptionKey {
    EncryptionKey::from_bytes(&[byte; 32]).unwrap()
}

fn config(db: &Path, key: Option<EncryptionKey>) -> SdkConfig {
    // Offline: the transfer is committed at confirm and nothing is sent.
    let builder = SdkConfig::builder("http://127.0.0.1:9", db)
        .access_token("tok")
        .network_profile(NetworkProfile::Offline);
    match key {
        Some(k) => builder.encryption_key(k),
        None => builder,
    }
    .build()
    .unwrap()
}

/// Confirms one transfer with the recipient and the note, then closes.
async fn confirm_one(db: &Path, key: Option<EncryptionKey>) -> String {
    let sdk = Sdk::open(config(db, key)).unwrap();
    let t = sdk
        .send_transfer(TransferRequest {
            to_user_id: RECIPIENT.into(),
            amount_minor: 4_000,
            currency: "BDT".into(),
            note: Some(NOTE.into()),
        })
        .await
        .unwrap();
    sdk.close();
    t.local_id
}

/// Every byte of the store: the file, its WAL and anything else SQLite left beside it.
fn bytes_of(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        all.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_store_holds_no_recipient_or_note_and_reads_back_with_its_key() {
    // In clear (the control: the check sees them when they are there).
    let plain = tempfile::tempdir().unwrap();
    confirm_one(&plain.path().join("s.db"), None).await;
    let clear = bytes_of(plain.path());
    assert!(contains(&clear, NOTE) && contains(&clear, RECIPIENT));

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let id = confirm_one(&db, Some(key(7))).await;
    let sealed = bytes_of(dir.path());
    for secret in [
        NOTE,
        RECIPIENT,
        "SQLite format 3",
        "CREATE TABLE",
        "idempotency",
    ] {
        assert!(
            !contains(&sealed, secret),
            "{secret:?} is in the file's bytes"
        );
    }

    // Another key, or none: a typed error, and not one byte of the file changes.
    let before = bytes_of(dir.path());
    let err = Sdk::open(config(&db, Some(key(8)))).unwrap_err();
    assert!(matches!(err, SdkError::StorageKey(_)), "{err:?}");
    assert!(Sdk::open(config(&db, None)).is_err());
    assert!(bytes_of(dir.path()) == before, "the file is left as it was");

    // The same key reads the transfer back, with its recipient and note.
    let sdk = Sdk::open(config(&db, Some(key(7)))).unwrap();
    let t = sdk.transfer(&id).unwrap();
    assert_eq!(
        (t.to_user_id.as_str(), t.note.as_deref()),
        (RECIPIENT, Some(NOTE))
    );
    sdk.close();

    // A key for a file kept in clear is refused too: nothing is silently left unencrypted.
    let clear = bytes_of(plain.path());
    let err = Sdk::open(config(&plain.path().join("s.db"), Some(key(7)))).unwrap_err();
    assert!(matches!(err, SdkError::StorageKey(_)), "{err:?}");
    assert!(
        bytes_of(plain.path()) == clear,
        "the file in clear is left as it was"
    );
}

#[test]
fn a_key_is_32_bytes_and_never_prints() {
    assert!(matches!(
        EncryptionKey::from_bytes(&[1; 16]),
        Err(SdkError::InvalidConfig(_))
    ));
    let k = key(0xab);
    assert!(!format!("{k:?}").contains("ab"), "{k:?}");
    let c = config(Path::new("/tmp/never-opened.db"), Some(k));
    assert!(!format!("{c:?}").to_lowercase().contains("abab"), "{c:?}");
}
