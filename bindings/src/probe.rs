//! A StrictMode-like probe for tests and debug builds: records which thread runs each store
//! transaction and each request, so the Kotlin and Swift suites can prove that no public call does
//! disk or network I/O on the caller's thread. Only one probe records at a time.

use std::sync::{Arc, Mutex};

/// What kind of I/O happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum IoKind {
    /// A transaction (or a read) on the SQLite file, or opening it.
    Store,
    /// A request handed to the transport.
    Send,
}

/// One I/O and the thread that did it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct IoEvent {
    /// What it was.
    pub kind: IoKind,
    /// The thread, as `current_thread_label()` names it.
    pub thread: String,
}

/// Records every I/O of every SDK instance in this process from `start()` until `stop()`.
#[derive(uniffi::Object)]
pub struct IoProbe {
    events: Arc<Mutex<Vec<IoEvent>>>,
}

#[uniffi::export]
impl IoProbe {
    /// Starts recording (replacing any probe that records now).
    #[uniffi::constructor]
    pub fn start() -> Arc<Self> {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        sendonce::probe::set_io_observer(Some(Arc::new(move |kind| {
            let kind = match kind {
                sendonce::probe::IoKind::Store => IoKind::Store,
                sendonce::probe::IoKind::Send => IoKind::Send,
            };
            let event = IoEvent {
                kind,
                thread: current_thread_label(),
            };
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(event);
        })));
        Arc::new(Self { events })
    }

    /// Everything recorded so far, in order.
    pub fn events(&self) -> Vec<IoEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops recording (of every probe).
    pub fn stop(&self) {
        sendonce::probe::set_io_observer(None);
    }
}

/// A name of the calling thread that is unique in the process (a JVM or Swift thread included).
#[uniffi::export]
pub fn current_thread_label() -> String {
    let me = std::thread::current();
    format!("{}/{:?}", me.name().unwrap_or("unnamed"), me.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_threads_have_two_labels_and_one_thread_one() {
        let here = current_thread_label();
        assert_eq!(here, current_thread_label());
        let there = std::thread::spawn(current_thread_label).join().unwrap();
        assert_ne!(here, there);
    }
}
