//! Bearer tokens kept in one of the application's own tables as their SHA-256 (never the
//! token itself): an [`Authenticate`] written once for both stores, for a service whose API
//! keys are rows of its database. A service with another credential (OAuth, JWT, mTLS)
//! implements [`Authenticate`] itself.

use sha2::{Digest, Sha256};

use super::service::Authenticate;
use crate::problem::Problem;
use crate::store::sql::{Sql, Value};

/// How a token is stored: its SHA-256. Store this when you issue a token; [`TokenTable`]
/// looks tokens up by it.
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Tokens looked up with `query`: one `$1` parameter (the token's [`token_hash`], bytes),
/// the principal's id as text in the first column of the row it finds (no row: nobody).
/// A database that is down answers its problem (503), never 401.
#[derive(Clone)]
pub struct TokenTable<S> {
    db: S,
    query: &'static str,
}

impl<S> TokenTable<S> {
    /// Tokens of `db`, found with `query` (e.g. `SELECT user_id FROM cards WHERE
    /// token_hash = $1`; add `AND expires_at_ms > …` as your table keeps it).
    pub fn new(db: S, query: &'static str) -> Self {
        Self { db, query }
    }
}

impl<S: Sql + Clone> Authenticate for TokenTable<S> {
    async fn principal(&self, token: &str) -> Result<Option<String>, Problem> {
        let row = self
            .db
            .query_opt(self.query, vec![Value::from(token_hash(token))]);
        Ok(row.await?.map(|r| r.text(0)).transpose()?)
    }
}
