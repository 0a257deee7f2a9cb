//! The reaper: resolves keys stuck `IN_PROGRESS` and expires old key buckets.

use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};
use tokio::sync::watch;

use crate::db::{DbError, Durability};
use crate::{idempotency, ledger, App};

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Stuck keys completed from a ledger debit (money had moved).
    pub completed: usize,
    /// Stuck keys released (no money moved): a retry will execute once.
    pub released: usize,
    /// Key rows removed by bucket expiry.
    pub expired: usize,
}

/// How often the reaper looks: a quarter of the lock timeout, between 20 ms and 1 s.
pub fn interval(lock_timeout: Duration) -> Duration {
    (lock_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// Runs until shutdown.
pub async fn run(app: App, mut shutdown: watch::Receiver<bool>) {
    let every = interval(app.config.lock_timeout);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = app.reaper_wake.notified() => {}
            _ = tokio::time::sleep(every) => {}
        }
        match pass(&app).await {
            Ok(p) if p != Pass::default() => tracing::info!(?p, "reaper pass"),
            Ok(_) => {}
            Err(e) => tracing::warn!(%e, "reaper pass failed"),
        }
    }
}

/// One pass at the current server time.
pub async fn pass(app: &App) -> Result<Pass, DbError> {
    let now = app.clock.now_ms();
    let lock_timeout_ms = i64::try_from(app.config.lock_timeout.as_millis()).unwrap_or(i64::MAX);
    let window_ms = app.key_window_ms();
    let mut p = app
        .db
        .call(move |c| resolve_stuck(c, now.saturating_sub(lock_timeout_ms)))
        .await?;
    // Whole expired buckets, a chunk per group-commit job: between chunks the requests'
    // commits go through, so a 100k-row bucket never stalls them for its whole delete.
    loop {
        let n = app
            .db
            .write(Durability::Full, move |c| {
                idempotency::expire_chunk(c, now, window_ms, EXPIRE_CHUNK)
            })
            .await?;
        p.expired += n;
        if n < EXPIRE_CHUNK {
            return Ok(p);
        }
    }
}

/// Key rows removed per expiry transaction.
const EXPIRE_CHUNK: usize = 1_000;

/// Completes or releases every key locked before `locked_before`.
fn resolve_stuck(conn: &mut Connection, locked_before: i64) -> Result<Pass, DbError> {
    let mut p = Pass::default();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let stuck: Vec<(String, String, String)> = {
        let mut stmt = tx.prepare(
            "SELECT user_id, idem_key, lock_id FROM idempotency_keys
             WHERE state = 'in_progress' AND locked_at_ms < ?1",
        )?;
        let rows = stmt.query_map(params![locked_before], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    for (user, key, lock_id) in stuck {
        // Ask the ledger whether money moved under this key; it is the source of truth.
        match ledger::debit_by_key(&tx, &user, &key)? {
            Some((record, _)) => {
                idempotency::complete(&tx, &user, &key, &lock_id, 201, &record.to_json())?;
                p.completed += 1;
            }
            None => {
                idempotency::release(&tx, &user, &key, &lock_id)?;
                p.released += 1;
            }
        }
    }
    tx.commit()?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::db::Db;
    use crate::ledger::TransferRecord;

    fn stuck_key(c: &Connection, key: &str, locked_at: i64) {
        c.execute(
            "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                                           locked_at_ms, created_at_ms, bucket)
             VALUES ('u1', ?1, x'00', 'in_progress', 'dead', ?2, ?2, 0)",
            params![key, locked_at],
        )
        .unwrap();
    }

    #[tokio::test]
    async fn completes_when_money_moved_and_releases_otherwise() {
        let db = Db::open(":memory:").unwrap();
        let record = TransferRecord {
            transfer_id: "tr_1".into(),
            from_user_id: "u1".into(),
            to_user_id: "u2".into(),
            amount_minor: 10,
            currency: "BDT".into(),
            note: None,
            created_at_ms: 1_000,
            idempotency_key: "moved".into(),
        };
        let expected = record.to_json();
        let p = db
            .call(move |c| {
                stuck_key(c, "moved", 1_000);
                stuck_key(c, "nothing", 1_000);
                stuck_key(c, "fresh", 50_000);
                ledger::insert_debit(c, &record, b"\0")?;
                resolve_stuck(c, 10_000)
            })
            .await
            .unwrap();
        assert_eq!((p.completed, p.released), (1, 1));
        let (moved, nothing, fresh) = db
            .call(|c| {
                Ok((
                    idempotency::read(c, "u1", "moved")?,
                    idempotency::read(c, "u1", "nothing")?,
                    idempotency::read(c, "u1", "fresh")?,
                ))
            })
            .await
            .unwrap();
        let moved = moved.unwrap();
        assert!(moved.completed);
        assert_eq!(moved.status, Some(201));
        assert_eq!(
            moved.body,
            Some(expected),
            "rebuilt from the ledger, byte-identical"
        );
        assert!(nothing.is_none(), "released so a retry executes once");
        assert!(!fresh.unwrap().completed, "not past the lock timeout yet");
    }

    #[tokio::test]
    async fn expiry_in_chunks_removes_exactly_the_expired_buckets() {
        let db = Db::open(":memory:").unwrap();
        let window = 2_000; // bucket width 2 s
        db.call(|c| {
            let tx = c.transaction()?;
            for i in 0..2_500 {
                // Buckets 0 and 1 expire at now = 6_000 (first kept bucket: 2); 2 stays.
                let bucket = if i < 2_490 { i % 2 } else { 2 };
                tx.execute(
                    "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state,
                         lock_id, locked_at_ms, created_at_ms, bucket)
                     VALUES ('u1', ?1, x'00', 'completed', 'l', ?2, ?2, ?3)",
                    params![format!("k{i}"), bucket * 2_000 + i, bucket],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
        .unwrap();
        let mut chunks = Vec::new();
        loop {
            let n = db
                .write(Durability::Full, move |c| {
                    idempotency::expire_chunk(c, 6_000, window, EXPIRE_CHUNK)
                })
                .await
                .unwrap();
            chunks.push(n);
            if n < EXPIRE_CHUNK {
                break;
            }
        }
        assert_eq!(chunks, vec![1_000, 1_000, 490]);
        let left: Vec<i64> = db
            .call(|c| {
                let mut st = c.prepare("SELECT bucket FROM idempotency_keys")?;
                let rows = st.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
            .unwrap();
        assert_eq!(left, vec![2; 10], "only the kept bucket remains");
    }

    #[test]
    fn interval_is_bounded() {
        assert_eq!(interval(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(interval(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(
            interval(Duration::from_millis(10)),
            Duration::from_millis(20)
        );
    }
}
