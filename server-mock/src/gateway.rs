//! The simulated payment gateway: latency, and idempotency on our key, kept on disk.
//!
//! A real gateway is a third party that remembers every authorisation it gave. This one
//! keeps its records in its own table (`gateway_authorizations`, written by each store's
//! `keys` module; the record's types and how an authorisation ends: `crate::authorization`),
//! so a retry after a crash, a restart or a reaper release presents the same key and gets the
//! same authorisation back: step (2) may run more than once, the gateway authorises once.
//! Nothing per key lives in memory.

use std::time::Duration;

use crate::authorization::Authorization;
use crate::store::Store;
use sendonce_server::store::DbError;

/// Waits `delay`, then authorises (user, key), idempotently, through the store.
pub async fn authorize(
    store: &dyn Store,
    delay: Duration,
    user_id: &str,
    key: &str,
    now_ms: i64,
) -> Result<Authorization, DbError> {
    // tokio's timer rounds a deadline up to its next millisecond tick, so even a zero sleep
    // waits for the timer wheel (~0.5 ms on average): a gateway configured with no latency
    // must not add one.
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let fresh = format!("auth_{}", uuid::Uuid::new_v4().simple());
    store
        .authorize(user_id.to_string(), key.to_string(), fresh, now_ms)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authorization::Counts;
    use crate::store::sqlite::gateway::{counts, expire_chunk};
    use crate::store::{sqlite::SqliteStore, Instance};
    use sendonce_server::store::sqlite::{Db, Durability};

    #[tokio::test]
    async fn same_key_same_authorization_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db").display().to_string();
        let store = SqliteStore::open(&path, Instance::new()).unwrap();
        let a = authorize(&store, Duration::ZERO, "u", "k", 1)
            .await
            .unwrap();
        let c = authorize(&store, Duration::ZERO, "v", "k", 1)
            .await
            .unwrap();
        drop(store);
        let store = SqliteStore::open(&path, Instance::new()).unwrap();
        let b = authorize(&store, Duration::ZERO, "u", "k", 2)
            .await
            .unwrap();
        let db: &Db = &store.db;
        assert_eq!(a.authorization_id, b.authorization_id, "a restart keeps it");
        assert_ne!(a.authorization_id, c.authorization_id);
        assert_eq!(b.calls, 2);
        let n = db.read(|c| counts(c)).await.unwrap();
        assert_eq!((n.authorizations, n.calls), (2, 3));
        let gone = db
            .write(Durability::Full, |c| expire_chunk(c, 2, 3, 10))
            .await;
        assert_eq!(gone.unwrap(), 2);
        let n = db.read(|c| counts(c)).await.unwrap();
        assert_eq!(
            (n.authorizations, n.voids),
            (2, 2),
            "never captured: voided, not forgotten"
        );
        let gone = db
            .write(Durability::Full, |c| expire_chunk(c, 4, 5, 10))
            .await;
        assert_eq!(gone.unwrap(), 2, "the voids are forgotten a window later");
        assert_eq!(db.read(|c| counts(c)).await.unwrap(), Counts::default());
    }
}
