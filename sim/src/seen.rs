//! What a phone's listener saw of each transfer over its whole life (across restarts), and the
//! timeline marks its state changes stand for.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use sendonce::{Clock, SimClock, Transfer, TransferListener, TransferState};

use crate::timeline::{mark_of_state, SharedTimeline};

/// What the listener saw of one transfer over its whole life (across restarts).
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Every key it was ever sent with.
    pub keys: BTreeSet<String>,
    /// It reached NeedsAttention at least once.
    pub needed_attention: bool,
    /// The first final state it reached.
    pub first_final: Option<TransferState>,
    /// States it was seen in after that (a final state must never change).
    pub after_final: Vec<TransferState>,
    /// It was parked (RequiresAction) at least once.
    pub parked: bool,
    /// It went from RequiresAction to NeedsAttention: it gave up while it waited for the customer.
    pub gave_up_parked: bool,
    /// The last state seen.
    pub last: Option<TransferState>,
}

/// Listener registered on every SDK instance of the phone.
pub struct KeyLog {
    pub(crate) seen: Mutex<BTreeMap<String, Seen>>,
    pub(crate) phone: usize,
    pub(crate) clock: Arc<SimClock>,
    pub(crate) timeline: SharedTimeline,
}

impl TransferListener for KeyLog {
    fn on_transfer_changed(&self, transfer: Transfer) {
        if let Some(mark) = mark_of_state(transfer.state, transfer.last_error.as_deref()) {
            self.timeline
                .record(Some(self.phone), self.clock.monotonic_ms(), mark);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let entry = seen.entry(transfer.local_id).or_default();
        entry.keys.insert(transfer.idempotency_key);
        entry.needed_attention |= transfer.state == TransferState::NeedsAttention;
        entry.parked |= transfer.state == TransferState::RequiresAction;
        entry.gave_up_parked |= entry.last == Some(TransferState::RequiresAction)
            && transfer.state == TransferState::NeedsAttention;
        entry.last = Some(transfer.state);
        match entry.first_final {
            Some(state) if state != transfer.state => entry.after_final.push(transfer.state),
            None if transfer.state.is_final() => entry.first_final = Some(transfer.state),
            _ => {}
        }
    }
}

/// Ids of the transfers that needed attention.
pub fn needed_attention(seen: &BTreeMap<String, Seen>) -> BTreeSet<String> {
    seen.iter()
        .filter(|(_, s)| s.needed_attention)
        .map(|(id, _)| id.clone())
        .collect()
}
