//! One instance per app process: the UI, a background worker and a push handler share it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use crate::config::{RetryPolicy, SdkConfig};
use crate::error::{Result, SdkError};
use crate::sdk::Sdk;
use crate::transport::Transport;

/// Live shared instances by the file they own, with the configuration that opened each.
static SHARED: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();

struct Entry {
    sdk: Weak<Sdk>,
    opened_by: Settings,
}

/// What a later `shared()` call must agree on with the call that opened the instance: everything
/// that changes where and how money is sent. Not compared: the access token (a worker may hold a
/// fresher one; `set_access_token` replaces it) and the starting network profile (switched at run
/// time). The token provider and the transport are compared by identity (the same object).
#[derive(PartialEq)]
struct Settings {
    base_url: String,
    account_id: Option<String>,
    retry: RetryPolicy,
    request_timeout: Duration,
    connect_timeout: Duration,
    max_concurrent_sends: usize,
    retention: Duration,
    token_timeout: Duration,
    background_wake_window: Duration,
    log_personal_data: bool,
    /// Addresses of the objects (held alive by the open instance, so never reused meanwhile).
    token_provider: Option<usize>,
    transport: Option<usize>,
    encryption_key: Option<crate::encryption::EncryptionKey>,
}

impl Settings {
    fn of(config: &SdkConfig, transport: Option<&Arc<dyn Transport>>) -> Self {
        Self {
            base_url: config.base_url.clone(),
            account_id: config.account_id.clone(),
            retry: config.retry.clone(),
            request_timeout: config.request_timeout,
            connect_timeout: config.connect_timeout,
            max_concurrent_sends: config.max_concurrent_sends,
            retention: config.retention,
            token_timeout: config.token_timeout,
            background_wake_window: config.background_wake_window,
            log_personal_data: config.log_personal_data,
            token_provider: config
                .token_provider
                .as_ref()
                .map(|p| Arc::as_ptr(p).cast::<()>() as usize),
            transport: transport.map(|t| Arc::as_ptr(t).cast::<()>() as usize),
            encryption_key: config.encryption_key.clone(),
        }
    }

    /// The names of the settings that differ from `other`'s (never their values: a URL may carry a secret).
    fn differences(&self, other: &Settings) -> Vec<&'static str> {
        let checks = [
            ("base URL", self.base_url != other.base_url),
            (
                "encryption key",
                self.encryption_key != other.encryption_key,
            ),
            ("account", self.account_id != other.account_id),
            ("retry policy", self.retry != other.retry),
            (
                "request timeout",
                self.request_timeout != other.request_timeout,
            ),
            (
                "connect timeout",
                self.connect_timeout != other.connect_timeout,
            ),
            (
                "max concurrent sends",
                self.max_concurrent_sends != other.max_concurrent_sends,
            ),
            ("retention", self.retention != other.retention),
            ("token timeout", self.token_timeout != other.token_timeout),
            (
                "background wake window",
                self.background_wake_window != other.background_wake_window,
            ),
            (
                "log_personal_data",
                self.log_personal_data != other.log_personal_data,
            ),
            (
                "token provider",
                self.token_provider != other.token_provider,
            ),
            ("transport", self.transport != other.transport),
        ];
        checks
            .into_iter()
            .filter(|(_, differs)| *differs)
            .map(|(name, _)| name)
            .collect()
    }
}

fn lock() -> MutexGuard<'static, HashMap<PathBuf, Entry>> {
    SHARED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// `close()` of one holder: true when the instance must really close (it was not shared, or this was
/// its last claim). Under the map's lock, so a concurrent `shared()` never gets an instance that is
/// about to close.
pub(crate) fn release(sdk: &Sdk) -> bool {
    if sdk.holders.load(Ordering::SeqCst) == 0 {
        return true;
    }
    let _shared = lock();
    match sdk.holders.load(Ordering::SeqCst) {
        0 | 1 => {
            sdk.holders.store(0, Ordering::SeqCst);
            true
        }
        n => {
            sdk.holders.store(n - 1, Ordering::SeqCst);
            false
        }
    }
}

impl Sdk {
    /// The process's one instance on `config.db_path`: opened at the first call, the same instance
    /// afterwards (never `AlreadyOpen`) until every caller has closed it (each call is one claim that
    /// its `close()` releases) or every handle is dropped.
    ///
    /// Another process holding the file (an app's `:worker` process) gives `Busy`: try again later.
    /// A later call must configure it the same way: another base URL, account, timeout, retry policy,
    /// token provider or transport (another object) is `InvalidConfig`, never silently dropped.
    /// Configure it once, at application start, and pass that one configuration everywhere.
    pub fn shared(config: SdkConfig) -> Result<Arc<Sdk>> {
        shared_with(config, None)
    }

    /// [`Sdk::shared`] with the app's own transport (the same object on every call, see [`Sdk::shared`]).
    pub fn shared_with_transport(
        config: SdkConfig,
        transport: Arc<dyn Transport>,
    ) -> Result<Arc<Sdk>> {
        shared_with(config, Some(transport))
    }
}

fn shared_with(config: SdkConfig, transport: Option<Arc<dyn Transport>>) -> Result<Arc<Sdk>> {
    config.validate()?;
    let key = identity(&config.db_path);
    let wanted = Settings::of(&config, transport.as_ref());
    // Held across the open: two threads asking at once get one instance, not one AlreadyOpen.
    let mut shared = lock();
    shared.retain(|_, e| e.sdk.upgrade().is_some_and(|s| !s.is_closed()));
    if let Some(entry) = shared.get(&key) {
        if let Some(sdk) = entry.sdk.upgrade() {
            let differ = entry.opened_by.differences(&wanted);
            if !differ.is_empty() {
                return Err(SdkError::InvalidConfig(format!(
                    "the shared instance on this file was opened with another {}; configure it once, \
                     at application start, and pass the same configuration (and the same objects) everywhere",
                    differ.join(", ")
                )));
            }
            sdk.holders.fetch_add(1, Ordering::SeqCst);
            return Ok(sdk);
        }
    }
    let opened = match transport {
        None => Sdk::open(config),
        Some(transport) => Sdk::open_with_transport(config, transport),
    };
    let sdk = Arc::new(opened.map_err(|e| match e {
        // Not this process (its instance would be in the map): another one holds the file.
        SdkError::AlreadyOpen(path) => SdkError::Busy(path),
        other => other,
    })?);
    sdk.holders.store(1, Ordering::SeqCst);
    shared.insert(
        key,
        Entry {
            sdk: Arc::downgrade(&sdk),
            opened_by: wanted,
        },
    );
    Ok(sdk)
}

/// The file's identity: its folder resolved (links, `..`) plus its name; the file may not exist yet.
fn identity(path: &Path) -> PathBuf {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let folder = parent.map_or_else(|| std::env::current_dir().ok(), |p| p.canonicalize().ok());
    match (folder, path.file_name()) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
    }
}
