//! What the sender does, as events for the app's analytics: attempts, answers, retries, outcomes, wipes.
//!
//! Events name transfers by local id only: no recipient, note, amount or token is ever in one.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::model::TransferState;

/// One thing the SDK did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkEvent {
    /// An operation was committed at confirm (its key minted, its bytes fixed).
    Confirmed {
        /// The operation.
        local_id: String,
        /// Its type name (`transfer`, `payout`, ...).
        operation_type: String,
    },
    /// The server wants the customer to complete a step; the operation is parked until `action_completed`.
    ActionRequired {
        /// The operation.
        local_id: String,
        /// Its type name.
        operation_type: String,
    },
    /// A request for a transfer left (attempt counts from 1).
    AttemptStarted {
        /// The transfer.
        local_id: String,
        /// Which attempt.
        attempt: u32,
    },
    /// The attempt ended: an HTTP status, or none when no answer came (`error` says why).
    AttemptAnswered {
        /// The transfer.
        local_id: String,
        /// Which attempt.
        attempt: u32,
        /// The HTTP status, if an answer came.
        status: Option<u16>,
        /// From the request leaving to the answer (or the failure).
        latency_ms: u64,
        /// Why no answer came (offline, timeout, connection), if none did.
        error: Option<String>,
    },
    /// The transfer will be sent again after `delay_ms`.
    RetryScheduled {
        /// The transfer.
        local_id: String,
        /// Delay until the next attempt (SDK clock).
        delay_ms: i64,
    },
    /// The give-up horizon was reached: the outcome is resolved by status look-ups from now on.
    GaveUp {
        /// The transfer.
        local_id: String,
    },
    /// The transfer reached a final state.
    Resolved {
        /// The transfer.
        local_id: String,
        /// Succeeded, Rejected or Failed.
        state: TransferState,
    },
    /// The store was wiped (sign-out or `wipe`).
    Wiped {
        /// Unfinished transfers discarded (only with `force`).
        discarded_unfinished: u32,
        /// Finished transfers deleted.
        deleted_finished: u32,
    },
}

/// Told of every [`SdkEvent`] (implementable from Kotlin and Swift), on an SDK thread, in order.
pub trait EventListener: Send + Sync {
    /// Something happened.
    fn on_event(&self, event: SdkEvent);
}

/// Calls one listener; a panic (or a foreign exception turned into one) is logged, never fatal.
pub(crate) fn deliver(listener: &dyn EventListener, event: SdkEvent) {
    if catch_unwind(AssertUnwindSafe(|| listener.on_event(event))).is_err() {
        tracing::warn!("an event listener panicked; ignored");
    }
}
