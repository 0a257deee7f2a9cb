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

use deadpool_postgres::GenericClient;

use super::{exec, lease, rows};
use crate::lease::Instance;
use crate::store::DbError;

/// The heartbeat's statement.
const BEAT: &str = "INSERT INTO server_instances (instance_id, mono_ms, wall_ms) VALUES ($1, $2, $3)
     ON CONFLICT (instance_id) DO UPDATE SET mono_ms = EXCLUDED.mono_ms, wall_ms = EXCLUDED.wall_ms";

/// Publishes this instance's monotonic time and its wall clock's `wall_ms`.
pub async fn beat<C: GenericClient>(
    client: &C,
    instance: &Instance,
    wall_ms: i64,
) -> Result<(), DbError> {
    exec(
        client,
        BEAT,
        &[&&*instance.id, &instance.mono_ms(), &wall_ms],
    )
    .await?;
    Ok(())
}

/// Beats every [`lease::HEARTBEAT`] until aborted (when the store is dropped), on a
/// connection of its own (`config`), opened again whenever it fails: never from the pool,
/// which requests waiting out locks can pin, so a live instance keeps beating then.
pub async fn run(
    config: tokio_postgres::Config,
    instance: Instance,
    clock: std::sync::Arc<crate::clock::Clock>,
) {
    let mut every = tokio::time::interval(lease::HEARTBEAT);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut session: Option<(tokio_postgres::Client, tokio_postgres::Statement)> = None;
    loop {
        every.tick().await;
        if session.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            session = connect(&config)
                .await
                .inspect_err(|e| tracing::warn!(%e, "heartbeat cannot connect"))
                .ok();
        }
        if let Some((c, beat)) = &session {
            let (mono, wall) = (instance.mono_ms(), clock.now_ms());
            if let Err(e) = c.execute(beat, &[&&*instance.id, &mono, &wall]).await {
                tracing::warn!(%e, "heartbeat failed");
            }
        }
    }
}

/// The heartbeat's own connection and its prepared statement.
async fn connect(
    config: &tokio_postgres::Config,
) -> Result<(tokio_postgres::Client, tokio_postgres::Statement), DbError> {
    let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let beat = client.prepare(BEAT).await?;
    Ok((client, beat))
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

/// The time expiry may go by: the earliest of `now_ms` (this instance's) and every other
/// instance's wall clock as its heartbeat last published it.
///
/// So one instance whose wall clock steps forward cannot drop the day partitions the
/// others still need: the others' clocks hold the cut-off back. The row of an instance
/// that died keeps its last time until the row is removed ([`lease::forget_after`]):
/// expiry waits for it meanwhile (late, never early).
pub async fn agreed_now<C: GenericClient>(
    client: &C,
    instance: &Instance,
    now_ms: i64,
) -> Result<i64, DbError> {
    let row = super::opt(
        client,
        "SELECT MIN(wall_ms) FROM server_instances WHERE instance_id <> $1",
        &[&&*instance.id],
    )
    .await?;
    let others: Option<i64> = row.and_then(|r| r.get(0));
    Ok(others.map_or(now_ms, |o| o.min(now_ms)))
}
