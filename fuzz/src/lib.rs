//! Coverage-guided fuzz targets for every parser of bytes sendonce does not control.
//!
//! Each module is one target: `check(data)` feeds the bytes to a parser and panics when a
//! property of the contract breaks (libFuzzer reports a panic as a crash and keeps the input).
//! The same functions replay the committed corpora on stable in `cargo test` (tests/corpus.rs),
//! so CI runs every input the fuzzer ever kept in seconds; `scripts/fuzz` runs the fuzzer.
//!
//! | target     | parser                                                  | untrusted source            |
//! |------------|---------------------------------------------------------|-----------------------------|
//! | `classify` | the SDK's verdict on an answer (status, headers, body)  | the network, intermediaries |
//! | `problem`  | the SDK's reading of an error body; the server's writing | the network                 |
//! | `key`      | the server's `Idempotency-Key` header parsing           | every client                |
//! | `body`     | the server's transfer body parsing and validation       | every client                |
//! | `event`    | the Kafka consumers' event decoding                     | every producer of a topic   |

pub mod answer;
pub mod body;
pub mod classify;
pub mod event;
pub mod key;
pub mod oracle;
pub mod problem;

/// A target's property: panics when `data` breaks it.
pub type Check = fn(&[u8]);

/// Every target's name and property, in the order `scripts/fuzz` runs them.
pub const TARGETS: [(&str, Check); 5] = [
    ("classify", classify::check),
    ("problem", problem::check),
    ("key", key::check),
    ("body", body::check),
    ("event", event::check),
];
