//! The SDK beyond the open screen: the process's shared instance, background drains, accounts and
//! the app's own token provider, HTTP stack and event listener.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cancel::{unless_cancelled, CancelSignal};
use crate::error::Result;
use crate::events::{EventListener, EventListenerAdapter};
use crate::foreign::{AccessTokenProvider, HttpTransport, TokenProviderAdapter, TransportAdapter};
use crate::guard::{guard, guard_async};
use crate::objects::SendOnceCore;
use crate::settings::SendOnceConfig;
use crate::time::{instant, span};
use crate::types::Transfer;

/// What a drain achieved: a WorkManager worker turns it into `Result.success()` / `retry()`, a
/// BGProcessingTask into its completion and next request.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct DrainSummary {
    /// Transfers that reached a final state during the drain.
    pub finished: Vec<Transfer>,
    /// Transfers still unfinished (AuthRequired ones wait for a token, not for a worker).
    pub unfinished: Vec<Transfer>,
    /// Earliest next attempt of the unfinished ones (SDK clock), if scheduled.
    pub next_attempt_at: Option<SystemTime>,
    /// From now to that attempt (at least zero): the delay of the next enqueue.
    pub next_attempt_in: Option<Duration>,
    /// True if the drain returned at its deadline with work still due.
    pub deadline_reached: bool,
}

impl From<sendonce::DrainSummary> for DrainSummary {
    fn from(s: sendonce::DrainSummary) -> Self {
        Self {
            finished: s.finished.into_iter().map(Into::into).collect(),
            unfinished: s.unfinished.into_iter().map(Into::into).collect(),
            next_attempt_at: s.next_attempt_at_ms.map(instant),
            next_attempt_in: s.next_attempt_in_ms.map(span),
            deadline_reached: s.deadline_reached,
        }
    }
}

/// What a sign-out or a wipe discarded.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct WipeReport {
    /// Unfinished transfers discarded (only with `force`): their outcome on the server is unknown.
    pub discarded_unfinished: Vec<Transfer>,
    /// Finished transfers deleted.
    pub deleted_finished: u32,
}

impl From<sendonce::WipeReport> for WipeReport {
    fn from(r: sendonce::WipeReport) -> Self {
        Self {
            discarded_unfinished: r.discarded_unfinished.into_iter().map(Into::into).collect(),
            deleted_finished: r.deleted_finished,
        }
    }
}

/// The SDK config with the app's provider and transport plugged in.
fn assemble(
    config: SendOnceConfig,
    token_provider: Option<Arc<dyn AccessTokenProvider>>,
) -> Result<sendonce::SdkConfig> {
    let mut config: sendonce::SdkConfig = config.try_into()?;
    if let Some(provider) = token_provider {
        config.token_provider = Some(Arc::new(TokenProviderAdapter(provider)));
    }
    Ok(config)
}

type Opener = fn(
    sendonce::SdkConfig,
    Option<Arc<dyn sendonce::transport::Transport>>,
) -> sendonce::Result<Arc<sendonce::Sdk>>;

/// Assembles the config, adapts the foreign transport (bounded by the request timeout) and opens.
fn start(
    config: SendOnceConfig,
    token_provider: Option<Arc<dyn AccessTokenProvider>>,
    transport: Option<Arc<dyn HttpTransport>>,
    open: Opener,
) -> Result<Arc<SendOnceCore>> {
    guard(|| {
        let config = assemble(config, token_provider)?;
        let transport = transport.map(|transport| {
            Arc::new(TransportAdapter {
                transport,
                timeout: config.request_timeout,
            }) as Arc<dyn sendonce::transport::Transport>
        });
        Ok(Arc::new(SendOnceCore {
            sdk: open(config, transport)?,
        }))
    })
}

#[uniffi::export(async_runtime = "tokio")]
impl SendOnceCore {
    /// The process's one instance on `config.db_path`: the same SDK for the UI, a worker and a push
    /// handler (never `AlreadyOpen`); `Busy` while another process holds the file (try later).
    #[uniffi::constructor]
    pub fn shared(config: SendOnceConfig) -> Result<Arc<Self>> {
        Self::shared_with(config, None, None)
    }

    /// [`SendOnceCore::shared`] with the app's token provider and HTTP stack (used only when this
    /// call opens the instance).
    #[uniffi::constructor]
    pub fn shared_with(
        config: SendOnceConfig,
        token_provider: Option<Arc<dyn AccessTokenProvider>>,
        transport: Option<Arc<dyn HttpTransport>>,
    ) -> Result<Arc<Self>> {
        start(config, token_provider, transport, |c, t| match t {
            None => sendonce::Sdk::shared(c),
            Some(t) => sendonce::Sdk::shared_with_transport(c, t),
        })
    }

    /// Like `open`, with the app's token provider and HTTP stack.
    #[uniffi::constructor]
    pub fn open_with(
        config: SendOnceConfig,
        token_provider: Option<Arc<dyn AccessTokenProvider>>,
        transport: Option<Arc<dyn HttpTransport>>,
    ) -> Result<Arc<Self>> {
        start(config, token_provider, transport, |c, t| {
            Ok(Arc::new(match t {
                None => sendonce::Sdk::open(c)?,
                Some(t) => sendonce::Sdk::open_with_transport(c, t)?,
            }))
        })
    }

    /// Sends and resolves everything due within `deadline`, then says what is left. Returns by the
    /// deadline even with a request out: nothing is lost, it goes on with the same key. `cancel` ends it
    /// early with `Cancelled` (an expiring background task).
    #[uniffi::method(default(cancel = None))]
    pub async fn drain(
        &self,
        deadline: Duration,
        cancel: Option<Arc<CancelSignal>>,
    ) -> Result<DrainSummary> {
        guard_async(unless_cancelled(cancel, async {
            Ok(self.sdk.drain(deadline).await?.into())
        }))
        .await
    }

    /// The app's lifecycle: in the background, network wake-ups are spread over the wake window.
    pub fn set_in_foreground(&self, foreground: bool) -> Result<()> {
        guard(|| Ok(self.sdk.set_in_foreground(foreground)?))
    }

    /// The account the store is bound to, if any.
    pub fn account_id(&self) -> Result<Option<String>> {
        guard(|| Ok(self.sdk.account_id()?))
    }

    /// Signs `account_id` in with `token`; another account than the bound one is refused with
    /// `AccountMismatch` while it has unfinished transfers (with none, its history is wiped first).
    pub fn sign_in(&self, account_id: String, token: Option<String>) -> Result<Option<WipeReport>> {
        guard(|| Ok(self.sdk.sign_in(&account_id, token)?.map(Into::into)))
    }

    /// Forgets the token and deletes every transfer and the account binding; refused with
    /// `UnfinishedTransfers` while any is unfinished, unless `force`.
    pub fn sign_out(&self, force: bool) -> Result<WipeReport> {
        guard(|| Ok(self.sdk.sign_out(force)?.into()))
    }

    /// Registers a listener told of every event (attempts, answers, retries, outcomes, wipes).
    pub fn add_event_listener(&self, listener: Arc<dyn EventListener>) -> Result<u64> {
        guard(|| {
            Ok(self
                .sdk
                .add_event_listener(Arc::new(EventListenerAdapter(listener))))
        })
    }
}

/// Wipes a file no instance has open; `Busy` if one has, `UnfinishedTransfers` unless `force`.
#[uniffi::export]
pub fn wipe(db_path: String, force: bool) -> Result<WipeReport> {
    guard(|| Ok(sendonce::wipe(std::path::Path::new(&db_path), force)?.into()))
}
