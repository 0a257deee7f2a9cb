//! Where the contract's tables live: one folder per database, the same jobs under the same
//! file names, all the SQL of the engine's tables inside it. SQLite is here; the PostgreSQL
//! store is still inside server-mock (`store/postgres/`) and moves next.

mod error;
pub mod sqlite;

pub use error::DbError;
