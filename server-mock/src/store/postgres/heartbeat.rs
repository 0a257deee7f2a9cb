//! The `server_instances` table: this instance's heartbeat, every instance's read by the
//! reaper, and the removal of rows of instances long dead (see [`lease`] for the rules).
//!
//! A killed instance never deletes its own row, and every restart is a new instance id, so
//! without removal the table (and each observer's memory) grows by one row per crash
//! forever. Removal is safe across instances: a row is removed only when its heartbeat has
//! not moved for [`lease::forget_after`] by the remover's own clock (by then every
//! observer has judged it dead for many lock timeouts, and a missing row means dead
//! anyway), and only if it still holds the value observed (`AND mono_ms = $2`), so a
//! holder that beat again in between keeps its row. Two removers at once delete it once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use deadpool_postgres::{GenericClient, Pool};

use super::{exec, lease, rows, Instance};
use crate::db::DbError;

/// Publishes this instance's monotonic time.
pub async fn beat(pool: &Pool, instance: &Instance) -> Result<(), DbError> {
    let client = pool.get().await?;
    exec(
        &client,
        "INSERT INTO server_instances (instance_id, mono_ms) VALUES ($1, $2)
         ON CONFLICT (instance_id) DO UPDATE SET mono_ms = EXCLUDED.mono_ms",
        &[&&*instance.id, &instance.mono_ms()],
    )
    .await?;
    Ok(())
}

/// Beats every [`lease::HEARTBEAT`] until aborted (when the store is dropped).
pub async fn run(pool: Pool, instance: Instance) {
    let mut every = tokio::time::interval(lease::HEARTBEAT);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = beat(&pool, &instance).await {
            tracing::warn!(%e, "heartbeat failed");
        }
    }
}

/// Every instance's heartbeat as `observer` (the instance `me`) judges it `now`, after
/// removing the rows silent for [`lease::forget_after`] `lock_timeout`.
pub async fn holders<C: GenericClient>(
    client: &C,
    (observer, me): (&lease::Observer, &str),
    now: Instant,
    lock_timeout: Duration,
) -> Result<HashMap<String, lease::Holder>, DbError> {
    let beats = rows(
        client,
        "SELECT instance_id, mono_ms FROM server_instances",
        &[],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect();
    let holders = observer.observe(beats, now, lease::dead_after(lock_timeout));
    forget_silent(
        client,
        (observer, me),
        now,
        lease::forget_after(lock_timeout),
    )
    .await?;
    Ok(holders)
}

/// Removes the rows `observer` has seen silent for `at_least` at `now`, each only if it
/// still holds the value observed, never its own (`me`: running, so alive); returns how
/// many went.
pub async fn forget_silent<C: GenericClient>(
    client: &C,
    (observer, me): (&lease::Observer, &str),
    now: Instant,
    at_least: Duration,
) -> Result<u64, DbError> {
    let mut removed = 0;
    for (id, mono_ms) in observer.silent_for(now, at_least) {
        if id == me {
            continue;
        }
        let n = exec(
            client,
            "DELETE FROM server_instances WHERE instance_id = $1 AND mono_ms = $2",
            &[&id, &mono_ms],
        )
        .await?;
        if n > 0 {
            tracing::info!(instance = %id, "removed the heartbeat row of a long-dead instance");
        }
        removed += n;
    }
    Ok(removed)
}
