//! A model checker over the sendonce protocol: phones, network, server phases and crashes, explored
//! exhaustively (BFS, stateright) up to a bound, deciding with the SDK's own `classify` and `next_attempt`.

pub mod cli;
pub mod model;
pub mod network;
pub mod phone;
pub mod properties;
pub mod server;

pub use crate::cli::{check, Outcome, Report};
pub use crate::model::{Bound, Mutant, Protocol};
