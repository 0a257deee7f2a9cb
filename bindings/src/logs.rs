//! The SDK's `tracing` output handed to the app's own logger (Logcat, os_log, a crash reporter), so
//! nothing is lost on a device where no subscriber exists.
//!
//! Only the SDK's own targets (`sendonce*`) reach the sink: the HTTP stack's logs stay out. The SDK logs
//! no recipient, note or token (only ids, keys, states and amounts) unless the config opts in with
//! `log_personal_data`.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock, RwLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::error::{Result, SendOnceError};
use crate::guard::guard;
use crate::listener::ListenerError;

/// How much the sink receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LogLevel {
    /// Failures only.
    Error,
    /// And what the SDK worked around.
    Warn,
    /// And each attempt, outcome and lifecycle step.
    Info,
    /// And every state change.
    Debug,
    /// Everything.
    Trace,
}

impl From<LogLevel> for Level {
    fn from(l: LogLevel) -> Self {
        match l {
            LogLevel::Error => Level::ERROR,
            LogLevel::Warn => Level::WARN,
            LogLevel::Info => Level::INFO,
            LogLevel::Debug => Level::DEBUG,
            LogLevel::Trace => Level::TRACE,
        }
    }
}

impl From<&Level> for LogLevel {
    fn from(l: &Level) -> Self {
        match *l {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            Level::DEBUG => LogLevel::Debug,
            _ => LogLevel::Trace,
        }
    }
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LogRecord {
    /// Its level.
    pub level: LogLevel,
    /// The module that logged it (`sendonce::sender`, ...).
    pub target: String,
    /// The message and its fields, `message key=value ...`.
    pub message: String,
}

/// Receives the SDK's log lines, on whichever thread logged them; must not block.
#[uniffi::export(foreign)]
pub trait LogSink: Send + Sync {
    /// One line.
    fn log(&self, record: LogRecord) -> std::result::Result<(), ListenerError>;
}

type Installed = (Arc<dyn LogSink>, Level);

static SINK: RwLock<Option<Installed>> = RwLock::new(None);
static SUBSCRIBER: OnceLock<std::result::Result<(), String>> = OnceLock::new();

thread_local! {
    /// Set while a sink runs: whatever it makes the SDK log meanwhile is dropped, not looped back.
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// Sends the SDK's log lines at `level` and above to `sink` (`None` stops them). The first call
/// installs the process's tracing subscriber; `InvalidConfig` if the app installed one already.
#[uniffi::export]
pub fn set_log_sink(sink: Option<Arc<dyn LogSink>>, level: LogLevel) -> Result<()> {
    guard(|| {
        let installed = SUBSCRIBER.get_or_init(|| {
            let subscriber = tracing_subscriber::registry().with(SinkLayer);
            tracing::subscriber::set_global_default(subscriber).map_err(|e| e.to_string())
        });
        if let Err(e) = installed {
            return Err(SendOnceError::config(format!(
                "another tracing subscriber is installed in this process: {e}"
            )));
        }
        *SINK.write().unwrap_or_else(|p| p.into_inner()) = sink.map(|s| (s, level.into()));
        tracing::callsite::rebuild_interest_cache();
        Ok(())
    })
}

fn current() -> Option<Installed> {
    SINK.read().unwrap_or_else(|p| p.into_inner()).clone()
}

struct SinkLayer;

impl<S: Subscriber> Layer<S> for SinkLayer {
    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        // Spans pass (the registry tracks them); events only from the SDK, at the chosen level.
        metadata.is_span()
            || (metadata.target().starts_with("sendonce")
                && current().is_some_and(|(_, level)| *metadata.level() <= level))
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let Some((sink, level)) = current() else {
            return;
        };
        if !meta.target().starts_with("sendonce") || *meta.level() > level {
            return;
        }
        if IN_SINK.with(|f| f.replace(true)) {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let record = LogRecord {
            level: meta.level().into(),
            target: meta.target().to_string(),
            message: line.text(),
        };
        // A sink's failure is its own: logging it would only come back here.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.log(record)));
        IN_SINK.with(|f| f.set(false));
    }
}

#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Line {
    fn text(self) -> String {
        if self.fields.is_empty() {
            self.message
        } else {
            format!("{}{}", self.message, self.fields)
        }
    }
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}
