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
    let lines = LINES.get_or_init(Default::default).clone();
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || Sink(lines.clone()))
        .try_init();
}

/// True once a captured line contains every one of `parts`.
pub fn logged(parts: &[&str]) -> bool {
    let Some(lines) = LINES.get() else {
        return false;
    };
    let text = String::from_utf8_lossy(&lines.lock().unwrap()).into_owned();
    text.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}
