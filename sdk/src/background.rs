//! Sending while no screen is open: `drain(deadline)` for WorkManager / BGTaskScheduler, and the
//! spread of background wake-ups so a fleet coming back at once does not arrive at once.
//!
//! Which wake-up applies when: `set_network_available(true)` while the app is in the foreground (the
//! default, `set_in_foreground(true)`) wakes every waiting transfer at once — the user is looking.
//! In the background (`set_in_foreground(false)`) and in every `drain`, each waiting transfer's next
//! request is spread over `background_wake_window` (at most one retry cap, and at most half the
//! drain's deadline) by its own seed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::core::Core;
use crate::error::{Result, SdkError};
use crate::model::{Transfer, TransferState};
use crate::schedule::{background_wake_at, seed_of};
use crate::sdk::Sdk;

/// What a drain achieved, for the worker's result and its next enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainSummary {
    /// Transfers that reached a final state during the drain.
    pub finished: Vec<Transfer>,
    /// Transfers still unfinished (a worker should run again; AuthRequired ones wait for a token,
    /// RequiresAction ones for the customer).
    pub unfinished: Vec<Transfer>,
    /// Earliest next attempt of the unfinished ones (SDK clock, ms), if one is scheduled.
    pub next_attempt_at_ms: Option<i64>,
    /// From now to that attempt (ms, at least 0): the delay of the next enqueue.
    pub next_attempt_in_ms: Option<i64>,
    /// True if the drain returned at its deadline with work still due.
    pub deadline_reached: bool,
}

impl Sdk {
    /// Sends and resolves everything due within `deadline`, then says what is left.
    ///
    /// Call it from background work the OS runs with connectivity (WorkManager with
    /// `NetworkType.CONNECTED`, a `BGProcessingTask` requiring network): it marks the network available
    /// and spreads the waiting transfers' first requests (see the module doc). It returns by the
    /// deadline even with a request still out: that request's outcome is unknown, the transfer stays
    /// durable and goes on with the same key, in this instance or the next.
    pub async fn drain(&self, deadline: Duration) -> Result<DrainSummary> {
        let core = self.live()?.clone();
        let handle = self.handle.clone();
        handle
            .spawn(async move { drain_on(core, deadline).await })
            .await
            .map_err(|e| crate::sdk::joined(&self.core, e))?
    }

    /// The host app's lifecycle: in the background, network wake-ups are spread (see the module doc).
    pub fn set_in_foreground(&self, foreground: bool) -> Result<()> {
        self.live()?.set_in_foreground(foreground);
        Ok(())
    }
}

async fn drain_on(core: Arc<Core>, deadline: Duration) -> Result<DrainSummary> {
    let until = Instant::now() + deadline;
    let before: HashSet<String> = core
        .store
        .list(true)?
        .into_iter()
        .map(|t| t.local_id)
        .collect();
    core.set_network_available(true);
    let window = core
        .config
        .background_wake_window
        .min(core.config.retry.cap)
        .min(deadline / 2);
    spread_wake(&core, window)?;
    let mut changes = core.changes.subscribe();
    let mut deadline_reached = false;
    loop {
        if core.is_closed() {
            return Err(SdkError::Closed);
        }
        let unfinished = core.store.list(true)?;
        let left = until.saturating_duration_since(Instant::now());
        let now = core.clock.now_ms();
        if !unfinished.iter().any(|t| due_within(&core, t, now, left)) {
            break;
        }
        if left.is_zero() {
            deadline_reached = true;
            break;
        }
        // Every state change wakes this; the bound catches a retry coming due without one.
        let _ = tokio::time::timeout(left.min(Duration::from_millis(250)), changes.changed()).await;
    }
    let now = core.clock.now_ms();
    let unfinished = core.store.list(true)?;
    let mut finished = Vec::new();
    for id in &before {
        if let Some(t) = core.store.get(id)? {
            if t.state.is_final() {
                finished.push(t);
            }
        }
    }
    let next_attempt_at_ms = unfinished
        .iter()
        // Waiting for a token or for the customer's step: nothing a worker can do, so no reason to wake it
        // (a parked operation counted as "due now" had background workers run again at once, in a loop).
        .filter(|t| {
            !matches!(
                t.state,
                TransferState::AuthRequired | TransferState::RequiresAction
            )
        })
        .filter_map(|t| t.next_attempt_at_ms.or(Some(now)))
        .min();
    tracing::info!(
        finished = finished.len(),
        unfinished = unfinished.len(),
        deadline_reached,
        "drain"
    );
    Ok(DrainSummary {
        finished,
        unfinished,
        next_attempt_in_ms: next_attempt_at_ms.map(|at| (at - now).max(0)),
        next_attempt_at_ms,
        deadline_reached,
    })
}

/// True if the transfer has work the drain should wait for within `left`.
fn due_within(core: &Core, t: &Transfer, now: i64, left: Duration) -> bool {
    match t.state {
        TransferState::Pending | TransferState::Sending => true,
        TransferState::Retrying | TransferState::NeedsAttention => t
            .next_attempt_at_ms
            .is_none_or(|at| core.clock.real_duration((at - now).max(0)) <= left),
        _ => false,
    }
}

/// Gives every waiting transfer a next request spread over `window` (see the module doc) and wakes
/// the sender.
pub(crate) fn spread_wake(core: &Core, window: Duration) -> Result<usize> {
    let now = core.clock.now_ms();
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let times: Vec<(String, i64)> = core
        .store
        .waiting()?
        .into_iter()
        .map(|(id, key, at)| {
            let when = background_wake_at(now, window_ms, seed_of(&key), at);
            (id, when)
        })
        .collect();
    let moved = core.store.reschedule(&times, now)?;
    for id in &moved {
        if let Some(t) = core.store.get(id)? {
            core.publish(t);
        }
    }
    core.wake.notify_one();
    Ok(moved.len())
}

/// A foreground wake-up: pending transfers a background wake-up had spread are due now as well.
pub(crate) fn wake_pending_now(core: &Core, now: i64) -> Result<Vec<String>> {
    let later: Vec<(String, i64)> = core
        .store
        .waiting()?
        .into_iter()
        .filter(|(_, _, at)| *at > now)
        .map(|(id, _, _)| (id, now))
        .collect();
    core.store.reschedule(&later, now)
}
