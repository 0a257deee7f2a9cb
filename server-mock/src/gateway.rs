//! The simulated payment gateway: latency, and idempotency on our key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// An external gateway stand-in that authorises each (user, key) once.
///
/// It lives in memory, like a third party we cannot see into: a retry after a crash or a
/// reaper release sends the same key again and gets the same authorisation back, so the
/// gateway never charges twice even though our step (2) may run more than once.
#[derive(Debug, Default)]
pub struct Gateway {
    auths: Mutex<HashMap<(String, String), Authorization>>,
}

/// What the gateway returned for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// Gateway-side id, the same for every call with the key.
    pub authorization_id: String,
    /// How many times the key was presented.
    pub calls: u32,
}

impl Gateway {
    /// Waits `delay`, then authorises `amount` under (user, key), idempotently.
    pub async fn authorize(&self, delay: Duration, user_id: &str, key: &str) -> Authorization {
        tokio::time::sleep(delay).await;
        let mut auths = self.auths.lock().unwrap_or_else(|p| p.into_inner());
        let entry = auths
            .entry((user_id.to_string(), key.to_string()))
            .or_insert_with(|| Authorization {
                authorization_id: format!("auth_{}", uuid::Uuid::new_v4().simple()),
                calls: 0,
            });
        entry.calls += 1;
        entry.clone()
    }

    /// (distinct authorisations, total calls) since start.
    pub fn counts(&self) -> (usize, u64) {
        let auths = self.auths.lock().unwrap_or_else(|p| p.into_inner());
        let calls = auths.values().map(|a| u64::from(a.calls)).sum();
        (auths.len(), calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn same_key_same_authorization() {
        let g = Gateway::default();
        let a = g.authorize(Duration::ZERO, "u", "k").await;
        let b = g.authorize(Duration::ZERO, "u", "k").await;
        let c = g.authorize(Duration::ZERO, "v", "k").await;
        assert_eq!(a.authorization_id, b.authorization_id);
        assert_ne!(a.authorization_id, c.authorization_id);
        assert_eq!(b.calls, 2);
        assert_eq!(g.counts(), (2, 3));
    }
}
