//! The one clock all server time goes through, so tests can move it forward.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Wall clock plus a test-controlled offset, in Unix milliseconds.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
    /// A simulation's start time and the tokio instant it stands for (`None`: the system clock).
    simulated: Option<(i64, tokio::time::Instant)>,
}

impl Clock {
    /// A clock that starts at `start_ms` and follows tokio's clock (paused in a deterministic ride).
    pub fn simulated(start_ms: i64) -> Self {
        Self {
            offset_ms: AtomicI64::new(0),
            simulated: Some((start_ms, tokio::time::Instant::now())),
        }
    }

    /// Current server time in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        let wall = match self.simulated {
            Some((start, at)) => {
                start.saturating_add(i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX))
            }
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0),
        };
        wall.saturating_add(self.offset_ms.load(Ordering::SeqCst))
    }

    /// Moves the clock by `ms`, forward or back (test API); returns the new total offset.
    pub fn advance(&self, ms: i64) -> i64 {
        let delta = ms;
        let step = |off: i64| Some(off.saturating_add(delta));
        // fetch_update with a closure that always returns Some cannot fail.
        let old = self
            .offset_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, step)
            .unwrap_or_else(|current| current);
        old.saturating_add(delta)
    }

    /// Total offset applied so far.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }
}

/// Formats Unix milliseconds as RFC 3339 UTC, e.g. `2025-01-02T03:04:05.678Z`.
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_500), "1970-01-01T00:00:01.5Z");
    }

    #[test]
    fn advance_moves_both_ways() {
        let c = Clock::default();
        let before = c.now_ms();
        c.advance(10_000);
        c.advance(-5);
        assert!(c.now_ms() >= before + 9_995);
        assert_eq!(c.offset_ms(), 9_995);
        c.advance(-9_995);
        c.advance(i64::MAX);
        c.advance(i64::MAX);
        assert_eq!(c.offset_ms(), i64::MAX, "saturates instead of wrapping");
    }
}
