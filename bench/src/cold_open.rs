//! Figure 8, cold start: `Sdk::open` on the file a year of use leaves (10,000 unfinished and
//! 100,000 finished transfers) vs a raw SQLite open plus one indexed scan of the unfinished rows,
//! each in a fresh child process; and the SDK's resident memory on that file after a year of use
//! with the default retention (finished transfers pruned after 30 days).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection};

use crate::memory::{rss_kib, sqlite_heap_kib};
use crate::report::{r3, Report, Row};
use crate::stats::{fmt, spread, summarize};

const DAY_MS: i64 = 86_400_000;
/// States the sender still works on, as in the SDK's store.
const UNFINISHED: &str = "('pending','sending','retrying','auth_required','needs_attention')";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn config(db: &Path, retention_days: u64) -> sendonce::SdkConfig {
    sendonce::SdkConfig::builder("http://127.0.0.1:9", db)
        .network_profile(sendonce::NetworkProfile::Offline)
        .retention(Duration::from_secs(retention_days * 86_400))
        .build()
        .expect("config")
}

/// Writes the year: the SDK makes the file (schema, identity), then one raw transaction fills it.
/// Finished transfers ended evenly over the last 365 days; unfinished ones wait for a retry due
/// `due_in_ms` from now (within the retry cap, so none is due at open), or with a negative
/// `due_in_ms` are pending and due now.
pub fn make_year(db: &Path, unfinished: usize, finished: usize, due_in_ms: i64) {
    sendonce::Sdk::open(config(db, 400))
        .expect("sdk makes the file")
        .close();
    let mut conn = Connection::open(db).expect("open fixture");
    let tx = conn.transaction().expect("tx");
    let now = now_ms();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO transfers (local_id, idem_key, to_user_id, amount_minor, currency, note, body, state, \
                 attempts, created_at_ms, updated_at_ms, last_attempt_at_ms, next_attempt_at_ms, last_error, \
                 server_transfer_id, reject_code, reject_detail, reject_status, response_body, elapsed_ms) \
                 VALUES (?1,?2,?3,?4,'BDT','rent',?5,?6,?7,?8,?9,?9,?10,?11,?12,?13,?14,?15,?16,?17)",
            )
            .expect("prepare");
        for i in 0..finished + unfinished {
            let done = i < finished;
            let ended = now - 365 * DAY_MS + (i as i64) * (365 * DAY_MS / finished.max(1) as i64);
            let (state, created, next, error) = if done {
                let state = match i % 100 {
                    0..=89 => "succeeded",
                    90..=96 => "rejected",
                    _ => "failed",
                };
                (state, ended - 4_000, None, None)
            } else if due_in_ms >= 0 {
                (
                    "retrying",
                    now - DAY_MS,
                    Some(now + due_in_ms + (i % 20_000) as i64),
                    Some("offline"),
                )
            } else {
                // Never attempted yet (as figure 7's fresh confirmations): the first attempt is not budgeted.
                ("pending", now - 60_000, Some(now), None)
            };
            let to = format!("usr_{:08}", i % 5_000);
            let body = format!(
                "{{\"to_user_id\":\"{to}\",\"amount_minor\":{},\"currency\":\"BDT\",\"note\":\"rent\"}}",
                1 + i
            );
            let succeeded = state == "succeeded";
            let rejected = state == "rejected";
            insert
                .execute(params![
                    uuid::Uuid::now_v7().to_string(),
                    uuid::Uuid::new_v4().to_string(),
                    to,
                    1 + i as i64,
                    body.into_bytes(),
                    state,
                    if done {
                        1
                    } else if due_in_ms >= 0 {
                        3
                    } else {
                        0
                    },
                    created,
                    if done { ended } else { now - 60_000 },
                    next,
                    error,
                    succeeded.then(|| format!("trf_{i:012}")),
                    rejected.then_some("insufficient_funds"),
                    rejected.then_some("balance too low"),
                    rejected.then_some(422),
                    succeeded.then(|| vec![b'x'; 240]),
                    if done { 1_200 } else { 60_000 },
                ])
                .expect("insert");
        }
    }
    tx.commit().expect("commit");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("checkpoint");
}

/// Child (`sendonce-bench child cold-open sdk|raw DB`): one open, timed inside the process, with its
/// memory after; printed as JSON.
pub fn child(side: &str, db: &Path) {
    let (before, _) = rss_kib("self");
    let start = Instant::now();
    let out = if side == "raw" {
        let rows = raw_open_and_scan(db);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let (rss, hwm) = rss_kib("self");
        serde_json::json!({"ms": ms, "rows": rows, "before_kib": before, "rss_kib": rss, "hwm_kib": hwm})
    } else {
        let sdk = sendonce::Sdk::open(config(db, 400)).expect("sdk opens");
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let (rss, hwm) = rss_kib("self");
        // The sender has started; nothing is due yet, so a moment later shows what open left behind.
        std::thread::sleep(Duration::from_millis(200));
        let (settled, _) = rss_kib("self");
        sdk.close();
        serde_json::json!({"ms": ms, "before_kib": before, "rss_kib": rss, "hwm_kib": hwm, "settled_kib": settled})
    };
    println!("{out}");
}

/// The baseline: what any app must do at least to know its unfinished transfers.
fn raw_open_and_scan(db: &Path) -> u64 {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(&format!(
            "SELECT local_id, next_attempt_at_ms FROM transfers WHERE state IN {UNFINISHED}"
        ))
        .expect("prepare");
    let mut rows = stmt.query([]).expect("scan");
    let mut n = 0u64;
    while let Some(row) = rows.next().expect("row") {
        let _id: String = row.get(0).expect("id");
        let _at: Option<i64> = row.get(1).expect("at");
        n += 1;
    }
    n
}

/// Child (`sendonce-bench child year-rss DB`): opens the year's file with the default retention
/// (offline profile, every unfinished transfer due), waits until pruning is done and each
/// unfinished transfer has met the offline network once, and prints its memory.
pub fn child_year(db: &Path, unfinished: usize) {
    let (before, _) = rss_kib("self");
    let started = Instant::now();
    let sdk = sendonce::Sdk::open(config(db, 30)).expect("sdk opens");
    // One probe connection with a page cache of 16 pages, so the figure counts the SDK's memory.
    let probe = Connection::open(db).expect("probe");
    probe
        .execute_batch("PRAGMA cache_size=16;")
        .expect("probe cache");
    let old = || -> i64 {
        probe.query_row(
            "SELECT count(*) FROM transfers WHERE state IN ('succeeded','rejected','failed') AND updated_at_ms < ?1",
            // The SDK prunes hourly: a row that turned 30 days old since the last prune may stay an hour.
            [now_ms() - 30 * DAY_MS - 3_600_000],
            |r| r.get(0),
        )
        .unwrap_or(-1)
    };
    while (old() > 0 || (sdk.network_stats().requests as usize) < unfinished)
        && started.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (steady, hwm) = rss_kib("self");
    let sqlite_kib = sqlite_heap_kib();
    let left: i64 = probe
        .query_row("SELECT count(*) FROM transfers", [], |r| r.get(0))
        .unwrap_or(-1);
    let listed = sdk.unfinished_transfers().map(|v| v.len()).unwrap_or(0);
    let (after_list, _) = rss_kib("self");
    println!(
        "{}",
        serde_json::json!({"before_open_kib": before, "steady_kib": steady, "hwm_kib": hwm, "after_list_kib": after_list, "sqlite_heap_kib": sqlite_kib,
            "rows_left": left, "old_finished_left": old(), "listed": listed,
            "attempted": sdk.network_stats().requests, "seconds": started.elapsed().as_secs_f64()})
    );
    sdk.close();
}

fn spawn_child(args: &[&str]) -> serde_json::Value {
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(exe)
        .arg("child")
        .args(args)
        .output()
        .expect("child");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        eprintln!(
            "sendonce-bench: child {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::Value::Null
    })
}

fn kib_to_mib(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(0.0) / 1024.0
}

/// Runs figure 8 in `dir` (the open) and `fast_dir` (the year of memory, like figure 7).
/// `sdk_10k_mib`: figure 7's same-run RSS with 10,000 unfinished transfers, if it ran.
pub fn run(
    report: &mut Report,
    dir: &Path,
    fast_dir: &Path,
    unfinished: usize,
    finished: usize,
    rounds: usize,
) {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let db = tmp.path().join("year.db");
    let built = Instant::now();
    make_year(&db, unfinished, finished, 30_000);
    let build_s = built.elapsed().as_secs_f64();
    let file_mib = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0) as f64 / 1048576.0;
    let db_s = db.to_str().expect("utf-8");
    // Warm the page cache once per side: "cold" is a new process, not an empty page cache (which
    // cannot be emptied without disturbing every other process on the machine).
    spawn_child(&["cold-open", "raw", db_s]);
    spawn_child(&["cold-open", "sdk", db_s]);
    let (mut sdk, mut raw, mut ratios, mut rss) = (vec![], vec![], vec![], vec![]);
    let mut settled = vec![];
    let mut raw_rows = 0;
    for round in 0..rounds {
        let one = |side: &str| spawn_child(&["cold-open", side, db_s]);
        let (s, r) = if round % 2 == 0 {
            let s = one("sdk");
            (s, one("raw"))
        } else {
            let r = one("raw");
            (one("sdk"), r)
        };
        let (sm, rm) = (
            s["ms"].as_f64().unwrap_or(f64::NAN),
            r["ms"].as_f64().unwrap_or(f64::NAN),
        );
        raw_rows = r["rows"].as_u64().unwrap_or(0);
        sdk.push(sm);
        raw.push(rm);
        ratios.push(sm / rm);
        rss.push(kib_to_mib(&s, "rss_kib"));
        settled.push(kib_to_mib(&s, "settled_kib"));
    }
    let (ss, rs, rr, rssm, settledm) = (
        summarize(&sdk),
        summarize(&raw),
        summarize(&ratios),
        summarize(&rss),
        summarize(&settled),
    );
    let ratio = ss.p50 / rs.p50;
    report.rows.push(
        Row::new("8", "cold start: Sdk::open on a year's file, ms")
            .subject(format!(
                "{} (p10–p90 {}–{})",
                fmt(ss.p50),
                fmt(ss.p10),
                fmt(ss.p90)
            ))
            .baseline(format!(
                "{} raw open + indexed scan of the {raw_rows} unfinished rows (p10–p90 {}–{})",
                fmt(rs.p50),
                fmt(rs.p10),
                fmt(rs.p90)
            ))
            .ratio(format!("{} · per round {}", fmt(ratio), spread(&rr)))
            .target("≤ 2", ratio <= 2.0),
    );
    report.rows.push(
        Row::new("8", "cold start: RSS after Sdk::open (MiB)")
            .subject(format!(
                "{} (max {}); 200 ms later {}",
                fmt(rssm.p50),
                fmt(rssm.max),
                fmt(settledm.p50)
            ))
            .baseline(format!("file {} MiB", fmt(file_mib)))
            .target("≤ 20 MiB", rssm.max <= 20.0),
    );
    // A year of use with the default retention, in a copy on tmpfs (like figure 7).
    let fast = tempfile::tempdir_in(fast_dir).expect("tempdir");
    let year_db = fast.path().join("year.db");
    make_year(&year_db, unfinished, finished, -1);
    let year = spawn_child(&[
        "year-rss",
        year_db.to_str().expect("utf-8"),
        &unfinished.to_string(),
    ]);
    let year_mib = kib_to_mib(&year, "steady_kib");
    let fig7 = report
        .json
        .get("sdk_rss_mib_10k_pending")
        .and_then(|v| v.as_f64());
    let mut row = Row::new(
        "8",
        format!("SDK RSS after a year of use, retention 30 days, {unfinished} unfinished (MiB)"),
    )
    .subject(format!(
        "{} ({} rows left of {}, {} old finished left; after listing the unfinished {})",
        fmt(year_mib),
        year["rows_left"],
        finished + unfinished,
        year["old_finished_left"],
        fmt(kib_to_mib(&year, "after_list_kib"))
    ));
    if let Some(f7) = fig7.filter(|_| unfinished == 10_000) {
        row = row
            .baseline(format!(
                "{} figure 7 (10,000 unfinished, no history)",
                fmt(f7)
            ))
            .ratio(fmt(year_mib / f7))
            .target("≤ 1.25× figure 7", year_mib <= 1.25 * f7);
    }
    report.rows.push(row);
    report.key("cold_open_ratio", r3(ratio));
    report.key("cold_open_rss_mib", r3(rssm.max));
    report.key("sdk_rss_mib_year_of_use", r3(year_mib));
    report.key(
        "cold_open",
        serde_json::json!({
            "sdk_ms": {"p10": r3(ss.p10), "p50": r3(ss.p50), "p90": r3(ss.p90), "n": ss.n},
            "raw_ms": {"p10": r3(rs.p10), "p50": r3(rs.p50), "p90": r3(rs.p90), "n": rs.n},
            "per_round_ratio": {"p10": r3(rr.p10), "p50": r3(rr.p50), "p90": r3(rr.p90)},
            "rss_after_open_mib": {"p50": r3(rssm.p50), "max": r3(rssm.max)},
            "rss_settled_mib_p50": r3(settledm.p50),
            "unfinished": unfinished, "finished": finished, "file_mib": r3(file_mib),
            "fixture_seconds": r3(build_s), "year_of_use": year,
        }),
    );
    report.note(
        "8 cold start",
        format!(
            "A file as a year of use leaves it: the SDK creates it (schema and identity), then one raw transaction adds \
             {finished} finished transfers (90 % succeeded with a 240-byte stored answer, 7 % rejected, 3 % failed) ended \
             evenly over the last 365 days and {unfinished} `retrying` ones due 30–50 s from now (inside the retry cap, so \
             the sender has nothing due at open); WAL checkpointed and truncated ({} MiB, in `{}`). {rounds} rounds, each a \
             fresh child process per side, order alternating; the time is taken inside the child around the open alone. \
             SDK: `Sdk::open` with a retention of 400 days (nothing to prune: the case \"nothing was pruned\"), HTTP \
             transport and runtime included. Baseline: `rusqlite::Connection::open` plus `SELECT local_id, \
             next_attempt_at_ms FROM transfers WHERE state IN (unfinished)` read to the end (the `transfers_due` index, \
             then the row). The page cache is warm (one untimed open per side first): a cold page cache cannot be had \
             without dropping every other process's cache on a shared machine. RSS: `VmRSS` of the child right after \
             `open` returns. Year of use: the same kind of file on `{}` with every unfinished transfer due, opened with \
             the default retention (30 days) under the offline profile; the child waits (polling through one connection with a 16-page cache) until no finished transfer older \
             than 30 days is left and every unfinished one met the offline network once, then reads `VmRSS` (as figure \
             7 does after its 10,000 confirmations).",
            fmt(file_mib),
            dir.display(),
            fast_dir.display()
        ),
    );
}
