//! Where the contract's tables live: one folder per database, the same jobs under the same
//! file names, all the SQL of the engine's tables inside it. The SQLite key table is here;
//! of the PostgreSQL store, its leases, partitions and heartbeats (the rest moves next).

mod error;
pub mod postgres;
pub mod sqlite;

pub use error::DbError;
