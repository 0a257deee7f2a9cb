//! The Kafka side of sendonce: the topics between server-mock's outbox relay and its
//! consumers, and the consumers themselves (fraud check, wallet credit, SMS), each its
//! own process (the wallet and the SMS consumer with their own SQLite databases).
//!
//! Effectively-once inside Kafka (idempotent producer, one transaction for the fraud
//! check's output and its input offsets, `read_committed` readers); idempotent at every
//! edge outside it (the relay's publish-then-mark; each consumer's inbox, keyed on the
//! transfer and kept for what the broker can still deliver, and each effect's own
//! uniqueness on the transfer).

pub mod broker;
pub mod cli;
pub mod consume;
pub mod crash;
pub mod event;
pub mod fraud;
pub mod horizon;
pub mod inbox;
pub mod sms;
pub mod topics;
pub mod wallet;

pub use broker::{Broker, BrokerError};
pub use event::{Envelope, TransferDone};
