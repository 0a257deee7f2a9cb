//! Figure 6, storage: idempotency-table rows over 7 simulated days at a steady rate with the 48 h
//! window (server clock advanced through the test API), and the cost of expiring one day-bucket
//! against the rows in it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::params;
use sendonce_server::store::sqlite::keys;
use sendonce_server::store::sqlite::Db;

use crate::report::{r3, Report, Row};
use crate::server::{self, User};
use crate::stats::{fmt, summarize};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

async fn key_rows(c: &reqwest::Client, base: &str) -> i64 {
    let s = server::test_api(
        c,
        base,
        reqwest::Method::GET,
        "/v1/test/stats",
        serde_json::Value::Null,
    )
    .await;
    s["idempotency_keys"].as_i64().unwrap_or(-1)
}

/// Part A: rows after each simulated day. Returns rows at the end of day 1..=days.
async fn seven_days(per_hour: usize, days: usize) -> (Vec<i64>, i64, f64) {
    // Row counts do not depend on the storage: an in-memory database keeps this part fast.
    let srv = server::start(":memory:", Duration::ZERO).await;
    let base = srv.base_url();
    let c = server::client();
    let mut senders: Vec<User> = Vec::new();
    for i in 0..8 {
        senders.push(server::create_user(&c, &base, &format!("s{i}"), 1_000_000_000_000_000).await);
    }
    let to = server::create_user(&c, &base, "to", 0).await.user_id;
    let clock = |ms: i64| {
        server::test_api(
            &c,
            &base,
            reqwest::Method::POST,
            "/v1/test/clock",
            serde_json::json!({"advance_ms": ms}),
        )
    };
    // Start one minute after a bucket (UTC day) boundary so day d ends on a boundary.
    let offset = clock(0).await["offset_ms"].as_i64().unwrap_or(0);
    let server_now = now_ms() + offset;
    clock((server_now.div_euclid(DAY_MS) + 1) * DAY_MS - server_now + 60_000).await;
    let senders = Arc::new(senders);
    let mut per_day = Vec::new();
    let mut max_rows = 0;
    let started = Instant::now();
    for hour in 1..=days * 24 {
        // Time passes first, then the hour's claims are stamped by it: the server expires by
        // the newest claim plus monotonic time (a clock step alone expires nothing), so a
        // reap right after a step, before any claim at the new time, would still go by the
        // previous hour and expire each day's bucket an hour late.
        clock(HOUR_MS).await;
        let mut tasks = Vec::new();
        for t in 0..8 {
            let (c, base, senders, to) = (c.clone(), base.clone(), senders.clone(), to.clone());
            tasks.push(tokio::spawn(async move {
                let url = format!("{base}/v1/transfers");
                for i in (t..per_hour).step_by(8) {
                    let u = &senders[i % senders.len()];
                    let key = uuid::Uuid::new_v4().to_string();
                    server::post(
                        &c,
                        &url,
                        &u.token,
                        Some(&key),
                        server::transfer_body(&to, 1),
                    )
                    .await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("load");
        }
        max_rows = max_rows.max(key_rows(&c, &base).await);
        server::test_api(
            &c,
            &base,
            reqwest::Method::POST,
            "/v1/test/reap",
            serde_json::Value::Null,
        )
        .await;
        if hour % 24 == 0 {
            per_day.push(key_rows(&c, &base).await);
        }
    }
    srv.shutdown().await;
    (per_day, max_rows, started.elapsed().as_secs_f64())
}

/// Fills bucket 10 (to expire) and bucket 11 (to keep) with `n` rows each; realistic row sizes.
async fn fill(db: &Db, n: usize, start: usize) {
    db.call(move |c| {
        let tx = c.transaction()?;
        {
            let mut st = tx.prepare(
                "INSERT INTO idempotency_keys (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, \
                 created_at_ms, bucket, response_status, response_body) VALUES (?1, ?2, ?3, 'completed', ?4, ?5, ?5, ?6, 201, ?7)",
            )?;
            let body = vec![b'x'; 300];
            for i in start..start + 2 * n {
                let bucket = if i - start < n { 10 } else { 11 };
                st.execute(params![
                    format!("usr_{:032}", i % 997),
                    uuid::Uuid::new_v4().to_string(),
                    vec![7u8; 32],
                    format!("{:032}", i),
                    bucket * DAY_MS,
                    bucket,
                    body
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    })
    .await
    .expect("fill");
}

/// Part B: one bucket delete per size, and the row-by-row baselines.
async fn expiry_cost(dir: &Path, sizes: &[usize], rounds: usize) -> serde_json::Value {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let mut out = serde_json::Map::new();
    let mut bucket_ms: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    let (mut own_tx_us, mut one_tx_us) = (Vec::new(), Vec::new());
    let window = 2 * DAY_MS;
    let mut file = 0;
    for _ in 0..rounds {
        for (si, &n) in sizes.iter().enumerate() {
            file += 1;
            let db = Db::open(
                tmp.path()
                    .join(format!("k{file}.db"))
                    .to_str()
                    .expect("utf-8"),
                server_mock::schema::create,
            )
            .expect("db");
            fill(&db, n, 0).await;
            // Bucket 10 may go once now - window is in bucket 11.
            let now = 11 * DAY_MS + window + 1;
            let (ms, expired) = db
                .call(move |c| {
                    let t = Instant::now();
                    let n = keys::expire(c, now, window)?;
                    Ok((t.elapsed().as_secs_f64() * 1e3, n))
                })
                .await
                .expect("expire");
            assert_eq!(expired, n, "one bucket expired");
            bucket_ms[si].push(ms);
        }
        // Baselines: the same rows deleted one by one by primary key.
        file += 1;
        let db = Db::open(
            tmp.path()
                .join(format!("r{file}.db"))
                .to_str()
                .expect("utf-8"),
            server_mock::schema::create,
        )
        .expect("db");
        fill(&db, 5_000, 0).await;
        let (own, one) = db
            .call(|c| {
                let keys: Vec<(String, String)> = c
                    .prepare("SELECT user_id, idem_key FROM idempotency_keys WHERE bucket = 10")?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let del = "DELETE FROM idempotency_keys WHERE user_id = ?1 AND idem_key = ?2";
                let t = Instant::now();
                for (u, k) in &keys[..100] {
                    c.execute(del, params![u, k])?; // autocommit: one transaction (and fsync) per row
                }
                let own = t.elapsed().as_secs_f64() * 1e6 / 100.0;
                let t = Instant::now();
                let tx = c.transaction()?;
                for (u, k) in &keys[100..] {
                    tx.execute(del, params![u, k])?;
                }
                tx.commit()?;
                let one = t.elapsed().as_secs_f64() * 1e6 / (keys.len() - 100) as f64;
                Ok((own, one))
            })
            .await
            .expect("row by row");
        own_tx_us.push(own);
        one_tx_us.push(one);
    }
    for (si, &n) in sizes.iter().enumerate() {
        let s = summarize(&bucket_ms[si]);
        out.insert(
            format!("bucket_{n}_rows"),
            serde_json::json!({"ms_p50": r3(s.p50), "ms_max": r3(s.max), "us_per_row": r3(s.p50 * 1e3 / n as f64)}),
        );
    }
    out.insert(
        "row_by_row_own_tx_us_per_row".into(),
        r3(summarize(&own_tx_us).p50),
    );
    out.insert(
        "row_by_row_one_tx_us_per_row".into(),
        r3(summarize(&one_tx_us).p50),
    );
    out.into()
}

/// Runs figure 6; `dir` holds the expiry-cost databases (real file system).
pub async fn run(report: &mut Report, dir: &Path, per_hour: usize) {
    let (per_day, max_rows, secs) = seven_days(per_hour, 7).await;
    let day = |d: usize| per_day.get(d - 1).copied().unwrap_or(-1);
    // From day 3 on each day's end holds the window (2 days of keys) and the new day's first
    // hour, whose claims moved expiry onto the new day.
    let steady = per_hour as i64 * (48 + 1);
    let flat = per_day.iter().skip(2).all(|&r| r == steady);
    report.rows.push(
        Row::new("6", "idempotency-key rows at the end of day 1…7")
            .subject(format!("{per_day:?}; max within a day {max_rows}"))
            .baseline(format!(
                "{} keys/day (48 h window ⇒ 2 days kept, + the new day's first hour: {steady})",
                per_hour * 24
            ))
            .ratio(format!(
                "day7/day3 = {}",
                fmt(day(7) as f64 / day(3) as f64)
            ))
            .target(format!("flat after day 2, at {steady}"), flat),
    );
    report.key("key_table_rows_day2", day(2));
    report.key("key_table_rows_day7", day(7));
    let sizes = [1_000usize, 10_000, 100_000];
    let cost = expiry_cost(dir, &sizes, 3).await;
    let us = |n: usize| {
        cost[format!("bucket_{n}_rows")]["us_per_row"]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    let ms = |n: usize| {
        cost[format!("bucket_{n}_rows")]["ms_p50"]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    report.rows.push(
        Row::new(
            "6",
            "expire one day-bucket: ms (µs/row) at 1k / 10k / 100k rows",
        )
        .subject(format!(
            "{} ({}) / {} ({}) / {} ({})",
            fmt(ms(1_000)),
            fmt(us(1_000)),
            fmt(ms(10_000)),
            fmt(us(10_000)),
            fmt(ms(100_000)),
            fmt(us(100_000))
        ))
        .baseline(format!(
            "row by row: {} µs/row (own tx each), {} µs/row (one tx)",
            fmt(cost["row_by_row_own_tx_us_per_row"]
                .as_f64()
                .unwrap_or(f64::NAN)),
            fmt(cost["row_by_row_one_tx_us_per_row"]
                .as_f64()
                .unwrap_or(f64::NAN))
        ))
        .ratio(format!(
            "100k/1k per-row cost = {}",
            fmt(us(100_000) / us(1_000))
        )),
    );
    report.key(
        "key_table",
        serde_json::json!({"rows_per_day_end": per_day, "max_rows_within_day": max_rows,
            "keys_per_day": per_hour * 24, "simulated_days_real_seconds": r3(secs), "expiry_cost": cost}),
    );
    report.note(
        "6 storage",
        format!(
            "Part 1: server-mock with the default 48 h key window and an in-memory database (row counts do not \
             depend on the storage), clock aligned one minute past a UTC day (bucket) boundary, then for 7 × 24 \
             simulated hours: `POST /v1/test/clock {{\"advance_ms\": 3600000}}`, {per_hour} first requests (stamped \
             by the new hour: expiry goes by the newest claim plus monotonic time, so a clock step alone expires \
             nothing), `POST /v1/test/reap`; `GET /v1/test/stats` gives the rows. Part 2: the server's own schema and \
             connection (`sendonce_server::store::sqlite::Db`, WAL + synchronous=FULL) on a file in `{}`; bucket 10 and bucket 11 \
             filled with N rows each (300-byte stored responses), then `keys::expire` of sendonce-server (one `DELETE … WHERE \
             bucket < ?`) timed; 3 rounds per size. Baselines, same rounds: deleting rows one by one by primary key, \
             each in its own transaction (100 rows), and all in one transaction (4,900 rows). The expiry runs on the \
             single writer connection, so its duration is also how long every transfer commit waits behind it.",
            dir.display()
        ),
    );
}
