//! Where the contract's tables live: one folder per database, the same jobs under the same
//! file names, all the SQL of the engine's tables inside it. The SQLite key table is here;
//! of the PostgreSQL store, its leases, partitions and heartbeats (the rest moves next).

mod error;
pub mod postgres;
pub mod sqlite;

pub use error::DbError;

use crate::lease::Lease;

/// Everything needed to insert a key row.
pub struct NewKey<'a> {
    /// Owner of the key (keys are scoped per user).
    pub user_id: &'a str,
    /// The normalised key.
    pub key: &'a str,
    /// Fingerprint of the request.
    pub hash: &'a [u8],
    /// Random id of this attempt, so only the owner can complete the row.
    pub lock_id: &'a str,
    /// The lease: which server process holds the lock, and when it took it.
    pub lease: Lease<'a>,
    /// The exact request body (the reaper finishes an authorised transfer from it).
    pub body: &'a [u8],
    /// Server time now.
    pub now_ms: i64,
    /// Expiry bucket width.
    pub bucket_width_ms: i64,
}
