//! The SDK's events for the app's analytics, and the foreign listener that receives them.

use std::sync::Arc;
use std::time::Duration;

use crate::listener::ListenerError;
use crate::time::span;
use crate::types::TransferState;

/// One thing the SDK did; transfers are named by local id only (no recipient, note or token).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum SdkEvent {
    /// An operation was committed at confirm (key minted, bytes fixed).
    Confirmed {
        local_id: String,
        operation_type: String,
    },
    /// The server wants the customer to complete a step; parked until `action_completed`.
    ActionRequired {
        local_id: String,
        operation_type: String,
    },
    /// A request for a transfer left (attempt counts from 1).
    AttemptStarted { local_id: String, attempt: u32 },
    /// The attempt ended: an HTTP status, or none when no answer came (`error` says why).
    AttemptAnswered {
        local_id: String,
        attempt: u32,
        status: Option<u16>,
        latency: Duration,
        error: Option<String>,
    },
    /// The transfer will be sent again after `delay`.
    RetryScheduled { local_id: String, delay: Duration },
    /// The give-up horizon was reached; status look-ups resolve it from now on.
    GaveUp { local_id: String },
    /// The transfer reached a final state.
    Resolved {
        local_id: String,
        state: TransferState,
    },
    /// The store was wiped (sign-out or `wipe`).
    Wiped {
        discarded_unfinished: u32,
        deleted_finished: u32,
    },
}

impl From<sendonce::SdkEvent> for SdkEvent {
    fn from(e: sendonce::SdkEvent) -> Self {
        use sendonce::SdkEvent as E;
        match e {
            E::Confirmed {
                local_id,
                operation_type,
            } => Self::Confirmed {
                local_id,
                operation_type,
            },
            E::ActionRequired {
                local_id,
                operation_type,
            } => Self::ActionRequired {
                local_id,
                operation_type,
            },
            E::AttemptStarted { local_id, attempt } => Self::AttemptStarted { local_id, attempt },
            E::AttemptAnswered {
                local_id,
                attempt,
                status,
                latency_ms,
                error,
            } => Self::AttemptAnswered {
                local_id,
                attempt,
                status,
                latency: Duration::from_millis(latency_ms),
                error,
            },
            E::RetryScheduled { local_id, delay_ms } => Self::RetryScheduled {
                local_id,
                delay: span(delay_ms),
            },
            E::GaveUp { local_id } => Self::GaveUp { local_id },
            E::Resolved { local_id, state } => Self::Resolved { local_id, state },
            E::Wiped {
                discarded_unfinished,
                deleted_finished,
            } => Self::Wiped {
                discarded_unfinished,
                deleted_finished,
            },
        }
    }
}

/// Told of every [`SdkEvent`], in order, on an SDK thread.
#[uniffi::export(foreign)]
pub trait EventListener: Send + Sync {
    /// Something happened.
    fn on_event(&self, event: SdkEvent) -> Result<(), ListenerError>;
}

pub(crate) struct EventListenerAdapter(pub Arc<dyn EventListener>);

impl sendonce::EventListener for EventListenerAdapter {
    fn on_event(&self, event: sendonce::SdkEvent) {
        if let Err(e) = self.0.on_event(event.into()) {
            tracing::warn!(error = %e, "an event listener failed; ignored");
        }
    }
}
