//! Key expiry by bucket: a key lives at least the key window, and goes with its whole
//! bucket (a day, or the window if shorter) — one range delete on SQLite, one dropped
//! partition on PostgreSQL, never row by row.

use std::sync::Mutex;
// tokio's instant: the real one, except under a paused clock (deterministic rides).
use tokio::time::Instant;

/// Width of an expiry bucket: a day, or the key window if shorter (seconds-long test windows).
pub fn bucket_width_ms(key_window_ms: i64) -> i64 {
    key_window_ms.clamp(1_000, 86_400_000)
}

/// The bucket a key created at `now_ms` lands in.
pub fn bucket(now_ms: i64, key_window_ms: i64) -> i64 {
    now_ms.div_euclid(bucket_width_ms(key_window_ms))
}

/// The oldest bucket still kept at `now_ms`: bucket b holds keys created in
/// [b·w, (b+1)·w), and may go once (b+1)·w ≤ now − window.
pub fn first_kept_bucket(now_ms: i64, key_window_ms: i64) -> i64 {
    now_ms
        .saturating_sub(key_window_ms)
        .div_euclid(bucket_width_ms(key_window_ms))
}

/// The time key expiry goes by, proof against a wall clock stepped forward: this
/// process's clock, but never later than the newest claim it made plus the monotonic time
/// since. A step alone expires nothing: only elapsed time, or claims stamped by the new
/// time, move expiry on. (A process cannot tell a step from elapsed time once it serves
/// claims at the stepped time; on PostgreSQL the other live instances' clocks bound it
/// too, see the store's `expire`.)
#[derive(Debug, Default)]
pub struct Anchor {
    newest: Mutex<Option<(i64, Instant)>>,
}

impl Anchor {
    /// Notes a key claimed at wall time `now_ms`.
    pub fn note_claim(&self, now_ms: i64) {
        let at = Instant::now();
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        if newest.is_none_or(|anchor| now_ms > projected(anchor, at)) {
            *newest = Some((now_ms, at));
        }
    }

    /// The expiry time at wall time `now_ms`; `None` before the first claim (nothing to
    /// expire by yet).
    pub fn now(&self, now_ms: i64) -> Option<i64> {
        let anchor = (*self.newest.lock().unwrap_or_else(|p| p.into_inner()))?;
        Some(now_ms.min(projected(anchor, Instant::now())))
    }
}

/// The wall time of `anchor` (wall ms, monotonic instant) carried forward to `at` by the
/// monotonic clock.
fn projected((wall_ms, since): (i64, Instant), at: Instant) -> i64 {
    let elapsed = at.saturating_duration_since(since).as_millis();
    wall_ms.saturating_add(i64::try_from(elapsed).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_keys_at_least_a_window() {
        let window = 48 * 3_600_000;
        let w = bucket_width_ms(window);
        assert_eq!(w, 86_400_000);
        let created = 10 * w + 5;
        assert_eq!(bucket(created, window), 10);
        // Not yet a full window old: its bucket survives.
        assert!(bucket(created, window) >= first_kept_bucket(created + window - 1, window));
        // A full window after the end of its bucket, it goes.
        assert!(bucket(created, window) < first_kept_bucket(11 * w + window, window));
        assert_eq!(bucket_width_ms(2_000), 2_000);
    }
}
