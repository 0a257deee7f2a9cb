//! State shared by the public handle, the sender and the composers.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{broadcast, watch, Notify, Semaphore};

use crate::clock::Clock;
use crate::config::SdkConfig;
use crate::confirm::Confirmer;
use crate::events::{EventListener, SdkEvent};
use crate::model::Transfer;
use crate::netsim::{NetsimStats, NetworkProfile, SimTransport};
use crate::schedule::RetryBudget;
use crate::store::Store;
use crate::transport::Transport;

/// Told of every state change of every transfer (implementable from Kotlin and Swift).
pub trait TransferListener: Send + Sync {
    /// A transfer changed; `transfer` is its new persisted state.
    fn on_transfer_changed(&self, transfer: Transfer);
}

/// The profile in force, the transport requests go through, and the simulator inside it (if any).
type ActiveTransport = (
    NetworkProfile,
    Arc<dyn Transport>,
    Option<Arc<SimTransport>>,
);

pub(crate) struct Core {
    pub store: Store,
    /// The store thread that commits confirmations.
    pub confirmer: Confirmer,
    pub config: SdkConfig,
    pub clock: Arc<dyn Clock>,
    pub wake: Notify,
    pub send_slots: Semaphore,
    /// Every persisted state change, shared: each subscriber's receive clones a pointer, not
    /// the transfer's strings.
    pub events: broadcast::Sender<Arc<Transfer>>,
    pub changes: watch::Sender<u64>,
    base_transport: Arc<dyn Transport>,
    transport: RwLock<ActiveTransport>,
    token: RwLock<Option<String>>,
    token_generation: AtomicU64,
    network_available: AtomicBool,
    in_flight: Mutex<HashSet<String>>,
    /// Monotonic time when this instance opened: sending time of a loaded transfer counts from here.
    opened_mono_ms: i64,
    /// Per transfer, the monotonic time up to which its sending time is persisted.
    elapsed_marks: Mutex<HashMap<String, i64>>,
    budget: Mutex<RetryBudget>,
    closed: AtomicBool,
    listeners: RwLock<Vec<(u64, Arc<dyn TransferListener>)>>,
    next_listener: AtomicU64,
    /// SDK-clock time of the last prune of finished transfers.
    last_prune_ms: AtomicI64,
    /// Every [`SdkEvent`], fanned out to the event listeners by a task of their own.
    pub sdk_events: broadcast::Sender<SdkEvent>,
    event_listeners: RwLock<Vec<(u64, Arc<dyn EventListener>)>>,
    /// Transfers whose 401 waits for the token provider, and those that already had their one refresh.
    pub refresh: Mutex<crate::token::RefreshQueue>,
    /// Wakes the token refresher.
    pub refresh_wake: Notify,
    /// False while the host app says it is in the background: network wake-ups are spread then.
    in_foreground: AtomicBool,
    /// Attempts running now: `close` cuts them off even on a runtime the SDK does not own.
    attempts: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// How often (SDK clock) the sender prunes finished transfers: each prune is one indexed query.
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// Locks without propagating a poisoned lock: a panicking listener must not wedge the SDK.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}
fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fresh idempotency key: UUID v4, 122 random bits (or the simulation's seeded one).
pub(crate) fn mint_key(config: &SdkConfig) -> String {
    match &config.deterministic {
        Some(d) => (d.mint_key)(),
        None => uuid::Uuid::new_v4().to_string(),
    }
}

impl Core {
    pub fn new(
        store: Store,
        config: SdkConfig,
        base_transport: Arc<dyn Transport>,
    ) -> crate::error::Result<Self> {
        let clock = config.clock.clone();
        let budget = RetryBudget::new(&config.retry, clock.now_ms());
        let (events, _) = broadcast::channel(1024);
        let (changes, _) = watch::channel(0);
        let (sdk_events, _) = broadcast::channel(1024);
        Ok(Self {
            sdk_events,
            event_listeners: RwLock::new(Vec::new()),
            refresh: Mutex::new(Default::default()),
            refresh_wake: Notify::new(),
            in_foreground: AtomicBool::new(true),
            store,
            confirmer: Confirmer::start()?,
            token: RwLock::new(config.access_token.clone()),
            send_slots: Semaphore::new(config.max_concurrent_sends),
            clock,
            wake: Notify::new(),
            events,
            changes,
            transport: RwLock::new((NetworkProfile::Off, base_transport.clone(), None)),
            base_transport,
            token_generation: AtomicU64::new(0),
            network_available: AtomicBool::new(true),
            in_flight: Mutex::new(HashSet::new()),
            opened_mono_ms: config.clock.monotonic_ms(),
            elapsed_marks: Mutex::new(HashMap::new()),
            budget: Mutex::new(budget),
            closed: AtomicBool::new(false),
            listeners: RwLock::new(Vec::new()),
            next_listener: AtomicU64::new(1),
            last_prune_ms: AtomicI64::new(i64::MIN),
            attempts: Mutex::new(Vec::new()),
            config,
        })
    }

    /// Tells listeners, waiters and composers of a new persisted state.
    pub fn publish(&self, transfer: Transfer) {
        tracing::debug!(
            local_id = %transfer.local_id,
            key = %transfer.idempotency_key,
            state = transfer.state.as_str(),
            attempts = transfer.attempts,
            next_attempt_at_ms = transfer.next_attempt_at_ms,
            "transfer state"
        );
        // The dispatcher always holds one receiver: with no listener and no composer watching,
        // a send would only wake its task for nothing (on a confirmation, a futex wake-up on the
        // caller's own thread). One that registers after this check sees only later changes.
        if self.has_listeners() || self.events.receiver_count() > 1 {
            let _ = self.events.send(Arc::new(transfer));
        }
        self.changes.send_modify(|n| *n += 1);
    }

    /// Whether any transfer listener is registered.
    pub fn has_listeners(&self) -> bool {
        !read(&self.listeners).is_empty()
    }

    /// Calls every listener; a listener that panics (or whose foreign code throws) is logged, never fatal.
    pub fn notify_listeners(&self, transfer: &Transfer) {
        let listeners: Vec<_> = read(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            let t = transfer.clone();
            if catch_unwind(AssertUnwindSafe(|| listener.on_transfer_changed(t))).is_err() {
                tracing::warn!(local_id = %transfer.local_id, "a transfer listener panicked; ignored");
            }
        }
    }

    /// Hands an event to the event dispatcher (never blocks the sender on the app's code).
    pub fn emit(&self, event: SdkEvent) {
        // Only the dispatcher receives these: without an event listener it would wake for nothing.
        if read(&self.event_listeners).is_empty() {
            return;
        }
        let _ = self.sdk_events.send(event);
    }

    /// Calls every event listener with `event`.
    pub fn notify_event_listeners(&self, event: &SdkEvent) {
        let listeners: Vec<_> = read(&self.event_listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            crate::events::deliver(listener.as_ref(), event.clone());
        }
    }

    pub fn add_event_listener(&self, listener: Arc<dyn EventListener>) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        write(&self.event_listeners).push((id, listener));
        id
    }

    pub fn in_foreground(&self) -> bool {
        self.in_foreground.load(Ordering::SeqCst)
    }

    pub fn set_in_foreground(&self, foreground: bool) {
        self.in_foreground.store(foreground, Ordering::SeqCst);
    }

    pub fn add_listener(&self, listener: Arc<dyn TransferListener>) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        write(&self.listeners).push((id, listener));
        id
    }

    pub fn remove_listener(&self, id: u64) {
        write(&self.listeners).retain(|(i, _)| *i != id);
        write(&self.event_listeners).retain(|(i, _)| *i != id);
    }

    pub fn transport(&self) -> Arc<dyn Transport> {
        read(&self.transport).1.clone()
    }

    pub fn set_profile(&self, profile: NetworkProfile, seed: u64) {
        let mut slot = write(&self.transport);
        *slot = match profile.settings(seed) {
            None => (profile, self.base_transport.clone(), None),
            Some(settings) => {
                let sim = Arc::new(SimTransport::new(
                    self.base_transport.clone(),
                    self.clock.clone(),
                    settings,
                ));
                (profile, sim.clone() as Arc<dyn Transport>, Some(sim))
            }
        };
    }

    pub fn profile(&self) -> NetworkProfile {
        read(&self.transport).0.clone()
    }

    pub fn netsim_stats(&self) -> NetsimStats {
        read(&self.transport)
            .2
            .as_ref()
            .map(|s| s.stats())
            .unwrap_or_default()
    }

    pub fn access_token(&self) -> Option<String> {
        read(&self.token).clone()
    }

    pub fn set_access_token(&self, token: Option<String>) {
        *write(&self.token) = token;
        self.token_generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn token_generation(&self) -> u64 {
        self.token_generation.load(Ordering::SeqCst)
    }

    pub fn network_available(&self) -> bool {
        self.network_available.load(Ordering::SeqCst)
    }

    pub fn set_network_available(&self, available: bool) -> bool {
        self.network_available.swap(available, Ordering::SeqCst)
    }

    pub fn take_retry_token(&self, now_ms: i64) -> Result<(), i64> {
        lock(&self.budget).take(now_ms)
    }

    /// Sending time of a transfer: its persisted total plus what this instance measured since then.
    ///
    /// Only monotonic time while the SDK runs counts, so no setting of the phone's clock ends (or
    /// extends) a transfer; time while the app is not running is not counted either.
    pub fn elapsed_ms(&self, local_id: &str, persisted_ms: i64, mono_now: i64) -> i64 {
        let mark = lock(&self.elapsed_marks)
            .get(local_id)
            .copied()
            .unwrap_or(self.opened_mono_ms);
        persisted_ms.saturating_add(mono_now.saturating_sub(mark).max(0))
    }

    /// Records that the sending time of `local_id` is persisted up to `mono_now`.
    pub fn mark_elapsed(&self, local_id: &str, mono_now: i64) {
        lock(&self.elapsed_marks).insert(local_id.to_string(), mono_now);
    }

    /// Drops the mark of a transfer the sender no longer sends.
    pub fn forget_elapsed(&self, local_id: &str) {
        lock(&self.elapsed_marks).remove(local_id);
    }

    /// Deletes finished transfers past the retention if the last prune is an hour old (or the clock
    /// went back past it); returns whether a backlog is left for the next turn.
    pub fn prune_if_due(&self, now_ms: i64) -> crate::error::Result<bool> {
        let last = self.last_prune_ms.load(Ordering::SeqCst);
        if last != i64::MIN && (last..last.saturating_add(PRUNE_EVERY_MS)).contains(&now_ms) {
            return Ok(false);
        }
        let retention = i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX);
        let (pruned, more) = self.store.prune(now_ms.saturating_sub(retention))?;
        // A long backlog (a first open after an upgrade) goes on at the sender's next turn, not in an hour.
        if !more {
            self.last_prune_ms.store(now_ms, Ordering::SeqCst);
        }
        if pruned > 0 {
            tracing::info!(
                pruned,
                more,
                "finished transfers past the retention deleted"
            );
            if !more {
                return_freed_memory();
            }
        }
        Ok(more)
    }

    /// Marks a transfer as being worked on; false if it already is.
    pub fn claim(&self, local_id: &str) -> bool {
        lock(&self.in_flight).insert(local_id.to_string())
    }

    pub fn release(&self, local_id: &str) {
        lock(&self.in_flight).remove(local_id);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Spawns an attempt that `mark_closed` aborts.
    pub fn spawn_attempt(&self, attempt: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut attempts = lock(&self.attempts);
        attempts.retain(|a| !a.is_finished());
        attempts.push(tokio::spawn(attempt).abort_handle());
    }

    pub fn mark_closed(&self) {
        for attempt in lock(&self.attempts).drain(..) {
            attempt.abort();
        }
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.changes.send_modify(|n| *n += 1);
    }
}

/// Hands the pages the allocator keeps free back to the OS, after a prune's batches (on several
/// threads of the runtime) freed their rows. glibc keeps freed memory in per-thread arenas: after a
/// year of history was pruned, 2.5–4.5 MiB of the SDK's RSS was memory it no longer used (figure 8 of
/// `scripts/bench`). Elsewhere (Android's and Apple's allocators return memory by themselves) nothing.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer; it walks glibc's own arenas under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Runs at the start of each of the SDK's runtime threads (the sender, the listeners' and
/// events' dispatchers, the token refresher): on Linux and Android, `SCHED_BATCH` — the same
/// share of the CPU, but a thread of this policy never preempts the thread that woke it. A
/// confirmation wakes the listeners' dispatcher just before it returns; without this, the
/// kernel may run the dispatcher on the caller's CPU at once and the caller's answer waits
/// for it (figure 1 in BENCHMARKS.md: the p50 ratio 1.14–1.16 before, 1.07–1.12 after). The
/// store thread keeps the default policy: an async caller waits on it.
pub(crate) fn background_thread() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param`; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
            // Refused (a seccomp profile, say): the thread runs as before, nothing else changes.
            tracing::debug!(error = %std::io::Error::last_os_error(), "SCHED_BATCH not set");
        }
    }
}
