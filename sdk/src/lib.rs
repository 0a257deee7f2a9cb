//! sendonce: the client core that makes every money transfer safe to retry.
//!
//! At confirm the SDK mints an idempotency key and commits the transfer, the key and the exact
//! request bytes to SQLite before the first byte leaves; a background sender retries with the same
//! key and bytes, with full-jitter backoff, across restarts, until the server gives a definitive answer.
//!
//! ```no_run
//! use sendonce::{Sdk, SdkConfig, TransferRequest};
//! # async fn demo() -> Result<(), sendonce::SdkError> {
//! let config = SdkConfig::builder("https://api.example.com", "/data/app/sendonce.db")
//!     .access_token("token-from-login")
//!     .build()?;
//! let sdk = Sdk::open(config)?; // resumes every unfinished transfer
//! let request = TransferRequest {
//!     to_user_id: "u_42".into(),
//!     amount_minor: 50_000,
//!     currency: "BDT".into(),
//!     note: Some("rent".into()),
//! };
//! let transfer = sdk.send_transfer(request).await?; // durable before the first byte leaves
//! let outcome = sdk.wait_for_outcome(&transfer.local_id).await?;
//! println!("{:?} {:?}", outcome.state, outcome.server_transfer_id);
//! sdk.close();
//! # Ok(()) }
//! ```

// The core's value types shared with Kotlin and Swift (the response contract, rejection reasons,
// required actions) derive their uniffi records here, under the `uniffi` feature, so each is written
// once; the bindings crate (`sendonce-ffi`) turns this on and adds only what is FFI-specific.
#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!();

mod account;
mod background;
mod classify;
pub mod clock;
mod composer;
mod config;
mod confirm;
mod contract;
mod core;
mod dispatch;
pub mod encryption;
mod error;
mod events;
mod model;
pub mod netsim;
mod operation;
pub mod probe;
pub mod schedule;
mod sdk;
mod sender;
mod shared;
mod store;
mod token;
pub mod transport;

pub use crate::account::{wipe, WipeReport};
pub use crate::background::DrainSummary;
pub use crate::events::{EventListener, SdkEvent};
pub use crate::token::AccessTokenProvider;

pub use crate::classify::{classify, classify_with, Verdict};
pub use crate::clock::{Clock, SimClock, SystemClock};
pub use crate::composer::{Composer, ComposerListener, ComposerState};
pub use crate::config::{Deterministic, RetryPolicy, SdkConfig, SdkConfigBuilder};
pub use crate::contract::{
    ActionRule, Locator, LookupRoute, ProblemFormat, RefusalCode, ResponseContract,
};
pub use crate::core::TransferListener;
pub use crate::encryption::EncryptionKey;
pub use crate::error::{Result, SdkError};
pub use crate::model::{
    Rejection, RejectionReason, RequiredAction, Transfer, TransferRequest, TransferState,
    MAX_AMOUNT_MINOR,
};
pub use crate::netsim::{NetsimSettings, NetsimStats, NetworkProfile};
pub use crate::operation::{
    AttemptInfo, BodyCodec, HeaderProvider, JsonCodec, Operation, OperationSummary, TransferCodec,
    MAX_BODY_BYTES, TRANSFER_TYPE,
};
pub use crate::sdk::{has_built_in_transport, Sdk};
