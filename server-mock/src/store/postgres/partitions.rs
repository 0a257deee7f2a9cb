//! Day partitions of the key table: created ahead, expired by detaching and dropping a
//! whole partition (never a row-by-row DELETE), safe when every instance's reaper runs it.

use deadpool_postgres::Pool;

use crate::db::DbError;
use crate::idempotency::bucket_width_ms;

/// Buckets created ahead of the current one.
pub const AHEAD: i64 = 2;

/// Advisory locks: one instance at a time creates partitions, one expires them.
const CREATE_LOCK: i64 = 0x5345_4e44_0002;
const EXPIRE_LOCK: i64 = 0x5345_4e44_0003;

/// Name of the partition holding `bucket`.
pub fn name(bucket: i64) -> String {
    if bucket < 0 {
        format!("idempotency_keys_bm{}", bucket.unsigned_abs())
    } else {
        format!("idempotency_keys_b{bucket}")
    }
}

/// The bucket a partition name holds (`None` for a table that is not one of ours).
fn bucket_of(name: &str) -> Option<i64> {
    let tail = name.strip_prefix("idempotency_keys_b")?;
    match tail.strip_prefix('m') {
        Some(neg) => neg.parse::<i64>().ok().map(|b| -b),
        None => tail.parse().ok(),
    }
}

/// The key table's partitions as (bucket, name), oldest first.
pub async fn list(c: &tokio_postgres::Client) -> Result<Vec<(i64, String)>, DbError> {
    let rows = c
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'idempotency_keys'::regclass",
            &[],
        )
        .await?;
    let mut parts: Vec<(i64, String)> = rows
        .iter()
        .filter_map(|r| {
            let name: String = r.get(0);
            bucket_of(&name).map(|b| (b, name))
        })
        .collect();
    parts.sort();
    Ok(parts)
}

/// Creates the partitions for buckets `from..=to` that do not exist yet.
pub async fn ensure(pool: &Pool, from: i64, to: i64) -> Result<(), DbError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK])
        .await?;
    for bucket in from..=to {
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} PARTITION OF idempotency_keys
                 FOR VALUES FROM ({bucket}) TO ({})",
            name(bucket),
            bucket.saturating_add(1)
        ))
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The partitions the current bucket and the next [`AHEAD`] need.
pub async fn ensure_ahead(pool: &Pool, now_ms: i64, key_window_ms: i64) -> Result<(), DbError> {
    let current = now_ms.div_euclid(bucket_width_ms(key_window_ms));
    let have: Vec<i64> = list(&*pool.get().await?)
        .await?
        .into_iter()
        .map(|(b, _)| b)
        .collect();
    if (current..=current + AHEAD).all(|b| have.contains(&b)) {
        return Ok(());
    }
    ensure(pool, current, current + AHEAD).await
}

/// Drops every partition entirely older than the key window; returns about how many rows
/// they held — the tables' statistics (`reltuples`, kept by ANALYZE and autovacuum), since
/// an exact `COUNT` would read the whole day row by row (a third of the pass at 100,000
/// keys, 0.6 s at 1,000,000: BENCHMARKS.md, figure 9).
///
/// `DETACH ... CONCURRENTLY` first, so the parent table is never locked against the
/// claims and look-ups running meanwhile; then `DROP TABLE` of the detached table. A
/// detach interrupted by a crash is finished (`FINALIZE`) by the next run. One instance
/// at a time (a session advisory lock): another instance's pass waits for this one and
/// then finds nothing left, so a pass that returns has seen every expired day gone.
pub async fn expire(pool: &Pool, now_ms: i64, key_window_ms: i64) -> Result<usize, DbError> {
    let width = bucket_width_ms(key_window_ms);
    // Bucket b holds keys created in [b*w, (b+1)*w); it may go once (b+1)*w <= now - window.
    let first_kept = now_ms.saturating_sub(key_window_ms).div_euclid(width);
    let expired = |parts: &[(i64, String)]| parts.first().is_some_and(|(b, _)| *b < first_kept);
    if !expired(&list(&*pool.get().await?).await?) {
        return Ok(0);
    }
    // A connection of its own, closed afterwards: if this pass is cancelled while it holds
    // the session lock, closing the connection releases the lock (a pooled one would keep it).
    let client = deadpool_postgres::Object::take(pool.get().await?);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&EXPIRE_LOCK])
        .await?;
    let result = drop_older(&client, first_kept).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&EXPIRE_LOCK])
        .await;
    let n = result?;
    unlocked?;
    Ok(n)
}

async fn drop_older(client: &tokio_postgres::Client, first_kept: i64) -> Result<usize, DbError> {
    let mut removed = 0usize;
    let pending: Vec<String> = client
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'idempotency_keys'::regclass AND i.inhdetachpending",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for name in pending {
        client
            .batch_execute(&format!(
                "ALTER TABLE idempotency_keys DETACH PARTITION {name} FINALIZE"
            ))
            .await?;
    }
    for (bucket, name) in list(client).await? {
        if bucket >= first_kept {
            break;
        }
        let rows: i64 = client
            .query_one(
                "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = $1::text::regclass",
                &[&name],
            )
            .await?
            .get(0);
        // Not in a transaction: DETACH CONCURRENTLY must run on its own.
        client
            .batch_execute(&format!(
                "ALTER TABLE idempotency_keys DETACH PARTITION {name} CONCURRENTLY"
            ))
            .await?;
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
            .await?;
        removed += usize::try_from(rows).unwrap_or(0);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in [0, 1, 20_423, -3, i64::MAX] {
            assert_eq!(bucket_of(&name(b)), Some(b));
        }
        assert_eq!(bucket_of("idempotency_keys"), None);
        assert_eq!(bucket_of("idempotency_keys_bx"), None);
    }
}
