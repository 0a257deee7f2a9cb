//! The sender: the life of one transfer, phase by phase, and the loop that drives it.
//!
//! Read `attempt` top to bottom: each phase is one function, each store call one transaction.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::sleep;

use crate::classify::{classify_with, contact, Contact, Verdict};
use crate::contract::ResponseContract;
use crate::core::Core;
use crate::error::Result;
use crate::events::SdkEvent;
use crate::model::{Rejection, RejectionReason, Transfer, TransferState};
use crate::operation::{check_header, is_reserved, AttemptInfo};
use crate::schedule::{next_attempt, seed_of, NextAttempt, ScheduleInput};
use crate::store::{Update, Wire};
use crate::token;
use crate::transport::{HttpRequest, HttpResponse, Method, TransportError};

mod claim;
mod durable;

pub(crate) use claim::Claim;
use durable::durably;

/// Runs until the SDK closes: starts every due transfer, then sleeps until the next one or a wake-up.
pub(crate) async fn run(core: Arc<Core>) {
    loop {
        let wake = core.wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        if core.is_closed() {
            return;
        }
        let wait = match start_due(&core) {
            Ok(wait) => wait,
            Err(e) => {
                tracing::error!(error = %e, "sender could not read the store; trying again in 1 s");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            _ = &mut wake => {}
            _ = sleep(wait) => {}
        }
    }
}

/// Spawns an attempt (or a status look-up) for each due transfer; returns how long to sleep.
fn start_due(core: &Arc<Core>) -> Result<Duration> {
    let idle = Duration::from_secs(3600);
    if let Err(e) = core.store.checkpoint_if_due() {
        tracing::warn!(error = %e, "WAL checkpoint failed; retried after the next commits");
    }
    let now = core.clock.now_ms();
    // A prune backlog drains turn by turn, a pause between them, instead of one turn an hour.
    let idle = match core.prune_if_due(now) {
        Ok(true) => PRUNE_PAUSE,
        Ok(false) => idle,
        Err(e) => {
            tracing::warn!(error = %e, "pruning finished transfers failed; tried again later");
            idle
        }
    };
    if !core.network_available() {
        return Ok(idle);
    }
    let cap = core.config.retry.cap.as_millis() as i64;
    let stranded = claim::sweep(core)?;
    for step in core.store.due(now, cap, 256)? {
        if let Some(claim) = Claim::take(core, &step.local_id) {
            let core2 = core.clone();
            core.spawn_attempt(async move {
                let core = core2;
                let _slot = core.send_slots.acquire().await;
                let id = step.local_id;
                let result = if step.look_up {
                    look_up(&core, &id).await.map(|_| ())
                } else {
                    attempt(&core, &id).await
                };
                if let Err(e) = result {
                    tracing::error!(local_id = %id, error = %e, "attempt could not be recorded; handed back to the sender");
                    // A store that cannot write now gets a second before this transfer is tried again,
                    // instead of a hot loop of failing attempts.
                    sleep(STORE_PAUSE).await;
                }
                drop(claim);
            });
        }
    }
    if stranded > 0 {
        // Their hand-back could not be written: look again soon, not in an hour.
        return Ok(STORE_PAUSE);
    }
    Ok(match core.store.next_due_after(now)? {
        // A wait longer than the cap means the clock jumped backwards: never sleep past the cap.
        Some(at) => core.clock.real_duration((at - now).clamp(0, cap)).min(idle),
        None => idle,
    })
}

/// Pause between two turns of a prune backlog: confirmations and attempts get the writer in between.
const PRUNE_PAUSE: Duration = Duration::from_millis(50);

/// Pause after a store error before the same transfer (or a stranded one) is tried again.
const STORE_PAUSE: Duration = Duration::from_secs(1);

/// One attempt, in the order that makes it safe to repeat at any point.
pub(crate) async fn attempt(core: &Core, local_id: &str) -> Result<()> {
    let now = core.clock.now_ms();
    let mono = core.clock.monotonic_ms();
    let Some(transfer) = core.store.get(local_id)? else {
        return Ok(());
    };
    // The horizon counts measured sending time, never wall-clock distance: a clock set forward before
    // the first attempt does not skip it, a clock set back does not extend the window.
    let (persisted_ms, reached) = core.store.progress(local_id)?;
    let elapsed = core.elapsed_ms(local_id, persisted_ms, mono);
    let reached = Contact::from_i64(reached);
    if elapsed >= horizon_ms(core) && may_give_up(reached) {
        core.forget_elapsed(local_id);
        let t = core
            .store
            .record(local_id, &needs_attention(core, now), now, QUEUED)?;
        tracing::warn!(local_id, key = %t.idempotency_key, "give-up horizon reached; resolving by status look-up");
        announce(core, &t, now);
        core.publish(t);
        return Ok(());
    }
    if transfer.attempts > 0 {
        if let Err(at) = core.take_retry_token(now) {
            let update = Update::Retry {
                next_attempt_at_ms: at,
                error: "retry budget exhausted".into(),
            };
            core.publish(core.store.record(local_id, &update, now, QUEUED)?);
            return Ok(());
        }
        if core.config.unsafe_new_key_per_retry {
            core.store
                .rotate_key(local_id, &crate::core::mint_key(&core.config))?;
        }
    }

    // Phase 1: the attempt is counted and marked on the wire before the request leaves.
    let Some(transfer) = core.store.begin_attempt(local_id, now, elapsed)? else {
        return Ok(());
    };
    core.mark_elapsed(local_id, mono);
    core.publish(transfer.clone());
    core.emit(SdkEvent::AttemptStarted {
        local_id: local_id.into(),
        attempt: transfer.attempts,
    });

    // Phase 2: the same key, the same bytes and the same committed headers, every time.
    let wire = core.store.wire(local_id)?;
    let key = wire.key.clone();
    let token_generation = core.token_generation();
    let span = tracing::info_span!("attempt", local_id, op = %wire.op_type, key = %key, attempt = transfer.attempts);
    let sent_at = std::time::Instant::now();
    let result = send_operation(core, local_id, transfer.attempts, wire).await;
    core.emit(answered(local_id, transfer.attempts, &result, sent_at));
    let verdict = verdict_of(core, &result, &key);
    let unauthorized = matches!(verdict, Verdict::AuthRequired(_));
    let token_changed = core.token_generation() != token_generation;
    let refresh = unauthorized && !token_changed && token::may_refresh(core, local_id);
    let got = contact(contract(core), &result, &key);
    if got > reached {
        durably(local_id, || core.store.raise_contact(local_id, got as i64)).await?;
    }
    let _enter = span.enter();
    tracing::info!(?verdict, "attempt answered");

    // Phase 3: the verdict becomes the new persisted state.
    let later = core.clock.now_ms();
    let update = match verdict {
        Verdict::Succeeded {
            server_transfer_id,
            replayed,
        } => Update::Succeeded {
            server_transfer_id: Some(server_transfer_id),
            replayed,
            response_body: result.map(|r| r.body).unwrap_or_default(),
        },
        Verdict::Rejected(rejection) => Update::Ended {
            state: TransferState::Rejected,
            rejection,
        },
        Verdict::Failed(rejection) => Update::Ended {
            state: TransferState::Failed,
            rejection,
        },
        // A token set while this request was out is retried at once instead of parking the transfer.
        Verdict::AuthRequired(error) if token_changed => Update::Retry {
            next_attempt_at_ms: later,
            error,
        },
        // The app's provider is asked once for a fresh token, off this path (see token.rs).
        Verdict::AuthRequired(error) if refresh => Update::Retry {
            next_attempt_at_ms: later.saturating_add(token::hold_ms(core)),
            error: format!("{error}; asking the app for a fresh token"),
        },
        Verdict::AuthRequired(error) => Update::AuthRequired { error },
        Verdict::RequiresAction(action) => Update::RequiresAction { action },
        Verdict::Retry {
            retry_after_ms,
            error,
        } => {
            let sending = Sending {
                elapsed_ms: elapsed,
                may_give_up: may_give_up(reached.max(got)),
            };
            retry_update(core, &transfer, &key, retry_after_ms, error, later, sending)
        }
    };
    if matches!(update, Update::RequiresAction { .. }) {
        // Parked: the sending time stops here and starts again when the customer is done, so the
        // horizon never runs out while the server waits for them.
        let parked_at =
            elapsed.saturating_add(core.clock.monotonic_ms().saturating_sub(mono).max(0));
        durably(local_id, || core.store.save_elapsed(local_id, parked_at)).await?;
    }
    if !matches!(update, Update::Retry { .. } | Update::AuthRequired { .. }) {
        core.forget_elapsed(local_id);
    }
    let parks = matches!(update, Update::AuthRequired { .. });
    if !unauthorized {
        token::forget(core, local_id);
    }
    // The answer is the one thing that cannot be had again for free: a failed write is retried before
    // the transfer is handed back to the schedule (and, the disk still full, to the sweep).
    let mut recorded = durably(local_id, || {
        core.store
            .record(local_id, &update, later, &[TransferState::Sending])
    })
    .await?;
    // A token set between the check above and this write found nothing to resume (the row still said
    // Sending); set_access_token bumps the generation before it resumes, so looking again here closes that gap.
    if parks && core.token_generation() != token_generation {
        let resume = Update::Retry {
            next_attempt_at_ms: later,
            error: "a new access token arrived while the 401 was recorded".into(),
        };
        recorded = core
            .store
            .record(local_id, &resume, later, &[TransferState::AuthRequired])?;
    }
    announce(core, &recorded, later);
    if refresh && recorded.state == TransferState::Retrying {
        token::request(core, local_id);
    }
    core.publish(recorded);
    Ok(())
}

/// The event for an attempt's answer (or its lack).
fn answered(
    local_id: &str,
    attempt: u32,
    result: &Result<HttpResponse, TransportError>,
    sent_at: std::time::Instant,
) -> SdkEvent {
    let (status, error) = match result {
        Ok(r) => (Some(r.status), None),
        Err(e) => (None, Some(e.to_string())),
    };
    SdkEvent::AttemptAnswered {
        local_id: local_id.into(),
        attempt,
        status,
        latency_ms: u64::try_from(sent_at.elapsed().as_millis()).unwrap_or(u64::MAX),
        error,
    }
}

/// The event for a recorded state: a retry's delay, a give-up, or the outcome.
fn announce(core: &Core, t: &Transfer, now: i64) {
    let local_id = t.local_id.clone();
    let event = match t.state {
        TransferState::Retrying => SdkEvent::RetryScheduled {
            local_id,
            delay_ms: t
                .next_attempt_at_ms
                .unwrap_or(now)
                .saturating_sub(now)
                .max(0),
        },
        TransferState::NeedsAttention => SdkEvent::GaveUp { local_id },
        TransferState::RequiresAction => SdkEvent::ActionRequired {
            local_id,
            operation_type: t.operation_type.clone(),
        },
        s if s.is_final() => SdkEvent::Resolved { local_id, state: s },
        _ => return,
    };
    core.emit(event);
}

/// States a transfer waits in between attempts (the sender may start an attempt from these).
const QUEUED: &[TransferState] = &[TransferState::Pending, TransferState::Retrying];

/// States a status look-up may conclude from: not final, and no attempt of ours on the wire.
const LOOKUP_FROM: &[TransferState] = &[
    TransferState::Pending,
    TransferState::Retrying,
    TransferState::AuthRequired,
    TransferState::NeedsAttention,
    TransferState::RequiresAction,
];

/// Resolves an unknown outcome through the status look-up by key; never sends the transfer again.
///
/// The caller holds the transfer's claim, so no attempt of this instance is on the wire. The
/// server's own 404 (`transfer_not_found` problem+json) ends the transfer as "not executed"
/// whenever it comes: the contract makes a by-key 404 final (DESIGN.md invariant 6; server-mock
/// closes the key with it), so sending on would only replay it.
pub(crate) async fn look_up(core: &Core, local_id: &str) -> Result<Transfer> {
    let Some(current) = core.store.get(local_id)? else {
        return Err(crate::error::SdkError::NotFound(local_id.into()));
    };
    if current.state.is_final() {
        return Ok(current);
    }
    let given_up = current.state == TransferState::NeedsAttention;
    let parked = current.state == TransferState::RequiresAction;
    let key = current.idempotency_key.clone();
    let c = contract(core);
    let path = c.lookup_path(&key);
    let result = send(core, Method::Get, &path, Vec::new(), Vec::new()).await;
    let now = core.clock.now_ms();
    let later = |error: String| Update::NeedsAttention {
        next_attempt_at_ms: now + cap_ms(core),
        error,
    };
    let update = match (&result, classify_with(c, &result, &key)) {
        (
            Ok(r),
            Verdict::Succeeded {
                server_transfer_id, ..
            },
        ) => Some(Update::Succeeded {
            server_transfer_id: Some(server_transfer_id),
            replayed: true,
            response_body: r.body.clone(),
        }),
        // The server still waits for the customer (or now does): parked, never given up.
        (Ok(_), Verdict::RequiresAction(action)) => Some(Update::RequiresAction { action }),
        // A parked operation is not executed yet by definition: the customer may still complete it.
        (Ok(r), _) if !parked && c.is_not_found(r) => Some(Update::Ended {
            state: TransferState::Failed,
            rejection: Rejection {
                reason: RejectionReason::NotExecuted,
                code: "not_executed".into(),
                detail: "the server never executed this transfer; no money moved".into(),
                http_status: 404,
            },
        }),
        // A stored outcome for this key (402) comes back as a replay and is as definitive as on the POST;
        // any other server problem on a look-up is about the look-up, not the transfer.
        (Ok(r), Verdict::Rejected(rejection)) if c.is_replay(r) => Some(Update::Ended {
            state: TransferState::Rejected,
            rejection,
        }),
        (Ok(r), Verdict::Failed(rejection)) if c.is_replay(r) => Some(Update::Ended {
            state: TransferState::Failed,
            rejection,
        }),
        (Ok(r), verdict) if given_up => Some(later(lookup_unknown(r, verdict))),
        (Err(e), _) if given_up => Some(later(format!("look-up failed: {e}"))),
        _ => None,
    };
    let transfer = match update {
        Some(update) => core.store.record(local_id, &update, now, LOOKUP_FROM)?,
        None => current,
    };
    tracing::info!(local_id, key = %key, state = ?transfer.state, "status look-up");
    if transfer.state.is_final() {
        announce(core, &transfer, now);
    }
    core.publish(transfer.clone());
    Ok(transfer)
}

/// Why a look-up answer left the outcome unknown, for the transfer's last error.
fn lookup_unknown(r: &HttpResponse, verdict: Verdict) -> String {
    let what = match verdict {
        Verdict::Retry { error, .. } | Verdict::AuthRequired(error) => error,
        Verdict::Rejected(p) | Verdict::Failed(p) => {
            format!(
                "{} {} is not a stored outcome for this key",
                r.status, p.code
            )
        }
        Verdict::Succeeded { .. } => format!("{}", r.status),
        Verdict::RequiresAction(a) => format!("{} {} (action required)", r.status, a.code),
    };
    format!("look-up answered {what}; outcome still unknown")
}

fn retry_update(
    core: &Core,
    t: &Transfer,
    key: &str,
    retry_after_ms: Option<i64>,
    error: String,
    now: i64,
    sending: Sending,
) -> Update {
    let last_attempt_at_ms = t.last_attempt_at_ms.unwrap_or(now);
    let elapsed_ms = sending.elapsed_ms;
    let input = ScheduleInput {
        // The confirm time as this attempt's clock would have read it had it never jumped: the schedule
        // then gives up after `give_up_after` of measured sending time.
        created_at_ms: last_attempt_at_ms.saturating_sub(elapsed_ms),
        attempts: t.attempts,
        last_attempt_at_ms,
        retry_after_ms,
        jitter_seed: seed_of(key),
    };
    match next_attempt(&core.config.retry, &input) {
        NextAttempt::At(at) => Update::Retry {
            next_attempt_at_ms: at,
            error,
        },
        NextAttempt::GiveUp if sending.may_give_up => needs_attention(core, now),
        // Past the horizon, but only an intermediary ever answered: keep trying, one cap apart.
        NextAttempt::GiveUp => Update::Retry {
            next_attempt_at_ms: last_attempt_at_ms.saturating_add(cap_ms(core)),
            error,
        },
    }
}

/// What the give-up rule needs to know about a transfer's sending so far.
struct Sending {
    /// Measured sending time (monotonic) at the start of the attempt.
    elapsed_ms: i64,
    /// See [`may_give_up`].
    may_give_up: bool,
}

/// The SDK may stop sending only once an attempt reached the server (its answer, or a timeout that can
/// have reached it) or when nothing ever got past the device (offline the whole horizon). While only an
/// intermediary answers (a captive portal, a proxy), the server may never have seen the key: keep sending.
fn may_give_up(reached: Contact) -> bool {
    reached != Contact::Intermediary
}

fn horizon_ms(core: &Core) -> i64 {
    core.config.retry.give_up_after.as_millis() as i64
}

fn needs_attention(core: &Core, now: i64) -> Update {
    // The first look-up waits one cap so a delayed last attempt can land before we ask.
    Update::NeedsAttention {
        next_attempt_at_ms: now + cap_ms(core),
        error: "gave up sending; outcome unknown".into(),
    }
}

fn cap_ms(core: &Core) -> i64 {
    core.config.retry.cap.as_millis() as i64
}

/// The contract this SDK reads answers with.
fn contract(core: &Core) -> &ResponseContract {
    &core.config.contract
}

/// Sends an operation's committed request: its method, path, headers and bytes, plus the SDK's own
/// headers and the app's per-attempt ones (which never replace a committed or an SDK header).
async fn send_operation(
    core: &Core,
    local_id: &str,
    attempt: u32,
    wire: Wire,
) -> std::result::Result<HttpResponse, TransportError> {
    let Some(method) = Method::parse(&wire.method) else {
        return Err(TransportError::Connection(format!(
            "stored method {:?} is unknown",
            wire.method
        )));
    };
    let mut headers = wire.headers;
    if !wire.body.is_empty() && !headers.iter().any(|(n, _)| n == "content-type") {
        // A row written before operations: server-mock's JSON, as it was always sent.
        headers.push(("content-type".into(), "application/json".into()));
    }
    let key_header = contract(core).key_header.to_ascii_lowercase();
    headers.retain(|(n, _)| *n != key_header);
    headers.push((key_header, wire.key.clone()));
    if let Some(provider) = &core.config.header_provider {
        let info = AttemptInfo {
            local_id: local_id.to_string(),
            operation_type: wire.op_type.clone(),
            idempotency_key: wire.key.clone(),
            attempt,
        };
        let extra =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| provider.headers(&info)))
                .unwrap_or_else(|_| {
                    tracing::warn!(
                        local_id,
                        "the header provider panicked; attempt sent without its headers"
                    );
                    Vec::new()
                });
        for (name, value) in extra {
            let name = name.to_ascii_lowercase();
            let taken =
                is_reserved(&name) || name == "accept" || headers.iter().any(|(n, _)| *n == name);
            if taken || check_header(&name, &value).is_err() {
                tracing::warn!(local_id, header = %name, "a provided header was dropped (reserved, committed or malformed)");
                continue;
            }
            headers.push((name, value));
        }
    }
    send(core, method, &wire.path, headers, wire.body).await
}

async fn send(
    core: &Core,
    method: Method,
    path: &str,
    extra: Vec<(String, String)>,
    body: Vec<u8>,
) -> std::result::Result<HttpResponse, TransportError> {
    let mut headers = vec![("accept".to_string(), "application/json".to_string())];
    if !extra.iter().any(|(n, _)| n == "accept") {
        headers.extend(extra);
    } else {
        headers = extra;
    }
    if let Some(token) = core.access_token() {
        headers.push(("authorization".into(), format!("Bearer {token}")));
    }
    let url = format!("{}{}", core.config.base_url.trim_end_matches('/'), path);
    let transport = core.transport();
    crate::probe::io(crate::probe::IoKind::Send);
    transport
        .send(HttpRequest {
            method,
            url,
            headers,
            body,
        })
        .await
}

/// The verdict on a POST's answer: `classify`, or in a test-only build the legacy rule.
fn verdict_of(core: &Core, result: &Result<HttpResponse, TransportError>, key: &str) -> Verdict {
    #[cfg(feature = "legacy-classify")]
    if core.config.unsafe_legacy_classify {
        return crate::classify::legacy(result);
    }
    classify_with(contract(core), result, key)
}
