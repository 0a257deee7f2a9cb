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

/// Users tracked at most (each entry is a few dozen bytes); past it the least recently
/// seen are forgotten, which only resets their budgets (as a restart does).
const MAX_TRACKED: usize = 100_000;
const HOUR: Duration = Duration::from_secs(3600);
/// How often entries at rest are dropped: often enough that the map holds about the users of
/// the last hour, rarely enough that the O(users) sweep is a small share of the requests.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct UserQuota {
    tokens: f64,
    refilled: Instant,
    hour_started: Instant,
    keys: u32,
}

impl UserQuota {
    /// Forgetting this entry changes no answer: its bucket has refilled and it holds no key
    /// of an hour still running (a fresh entry would say the same).
    fn at_rest(&self, limits: &QuotaLimits, now: Instant) -> bool {
        let refill = now.duration_since(self.refilled).as_secs_f64() * limits.requests_per_second;
        self.tokens + refill >= limits.burst
            && (self.keys == 0 || now.duration_since(self.hour_started) >= HOUR)
    }
}

#[derive(Debug)]
struct Users {
    map: HashMap<String, UserQuota>,
    swept: Instant,
}

/// The quotas of every user.
#[derive(Debug)]
pub struct Quotas {
    limits: QuotaLimits,
    capacity: usize,
    users: Mutex<Users>,
}

impl Quotas {
    /// Quotas with these limits.
    pub fn new(limits: QuotaLimits) -> Self {
        Self::with_capacity(limits, MAX_TRACKED)
    }

    /// Quotas that remember at most `capacity` users.
    pub fn with_capacity(limits: QuotaLimits, capacity: usize) -> Self {
        Self {
            limits,
            capacity: capacity.max(1),
            users: Mutex::new(Users {
                map: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// How many users are remembered now (bounded by the users of the last hour and the
    /// capacity).
    pub fn tracked(&self) -> usize {
        self.users
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .len()
    }

    fn with<R>(&self, user: &str, f: impl FnOnce(&mut UserQuota, &QuotaLimits, Instant) -> R) -> R {
        let now = Instant::now();
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let limits = &self.limits;
        if now.duration_since(users.swept) >= SWEEP_EVERY {
            users.map.retain(|_, q| !q.at_rest(limits, now));
            users.swept = now;
        }
        if users.map.len() >= self.capacity && !users.map.contains_key(user) {
            users.map.retain(|_, q| !q.at_rest(limits, now));
            if users.map.len() >= self.capacity {
                forget_least_recent(&mut users.map, self.capacity);
            }
        }
        let q = users
            .map
            .entry(user.to_string())
            .or_insert_with(|| UserQuota {
                tokens: limits.burst,
                refilled: now,
                hour_started: now,
                keys: 0,
            });
        f(q, limits, now)
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

/// Forgets the least recently seen tenth of a full map in one pass, so the O(users) work
/// comes once per `capacity / 10` new users, not once per request.
fn forget_least_recent(map: &mut HashMap<String, UserQuota>, capacity: usize) {
    let mut seen: Vec<Instant> = map.values().map(|q| q.refilled).collect();
    let drop = (capacity / 10).max(1).min(seen.len() - 1);
    let (_, &mut cut, _) = seen.select_nth_unstable(drop);
    map.retain(|_, q| q.refilled >= cut);
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

    fn limits() -> QuotaLimits {
        QuotaLimits {
            requests_per_second: 10.0,
            burst: 20.0,
            keys_per_hour: 5,
        }
    }

    /// Before the sweep, every user ever seen stayed until 100,000 were tracked: this test's
    /// 2,000 users of 20 waves all stayed (issue 29 item 10).
    #[tokio::test(start_paused = true)]
    async fn users_who_come_and_go_leave_the_map_flat() {
        let q = Quotas::new(limits());
        let mut most = 0;
        for wave in 0..20 {
            for u in 0..100 {
                let user = format!("w{wave}-u{u}");
                q.request(&user).unwrap();
                q.new_key(&user).unwrap();
            }
            most = most.max(q.tracked());
            // Ten minutes between waves: each wave's hour of keys ends six waves later.
            tokio::time::advance(Duration::from_secs(600)).await;
        }
        assert!(
            most <= 800,
            "at most the users of the last hour (+ one sweep): {most}"
        );
        tokio::time::advance(HOUR).await;
        q.request("last").unwrap();
        assert_eq!(q.tracked(), 1, "everyone else is at rest");
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_users_within_the_hour_stays_under_the_capacity() {
        let q = Quotas::with_capacity(limits(), 100);
        for u in 0..1_000 {
            q.new_key(&format!("u{u}")).unwrap();
            assert!(q.tracked() <= 100);
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        // The newest users keep their budgets; the oldest were forgotten first.
        for _ in 1..5 {
            q.new_key("u999").unwrap();
        }
        assert!(
            q.new_key("u999").is_err(),
            "u999's hour of keys is still counted"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_user_with_keys_in_the_running_hour_is_not_forgotten_by_the_sweep() {
        let q = Quotas::new(limits());
        for _ in 0..5 {
            q.new_key("busy").unwrap();
        }
        tokio::time::advance(Duration::from_secs(30 * 60)).await;
        q.request("other").unwrap();
        assert!(q.new_key("busy").is_err(), "still five keys this hour");
    }
}
