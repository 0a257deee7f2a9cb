//! One instance per app process: the UI, a background worker and a push handler share it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::config::SdkConfig;
use crate::error::{Result, SdkError};
use crate::sdk::Sdk;
use crate::transport::Transport;

/// Live shared instances by the file they own.
static SHARED: OnceLock<Mutex<HashMap<PathBuf, Weak<Sdk>>>> = OnceLock::new();

impl Sdk {
    /// The process's one instance on `config.db_path`: opened at the first call, the same instance
    /// afterwards (never `AlreadyOpen`) until it is closed or dropped everywhere.
    ///
    /// Another process holding the file (an app's `:worker` process) gives `Busy`: try again later.
    /// A later call must name the same server: another base URL is `InvalidConfig`.
    pub fn shared(config: SdkConfig) -> Result<Arc<Sdk>> {
        shared_with(config, None)
    }

    /// [`Sdk::shared`] with the app's own transport (used only when this call opens the instance).
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
    // Held across the open: two threads asking at once get one instance, not one AlreadyOpen.
    let mut shared = SHARED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    shared.retain(|_, sdk| sdk.upgrade().is_some_and(|s| !s.is_closed()));
    if let Some(sdk) = shared.get(&key).and_then(Weak::upgrade) {
        if sdk.base_url() != config.base_url {
            return Err(SdkError::InvalidConfig(format!(
                "the shared instance on this file talks to {:?}, not {:?}",
                sdk.base_url(),
                config.base_url
            )));
        }
        return Ok(sdk);
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
    shared.insert(key, Arc::downgrade(&sdk));
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
