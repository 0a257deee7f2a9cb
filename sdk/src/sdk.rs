//! The public handle: open, send, observe, close.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::composer::Composer;
use crate::config::SdkConfig;
use crate::confirm::{persist, persist_blocking};
use crate::core::{Core, TransferListener};
use crate::dispatch;
use crate::error::{Result, SdkError};
use crate::events::EventListener;
use crate::model::{Transfer, TransferRequest, TransferState};
use crate::netsim::{NetsimStats, NetworkProfile};
use crate::operation::Operation;
use crate::sender;
use crate::store::Store;
use crate::transport::Transport;

/// The SDK: one per database file, sending in the background on its own runtime.
pub struct Sdk {
    pub(crate) core: Arc<Core>,
    pub(crate) handle: Handle,
    runtime: Mutex<Option<Runtime>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Claims on an instance from [`Sdk::shared`] not yet released by `close()`; 0 for one from `open`.
    pub(crate) holders: AtomicUsize,
}

impl std::fmt::Debug for Sdk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sdk")
            .field("db", &self.core.store.path())
            .finish_non_exhaustive()
    }
}

impl Sdk {
    /// Opens the file, recovers every unfinished transfer and resumes sending, over the built-in
    /// HTTP stack. A build without it (feature `reqwest-transport` off, as a mobile build is)
    /// answers [`SdkError::InvalidConfig`]: open it with the platform's transport
    /// ([`Sdk::open_with_transport`]).
    pub fn open(config: SdkConfig) -> Result<Self> {
        config.validate()?;
        let transport = built_in_transport(&config)?;
        Self::open_with_transport(config, transport)
    }

    /// Like [`Sdk::open`] with a transport of your own (a proxy, a test double, a recorder).
    pub fn open_with_transport(config: SdkConfig, transport: Arc<dyn Transport>) -> Result<Self> {
        config.validate()?;
        let store = Store::open_with(&config.db_path, config.encryption_key.as_ref())?;
        if let Some(account) = &config.account_id {
            crate::account::bind_store(&store, account, |s| Ok(s.wipe()?.into()))?;
        }
        let now = config.clock.now_ms();
        let mut recovered = store.recover_in_flight(now)?;
        // A transfer parked for credentials resumes as soon as the app opens with a token: it will not
        // necessarily call set_access_token again.
        if config.access_token.is_some() {
            recovered.extend(store.resume_auth(now)?);
        }
        let (runtime, handle) = match &config.deterministic {
            Some(d) => (None, d.runtime.clone()),
            None => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("sendonce")
                    .on_thread_start(crate::core::background_thread)
                    .enable_all()
                    .build()
                    .map_err(|e| SdkError::Internal(format!("could not start the runtime: {e}")))?;
                let handle = runtime.handle().clone();
                (Some(runtime), handle)
            }
        };
        let profile = config.network_profile.clone();
        let core = Arc::new(Core::new(store, config, transport)?);
        // At open, before the first call: the history a UI lists is already within the retention.
        if let Err(e) = core.prune_if_due(now) {
            tracing::warn!(error = %e, "pruning finished transfers failed; tried again later");
        }
        core.set_profile(profile, 0);
        tracing::info!(db = %core.store.path().display(), recovered = recovered.len(), "sendonce opened");
        let sender = handle.spawn(sender::run(core.clone()));
        let dispatcher = handle.spawn(dispatch::listeners(core.clone()));
        let events = handle.spawn(dispatch::events(core.clone()));
        let refresher = handle.spawn(crate::token::run(core.clone()));
        Ok(Self {
            core,
            handle,
            runtime: Mutex::new(runtime),
            tasks: Mutex::new(vec![sender, dispatcher, events, refresher]),
            holders: AtomicUsize::new(0),
        })
    }

    pub(crate) fn live(&self) -> Result<&Arc<Core>> {
        if self.core.is_closed() {
            Err(SdkError::Closed)
        } else {
            Ok(&self.core)
        }
    }

    /// The user confirmed: mints the key, commits transfer + key + exact body, and returns the persisted transfer.
    ///
    /// The same as [`Sdk::send_operation`] with [`Operation::transfer`]: server-mock's wire format.
    pub async fn send_transfer(&self, request: TransferRequest) -> Result<Transfer> {
        persist(self.live()?, Operation::transfer(request)).await
    }

    /// The user confirmed an operation of the app's own API: mints the key, runs its codec once,
    /// commits operation + key + exact body + headers in one transaction, and returns it persisted.
    /// Every attempt sends these bytes and headers, until the server's own answer ends it.
    pub async fn send_operation(&self, operation: Operation) -> Result<Transfer> {
        persist(self.live()?, operation).await
    }

    /// Like [`Sdk::send_transfer`], committing on the calling thread: for a caller already on a
    /// thread that may block (Kotlin's `Dispatchers.IO`, tokio's `spawn_blocking`, a worker of
    /// your own). It saves the hop to the store thread and back; confirmations of other threads at
    /// the same moment still share one commit. Never call it on a UI thread or on an async
    /// executor's worker: it waits for an fsync.
    pub fn send_transfer_blocking(&self, request: TransferRequest) -> Result<Transfer> {
        persist_blocking(self.live()?, Operation::transfer(request))
    }

    /// Like [`Sdk::send_operation`], committing on the calling thread (see
    /// [`Sdk::send_transfer_blocking`] for where it may be called).
    pub fn send_operation_blocking(&self, operation: Operation) -> Result<Transfer> {
        persist_blocking(self.live()?, operation)
    }

    /// The customer completed the step the server asked for (3-D Secure, an SCA challenge, a code):
    /// the parked operation is sent again now, with the same key and bytes.
    ///
    /// Returns the operation; calling it for one that is not (or no longer) parked changes nothing.
    pub fn action_completed(&self, local_id: &str) -> Result<Transfer> {
        let core = self.live()?;
        let current = self.transfer(local_id)?;
        if current.state != TransferState::RequiresAction {
            return Ok(current);
        }
        // Its sending time starts again now: the time it was parked is not counted.
        core.mark_elapsed(local_id, core.clock.monotonic_ms());
        if !core.store.resume_action(local_id, core.clock.now_ms())? {
            return self.transfer(local_id);
        }
        let resumed = self.transfer(local_id)?;
        tracing::info!(local_id, op = %resumed.operation_type, "action completed; sending again");
        core.publish(resumed.clone());
        core.wake.notify_one();
        Ok(resumed)
    }

    /// One transfer by local id.
    pub fn transfer(&self, local_id: &str) -> Result<Transfer> {
        self.live()?
            .store
            .get(local_id)?
            .ok_or_else(|| SdkError::NotFound(local_id.into()))
    }

    /// Every transfer, newest first.
    pub fn transfers(&self) -> Result<Vec<Transfer>> {
        self.live()?.store.list(false)
    }

    /// One page of [`Sdk::transfers`]: up to `limit` (at most 500) after the transfer with local id
    /// `after` (the last one of the previous page; `None` for the first page).
    ///
    /// Stable while transfers are added: pages never repeat or skip one. `NotFound` if `after` was
    /// pruned meanwhile (start again from the first page).
    pub fn transfers_page(&self, after: Option<&str>, limit: u32) -> Result<Vec<Transfer>> {
        self.live()?.store.page(after, limit)
    }

    /// Transfers not yet final, newest first.
    pub fn unfinished_transfers(&self) -> Result<Vec<Transfer>> {
        self.live()?.store.list(true)
    }

    /// Waits until the transfer is settled (final, or handed to the user as NeedsAttention).
    pub async fn wait_for_outcome(&self, local_id: &str) -> Result<Transfer> {
        let mut changes = self.live()?.changes.subscribe();
        loop {
            let transfer = self.transfer(local_id)?;
            if transfer.state.is_settled() {
                return Ok(transfer);
            }
            changes.changed().await.map_err(|_| SdkError::Closed)?;
        }
    }

    /// Asks the server now, by key, what became of a transfer (never sends it, never mints a key).
    ///
    /// A transfer for this key or a stored rejection replayed by the server ends the transfer; the server's
    /// own 404 `transfer_not_found` ends only a transfer the SDK has given up on (NeedsAttention) —
    /// otherwise sending simply goes on. Anything else (an intermediary, another 404) changes nothing. If an attempt or a look-up is
    /// already running, this waits for it first (bounded by twice the request timeout).
    pub async fn resolve(&self, local_id: &str) -> Result<Transfer> {
        let core = self.live()?.clone();
        self.transfer(local_id)?;
        let id = local_id.to_string();
        self.handle
            .spawn(async move {
                let deadline = tokio::time::Instant::now() + core.config.request_timeout * 2;
                let mut changes = core.changes.subscribe();
                let claim = loop {
                    if core.is_closed() {
                        return Err(SdkError::Closed);
                    }
                    let current = core
                        .store
                        .get(&id)?
                        .ok_or_else(|| SdkError::NotFound(id.clone()))?;
                    if current.state.is_final() {
                        return Ok(current);
                    }
                    if let Some(claim) = sender::Claim::take(&core, &id) {
                        break claim;
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(current);
                    }
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_millis(100),
                        changes.changed(),
                    )
                    .await;
                };
                let result = sender::look_up(&core, &id).await;
                drop(claim);
                result
            })
            .await
            .map_err(|e| joined(&self.core, e))?
    }

    /// Registers a listener told of every change; returns an id for `remove_listener`.
    pub fn add_listener(&self, listener: Arc<dyn TransferListener>) -> u64 {
        self.core.add_listener(listener)
    }

    /// Registers a listener told of every [`SdkEvent`](crate::SdkEvent) (attempts, answers, retries, outcomes,
    /// wipes), in order; returns an id for `remove_listener`.
    pub fn add_event_listener(&self, listener: Arc<dyn EventListener>) -> u64 {
        self.core.add_event_listener(listener)
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// The server this instance talks to.
    pub fn base_url(&self) -> &str {
        &self.core.config.base_url
    }

    /// Unregisters a listener (transfer or event listener).
    pub fn remove_listener(&self, id: u64) {
        self.core.remove_listener(id)
    }

    /// The host app's connectivity signal; `true` wakes every waiting retry: at once in the foreground,
    /// spread over `background_wake_window` in the background (see `set_in_foreground`).
    pub fn set_network_available(&self, available: bool) -> Result<()> {
        let core = self.live()?;
        let was = core.set_network_available(available);
        if available && !core.in_foreground() {
            let woken = crate::background::spread_wake(
                core,
                core.config
                    .background_wake_window
                    .min(core.config.retry.cap),
            )?;
            tracing::info!(
                was_available = was,
                woken,
                "network available (background: spread)"
            );
        } else if available {
            let now = core.clock.now_ms();
            let mut woken = core.store.wake_retries(now)?;
            woken.extend(crate::background::wake_pending_now(core, now)?);
            tracing::info!(
                was_available = was,
                woken = woken.len(),
                "network available"
            );
            self.republish(&woken)?;
            core.wake.notify_one();
        }
        Ok(())
    }

    /// Replaces the bearer token; transfers waiting in AuthRequired resume.
    pub fn set_access_token(&self, token: Option<String>) -> Result<()> {
        crate::token::set_by_app(self.live()?, token)
    }

    /// Switches train mode (the network simulator) at run time; `seed` makes faults reproducible.
    pub fn set_network_profile(&self, profile: NetworkProfile, seed: u64) -> Result<()> {
        let core = self.live()?;
        tracing::info!(profile = profile.name(), seed, "network profile");
        core.set_profile(profile, seed);
        core.wake.notify_one();
        Ok(())
    }

    /// The current network profile.
    pub fn network_profile(&self) -> NetworkProfile {
        self.core.profile()
    }

    /// What the network simulator did so far.
    pub fn network_stats(&self) -> NetsimStats {
        self.core.netsim_stats()
    }

    /// A composer for one confirm screen.
    pub fn composer(&self) -> Result<Composer> {
        Ok(Composer::new(
            self.live()?.clone(),
            self.handle.clone(),
            None,
        ))
    }

    /// A composer re-attached to a transfer confirmed earlier (after the app was killed).
    pub fn composer_for(&self, local_id: &str) -> Result<Composer> {
        let transfer = self.transfer(local_id)?;
        Ok(Composer::new(
            self.live()?.clone(),
            self.handle.clone(),
            Some(transfer),
        ))
    }

    /// Stops sending and releases the file. Nothing is lost: a request cut off here is sent again, same key, on the next open.
    ///
    /// On an instance from [`Sdk::shared`] this releases the caller's claim only: the UI closing its
    /// screen never stops a worker's send. The instance closes when every `shared()` call's claim is
    /// released (or when the last handle is dropped).
    pub fn close(&self) {
        if crate::shared::release(self) {
            self.close_now();
        }
    }

    /// Closes whoever else holds this instance.
    fn close_now(&self) {
        self.core.mark_closed();
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
        if let Some(runtime) = self
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            // Waits (bounded) until the runtime's tasks, and the store connections they held, are
            // dropped, so nothing touches the file (or SQLCipher's crypto library) after close returns.
            // On a thread of its own: a runtime may not be shut down from inside an async context.
            let _ = std::thread::spawn(move || runtime.shutdown_timeout(CLOSE_WAIT)).join();
        }
        self.core.store.release_lock();
        tracing::info!("sendonce closed");
    }

    fn republish(&self, ids: &[String]) -> Result<()> {
        for id in ids {
            if let Some(t) = self.core.store.get(id)? {
                self.core.publish(t);
            }
        }
        Ok(())
    }
}

/// A task of the SDK's runtime that did not finish: cut off by `close()` (say so), or a caught panic.
pub(crate) fn joined(core: &Core, e: tokio::task::JoinError) -> SdkError {
    if core.is_closed() || e.is_cancelled() {
        SdkError::Closed
    } else {
        SdkError::Internal(e.to_string())
    }
}

impl Drop for Sdk {
    fn drop(&mut self) {
        // The last handle: no holder is left, whatever the count says.
        self.close_now();
    }
}

/// How long `close` waits for the runtime's tasks to be dropped.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether this build has the built-in HTTP stack (feature `reqwest-transport`); without it every
/// `open` needs the app's transport.
pub fn has_built_in_transport() -> bool {
    cfg!(feature = "reqwest-transport")
}

#[cfg(feature = "reqwest-transport")]
fn built_in_transport(config: &SdkConfig) -> Result<Arc<dyn Transport>> {
    let transport =
        crate::transport::HttpTransport::new(config.request_timeout, config.connect_timeout)
            .map_err(|e| SdkError::InvalidConfig(e.to_string()))?;
    Ok(Arc::new(transport))
}

#[cfg(not(feature = "reqwest-transport"))]
fn built_in_transport(_: &SdkConfig) -> Result<Arc<dyn Transport>> {
    Err(SdkError::InvalidConfig(
        "this build has no built-in HTTP stack (feature reqwest-transport is off): \
         open with the platform's transport (OkHttp, URLSession)"
            .into(),
    ))
}
