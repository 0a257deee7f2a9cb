//! Figure 9 (c): expiring a day of keys by partition drop vs `DELETE`, with the p99 of
//! transfers running meanwhile against the p99 without either.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sendonce_server::store::postgres::partitions;
use serde_json::json;
use server_mock::store::postgres;

use super::{closed_loop, connect, fresh_db, sql, start, timed_load, users, Kind};
use crate::report::{r3, Report, Row};
use crate::server::User;
use crate::stats::summarize;

const DAY_MS: i64 = 86_400_000;
/// The server's key window in this figure.
const WINDOW_MS: i64 = 30 * DAY_MS;

/// Fills the partition of `bucket` with `rows` completed keys (server-side generate_series).
async fn fill(db: &str, bucket: i64, rows: i64) {
    let name = partitions::name(bucket);
    sql(
        db,
        &format!(
            "CREATE TABLE IF NOT EXISTS {name} PARTITION OF idempotency_keys
                 FOR VALUES FROM ({bucket}) TO ({});
             INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id,
                 locked_at_ms, created_at_ms, bucket, response_status, response_body)
             SELECT 'usr_' || (i % 5000), gen_random_uuid()::text, sha256(i::text::bytea),
                    'completed', md5(i::text), {ms}, {ms}, {bucket}, 201,
                    convert_to(repeat('x', 300), 'UTF8')
             FROM generate_series(1, {rows}) AS i;
             ANALYZE {name};",
            bucket + 1,
            ms = bucket * DAY_MS,
        ),
    )
    .await;
}

/// Runs `op` while 16 transfers are in flight; returns (op seconds, p99 ms during it).
async fn during<F: std::future::Future<Output = ()>>(
    base: &str,
    senders: &Arc<Vec<User>>,
    to: &str,
    op: F,
) -> (f64, f64, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(closed_loop(
        Arc::new(vec![base.to_string()]),
        senders.clone(),
        to.to_string(),
        Kind::First,
        16,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    op.await;
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let load = load.await.expect("load");
    if !load.not_201.is_empty() {
        eprintln!(
            "figure 9 expiry: answers other than 201 by status: {:?}",
            load.not_201
        );
    }
    (secs, summarize(&load.ms).p99, load.errors)
}

pub(super) async fn drop_vs_delete(report: &mut Report, url: &str, sizes: &[i64]) {
    let db = fresh_db(url).await;
    // A 30-day window: the filled day (10 days old) is inside it for the server.
    let server = start(&db, Duration::from_millis(WINDOW_MS as u64)).await;
    let pool = postgres::pool(&db, 2).expect("pool");
    let base = server.base_url();
    let (senders, to) = users(&base).await;
    let now_bucket = sendonce_server::clock::Clock::default()
        .now_ms()
        .div_euclid(DAY_MS);
    let idle = timed_load(
        None,
        std::slice::from_ref(&base),
        &senders,
        &to,
        Kind::First,
        16,
        2.0,
    )
    .await;
    let idle_p99 = summarize(&idle.ms).p99;
    let mut details = serde_json::Map::new();
    let mut last_ratio = f64::NAN;
    for &rows in sizes {
        // DELETE: the row-by-row way, one statement over the whole day.
        let old = now_bucket - 10;
        fill(&db, old, rows).await;
        let conn = connect(&db).await;
        let (delete_s, delete_p99, delete_err) = during(&base, &senders, &to, async {
            conn.execute("DELETE FROM idempotency_keys WHERE bucket = $1", &[&old])
                .await
                .expect("delete");
        })
        .await;
        sql(&db, &format!("DROP TABLE {}", partitions::name(old))).await;
        // Partition drop: the server's own expiry step (`partitions::expire`, what the
        // reaper runs), on the same day under the same load and clock as the DELETE, with
        // "now" just past that day's window, so it is the one partition to go. (An earlier
        // driver moved the server clock 21 days and timed a whole reaper pass through the
        // test API instead: only this side then paid the HTTP calls, the clock's wake-up and
        // the pass's other steps, most of the time at 100,000 keys.)
        fill(&db, old, rows).await;
        let expire_now = (old + 1) * DAY_MS + WINDOW_MS;
        let (drop_s, drop_p99, drop_err) = during(&base, &senders, &to, async {
            partitions::expire(&pool, expire_now, WINDOW_MS)
                .await
                .expect("expire");
        })
        .await;
        let left = connect(&db)
            .await
            .query_one(
                "SELECT COUNT(*) FROM pg_class WHERE relname = $1",
                &[&partitions::name(old)],
            )
            .await
            .expect("count")
            .get::<_, i64>(0);
        assert_eq!(left, 0, "the expiry pass dropped the day");
        last_ratio = drop_s / delete_s;
        details.insert(
            format!("rows_{rows}"),
            json!({
                "delete_s": r3(delete_s), "drop_s": r3(drop_s), "drop_over_delete": r3(last_ratio),
                "p99_ms_idle": r3(idle_p99), "p99_ms_during_delete": r3(delete_p99),
                "p99_ms_during_drop": r3(drop_p99), "errors_during_delete": delete_err,
                "errors_during_drop": drop_err,
            }),
        );
        report.rows.push(
            Row::new(
                "9",
                format!("PostgreSQL: expire a day of {rows} keys, partition drop vs DELETE (s)"),
            )
            .subject(format!("{drop_s:.3} s (p99 {drop_p99:.1} ms)"))
            .baseline(format!(
                "{delete_s:.3} s (p99 {delete_p99:.1} ms; idle p99 {idle_p99:.1} ms)"
            ))
            .ratio(format!("{last_ratio:.3}"))
            .target("< 1", last_ratio < 1.0),
        );
    }
    report.key("pg_partition_drop_over_delete_ratio", r3(last_ratio));
    report.key("pg_partition_expiry", serde_json::Value::Object(details));
    report.note(
        "9 expiry",
        "One server-mock in process on a fresh database of the `scripts/pg` cluster (fsync on, \
         synchronous_commit on), 30-day key window. A day 10 days old is filled server-side with N \
         completed keys (300-byte bodies); then either `DELETE FROM idempotency_keys WHERE bucket = day` \
         runs, or, on the day filled again, the server's expiry step (`partitions::expire`, as the reaper \
         runs it, with now just past that day's window: the partition's row estimate for the report, \
         `DETACH … CONCURRENTLY`, `DROP TABLE`), both from the bench process, each \
         while 16 first requests stay in flight; p99 is of those transfers' latencies over the whole \
         load (the few hundred ms before the operation included). The ratio key is the largest N.",
    );
    server.shutdown().await;
}
