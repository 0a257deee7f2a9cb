//! The SDK's log lines, captured in memory so a test can wait for something the SDK reports.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

static LINES: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capture (once per test binary) at level WARN and above.
pub fn capture() {
    capture_at(tracing::Level::WARN);
}

/// Installs the capture (once per test binary; the first level wins) and returns every byte logged.
pub fn capture_at(level: tracing::Level) -> Arc<Mutex<Vec<u8>>> {
    let lines = LINES.get_or_init(Default::default).clone();
    let writer = lines.clone();
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || Sink(writer.clone()))
        .try_init();
    lines
}

/// True once a captured line contains every one of `parts`.
pub fn logged(parts: &[&str]) -> bool {
    let Some(lines) = LINES.get() else {
        return false;
    };
    let text = String::from_utf8_lossy(&lines.lock().unwrap()).into_owned();
    text.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}
