//! Integration tests for server-mock over real HTTP and real SQLite files.

mod bench_api;
mod clock_steps;
mod common;
mod concurrency;
mod contract;
mod fencing;
mod full_disk;
mod instances;
mod partitions;
mod pg_cuts;
mod properties;
mod recovery;
mod retention;
mod security;
mod stalls;
