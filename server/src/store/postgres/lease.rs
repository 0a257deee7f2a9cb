//! Leases across server instances: a heartbeat row per process, judged by each observer's
//! own monotonic clock.
//!
//! A lock carries its holder's instance id and the holder's monotonic time when it took it
//! (`lock_mono_ms`). No process can read another's monotonic clock, so every instance
//! publishes it: a row in `server_instances` bumped every [`HEARTBEAT`] with its current
//! monotonic milliseconds. An observer (a reaper) says a lock ran out when
//!
//! - the holder's own clock says so: its last heartbeat is `lock_timeout` past the lock
//!   (a live instance whose request stalled), or
//! - the holder stopped beating: its heartbeat value has not changed for `dead_after`
//!   as measured by the **observer's** monotonic clock (the holder was killed or hangs),
//!   or it never had a row.
//!
//! A row silent for [`forget_after`] (many lock timeouts) is removed (see `heartbeat`):
//! a missing row also means dead, so removal changes no judgement.
//!
//! No wall clock and no database clock is involved, so a wall-clock jump on any machine
//! (or the test API's clock) expires nothing: we chose this over `now()` of the database,
//! which would make every lease depend on one server's clock never stepping. The cost: a
//! newly started observer waits `dead_after` before it declares a silent instance dead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often an instance bumps its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

/// What an observer knows of one holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The holder's monotonic milliseconds at its last heartbeat.
    pub mono_ms: i64,
    /// Whether its heartbeat advanced within `dead_after` of the observer's clock.
    pub alive: bool,
}

/// One observer's memory of every instance's heartbeat.
#[derive(Debug, Default)]
pub struct Observer {
    seen: Mutex<HashMap<String, (i64, Instant)>>,
}

impl Observer {
    /// Takes in the heartbeats read now and says, for each instance, whether it is alive.
    pub fn observe(
        &self,
        beats: Vec<(String, i64)>,
        now: Instant,
        dead_after: Duration,
    ) -> HashMap<String, Holder> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // Rows removed (by any instance) are forgotten here too: the memory stays as small as the table.
        seen.retain(|id, _| beats.iter().any(|(b, _)| b == id));
        beats
            .into_iter()
            .map(|(id, mono_ms)| {
                let entry = seen.entry(id.clone()).or_insert((mono_ms, now));
                if entry.0 != mono_ms {
                    *entry = (mono_ms, now);
                }
                let alive = now.duration_since(entry.1) < dead_after;
                (id, Holder { mono_ms, alive })
            })
            .collect()
    }

    /// The instances (and their last heartbeat value) whose heartbeat has not moved for
    /// `at_least` by this observer's clock at `now`.
    pub fn silent_for(&self, now: Instant, at_least: Duration) -> Vec<(String, i64)> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.iter()
            .filter(|(_, (_, since))| now.duration_since(*since) >= at_least)
            .map(|(id, (mono_ms, _))| (id.clone(), *mono_ms))
            .collect()
    }
}

/// How long a silent heartbeat row stays before an observer removes it: many times
/// [`dead_after`], so every lock its instance held was taken over long before.
pub fn forget_after(lock_timeout: Duration) -> Duration {
    dead_after(lock_timeout) * 20
}

/// How long a silent heartbeat means a dead instance: the lock timeout, but never less
/// than a few heartbeats (a short test timeout must not kill live instances).
pub fn dead_after(lock_timeout: Duration) -> Duration {
    lock_timeout.max(HEARTBEAT * 4)
}

/// Whether a lock taken by `instance` at its monotonic `lock_mono_ms` ran out, as the
/// observer `me` (whose monotonic time is `my_mono_ms`) sees it.
pub fn expired(
    instance: &str,
    lock_mono_ms: i64,
    me: &str,
    my_mono_ms: i64,
    holders: &HashMap<String, Holder>,
    timeout_ms: i64,
) -> bool {
    if instance == me {
        return my_mono_ms.saturating_sub(lock_mono_ms) >= timeout_ms;
    }
    match holders.get(instance) {
        None => true,
        Some(h) => !h.alive || h.mono_ms.saturating_sub(lock_mono_ms) >= timeout_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_keeps_its_lock_until_its_own_clock_says_otherwise() {
        let obs = Observer::default();
        let t0 = Instant::now();
        let dead = Duration::from_secs(60);
        let h = obs.observe(vec![("a".into(), 1_000)], t0, dead);
        assert!(
            !expired("a", 900, "me", 5, &h, 60_000),
            "fresh lock of a live holder"
        );
        // The holder's clock moved 61 s past the lock: out, though it is alive.
        let h = obs.observe(
            vec![("a".into(), 61_901)],
            t0 + Duration::from_secs(61),
            dead,
        );
        assert!(h["a"].alive);
        assert!(expired("a", 900, "me", 5, &h, 60_000));
    }

    #[test]
    fn a_silent_holder_is_dead_after_the_observers_own_time() {
        let obs = Observer::default();
        let t0 = Instant::now();
        let dead = Duration::from_secs(60);
        let _ = obs.observe(vec![("a".into(), 1_000)], t0, dead);
        let h = obs.observe(
            vec![("a".into(), 1_000)],
            t0 + Duration::from_secs(59),
            dead,
        );
        assert!(
            !expired("a", 1_000, "me", 0, &h, 60_000),
            "silent for 59 s only"
        );
        let h = obs.observe(
            vec![("a".into(), 1_000)],
            t0 + Duration::from_secs(60),
            dead,
        );
        assert!(expired("a", 1_000, "me", 0, &h, 60_000), "silent for 60 s");
        assert!(
            expired("gone", 1_000, "me", 0, &h, 60_000),
            "no heartbeat row"
        );
    }

    #[test]
    fn only_instances_silent_long_enough_are_forgettable_and_removed_rows_are_forgotten() {
        let obs = Observer::default();
        let t0 = Instant::now();
        let dead = Duration::from_secs(1);
        let forget = forget_after(dead);
        let _ = obs.observe(vec![("dead".into(), 7), ("live".into(), 1)], t0, dead);
        let later = t0 + forget - Duration::from_millis(1);
        let _ = obs.observe(vec![("dead".into(), 7), ("live".into(), 900)], later, dead);
        assert!(obs.silent_for(later, forget).is_empty(), "not yet");
        let at = t0 + forget;
        assert_eq!(obs.silent_for(at, forget), vec![("dead".to_string(), 7)]);
        // Another instance removed the row: this observer forgets it on its next read.
        let _ = obs.observe(vec![("live".into(), 901)], at, dead);
        assert!(obs
            .silent_for(at + forget, forget)
            .iter()
            .all(|(id, _)| id != "dead"));
        assert!(forget > dead_after(dead) * 10, "much longer than the lease");
    }

    #[test]
    fn own_locks_follow_own_monotonic_time() {
        let h = HashMap::new();
        assert!(!expired("me", 1_000, "me", 60_999, &h, 60_000));
        assert!(expired("me", 1_000, "me", 61_000, &h, 60_000));
        assert_eq!(dead_after(Duration::from_millis(100)), HEARTBEAT * 4);
    }
}
