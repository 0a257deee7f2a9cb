//! Per-user quotas: a token bucket on transfer requests and a cap on keys created per hour,
//! so one client can neither starve the others nor grow the server without bound.
//!
//! Kept in memory (a restart forgets them, which only resets a budget) and measured in
//! monotonic time, so a wall-clock jump neither grants nor takes a budget.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

// tokio's instant: the real one, except in a deterministic ride (paused clock).
use tokio::time::Instant;

/// How much one user may ask for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaLimits {
    /// Transfer requests (POSTs and look-ups) per second, sustained.
    pub requests_per_second: f64,
    /// Requests allowed at once above the sustained rate.
    pub burst: f64,
    /// New idempotency keys per user per hour.
    pub keys_per_hour: u32,
}

impl Default for QuotaLimits {
    fn default() -> Self {
        // Far above what a phone or the benchmarks send; low enough to stop a flood.
        Self {
            requests_per_second: 100.0,
            burst: 200.0,
            keys_per_hour: 20_000,
        }
    }
}

/// Users tracked before idle entries are dropped (each entry is a few dozen bytes).
const MAX_TRACKED: usize = 100_000;
const HOUR: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct UserQuota {
    tokens: f64,
    refilled: Instant,
    hour_started: Instant,
    keys: u32,
}

/// The quotas of every user.
#[derive(Debug)]
pub struct Quotas {
    limits: QuotaLimits,
    users: Mutex<HashMap<String, UserQuota>>,
}

impl Quotas {
    /// Quotas with these limits.
    pub fn new(limits: QuotaLimits) -> Self {
        Self {
            limits,
            users: Mutex::new(HashMap::new()),
        }
    }

    fn with<R>(&self, user: &str, f: impl FnOnce(&mut UserQuota, &QuotaLimits, Instant) -> R) -> R {
        let now = Instant::now();
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        if users.len() >= MAX_TRACKED && !users.contains_key(user) {
            // Drop users idle for an hour: their bucket is full and their hour is over anyway.
            users.retain(|_, q| now.duration_since(q.refilled) < HOUR);
        }
        let q = users.entry(user.to_string()).or_insert_with(|| UserQuota {
            tokens: self.limits.burst,
            refilled: now,
            hour_started: now,
            keys: 0,
        });
        f(q, &self.limits, now)
    }

    /// Takes one request from `user`'s bucket, or says how many seconds to wait.
    pub fn request(&self, user: &str) -> Result<(), u32> {
        self.with(user, |q, l, now| {
            let elapsed = now.duration_since(q.refilled).as_secs_f64();
            q.tokens = (q.tokens + elapsed * l.requests_per_second).min(l.burst);
            q.refilled = now;
            if q.tokens >= 1.0 {
                q.tokens -= 1.0;
                Ok(())
            } else {
                Err(((1.0 - q.tokens) / l.requests_per_second)
                    .ceil()
                    .clamp(1.0, 3600.0) as u32)
            }
        })
    }

    /// Counts one new key for `user`, or says how many seconds until the hour is over.
    pub fn new_key(&self, user: &str) -> Result<(), u32> {
        self.with(user, |q, l, now| {
            if now.duration_since(q.hour_started) >= HOUR {
                q.hour_started = now;
                q.keys = 0;
            }
            if q.keys < l.keys_per_hour {
                q.keys += 1;
                Ok(())
            } else {
                let left = HOUR.saturating_sub(now.duration_since(q.hour_started));
                Err(left.as_secs().clamp(1, 3600) as u32)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let q = Quotas::new(QuotaLimits {
            requests_per_second: 0.5,
            burst: 2.0,
            keys_per_hour: 3,
        });
        assert!(q.request("u").is_ok());
        assert!(q.request("u").is_ok());
        assert_eq!(q.request("u"), Err(2), "empty: one token in two seconds");
        assert!(q.request("v").is_ok(), "per user");
        for _ in 0..3 {
            assert!(q.new_key("u").is_ok());
        }
        assert!(q.new_key("u").unwrap_err() > 3000);
    }
}
