//! Token refresh: on a 401 the SDK asks the app's provider once for a fresh token, off the sending path.
//!
//! The transfer that got the 401 waits (Retrying) while a task of its own asks the provider, bounded by
//! `token_timeout`; every other transfer keeps sending meanwhile, so a provider that fails or hangs
//! delays nobody but the transfers that need it. One refresh serves every transfer waiting at that
//! moment. With a fresh token they are sent again at once with the same key; otherwise, or on a second
//! 401 after their refresh, they park in AuthRequired until the app sets a token.

use std::collections::HashSet;
use std::sync::Arc;

use crate::core::{lock, Core};
use crate::model::TransferState;
use crate::store::Update;
use crate::transport::BoxFuture;

/// The app's source of access tokens (a Kotlin interface / Swift protocol in the bindings).
pub trait AccessTokenProvider: Send + Sync {
    /// A token for the bound account; `force_refresh` when the server refused the current one.
    /// `Ok(None)`: no token (signed out). `Err`: could not get one now (the text is logged without it).
    fn token(&self, force_refresh: bool) -> BoxFuture<'_, Result<Option<String>, String>>;
}

/// Transfers waiting for a refresh, and those that already had theirs.
#[derive(Default)]
pub(crate) struct RefreshQueue {
    waiting: Vec<String>,
    refreshed: HashSet<String>,
}

/// True (and remembered) if this 401 may ask the provider: there is one and this transfer has not had
/// its refresh since its last other answer.
pub(crate) fn may_refresh(core: &Core, local_id: &str) -> bool {
    core.config.token_provider.is_some()
        && lock(&core.refresh).refreshed.insert(local_id.to_string())
}

/// Any answer but a 401: the next 401 of this transfer may ask again.
pub(crate) fn forget(core: &Core, local_id: &str) {
    lock(&core.refresh).refreshed.remove(local_id);
}

/// The app set a token itself: every transfer gets a refresh again, and the parked ones resume.
pub(crate) fn set_by_app(core: &Core, token: Option<String>) -> crate::Result<()> {
    reset(core);
    install(core, token, &[])
}

fn reset(core: &Core) {
    lock(&core.refresh).refreshed.clear();
}

/// Queues a transfer (already recorded as Retrying) for the refresher.
pub(crate) fn request(core: &Core, local_id: &str) {
    lock(&core.refresh).waiting.push(local_id.to_string());
    core.refresh_wake.notify_one();
}

/// How long a transfer waiting for a refresh stays scheduled: one cap (the longest a schedule may
/// set), past the provider's timeout with the defaults, so the refresher decides first.
pub(crate) fn hold_ms(core: &Core) -> i64 {
    i64::try_from(core.config.retry.cap.as_millis()).unwrap_or(i64::MAX / 4)
}

/// A new token: every transfer parked for credentials (and those in `waiting`) is due now.
pub(crate) fn install(core: &Core, token: Option<String>, waiting: &[String]) -> crate::Result<()> {
    core.set_access_token(token);
    let now = core.clock.now_ms();
    let update = Update::Retry {
        next_attempt_at_ms: now,
        error: "401; retrying with a fresh token".into(),
    };
    for id in waiting {
        core.publish(
            core.store
                .record(id, &update, now, &[TransferState::Retrying])?,
        );
    }
    for id in core.store.resume_auth(now)? {
        if let Some(t) = core.store.get(&id)? {
            core.publish(t);
        }
    }
    core.wake.notify_one();
    Ok(())
}

/// The refresher: runs until the SDK closes (only when a provider is configured).
pub(crate) async fn run(core: Arc<Core>) {
    let Some(provider) = core.config.token_provider.clone() else {
        return;
    };
    if core.access_token().is_none() {
        // Opened without a token: the provider's current one, before the first 401 has to ask for it.
        let generation = core.token_generation();
        if let Ok(token) = ask(&core, provider.as_ref(), false).await {
            if core.token_generation() == generation {
                core.set_access_token(Some(token));
            }
        }
    }
    loop {
        let wake = core.refresh_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        if core.is_closed() {
            return;
        }
        let waiting = std::mem::take(&mut lock(&core.refresh).waiting);
        if waiting.is_empty() {
            wake.await;
            continue;
        }
        let generation = core.token_generation();
        let answer = ask(&core, provider.as_ref(), true).await;
        tracing::info!(
            transfers = waiting.len(),
            refreshed = answer.is_ok(),
            "token refresh"
        );
        let result = match answer {
            // A token the app set meanwhile is newer than the one we asked for: it already resumed them.
            Ok(_) if core.token_generation() != generation => install_none(&core, &waiting),
            Ok(token) => install(&core, Some(token), &waiting),
            Err(why) => park(&core, &waiting, &why),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not record the token refresh");
        }
    }
}

/// The waiting transfers go on with the token in force.
fn install_none(core: &Core, waiting: &[String]) -> crate::Result<()> {
    install(core, core.access_token(), waiting)
}

/// No fresh token: the waiting transfers park until the app sets one.
fn park(core: &Core, waiting: &[String], why: &str) -> crate::Result<()> {
    let now = core.clock.now_ms();
    let update = Update::AuthRequired {
        error: format!("401 and the token provider {why}"),
    };
    for id in waiting {
        core.publish(
            core.store
                .record(id, &update, now, &[TransferState::Retrying])?,
        );
    }
    Ok(())
}

/// One bounded call of the provider; the error says what went wrong, never the token.
async fn ask(
    core: &Core,
    provider: &dyn AccessTokenProvider,
    force_refresh: bool,
) -> Result<String, String> {
    match tokio::time::timeout(core.config.token_timeout, provider.token(force_refresh)).await {
        Err(_) => Err(format!(
            "did not answer within {:?}",
            core.config.token_timeout
        )),
        Ok(Err(_)) => Err("failed".into()),
        Ok(Ok(None)) => Err("has no token (signed out)".into()),
        Ok(Ok(Some(token))) => Ok(token),
    }
}
