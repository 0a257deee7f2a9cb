//! How a database error answers: 503 `busy` when retrying with the same key will do,
//! else 500 (the library decides: [`sendonce_server::store::DbError::into_problem`]).

use sendonce_server::Problem;

/// The answer to a database error (see [`sendonce_server::store::DbError::into_problem`]).
pub fn from_db(e: sendonce_server::store::DbError) -> Problem {
    e.into_problem()
}
