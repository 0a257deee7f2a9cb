//! The reaper: resolves keys stuck `IN_PROGRESS` and expires old key buckets.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::App;
use crate::retention::{Trimmed, TRIM_CHUNK};
use crate::store::Resolved;
use sendonce_server::store::DbError;

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Stuck keys completed from a ledger debit (money had moved).
    pub completed: usize,
    /// Stuck keys the gateway had authorised but no debit followed (the holder died or
    /// stalled between the phases): finished here, through the same fenced commit.
    pub finished: usize,
    /// Stuck keys released (no money moved, nothing authorised): a retry will execute once.
    pub released: usize,
    /// Key rows removed by bucket expiry.
    pub expired: usize,
}

/// How often the reaper looks: a quarter of the lock timeout, between 20 ms and 1 s.
pub fn interval(lock_timeout: Duration) -> Duration {
    (lock_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// How often rows past their retention are trimmed: retention is days, so a minute late
/// changes nothing, and the trim's few statements stay off the requests' path.
const TRIM_EVERY: Duration = Duration::from_secs(60);
/// Most chunks per trim, so a backlog (a first start after an upgrade) is worked off over
/// several rounds rather than in one long one.
const TRIM_MAX_CHUNKS: usize = 64;

/// Runs until shutdown.
pub async fn run(app: App, mut shutdown: watch::Receiver<bool>) {
    let every = interval(app.config.lock_timeout);
    let mut trimmed_at: Option<tokio::time::Instant> = None;
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
        if trimmed_at.is_none_or(|t| t.elapsed() >= TRIM_EVERY) {
            trimmed_at = Some(tokio::time::Instant::now());
            match trim(&app).await {
                Ok(t) if t.total() > 0 => tracing::info!(?t, "rows past their retention trimmed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(%e, "retention trim failed"),
            }
        }
    }
}

/// Removes rows past their retention (`crate::retention`), a chunk at a time, by the same
/// step-proof time as key expiry; nothing before the first claim gives that time.
pub async fn trim(app: &App) -> Result<Trimmed, DbError> {
    let mut total = Trimmed::default();
    let Some(now) = app.expiry_now() else {
        return Ok(total);
    };
    let cut = app.config.retention.cutoffs(now);
    for _ in 0..TRIM_MAX_CHUNKS {
        let t = app.store.trim(cut).await?;
        total.outbox += t.outbox;
        total.inbox += t.inbox;
        total.sms += t.sms;
        let chunk = usize::try_from(TRIM_CHUNK).unwrap_or(usize::MAX);
        if t.outbox < chunk && t.inbox < chunk && t.sms < chunk {
            break;
        }
    }
    Ok(total)
}

/// One pass: resolve every key whose lease ran out, then expire old buckets.
pub async fn pass(app: &App) -> Result<Pass, DbError> {
    let mut p = Pass::default();
    // The lease is measured in monotonic time, never the wall clock (each store says how
    // it judges another process's locks).
    let timeout_ms = i64::try_from(app.config.lock_timeout.as_millis()).unwrap_or(i64::MAX);
    let stuck = app.store.stuck_keys(timeout_ms).await?;
    let rules = app.rules(crate::ledger::decide::Authorised::Yes);
    for key in stuck {
        let now = app.clock.now_ms();
        let (user, k) = (key.user.clone(), key.key.clone());
        // One key that cannot be resolved now (its rows locked by a stalled session past
        // the store's lock wait) must not hold up the others: the next pass tries it again.
        match app.store.resolve(key, now, rules).await {
            Ok(Resolved::Completed) => p.completed += 1,
            Ok(Resolved::Finished) => p.finished += 1,
            Ok(Resolved::Released) => p.released += 1,
            Ok(Resolved::Moved) => {}
            Err(e) => tracing::warn!(%e, user, key = k, "stuck key not resolved this pass"),
        }
    }
    if p.finished > 0 {
        app.relay_wake.notify_one();
    }
    // Whole expired buckets (and the gateway's records after the same window), by a time
    // a wall-clock step alone cannot move (`AppState::expiry_now`).
    if let Some(now) = app.expiry_now() {
        p.expired = app.store.expire(now, app.key_window_ms()).await?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    use rusqlite::params;
    use sendonce_server::store::sqlite::{keys, Db, Durability};

    /// Key rows removed per expiry transaction (as the SQLite store does).
    const EXPIRE_CHUNK: usize = 1_000;

    #[tokio::test]
    async fn expiry_in_chunks_removes_exactly_the_expired_buckets() {
        let db = Db::open(":memory:", crate::schema::create).unwrap();
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
                    keys::expire_chunk(c, 6_000, window, EXPIRE_CHUNK)
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
