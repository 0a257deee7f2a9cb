//! A phone: the composer, the SDK's persisted transfers and its sender, deciding with the SDK's own functions.
//!
//! `classify`, `next_attempt`, `ComposerState::of` and `send_enabled` are the real ones from `sendonce`;
//! only the look-up's reading of an answer (private in `sdk/src/sender.rs`) is restated here.

use std::time::Duration;

use sendonce::schedule::{next_attempt, seed_of, NextAttempt, ScheduleInput};
use sendonce::transport::{HttpResponse, TransportError};
use sendonce::{classify, ComposerState, RetryPolicy, TransferState, Verdict};

use crate::model::{Key, Mutant, Protocol, State};
use crate::network::{Msg, Reply};

/// One model-clock step per attempt: the cap, so the horizon of `attempts` steps is `attempts` caps.
const STEP_MS: u64 = 1_000;

/// What the app process has in memory about one transfer's request (lost when the app is killed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    /// Nothing on the wire.
    Idle,
    /// The attempt is persisted (Sending) but its bytes have not left yet.
    Begun,
    /// A request is out and the sender waits for its answer (or a timeout).
    Awaiting {
        /// A status look-up (GET by key) rather than the POST.
        lookup: bool,
    },
}

/// One persisted transfer, as the SDK's store holds it, plus the sender's in-memory wire state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transfer {
    /// Every key it was sent under, in order; more than one only under the new-key mutant.
    pub keys: Vec<Key>,
    /// The persisted body (an id standing for the exact bytes).
    pub body: u8,
    /// Persisted state.
    pub state: TransferState,
    /// Persisted attempt count.
    pub attempts: u8,
    /// Look-ups made after giving up.
    pub lookups: u8,
    /// Tag of the latest request, so a late answer to an earlier one is recognised as stale.
    pub tag: u8,
    /// In memory only.
    pub wire: Wire,
    /// The first final state it reached (kept to check that final is final).
    pub first_final: Option<TransferState>,
}

impl Transfer {
    /// The key it is sent under now.
    pub fn key(&self) -> Key {
        *self.keys.last().expect("a transfer always has a key")
    }

    /// Whether the sender may start an attempt (`QUEUED` in `sender.rs`).
    pub fn sendable(&self) -> bool {
        matches!(self.state, TransferState::Pending | TransferState::Retrying)
    }

    /// The SDK's own `Transfer` for this one, so the real `ComposerState::of` can read it.
    pub fn sdk_view(&self) -> sendonce::Transfer {
        sendonce::Transfer {
            local_id: String::new(),
            operation_type: sendonce::TRANSFER_TYPE.into(),
            idempotency_key: self.key().wire(),
            to_user_id: "u2".into(),
            amount_minor: 1,
            currency: "BDT".into(),
            note: None,
            state: self.state,
            attempts: self.attempts as u32,
            created_at_ms: 0,
            updated_at_ms: 0,
            last_attempt_at_ms: None,
            next_attempt_at_ms: None,
            last_error: None,
            server_transfer_id: None,
            rejection: None,
            replayed: false,
            required_action: None,
        }
    }
}

/// One phone: a confirm screen and the transfers its SDK persisted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Phone {
    /// Phone id.
    pub id: u8,
    /// Taps on Send still to come.
    pub taps_left: u8,
    /// Keys minted so far (the next key's number).
    pub minted: u8,
    /// Every transfer persisted on this phone; the composer follows the last one.
    pub transfers: Vec<Transfer>,
}

impl Phone {
    /// A phone on the confirm screen, nothing persisted.
    pub fn new(id: u8, taps: u8) -> Self {
        Self {
            id,
            taps_left: taps,
            minted: 0,
            transfers: Vec::new(),
        }
    }

    /// What the screen shows (the real `ComposerState::of` of the followed transfer).
    pub fn composer(&self) -> ComposerState {
        self.transfers
            .last()
            .map(|t| ComposerState::of(&t.sdk_view()))
            .unwrap_or(ComposerState::Editing)
    }

    fn mint(&mut self) -> Key {
        let key = Key {
            phone: self.id,
            n: self.minted,
        };
        self.minted += 1;
        key
    }

    /// The app is killed and reopened: memory is gone, `recover_in_flight` turns Sending into Retrying.
    pub fn crash(&mut self) {
        for t in &mut self.transfers {
            t.wire = Wire::Idle;
            if t.state == TransferState::Sending {
                t.state = TransferState::Retrying;
            }
        }
    }
}

/// The retry policy the model runs the real schedule with: no jitter, one cap per attempt.
pub fn policy(attempts: u8) -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(STEP_MS),
        cap: Duration::from_millis(STEP_MS),
        give_up_after: Duration::from_millis(STEP_MS * attempts as u64),
        jitter: false,
        ..RetryPolicy::default()
    }
}

/// Whether Send is enabled: the real `send_enabled`, or also in Waiting under the resend mutant.
pub fn send_enabled(m: &Protocol, state: &ComposerState) -> bool {
    state.send_enabled()
        || (m.is(Mutant::ResendInWaiting) && matches!(state, ComposerState::Waiting { .. }))
}

/// The user taps Send: the composer's `confirm` mints a key only when Send is enabled.
pub fn tap(m: &Protocol, s: &mut State, p: u8) {
    let phone = &mut s.phones[p as usize];
    phone.taps_left -= 1;
    debug_assert!(send_enabled(m, &phone.composer()));
    let key = phone.mint();
    let body = phone.transfers.len() as u8;
    phone.transfers.push(Transfer {
        keys: vec![key],
        body,
        state: TransferState::Pending,
        attempts: 0,
        lookups: 0,
        tag: 0,
        wire: Wire::Idle,
        first_final: None,
    });
}

/// Phase 1 of `sender::attempt`: the horizon check, then the attempt persisted before any byte leaves.
pub fn begin(m: &Protocol, s: &mut State, p: u8, t: u8) {
    let phone = &mut s.phones[p as usize];
    let attempts = phone.transfers[t as usize].attempts;
    // Restated from `sender::attempt` (private): elapsed sending time is measured in attempts here.
    if attempts >= m.bound.attempts {
        phone.transfers[t as usize].state = TransferState::NeedsAttention;
        return;
    }
    if attempts > 0 && m.is(Mutant::NewKeyPerRetry) {
        let key = phone.mint();
        phone.transfers[t as usize].keys.push(key);
    }
    let tr = &mut phone.transfers[t as usize];
    tr.state = TransferState::Sending;
    tr.attempts += 1;
    tr.wire = Wire::Begun;
}

/// Phase 2: the persisted bytes leave with the persisted key.
pub fn send(s: &mut State, p: u8, t: u8) {
    let tr = &mut s.phones[p as usize].transfers[t as usize];
    tr.tag = tr.tag.wrapping_add(1);
    tr.wire = Wire::Awaiting { lookup: false };
    let msg = Msg::Post {
        key: tr.key(),
        body: tr.body,
        reply: Reply {
            phone: p,
            transfer: t,
            tag: tr.tag,
        },
    };
    s.net.push(msg);
}

/// `sender::look_up`: a GET by key, never the transfer again.
pub fn look_up(s: &mut State, p: u8, t: u8) {
    let tr = &mut s.phones[p as usize].transfers[t as usize];
    tr.tag = tr.tag.wrapping_add(1);
    tr.lookups = tr.lookups.saturating_add(1);
    tr.wire = Wire::Awaiting { lookup: true };
    let msg = Msg::Get {
        key: tr.key(),
        reply: Reply {
            phone: p,
            transfer: t,
            tag: tr.tag,
        },
    };
    s.net.push(msg);
}

/// The transport gave up without an answer.
pub fn timeout() -> TransportError {
    TransportError::Timeout
}

/// No network at all.
pub fn offline() -> TransportError {
    TransportError::Offline
}

/// Phase 3 (or the end of a look-up): the result becomes the new persisted state.
pub fn conclude(
    m: &Protocol,
    s: &mut State,
    p: u8,
    t: u8,
    result: Result<HttpResponse, TransportError>,
) {
    let tr = &mut s.phones[p as usize].transfers[t as usize];
    let lookup = matches!(tr.wire, Wire::Awaiting { lookup: true });
    tr.wire = Wire::Idle;
    let stale = Reply {
        phone: p,
        transfer: t,
        tag: tr.tag,
    };
    // An answer to a request nobody waits for any more is read by nobody: dropping it now only
    // spares the checker the orderings of its arrival (its request may still arrive and run).
    s.net
        .msgs
        .retain(|m| !matches!(m, Msg::Answer { reply, .. } if *reply == stale));
    let tr = &mut s.phones[p as usize].transfers[t as usize];
    if lookup {
        // `record(.., LOOKUP_FROM)`: a look-up only concludes from a waiting state.
        if !tr.state.is_final() && tr.state != TransferState::Sending {
            tr.state = lookup_verdict(&result, &tr.key().wire()).unwrap_or(tr.state);
        }
    } else if tr.state == TransferState::Sending {
        tr.state = attempt_verdict(m, tr, &result);
    }
    if tr.state.is_final() && tr.first_final.is_none() {
        tr.first_final = Some(tr.state);
    }
}

/// The real `classify`, then the real `next_attempt` for an unknown outcome.
fn attempt_verdict(
    m: &Protocol,
    tr: &Transfer,
    result: &Result<HttpResponse, TransportError>,
) -> TransferState {
    let key = tr.key().wire();
    match classify(result, &key) {
        Verdict::Succeeded { .. } => TransferState::Succeeded,
        Verdict::Rejected(_) => TransferState::Rejected,
        Verdict::Failed(_) => TransferState::Failed,
        // The model sends no credentials, so the server never answers 401.
        Verdict::AuthRequired(_) => TransferState::AuthRequired,
        // server-mock's contract has no "action required" answer.
        Verdict::RequiresAction(_) => TransferState::RequiresAction,
        Verdict::Retry { retry_after_ms, .. } => {
            let attempts = tr.attempts as u32;
            let input = ScheduleInput {
                created_at_ms: 0,
                attempts,
                last_attempt_at_ms: (attempts.saturating_sub(1) as u64 * STEP_MS) as i64,
                retry_after_ms,
                jitter_seed: seed_of(&key),
            };
            // Every answer the model gives comes from the server itself (no captive portal), so the
            // SDK's `may_give_up` is true and the schedule alone decides.
            match next_attempt(&policy(m.bound.attempts), &input) {
                NextAttempt::At(_) => TransferState::Retrying,
                NextAttempt::GiveUp => TransferState::NeedsAttention,
            }
        }
    }
}

/// Restated from `sender::look_up` (private): which look-up answers end the transfer, and how.
fn lookup_verdict(
    result: &Result<HttpResponse, TransportError>,
    key: &str,
) -> Option<TransferState> {
    let Ok(r) = result else {
        return None;
    };
    match classify(result, key) {
        Verdict::Succeeded { .. } => Some(TransferState::Succeeded),
        _ if is_server_not_found(r) => Some(TransferState::Failed),
        Verdict::Rejected(_) if is_replay(r) => Some(TransferState::Rejected),
        Verdict::Failed(_) if is_replay(r) => Some(TransferState::Failed),
        _ => None,
    }
}

/// Restated from `classify::is_server_not_found` (crate-private): the server's own 404 `transfer_not_found`.
fn is_server_not_found(r: &HttpResponse) -> bool {
    let problem_json = r
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/problem+json"));
    let code = serde_json::from_slice::<serde_json::Value>(&r.body)
        .ok()
        .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_owned));
    r.status == 404 && problem_json && code.as_deref() == Some("transfer_not_found")
}

/// Restated from `sender::is_replay` (private).
fn is_replay(r: &HttpResponse) -> bool {
    r.header("idempotent-replayed")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_schedule_gives_up_after_the_bound_s_attempts() {
        let at = |attempts: u32| {
            let input = ScheduleInput {
                created_at_ms: 0,
                attempts,
                last_attempt_at_ms: (attempts as i64 - 1) * STEP_MS as i64,
                retry_after_ms: None,
                jitter_seed: 7,
            };
            next_attempt(&policy(3), &input)
        };
        assert_eq!(at(1), NextAttempt::At(1_000));
        assert_eq!(at(2), NextAttempt::At(2_000));
        assert_eq!(at(3), NextAttempt::GiveUp);
    }

    #[test]
    fn send_is_disabled_while_waiting_unless_the_mutant_is_on() {
        let mut phone = Phone::new(0, 2);
        let sound = Protocol::new(crate::model::Bound::CI, None);
        let mutant = Protocol::new(crate::model::Bound::CI, Some(Mutant::ResendInWaiting));
        assert!(send_enabled(&sound, &phone.composer()));
        phone.transfers.push(Transfer {
            keys: vec![Key { phone: 0, n: 0 }],
            body: 0,
            state: TransferState::Retrying,
            attempts: 1,
            lookups: 0,
            tag: 1,
            wire: Wire::Idle,
            first_final: None,
        });
        assert!(matches!(phone.composer(), ComposerState::Waiting { .. }));
        assert!(!send_enabled(&sound, &phone.composer()));
        assert!(send_enabled(&mutant, &phone.composer()));
    }
}
