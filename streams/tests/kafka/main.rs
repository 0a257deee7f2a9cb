//! Tests on a real Kafka broker with real processes (SIGKILL included). They need
//! `SENDONCE_KAFKA=kafka://127.0.0.1:PORT` and server-mock built beside these binaries:
//! `scripts/test-all kafka` starts the broker, builds, runs them and stops the broker.

mod api;
mod durability;
mod fraud_slots;
mod horizon;
mod kill_points;
mod procs;
mod producer;
mod proxy;
mod relay_claims;
mod replay;
mod support;
mod transactions;
mod window;
