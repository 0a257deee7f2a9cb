//! Day partitions of the key table: created ahead, expired by detaching and dropping a
//! whole partition (never a row-by-row DELETE), safe when every instance's reaper runs it.
//!
//! Neither step may stall the instances behind one long transaction on the key table (a
//! `pg_dump`, an idle-in-transaction `SELECT`, a frozen instance). `CREATE TABLE …
//! PARTITION OF` needs ACCESS EXCLUSIVE on the parent, and every claim and look-up queues
//! behind a waiting request for it: so partitions are made a week ahead, each creation
//! waits at most `DDL_LOCK_WAIT` and, when it cannot get the lock, is tried again after
//! [`CREATE_RETRY`] — days of retries before a claim needs the partition. The instance-wide
//! advisory locks are only ever *tried*: a pass that finds one taken leaves the work to its
//! holder and looks again next pass, so no reaper waits behind another instance's DETACH.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use super::is_transient;
use crate::expiry::bucket_width_ms;
use crate::store::DbError;

/// Buckets created ahead of the current one (a week of day buckets).
pub const AHEAD: i64 = 7;

/// How long a partition's creation waits for its lock on the key table: every statement
/// on the table queues behind the waiting DDL for that long, at most.
const DDL_LOCK_WAIT: &str = "SET LOCAL lock_timeout = '200ms'";

/// How long after a creation that could not get its lock the next one is tried (while the
/// current bucket and the next one exist: a claim needs nothing yet).
pub const CREATE_RETRY: Duration = Duration::from_secs(60);

/// Advisory locks: one instance at a time creates partitions, one expires them.
const CREATE_LOCK: i64 = 0x5345_4e44_0002;
/// The expiry's advisory lock (public so a test can hold it as another instance would).
pub const EXPIRE_LOCK: i64 = 0x5345_4e44_0003;

/// When a creation that gave up may be tried again (one per store).
#[derive(Debug, Default)]
pub struct Retry(Mutex<Option<Instant>>);

impl Retry {
    fn due(&self) -> bool {
        let next = self.0.lock().unwrap_or_else(|p| p.into_inner());
        next.is_none_or(|at| Instant::now() >= at)
    }

    fn later(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + CREATE_RETRY);
    }
}

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

/// Creates the partitions for buckets `from..=to` that do not exist yet, nearest first,
/// each in its own short transaction that waits at most `DDL_LOCK_WAIT` for its lock on
/// the key table (then fails with a transient error, see [`is_transient`]). A claim that
/// needs the partition now waits for another instance creating partitions (at most the
/// session's lock timeout): it would only fail its insert again without it.
pub async fn ensure(pool: &Pool, from: i64, to: i64) -> Result<(), DbError> {
    create(pool, from, to, Creator::Wait).await
}

/// Whether [`create`] waits for another instance's creation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Creator {
    /// Wait for it (a claim needs the partition now).
    Wait,
    /// Leave the work to it (the reaper's look ahead).
    Skip,
}

async fn create(pool: &Pool, from: i64, to: i64, creator: Creator) -> Result<(), DbError> {
    let mut client = pool.get().await?;
    let have: Vec<i64> = list(&client).await?.into_iter().map(|(b, _)| b).collect();
    for bucket in (from..=to).filter(|b| !have.contains(b)) {
        let tx = client.transaction().await?;
        if creator == Creator::Wait {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK])
                .await?;
        } else {
            let ours: bool = tx
                .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&CREATE_LOCK])
                .await?
                .get(0);
            if !ours {
                return Ok(());
            }
        }
        tx.batch_execute(DDL_LOCK_WAIT).await?;
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} PARTITION OF idempotency_keys
                 FOR VALUES FROM ({bucket}) TO ({})",
            name(bucket),
            bucket.saturating_add(1)
        ))
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The partitions the current bucket and the next [`AHEAD`] need. A creation that could
/// not get its lock is logged and tried again after [`CREATE_RETRY`] (at once if the next
/// bucket is missing); the pass goes on either way.
pub async fn ensure_ahead(
    pool: &Pool,
    now_ms: i64,
    key_window_ms: i64,
    retry: &Retry,
) -> Result<(), DbError> {
    let current = now_ms.div_euclid(bucket_width_ms(key_window_ms));
    let have: Vec<i64> = list(&*pool.get().await?)
        .await?
        .into_iter()
        .map(|(b, _)| b)
        .collect();
    let missing = |b: &i64| !have.contains(b);
    if !(current..=current + AHEAD).any(|b| missing(&b)) {
        return Ok(());
    }
    let urgent = (current..=current + 1).any(|b| missing(&b));
    if !urgent && !retry.due() {
        return Ok(());
    }
    match create(pool, current, current + AHEAD, Creator::Skip).await {
        Err(DbError::Postgres(e)) if is_transient(&e) => {
            tracing::warn!(%e, "partitions ahead not created this pass (the key table is locked); trying again later");
            retry.later();
            Ok(())
        }
        other => other,
    }
}

/// Drops every partition entirely older than the key window; returns about how many rows
/// they held — the tables' statistics (`reltuples`, kept by ANALYZE and autovacuum), since
/// an exact `COUNT` would read the whole day row by row (a third of the pass at 100,000
/// keys, 0.6 s at 1,000,000: BENCHMARKS.md, figure 9).
///
/// `DETACH ... CONCURRENTLY` first, so the parent table is never locked against the
/// claims and look-ups running meanwhile; then `DROP TABLE` of the detached table. A
/// detach interrupted (a crash, or its wait for older transactions cut by the session's
/// lock or statement timeout) is finished (`FINALIZE`) by a later run, and a detached
/// table whose drop gave up is dropped by a later run. One instance at a time: the session
/// advisory lock is only tried, so while one instance expires (its DETACH perhaps waiting
/// for a long transaction) the others' passes skip expiry and go on; a pass may therefore
/// return before every expired day is gone, and a later pass finishes it.
pub async fn expire(pool: &Pool, now_ms: i64, key_window_ms: i64) -> Result<usize, DbError> {
    let width = bucket_width_ms(key_window_ms);
    // Bucket b holds keys created in [b*w, (b+1)*w); it may go once (b+1)*w <= now - window.
    let first_kept = now_ms.saturating_sub(key_window_ms).div_euclid(width);
    let client = pool.get().await?;
    let expired = list(&client)
        .await?
        .first()
        .is_some_and(|(b, _)| *b < first_kept)
        || !detached_leftovers(&client, first_kept).await?.is_empty();
    if !expired {
        return Ok(0);
    }
    // A connection of its own, closed afterwards: if this pass is cancelled while it holds
    // the session lock, closing the connection releases the lock (a pooled one would keep it).
    let client = deadpool_postgres::Object::take(client);
    let ours: bool = client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&EXPIRE_LOCK])
        .await?
        .get(0);
    if !ours {
        tracing::debug!("another instance is expiring key partitions; skipping this pass");
        return Ok(0);
    }
    let result = drop_older(&client, first_kept).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&EXPIRE_LOCK])
        .await;
    let n = result?;
    unlocked?;
    Ok(n)
}

/// Tables of expired buckets that were detached but not dropped (the drop gave up).
async fn detached_leftovers(
    client: &tokio_postgres::Client,
    first_kept: i64,
) -> Result<Vec<String>, DbError> {
    let rows = client
        .query(
            "SELECT relname::text FROM pg_class
             WHERE relkind = 'r' AND NOT relispartition
               AND relname LIKE 'idempotency\\_keys\\_b%'
               AND relnamespace =
                   (SELECT relnamespace FROM pg_class WHERE oid = 'idempotency_keys'::regclass)",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|n| bucket_of(n).is_some_and(|b| b < first_kept))
        .collect())
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
    for name in detached_leftovers(client, first_kept).await? {
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
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
