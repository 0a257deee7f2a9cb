//! `sendonce-sim`: whole rides on a simulated train against the embedded mock server, and the
//! checker of DESIGN.md's invariants (no double debit, nothing lost, device = server, money conserved).

pub mod aliases;
pub mod api;
pub mod backend;
pub mod bank;
pub mod checker;
pub mod cli;
pub mod dashboard;
pub mod device;
pub mod keys;
pub mod proxy;
pub mod report;
pub mod ride;
pub mod rng;
pub mod seen;
pub mod server;
pub mod svg;
pub mod tap;
pub mod testapi;
pub mod timeline;

pub use report::Report;
pub use ride::{run, RideConfig};
