//! What an application's fenced unit of work decided: the answer to store under the key
//! (and send), and the events to publish, written in the same transaction.

use crate::problem::Problem;

/// One event for the outbox: written in the unit of work's transaction, published after it
/// commits (at least once: consumers deduplicate through their inbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Where it goes (a Kafka topic, an in-process consumer's name).
    pub topic: String,
    /// The exact bytes to publish.
    pub payload: Vec<u8>,
}

/// The answer a unit of work stores under its key, with its outbox events.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// HTTP status of the stored answer.
    pub status: u16,
    /// Exact body bytes, replayed byte for byte to every retry.
    pub body: Vec<u8>,
    /// Events written in the same transaction.
    pub events: Vec<Event>,
}

impl Outcome {
    /// `201 Created` with `body` (JSON).
    pub fn created(body: Vec<u8>) -> Self {
        Self {
            status: 201,
            body,
            events: Vec::new(),
        }
    }

    /// A definitive refusal stored under the key (a 402, a declined card): every retry
    /// gets it again. Only for outcomes that stay true; a passing condition is a
    /// [`Problem`] from the external step instead (not stored, the retry runs again).
    pub fn refused(problem: &Problem) -> Self {
        Self {
            status: problem.status.as_u16(),
            body: problem.body_bytes(),
            events: Vec::new(),
        }
    }

    /// Adds an event for the outbox.
    pub fn with_event(mut self, topic: impl Into<String>, payload: Vec<u8>) -> Self {
        self.events.push(Event {
            topic: topic.into(),
            payload,
        });
        self
    }
}

impl Outcome {
    /// The answer sent for this outcome when it was just stored (a retry later gets the
    /// same status and bytes, marked replayed).
    pub fn answer(&self) -> crate::answer::Answer {
        crate::answer::Answer {
            status: self.status,
            body: self.body.clone(),
            replayed: false,
            retry_after: None,
            committed: !self.events.is_empty(),
        }
    }
}
