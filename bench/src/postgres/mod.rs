//! Figure 9: server-mock on PostgreSQL (a throwaway cluster from `scripts/pg start`).
//!
//! (a) first request vs the plain-insert baseline at 16 and 64 in flight, one instance;
//! (b) requests/s with 1, 2 and 3 instances on one database at 64 in flight;
//! (c) expiring a day of 100,000 (and 1,000,000) keys by partition drop vs `DELETE`,
//!     with the p99 of transfers running meanwhile against the p99 without either.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use server_mock::{RunningServer, ServerConfig};

mod expiry;

use crate::report::{r3, Report, Row};
use crate::server::{client, post, test_api, transfer_body, User};
use crate::stats::{spread, summarize};

/// (busy, total) jiffies of all CPUs so far, from /proc/stat (Linux).
fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle + iowait are fields 4 and 5.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// CPU jiffies so far of this process (server-mock and the load generator) and of every
/// `postgres` process (the backends, WAL writer, checkpointer), from /proc (Linux).
fn process_jiffies() -> (u64, u64) {
    let of = |stat: &str| -> Option<(String, u64)> {
        let (head, rest) = stat.rsplit_once(") ")?;
        let comm = head.split_once(" (")?.1.to_string();
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime: fields 14 and 15 of stat, 12 and 13 after the comm.
        Some((
            comm,
            f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        ))
    };
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| of(&s))
        .map_or(0, |(_, j)| j);
    let mut pg = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) {
            if let Some((comm, j)) = of(&stat) {
                if comm == "postgres" {
                    pg += j;
                }
            }
        }
    }
    (own, pg)
}

/// Where the machine's busy CPU went during a load: this process, PostgreSQL, the rest.
#[derive(Clone, Copy, Default)]
struct CpuSplit {
    own: f64,
    postgres: f64,
    other: f64,
}

impl CpuSplit {
    fn between(before: ((u64, u64), (u64, u64)), after: ((u64, u64), (u64, u64))) -> Self {
        let busy = (after.0 .0 - before.0 .0).max(1) as f64;
        let own = after.1 .0.saturating_sub(before.1 .0) as f64 / busy;
        let postgres = after.1 .1.saturating_sub(before.1 .1) as f64 / busy;
        Self {
            own,
            postgres,
            other: (1.0 - own - postgres).max(0.0),
        }
    }
}

/// What a closed-loop load saw.
struct Load {
    rps: f64,
    ms: Vec<f64>,
    errors: usize,
    /// The answers that were not 201, by status (0: no answer).
    not_201: std::collections::BTreeMap<u16, usize>,
    /// Shares of the machine's busy CPU during the load.
    cpu: CpuSplit,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    First,
    /// The contract's minimum writes for a first request (`/v1/bench/floor`).
    Floor,
    Plain,
}

/// The cluster's URL from `scripts/pg start` (its last line), or why not.
fn cluster() -> Result<String, String> {
    let out = std::process::Command::new("scripts/pg")
        .arg("start")
        .output()
        .map_err(|e| format!("scripts/pg: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(str::to_string)
        .ok_or_else(|| "scripts/pg printed nothing".into())
}

/// A fresh database of the cluster; returns its URL.
async fn fresh_db(url: &str) -> String {
    server_mock::store::postgres::fresh_database(url, "bench")
        .await
        .expect("a fresh database")
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

async fn sql(url: &str, statements: &str) {
    connect(url)
        .await
        .batch_execute(statements)
        .await
        .unwrap_or_else(|e| panic!("{statements}: {e}"));
}

async fn start(db: &str, key_window: Duration) -> RunningServer {
    let config = ServerConfig {
        key_window,
        ..crate::server::config(db, Duration::ZERO)
    };
    server_mock::start(config, "127.0.0.1:0".parse().expect("address"))
        .await
        .expect("server-mock on PostgreSQL starts")
}

/// 32 senders with plenty of money and one recipient; tokens that outlive the expiry
/// figure's clock jumps (42 days of server time; the default lifetime is 30).
async fn users(base: &str) -> (Arc<Vec<User>>, String) {
    let c = client();
    let mut senders = Vec::new();
    for i in 0..33 {
        let v = test_api(
            &c,
            base,
            reqwest::Method::POST,
            "/v1/test/users",
            json!({"display_name": format!("s{i}"), "balance_minor": if i < 32 { 1_000_000_000_000i64 } else { 0 },
                   "currency": "BDT", "token_ttl_ms": 365 * 86_400_000i64}),
        )
        .await;
        senders.push(User {
            user_id: v["user_id"].as_str().expect("a user id").to_string(),
            token: v["token"].as_str().expect("a token").to_string(),
        });
    }
    let to = senders.pop().expect("the recipient").user_id;
    (Arc::new(senders), to)
}

/// Runs `in_flight` closed loops over `bases` until `stop` is set.
async fn closed_loop(
    bases: Arc<Vec<String>>,
    senders: Arc<Vec<User>>,
    to: String,
    kind: Kind,
    in_flight: usize,
    stop: Arc<AtomicBool>,
) -> Load {
    let c = client();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let (c, bases, senders, to, stop, next) = (
                c.clone(),
                bases.clone(),
                senders.clone(),
                to.clone(),
                stop.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let (mut ms, mut not_201) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let base = &bases[n % bases.len()];
                    let user = &senders[n % senders.len()];
                    let body = transfer_body(&to, 1);
                    let a = match kind {
                        Kind::First => {
                            let key = uuid::Uuid::new_v4().to_string();
                            post(
                                &c,
                                &format!("{base}/v1/transfers"),
                                &user.token,
                                Some(&key),
                                body,
                            )
                            .await
                        }
                        Kind::Plain | Kind::Floor => {
                            let path = if kind == Kind::Plain {
                                "plain"
                            } else {
                                "floor"
                            };
                            post(
                                &c,
                                &format!("{base}/v1/bench/{path}"),
                                &user.token,
                                None,
                                body,
                            )
                            .await
                        }
                    };
                    if a.status == 201 {
                        ms.push(a.secs * 1e3);
                    } else {
                        not_201.push(a.status);
                    }
                }
                (ms, not_201)
            })
        })
        .collect();
    let (mut ms, mut not_201) = (Vec::new(), std::collections::BTreeMap::new());
    for t in tasks {
        let (m, e) = t.await.expect("load task");
        ms.extend(m);
        for status in e {
            *not_201.entry(status).or_insert(0) += 1;
        }
    }
    Load {
        rps: ms.len() as f64 / started.elapsed().as_secs_f64(),
        ms,
        errors: not_201.values().sum(),
        not_201,
        cpu: CpuSplit::default(),
    }
}

/// A closed-loop load for `secs`; with `drain`, then until the relay has delivered every
/// event the load made: its backlog is part of what the load cost (counted in its time),
/// and left over it would slow the next round instead (the relay can run behind a
/// saturating load).
async fn timed_load(
    drain: Option<&tokio_postgres::Client>,
    bases: &[String],
    senders: &Arc<Vec<User>>,
    to: &str,
    kind: Kind,
    in_flight: usize,
    secs: f64,
) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let before = (cpu_jiffies(), process_jiffies());
    let started = Instant::now();
    let load = tokio::spawn(closed_loop(
        Arc::new(bases.to_vec()),
        senders.clone(),
        to.to_string(),
        kind,
        in_flight,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut load = load.await.expect("load");
    if let Some(db) = drain {
        let pending = "SELECT EXISTS (SELECT 1 FROM outbox WHERE NOT published)";
        while db
            .query_one(pending, &[])
            .await
            .is_ok_and(|r| r.get::<_, bool>(0))
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        load.rps = load.ms.len() as f64 / started.elapsed().as_secs_f64();
    }
    load.cpu = CpuSplit::between(before, (cpu_jiffies(), process_jiffies()));
    load
}

/// Runs figure 9; without a cluster it says why and adds nothing.
pub async fn run(report: &mut Report, quick: bool) {
    let url = match cluster() {
        Ok(u) => u,
        Err(e) => {
            report.note(
                "9 postgres",
                format!("skipped: no PostgreSQL cluster ({e})"),
            );
            return;
        }
    };
    // Other work on the machine moves these ratios more than anything measured: say how much.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        report.note(
            "9 load",
            format!(
                "load average at the start of figure 9 (1/5/15 min): {}",
                load.join(" / ")
            ),
        );
    }
    let secs = if quick { 1.0 } else { 3.0 };
    // `SENDONCE_BENCH_PG_PARTS=a` (or `ab`, …): only those parts, for working on one of them.
    let parts = std::env::var("SENDONCE_BENCH_PG_PARTS").unwrap_or_else(|_| "abc".into());
    if parts.contains('a') {
        first_vs_plain(report, &url, secs).await;
    }
    if parts.contains('b') {
        instances(report, &url, secs).await;
    }
    if !parts.contains('c') {
        return;
    }
    let sizes: &[i64] = if quick {
        &[100_000]
    } else {
        &[100_000, 1_000_000]
    };
    expiry::drop_vs_delete(report, &url, sizes).await;
}

/// The same-run rounds of one in-flight level: requests/s and CPU split of each kind.
#[derive(Default)]
struct Rounds {
    rps: Vec<f64>,
    cpu: Vec<CpuSplit>,
}

impl Rounds {
    fn push(&mut self, load: Load) {
        self.rps.push(load.rps);
        self.cpu.push(load.cpu);
    }

    fn p50(&self) -> f64 {
        summarize(&self.rps).p50
    }

    /// The CPU split averaged over the rounds, as "own / postgres / other" percentages.
    fn cpu(&self) -> String {
        let n = self.cpu.len().max(1) as f64;
        let avg = |f: fn(&CpuSplit) -> f64| self.cpu.iter().map(f).sum::<f64>() / n * 100.0;
        format!(
            "server+load {:.0} % · postgres {:.0} % · other {:.0} %",
            avg(|c| c.own),
            avg(|c| c.postgres),
            avg(|c| c.other)
        )
    }
}

/// Relay batches of each size delivered between two snapshots, as "size: count" pairs.
fn batch_sizes_between(before: [u64; 8], after: [u64; 8]) -> String {
    const SIZES: [&str; 8] = [
        "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+",
    ];
    SIZES
        .iter()
        .zip(before.iter().zip(after))
        .filter(|(_, (b, a))| a > *b)
        .map(|(s, (b, a))| format!("{s}: {}", a - b))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure-9 row of `subject` vs `baseline` requests/s, with its rounds' spread.
fn cost_row(what: String, (subject, baseline): (f64, f64), rounds: &[f64]) -> Row {
    Row::new("9", format!("PostgreSQL: {what}"))
        .subject(format!("{subject:.0} req/s"))
        .baseline(format!("{baseline:.0} req/s"))
        .ratio(format!(
            "{:.2} · per round {}",
            baseline / subject,
            spread(&summarize(rounds))
        ))
}

/// Margin over the floor that the replacement target allows (issue #19's rule).
const FLOOR_MARGIN: f64 = 1.25;

async fn first_vs_plain(report: &mut Report, url: &str, secs: f64) {
    let db = fresh_db(url).await;
    let server = start(&db, Duration::from_secs(48 * 3600)).await;
    let base = vec![server.base_url()];
    let (senders, to) = users(&base[0]).await;
    let _warm = timed_load(None, &base, &senders, &to, Kind::First, 16, secs / 2.0).await;
    let pg = connect(&db).await;
    let (mut worst, mut worst_floor, mut worst_over_floor): (f64, f64, f64) = (0.0, 0.0, 0.0);
    let mut details = serde_json::Map::new();
    for in_flight in [16, 64] {
        // Alternating rounds, so drift (autovacuum, cache) hits every side alike.
        let (mut first, mut floor, mut plain) =
            (Rounds::default(), Rounds::default(), Rounds::default());
        let mut batches = [0; 8];
        for _ in 0..3 {
            plain.push(
                timed_load(
                    Some(&pg),
                    &base,
                    &senders,
                    &to,
                    Kind::Plain,
                    in_flight,
                    secs,
                )
                .await,
            );
            floor.push(
                timed_load(
                    Some(&pg),
                    &base,
                    &senders,
                    &to,
                    Kind::Floor,
                    in_flight,
                    secs,
                )
                .await,
            );
            let before = server_mock::store::postgres::batch_sizes();
            first.push(
                timed_load(
                    Some(&pg),
                    &base,
                    &senders,
                    &to,
                    Kind::First,
                    in_flight,
                    secs,
                )
                .await,
            );
            let after = server_mock::store::postgres::batch_sizes();
            for (i, (b, a)) in before.iter().zip(after).enumerate() {
                batches[i] += a - b;
            }
        }
        let (f, fl, p) = (first.p50(), floor.p50(), plain.p50());
        let (ratio, floor_ratio) = (p / f, p / fl);
        // The same round's sides: what other load on the machine did to all of them.
        let per_round: Vec<f64> = plain
            .rps
            .iter()
            .zip(&first.rps)
            .map(|(p, f)| p / f)
            .collect();
        let floor_round: Vec<f64> = plain
            .rps
            .iter()
            .zip(&floor.rps)
            .map(|(p, f)| p / f)
            .collect();
        worst = worst.max(ratio);
        worst_floor = worst_floor.max(floor_ratio);
        worst_over_floor = worst_over_floor.max(ratio / floor_ratio);
        let batch_sizes = batch_sizes_between([0; 8], batches);
        details.insert(
            format!("in_flight_{in_flight}"),
            json!({"first_rps": r3(f), "floor_rps": r3(fl), "plain_rps": r3(p),
                   "first_over_plain": r3(ratio), "floor_over_plain": r3(floor_ratio),
                   "per_round": per_round.iter().map(|r| r3(*r)).collect::<Vec<_>>(),
                   "floor_per_round": floor_round.iter().map(|r| r3(*r)).collect::<Vec<_>>(),
                   "cpu_first": first.cpu(), "cpu_floor": floor.cpu(), "cpu_plain": plain.cpu(),
                   "relay_batch_sizes": batch_sizes}),
        );
        report.rows.push(
            cost_row(
                format!("first request vs plain insert, {in_flight} in flight (cost ratio)"),
                (f, p),
                &per_round,
            )
            .target("≤ 1.5", ratio <= 1.5),
        );
        report.rows.push(cost_row(
            format!(
                "the contract's floor vs plain insert, {in_flight} in flight (claim, gateway \
                 record, debit+outbox+key: one statement each; the same set-based relay)"
            ),
            (fl, p),
            &floor_round,
        ));
        report.rows.push(
            Row::new(
                "9",
                format!(
                    "PostgreSQL: first request vs plain, against the floor + 25 %, {in_flight} in flight"
                ),
            )
            .subject(format!("{ratio:.2}"))
            .baseline(format!("floor {floor_ratio:.2}"))
            .ratio(format!("{:.2} × the floor", ratio / floor_ratio))
            .target(
                format!("≤ {:.2} (floor + 25 %)", floor_ratio * FLOOR_MARGIN),
                ratio <= floor_ratio * FLOOR_MARGIN,
            ),
        );
        report.rows.push(
            Row::new(
                "9",
                format!(
                    "PostgreSQL: where the CPU went, {in_flight} in flight (first / floor / plain)"
                ),
            )
            .subject(format!("first: {} · floor: {}", first.cpu(), floor.cpu()))
            .baseline(format!("plain: {}", plain.cpu()))
            .ratio(format!("relay batches (events: count): {batch_sizes}")),
        );
    }
    report.key("pg_first_over_plain_ratio", r3(worst));
    report.key("pg_floor_over_plain_ratio", r3(worst_floor));
    report.key("pg_first_over_floor_ratio", r3(worst_over_floor));
    report.key("pg_first_vs_plain", serde_json::Value::Object(details));
    server.shutdown().await;
}

async fn instances(report: &mut Report, url: &str, secs: f64) {
    let db = fresh_db(url).await;
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(start(&db, Duration::from_secs(48 * 3600)).await);
    }
    let bases: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let (senders, to) = users(&bases[0]).await;
    let _warm = timed_load(None, &bases, &senders, &to, Kind::First, 64, secs / 2.0).await;
    let pg = connect(&db).await;
    let (mut rps, mut busy) = (Vec::new(), Vec::new());
    for n in 1..=3 {
        let before = cpu_jiffies();
        let load = timed_load(Some(&pg), &bases[..n], &senders, &to, Kind::First, 64, secs).await;
        let after = cpu_jiffies();
        rps.push(load.rps);
        busy.push((after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64);
    }
    let ratio = rps[2] / rps[0];
    report.rows.push(
        Row::new(
            "9",
            "PostgreSQL: first requests/s, 3 instances vs 1 (64 in flight)",
        )
        .subject(format!("{:.0} req/s (2: {:.0})", rps[2], rps[1]))
        .baseline(format!("{:.0} req/s", rps[0]))
        .ratio(format!("{ratio:.2}"))
        .target("≥ 2 (or what limits it)", ratio >= 2.0),
    );
    report.key("pg_throughput_3_over_1_instances", r3(ratio));
    report.key(
        "pg_instances_rps",
        json!({"1": r3(rps[0]), "2": r3(rps[1]), "3": r3(rps[2]),
               "cpu_busy_1": r3(busy[0]), "cpu_busy_2": r3(busy[1]), "cpu_busy_3": r3(busy[2])}),
    );
    report.rows.push(
        Row::new(
            "9",
            "PostgreSQL: machine CPU busy during the 1 / 2 / 3-instance runs",
        )
        .subject(format!(
            "{:.0} % / {:.0} % / {:.0} %",
            busy[0] * 100.0,
            busy[1] * 100.0,
            busy[2] * 100.0
        ))
        .baseline("all cores of the machine")
        .ratio("-"),
    );
    report.note(
        "9 instances",
        "All instances run in the bench process (each its own pool, reaper, relay and \
         heartbeat) on the machine's 2 cores, beside PostgreSQL and the load generator: the \
         instances share the same CPUs, so more of them add database connections, not CPU. \
         On one 2-core machine the ratio measures contention, not scale-out: the CPU row shows \
         the machine already saturated with one instance (PostgreSQL, the server and the load \
         generator share it), so instances cannot add throughput here.",
    );
    for s in servers {
        s.shutdown().await;
    }
}
