//! The one place where the SDK's `i64` milliseconds become platform times and back: timestamps are
//! `SystemTime` (Kotlin `java.time.Instant`, Swift `Date`), spans are `Duration` (Kotlin
//! `java.time.Duration`, Swift `TimeInterval`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A timestamp of the SDK (ms since the Unix epoch, SDK clock) as a `SystemTime`.
pub(crate) fn instant(ms: i64) -> SystemTime {
    let magnitude = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// A `SystemTime` as the SDK's ms since the Unix epoch (saturating far outside ±292 million years).
pub(crate) fn epoch_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |v| -v),
    }
}

/// A span of the SDK (ms) as a `Duration`; a negative span (a clock step back) is zero.
pub(crate) fn span(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_on_both_sides_of_the_epoch() {
        for ms in [0, 1, -1, 1_764_590_400_123, -86_400_000, i64::MAX / 1000] {
            assert_eq!(epoch_ms(instant(ms)), ms, "{ms}");
        }
    }
}
