//! What a key already seen answers, decided once for every store and every path: the
//! stored response again (same request, finished), 409 `idempotency_key_in_use` (same
//! request, still running), 422 `idempotency_key_reused` (another request under the key —
//! whether the row was read before validation or found by a claim that lost the race).

use crate::answer::Answer;
use crate::problem::Problem;

/// State of an existing key row found on conflict.
#[derive(Debug, Clone)]
pub enum Existing {
    /// Another request with this key is still running.
    InProgress {
        /// Whether this request's fingerprint is the stored one (`false`: 422).
        same_request: bool,
    },
    /// Finished: stored status and exact stored body.
    Completed {
        /// Whether this request's fingerprint is the stored one (`false`: 422).
        same_request: bool,
        /// The stored answer's status.
        status: u16,
        /// The stored answer's exact bytes.
        body: Vec<u8>,
    },
}

/// Result of trying to claim a key.
#[derive(Debug, Clone)]
pub enum Claim {
    /// We inserted the row and own it until we complete or release it.
    Acquired,
    /// The row already existed.
    Exists(Existing),
}

/// A key row as stored.
#[derive(Debug, Clone)]
pub struct KeyRow {
    /// Stored request fingerprint.
    pub hash: Vec<u8>,
    /// `in_progress` or `completed`.
    pub completed: bool,
    /// Stored status when completed.
    pub status: Option<u16>,
    /// Stored body when completed.
    pub body: Option<Vec<u8>>,
}

impl KeyRow {
    /// What this row means for a request with fingerprint `hash`. A closed key (one a
    /// look-up closed as not executed) answers every request with its stored 404.
    pub fn into_existing(self, hash: &[u8]) -> Existing {
        let same_request = self.hash == hash || self.hash.is_empty();
        match (self.completed, self.status, self.body) {
            (true, Some(status), Some(body)) => Existing::Completed {
                same_request,
                status,
                body,
            },
            _ => Existing::InProgress { same_request },
        }
    }
}

impl Existing {
    /// The answer a request gets when its key is already taken. The fingerprint is compared
    /// on every path that finds a row, so a claim that lost a race to another body is a 422
    /// like a row read up front (the check an optimistic-write path is easy to skip).
    pub fn answer(self) -> Answer {
        match self {
            Existing::InProgress { same_request: true } => Problem::key_in_use().into(),
            Existing::Completed {
                same_request: true,
                status,
                body,
            } => Answer::replay(status, body),
            _ => Problem::key_reused().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(hash: &[u8], done: Option<(u16, &[u8])>) -> KeyRow {
        KeyRow {
            hash: hash.to_vec(),
            completed: done.is_some(),
            status: done.map(|d| d.0),
            body: done.map(|d| d.1.to_vec()),
        }
    }

    #[test]
    fn a_key_seen_answers_replay_409_or_422() {
        let done = row(b"h", Some((201, b"{}"))).into_existing(b"h").answer();
        assert_eq!(
            (done.status, done.replayed, done.body.as_slice()),
            (201, true, &b"{}"[..])
        );
        assert_eq!(row(b"h", None).into_existing(b"h").answer().status, 409);
        assert_eq!(row(b"h", None).into_existing(b"other").answer().status, 422);
        let reused = row(b"h", Some((201, b"{}")))
            .into_existing(b"other")
            .answer();
        assert_eq!((reused.status, reused.replayed), (422, false));
        // A key closed by a look-up (empty fingerprint) answers its stored 404 to anyone.
        let closed = row(b"", Some((404, b"nf"))).into_existing(b"any").answer();
        assert_eq!((closed.status, closed.replayed), (404, true));
    }
}
