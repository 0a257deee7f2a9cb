//! The key of an encrypted store, as Kotlin and Swift hand it over: an object (so no printed config
//! shows it), made from the 32 bytes the app keeps wrapped in the Android Keystore or the iOS Keychain.

use std::sync::Arc;

use crate::error::{Result, SendOnceError};

/// A raw 256-bit key for the store file (SQLCipher). Generate it once per install from a secure
/// random source, keep it wrapped by the platform's key store, and pass the same bytes at every open.
#[derive(uniffi::Object)]
pub struct StoreKey(sendonce::EncryptionKey);

#[uniffi::export]
impl StoreKey {
    /// The key from exactly 32 bytes (`InvalidConfig` otherwise).
    #[uniffi::constructor]
    pub fn new(bytes: Vec<u8>) -> Result<Arc<Self>> {
        Ok(Arc::new(Self(
            sendonce::EncryptionKey::from_bytes(&bytes).map_err(SendOnceError::from)?,
        )))
    }
}

impl StoreKey {
    /// The core's key, for the SDK config only.
    pub(crate) fn key(&self) -> sendonce::EncryptionKey {
        self.0.clone()
    }
}

impl std::fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreKey(<redacted>)")
    }
}

impl PartialEq for StoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

/// Whether this library can encrypt the store (built with the `encryption` feature). Without it, a
/// config with a `StoreKey` is refused with `InvalidConfig`, never opened in clear.
#[uniffi::export]
pub fn store_encryption_available() -> bool {
    sendonce::encryption::available()
}
