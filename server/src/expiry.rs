//! Key expiry by bucket: a key lives at least the key window, and goes with its whole
//! bucket (a day, or the window if shorter) — one range delete on SQLite, one dropped
//! partition on PostgreSQL, never row by row.

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
