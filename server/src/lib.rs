//! The server side of the sendonce idempotency contract, as a library.
//!
//! A request carries an `Idempotency-Key` ([`key`]); the server stores, per principal and
//! key, the request's fingerprint ([`fingerprint`]) and, once it has run, its answer. A key
//! already seen answers from its row ([`decision`]): the stored answer again with
//! `Idempotent-Replayed: true`, 409 while the first request still runs, 422 for another
//! request under the same key ([`answer`], [`problem`]). Locks carry a lease measured in
//! the holder's monotonic time ([`lease`]); keys expire a whole bucket at a time
//! ([`expiry`]). The SQLite store ([`store::sqlite`]) holds the key table's SQL and the
//! database handle with its group-commit writer.
//!
//! The parts of the contract that hold across stores live here; see README.md for what is
//! in the library today and what is still inside server-mock.

pub mod answer;
pub mod clock;
pub mod decision;
pub mod engine;
pub mod expiry;
pub mod fingerprint;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod key;
pub mod lease;
pub mod outcome;
pub mod problem;
pub mod store;

pub use answer::Answer;
pub use decision::{Claim, Existing, KeyRow};
pub use engine::{Engine, Look, Operation, Request};
pub use lease::{Instance, Lease};
pub use outcome::{Event, Outcome};
pub use problem::{Problem, PROBLEM_JSON};
