//! A StrictMode-like observer of the SDK's I/O: told, on the thread doing it, of every store
//! transaction and every request sent, so a binding's test can prove no public call does I/O on the
//! caller's (UI) thread. Off by default; when off, each I/O site pays one relaxed atomic load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// What kind of I/O is about to happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// A transaction (or a read) on the SQLite file, or opening it.
    Store,
    /// A request handed to the transport.
    Send,
}

/// Called on the thread that does the I/O, before it happens.
pub type IoObserver = Arc<dyn Fn(IoKind) + Send + Sync>;

static ARMED: AtomicBool = AtomicBool::new(false);
static OBSERVER: RwLock<Option<IoObserver>> = RwLock::new(None);

/// Installs (or with `None` removes) the process-wide observer; it replaces any earlier one.
pub fn set_io_observer(observer: Option<IoObserver>) {
    let mut slot = OBSERVER.write().unwrap_or_else(|p| p.into_inner());
    ARMED.store(observer.is_some(), Ordering::Release);
    *slot = observer;
}

/// Tells the observer, if any, that `kind` of I/O happens now on this thread.
pub(crate) fn io(kind: IoKind) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let observer = OBSERVER.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(observer) = observer {
        observer(kind);
    }
}
