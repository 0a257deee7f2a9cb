//! Encryption at rest: the store file encrypted by SQLCipher (page by page, AES-256, with the
//! schema, the WAL and every transfer's recipient, note and request bytes) under a key the app keeps
//! in the platform's key store (Android Keystore, iOS Keychain), never in the file system.
//!
//! Only in builds with the `encryption` feature (SQLCipher over the platform's crypto: OpenSSL on
//! Linux and Android, CommonCrypto on Apple; `encryption-vendored-openssl` builds OpenSSL from
//! source for an Android NDK build). A key given to a build without it is an `InvalidConfig`, never
//! a file silently left in clear.

use rusqlite::Connection;

use crate::error::{Result, SdkError};

/// A raw 256-bit key for the store file. Generate it once per install from a secure random source,
/// keep it wrapped by the platform's key store, and pass the same bytes at every open: without them
/// the file cannot be read (a lost key loses the unfinished transfers on this device).
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey([u8; 32]);

impl EncryptionKey {
    /// The key from exactly 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let key: [u8; 32] = bytes.try_into().map_err(|_| {
            SdkError::InvalidConfig(format!(
                "an encryption key is 32 bytes, got {}",
                bytes.len()
            ))
        })?;
        Ok(Self(key))
    }

    /// SQLCipher's raw-key form, `x'…'`: the bytes are the key itself, no passphrase derivation at
    /// open (the app's key store already holds a random key).
    fn pragma_value(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("\"x'{hex}'\"")
    }
}

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptionKey(<redacted>)")
    }
}

/// Whether this build can encrypt the store (feature `encryption`).
pub fn available() -> bool {
    cfg!(feature = "encryption")
}

/// Keys `conn` before its first read (a no-op without a key).
pub(crate) fn apply(conn: &Connection, key: Option<&EncryptionKey>) -> Result<()> {
    let Some(key) = key else { return Ok(()) };
    if !available() {
        return Err(no_encryption());
    }
    Ok(key_connection(conn, key)?)
}

/// Gives `conn` the key (SQLCipher's `PRAGMA key`), before its first read.
pub(crate) fn key_connection(conn: &Connection, key: &EncryptionKey) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("PRAGMA key = {};", key.pragma_value()))
}

/// A key given to a build that cannot use it.
pub(crate) fn no_encryption() -> SdkError {
    SdkError::InvalidConfig(
        "this build cannot encrypt the store (feature encryption is off); \
         refusing to keep the transfers in clear"
            .into(),
    )
}

/// What a keyed open that cannot read the file means: the key is not this file's (or the file was
/// written in clear, or is not a database at all). The file is left as it is.
pub(crate) fn wrong_key(e: &rusqlite::Error) -> Option<SdkError> {
    (e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase)).then(|| {
        SdkError::StorageKey(
            "the store cannot be read with this encryption key (another key, a file kept in clear, \
             or not a sendonce file); left untouched"
                .into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key given to a build without the feature is refused at `build`, never opened in clear.
    #[cfg(not(feature = "encryption"))]
    #[test]
    fn a_key_without_the_feature_is_refused() {
        let key = EncryptionKey::from_bytes(&[3; 32]).unwrap();
        let built = crate::SdkConfig::builder("http://127.0.0.1:9", "/tmp/never-opened.db")
            .encryption_key(key)
            .build();
        assert!(
            matches!(built, Err(SdkError::InvalidConfig(_))),
            "{built:?}"
        );
    }

    #[test]
    fn the_key_goes_to_sqlcipher_as_raw_hex() {
        let key = EncryptionKey::from_bytes(&[0xa5; 32]).unwrap();
        assert_eq!(key.pragma_value(), format!("\"x'{}'\"", "a5".repeat(32)));
    }
}
