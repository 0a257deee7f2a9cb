//! The two objects of the bindings: the SDK handle and a confirm screen's composer.

use std::sync::Arc;

use crate::cancel::{unless_cancelled, CancelSignal};
use crate::error::{Result, SendOnceError};
use crate::guard::{guard, guard_async};
use crate::listener::{
    ComposerListener, ComposerListenerAdapter, TransferListener, TransferListenerAdapter,
};
use crate::operations::OperationRequest;
use crate::settings::{NetsimStats, NetworkProfile, SendOnceConfig};
use crate::types::{ComposerState, Transfer, TransferRequest};

/// The SDK: one per database file, sending in the background on its own threads.
#[derive(uniffi::Object)]
pub struct SendOnceCore {
    pub(crate) sdk: Arc<sendonce::Sdk>,
}

#[uniffi::export(async_runtime = "tokio")]
impl SendOnceCore {
    /// Opens the file, recovers every unfinished transfer and resumes sending.
    #[uniffi::constructor]
    pub fn open(config: SendOnceConfig) -> Result<Arc<Self>> {
        guard(|| {
            let sdk = Arc::new(sendonce::Sdk::open(config.try_into()?)?);
            Ok(Arc::new(Self { sdk }))
        })
    }

    /// The user confirmed: mints the key, commits transfer + key + exact body, returns the persisted transfer.
    pub async fn send_transfer(&self, request: TransferRequest) -> Result<Transfer> {
        guard_async(async { Ok(self.sdk.send_transfer(request.into()).await?.into()) }).await
    }

    /// The user confirmed an operation of the app's own API: mints the key, commits operation + key +
    /// exact body + headers, returns it persisted. Every attempt sends these bytes and headers.
    pub async fn send_operation(&self, operation: OperationRequest) -> Result<Transfer> {
        guard_async(async { Ok(self.sdk.send_operation(operation.into()).await?.into()) }).await
    }

    /// Like `send_transfer`, committing on the calling thread, which waits for the fsync: for a
    /// caller already on a thread that may block (the Kotlin layer calls it on its I/O dispatcher).
    /// It saves the hop to the SDK's store thread and back. Never on the UI thread.
    pub fn send_transfer_blocking(&self, request: TransferRequest) -> Result<Transfer> {
        guard(|| Ok(self.sdk.send_transfer_blocking(request.into())?.into()))
    }

    /// Like `send_operation`, committing on the calling thread (see `send_transfer_blocking`).
    pub fn send_operation_blocking(&self, operation: OperationRequest) -> Result<Transfer> {
        guard(|| Ok(self.sdk.send_operation_blocking(operation.into())?.into()))
    }

    /// The customer completed the step the server asked for: the parked operation is sent again now,
    /// with the same key and bytes. For one not parked, returns it unchanged.
    pub fn action_completed(&self, local_id: String) -> Result<Transfer> {
        guard(|| Ok(self.sdk.action_completed(&local_id)?.into()))
    }

    /// One transfer by local id.
    pub fn transfer(&self, local_id: String) -> Result<Transfer> {
        guard(|| Ok(self.sdk.transfer(&local_id)?.into()))
    }

    /// Every transfer, newest first.
    pub fn transfers(&self) -> Result<Vec<Transfer>> {
        guard(|| Ok(self.sdk.transfers()?.into_iter().map(Into::into).collect()))
    }

    /// One page of `transfers`: up to `limit` (at most 500) after the transfer with local id `after`
    /// (the last of the previous page; `None` for the first). Stable while transfers are added.
    pub fn transfers_page(&self, after: Option<String>, limit: u32) -> Result<Vec<Transfer>> {
        guard(|| {
            Ok(self
                .sdk
                .transfers_page(after.as_deref(), limit)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// Transfers not yet final, newest first.
    pub fn unfinished_transfers(&self) -> Result<Vec<Transfer>> {
        guard(|| {
            Ok(self
                .sdk
                .unfinished_transfers()?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// Waits until the transfer is settled (final, or handed to the user as NeedsAttention); `cancel`
    /// ends the wait early with `Cancelled`.
    #[uniffi::method(default(cancel = None))]
    pub async fn wait_for_outcome(
        &self,
        local_id: String,
        cancel: Option<Arc<CancelSignal>>,
    ) -> Result<Transfer> {
        guard_async(unless_cancelled(cancel, async {
            Ok(self.sdk.wait_for_outcome(&local_id).await?.into())
        }))
        .await
    }

    /// Resolves a NeedsAttention transfer now through the status look-up by key (never a new key);
    /// `cancel` drops the look-up (the transfer stays NeedsAttention).
    #[uniffi::method(default(cancel = None))]
    pub async fn resolve(
        &self,
        local_id: String,
        cancel: Option<Arc<CancelSignal>>,
    ) -> Result<Transfer> {
        guard_async(unless_cancelled(cancel, async {
            Ok(self.sdk.resolve(&local_id).await?.into())
        }))
        .await
    }

    /// Registers a listener told of every change; returns an id for `remove_listener`.
    pub fn add_listener(&self, listener: Arc<dyn TransferListener>) -> Result<u64> {
        guard(|| {
            Ok(self
                .sdk
                .add_listener(Arc::new(TransferListenerAdapter(listener))))
        })
    }

    /// Unregisters a listener (transfer or event listener).
    pub fn remove_listener(&self, id: u64) -> Result<()> {
        guard(|| {
            self.sdk.remove_listener(id);
            Ok(())
        })
    }

    /// The host app's connectivity signal; `true` wakes every waiting retry at once.
    pub fn set_network_available(&self, available: bool) -> Result<()> {
        guard(|| Ok(self.sdk.set_network_available(available)?))
    }

    /// Replaces the bearer token; transfers waiting in AuthRequired resume.
    pub fn set_access_token(&self, token: Option<String>) -> Result<()> {
        guard(|| Ok(self.sdk.set_access_token(token)?))
    }

    /// Switches train mode (the network simulator) at run time; `seed` makes faults reproducible.
    pub fn set_network_profile(&self, profile: NetworkProfile, seed: u64) -> Result<()> {
        guard(|| Ok(self.sdk.set_network_profile(profile.try_into()?, seed)?))
    }

    /// The network profile in force.
    pub fn network_profile(&self) -> Result<NetworkProfile> {
        guard(|| Ok(self.sdk.network_profile().into()))
    }

    /// What the network simulator did so far (zeros when it is off).
    pub fn network_stats(&self) -> Result<NetsimStats> {
        guard(|| Ok(self.sdk.network_stats().into()))
    }

    /// A composer for one confirm screen.
    pub fn composer(&self) -> Result<Arc<ComposerCore>> {
        guard(|| Ok(ComposerCore::new(self.sdk.composer()?)))
    }

    /// A composer re-attached to a transfer confirmed earlier (after the app was killed).
    pub fn composer_for(&self, local_id: String) -> Result<Arc<ComposerCore>> {
        guard(|| Ok(ComposerCore::new(self.sdk.composer_for(&local_id)?)))
    }

    /// The composer a confirm screen restored after process death shows: the transfer whose local id the
    /// screen saved (`SavedStateHandle` / `@SceneStorage`), finished or not, so a receipt survives; without
    /// one (or if it was pruned), the newest unfinished transfer; otherwise a fresh composer.
    pub fn restore_composer(&self, saved_local_id: Option<String>) -> Result<Arc<ComposerCore>> {
        guard(|| {
            let composer = match saved_local_id {
                Some(id) => match self.sdk.composer_for(&id) {
                    Err(sendonce::SdkError::NotFound(_)) => self.newest_unfinished_composer()?,
                    other => other?,
                },
                None => self.newest_unfinished_composer()?,
            };
            Ok(ComposerCore::new(composer))
        })
    }

    /// Stops sending and releases the file. Nothing is lost: a request cut off here is sent again,
    /// with the same key, on the next open. Every later call fails with `Closed`.
    ///
    /// (Named `shutdown` because Kotlin's generated `close()` already frees the native handle.)
    pub fn shutdown(&self) -> Result<()> {
        guard(|| {
            self.sdk.close();
            Ok(())
        })
    }
}

impl SendOnceCore {
    fn newest_unfinished_composer(&self) -> sendonce::Result<sendonce::Composer> {
        match self.sdk.unfinished_transfers()?.first() {
            Some(t) => self.sdk.composer_for(&t.local_id),
            None => self.sdk.composer(),
        }
    }
}

/// One confirm screen's state machine: one transfer per intent, however often Send is tapped.
#[derive(uniffi::Object)]
pub struct ComposerCore {
    composer: Arc<sendonce::Composer>,
}

impl ComposerCore {
    fn new(composer: sendonce::Composer) -> Arc<Self> {
        Arc::new(Self {
            composer: Arc::new(composer),
        })
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl ComposerCore {
    /// The user tapped Send: the first call mints the key and persists the transfer; every later call
    /// returns that same transfer until a definitive no (or `new_intent`).
    ///
    /// Runs to completion even when the caller goes away (Kotlin drops this future when the coroutine is
    /// cancelled): dropped half way, the commit would still land on the store thread while the composer
    /// forgot it, and the next tap would mint a second key (`tests/dropped_confirm.rs`).
    pub async fn confirm(&self, request: TransferRequest) -> Result<Transfer> {
        let composer = self.composer.clone();
        guard_async(async move {
            let tap = tokio::spawn(async move { composer.confirm(request.into()).await });
            match tap.await {
                Ok(answer) => Ok(answer?.into()),
                Err(e) if e.is_panic() => Err(SendOnceError::from_panic(e.into_panic())),
                Err(e) => Err(SendOnceError::Internal {
                    detail: format!("the confirm task ended: {e}"),
                }),
            }
        })
        .await
    }

    /// The user tapped Send on an operation of the app's own API: as `confirm` (one key per intent;
    /// a second tap returns the same operation, also while it waits for the customer's action).
    pub async fn confirm_operation(&self, operation: OperationRequest) -> Result<Transfer> {
        let composer = self.composer.clone();
        guard_async(async move {
            let tap =
                tokio::spawn(async move { composer.confirm_operation(operation.into()).await });
            match tap.await {
                Ok(answer) => Ok(answer?.into()),
                Err(e) if e.is_panic() => Err(SendOnceError::from_panic(e.into_panic())),
                Err(e) => Err(SendOnceError::Internal {
                    detail: format!("the confirm task ended: {e}"),
                }),
            }
        })
        .await
    }

    /// What the screen shows now.
    pub fn state(&self) -> Result<ComposerState> {
        guard(|| Ok(self.composer.state().into()))
    }

    /// Whether the Send button is enabled.
    pub fn send_enabled(&self) -> Result<bool> {
        guard(|| Ok(self.composer.send_enabled()))
    }

    /// The transfer this screen follows, if confirmed.
    pub fn transfer(&self) -> Result<Option<Transfer>> {
        guard(|| Ok(self.composer.transfer()?.map(Into::into)))
    }

    /// Starts a new intent ("send another"); refused with `TransferUnfinished` unless the current one is final.
    pub fn new_intent(&self) -> Result<()> {
        guard(|| Ok(self.composer.new_intent()?))
    }

    /// Sets (or clears, with `None`) the listener told of every state change, in order.
    pub fn set_listener(&self, listener: Option<Arc<dyn ComposerListener>>) -> Result<()> {
        guard(|| {
            let adapter = listener.map(|l| {
                Arc::new(ComposerListenerAdapter(l)) as Arc<dyn sendonce::ComposerListener>
            });
            self.composer.set_listener(adapter);
            Ok(())
        })
    }
}
