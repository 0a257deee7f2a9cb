//! The server side of the sendonce idempotency contract, as a library.
//!
//! A request carries an `Idempotency-Key` ([`key`]); the server stores, per principal and
//! key, the request's fingerprint ([`fingerprint`]) and, once it has run, its answer. A key
//! already seen answers from its row ([`decision`]): the stored answer again with
//! `Idempotent-Replayed: true`, 409 while the first request still runs, 422 for another
//! request under the same key ([`answer`], [`problem`]). Locks carry a lease measured in
//! the holder's monotonic time ([`lease`]); keys expire a whole bucket at a time
//! ([`expiry`]). The [`engine`] runs an application's [`Operation`] once per key, with the
//! reaper and the relay; each store ([`store::sqlite`], [`store::postgres`]) holds all the SQL
//! of the engine's tables (the key table, the outbox, the inbox) in modules of the same names.
//! An application starts from [`prelude`].
//!
//! README.md shows a service wired in ten minutes, what the library guarantees under which
//! faults, and which of its public API is stable.

#![warn(missing_docs)]

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
pub mod prelude;
pub mod problem;
pub mod store;

pub use answer::Answer;
pub use decision::{Claim, Existing, KeyRow};
pub use engine::{Engine, Look, Operation, Request};
pub use lease::{Instance, Lease};
pub use outcome::{Event, Outcome};
pub use problem::{Problem, PROBLEM_JSON};
