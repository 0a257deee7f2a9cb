//! Listener traits implemented in Kotlin or Swift, and the adapters that hand them to the SDK.
//!
//! The methods return `Result` on purpose: an exception thrown by foreign code then comes back as
//! [`ListenerError`] (uniffi turns any foreign exception into it through
//! `From<UnexpectedUniFFICallbackError>`) and is logged, instead of becoming a Rust panic.

use std::sync::Arc;

use crate::types::{ComposerState, Transfer};

/// A listener's own failure; anything a listener throws arrives as this and is only logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum ListenerError {
    /// The listener failed; the SDK carries on.
    #[error("listener failed: {detail}")]
    Failed { detail: String },
}

impl From<uniffi::UnexpectedUniFFICallbackError> for ListenerError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        Self::Failed { detail: e.reason }
    }
}

/// Told of every state change of every transfer, on an SDK thread.
#[uniffi::export(foreign)]
pub trait TransferListener: Send + Sync {
    /// A transfer changed; `transfer` is its new persisted state.
    fn on_transfer_changed(&self, transfer: Transfer) -> Result<(), ListenerError>;
}

/// Told of every state change of one composer, in order, on an SDK thread.
#[uniffi::export(foreign)]
pub trait ComposerListener: Send + Sync {
    /// The screen should show `state`.
    fn on_state_changed(&self, state: ComposerState) -> Result<(), ListenerError>;
}

pub(crate) struct TransferListenerAdapter(pub Arc<dyn TransferListener>);

impl sendonce::TransferListener for TransferListenerAdapter {
    fn on_transfer_changed(&self, transfer: sendonce::Transfer) {
        let id = transfer.local_id.clone();
        if let Err(e) = self.0.on_transfer_changed(transfer.into()) {
            tracing::warn!(local_id = %id, error = %e, "a transfer listener failed; ignored");
        }
    }
}

pub(crate) struct ComposerListenerAdapter(pub Arc<dyn ComposerListener>);

impl sendonce::ComposerListener for ComposerListenerAdapter {
    fn on_state_changed(&self, state: sendonce::ComposerState) {
        if let Err(e) = self.0.on_state_changed(state.into()) {
            tracing::warn!(error = %e, "a composer listener failed; ignored");
        }
    }
}
