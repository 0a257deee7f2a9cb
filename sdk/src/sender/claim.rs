//! The claim on a transfer: held while this instance works on it, released by `Drop` whatever happens.
//!
//! Releasing in `Drop` is what makes a panicking attempt task or an error after the request left
//! harmless: the claim cannot leak, and a transfer left `Sending` by this instance goes back to the
//! schedule at once instead of waiting for the next open.

use std::sync::Arc;

use crate::core::Core;
use crate::error::Result;
use crate::model::TransferState;

use super::{retry_update, Sending};

/// This instance works on one transfer (an attempt or a look-up); nobody else of it may.
pub(crate) struct Claim {
    core: Arc<Core>,
    local_id: String,
    /// Wake the sender on release (off for the sender's own sweep, which would otherwise spin).
    wake: bool,
}

impl Claim {
    /// Claims `local_id`; `None` if an attempt or a look-up already holds it.
    pub(crate) fn take(core: &Arc<Core>, local_id: &str) -> Option<Self> {
        core.claim(local_id).then(|| Self {
            core: core.clone(),
            local_id: local_id.to_string(),
            wake: true,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // After close() a new instance may own the file: this one must not write to it any more.
        if !self.core.is_closed() {
            match hand_back(&self.core, &self.local_id) {
                Ok(true) => tracing::warn!(
                    local_id = %self.local_id,
                    "attempt ended without recording its outcome; sent again with the same key"
                ),
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    local_id = %self.local_id,
                    error = %e,
                    "transfer left sending; the sender hands it back once the store can write"
                ),
            }
        }
        self.core.release(&self.local_id);
        if self.wake {
            self.core.wake.notify_one();
        }
    }
}

/// A transfer still `Sending` while nobody holds its claim has an unknown outcome: it is scheduled
/// again (same key, same bytes) as after any unknown answer. True if it was.
fn hand_back(core: &Core, local_id: &str) -> Result<bool> {
    let Some(transfer) = core.store.get(local_id)? else {
        return Ok(false);
    };
    if transfer.state != TransferState::Sending {
        return Ok(false);
    }
    let (elapsed_ms, _) = core.store.progress(local_id)?;
    let now = core.clock.now_ms();
    let sending = Sending {
        elapsed_ms,
        // Giving up is decided by the next attempt, which checks the horizon before it sends.
        may_give_up: false,
    };
    let error = "the attempt ended before its outcome was recorded; outcome unknown".to_string();
    let update = retry_update(
        core,
        &transfer,
        &transfer.idempotency_key,
        None,
        error,
        now,
        sending,
    );
    let recorded = core
        .store
        .record(local_id, &update, now, &[TransferState::Sending])?;
    let handed_back = recorded.state != TransferState::Sending;
    core.publish(recorded);
    Ok(handed_back)
}

/// Hands back every transfer left `Sending` that no task of this instance holds; returns how many it
/// found (a hand-back that could not be written is tried again on the next sweep).
pub(crate) fn sweep(core: &Arc<Core>) -> Result<usize> {
    let mut found = 0;
    for local_id in core.store.sending_ids()? {
        // Taking and dropping the claim is the hand-back; a claim held elsewhere means an attempt is out.
        if let Some(mut claim) = Claim::take(core, &local_id) {
            found += 1;
            claim.wake = false;
            drop(claim);
        }
    }
    Ok(found)
}
