//! Who holds a key's lock, and since when, in the holder's own monotonic time: a wall-clock
//! jump on any machine neither expires a live request nor extends a dead one.

use std::sync::Arc;
// tokio's instant: the real one, except under a paused clock (deterministic rides).
use tokio::time::Instant;

/// Who this server process is, for the locks it takes (see [`Lease`]).
#[derive(Debug, Clone)]
pub struct Instance {
    /// Random id of this process (one per start).
    pub id: Arc<str>,
    /// When it started: lease ages are measured from it, never from the wall clock.
    pub started: Instant,
}

impl Instance {
    /// A new identity for a process starting now.
    pub fn new() -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string().into(),
            started: Instant::now(),
        }
    }

    /// Milliseconds since this process started (monotonic).
    pub fn mono_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The lease a lock taken now carries.
    pub fn lease(&self) -> Lease<'_> {
        Lease {
            instance: &self.id,
            mono_ms: self.mono_ms(),
        }
    }
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}

/// When a lock was taken, in the holder's monotonic time (a wall-clock jump moves neither).
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    /// Random id of the server process (one per start).
    pub instance: &'a str,
    /// Milliseconds since that process started.
    pub mono_ms: i64,
}
