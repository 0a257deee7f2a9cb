//! The by-key look-up: what happened to the request sent with a key — and an answer that
//! stays true. A key nothing ran under is closed with the 404 the look-up answers, so a late
//! duplicate of the request replays that 404 instead of running.

use super::Engine;
use crate::answer::Answer;
use crate::expiry::bucket_width_ms;
use crate::problem::Problem;
use crate::store::{DbError, Keys};

impl<S: Keys> Engine<S> {
    /// `GET …?idempotency_key=K` for `scope`: the stored success as 200 (same bytes as
    /// the 201), a stored refusal as it was answered, 409 while it runs, else `not_found`
    /// (a 404 problem), stored under the key in the same write that found no row.
    pub async fn lookup(&self, scope: &str, key: &str, not_found: Problem) -> Answer {
        match self.find(scope, key, not_found).await {
            Ok(answer) => answer,
            Err(e) => e.into_problem().into(),
        }
    }

    async fn find(&self, scope: &str, key: &str, not_found: Problem) -> Result<Answer, DbError> {
        let row = match self.store.read(scope, key).await? {
            Some(row) => row,
            None => {
                let now = self.clock.now_ms();
                let width = bucket_width_ms(self.key_window_ms);
                let body = not_found.body_bytes();
                match self
                    .store
                    .close_unexecuted(scope, key, now, width, body)
                    .await?
                {
                    // A request under the key wrote its row first: that row answers.
                    Some(row) => row,
                    None => return Ok(not_found.into()),
                }
            }
        };
        Ok(match (row.completed, row.status, row.body) {
            // The success itself, not a replay of the POST: 200 with the same bytes.
            (true, Some(201), Some(body)) => Answer {
                status: 200,
                body,
                replayed: false,
                retry_after: None,
                committed: false,
            },
            (true, Some(status), Some(body)) => Answer::replay(status, body),
            _ => Problem::key_in_use().into(),
        })
    }
}
