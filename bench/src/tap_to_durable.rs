//! Figure 1, tap-to-durable: a confirmation until it returns (row committed) vs a raw rusqlite
//! insert + commit of the same row with the same pragmas, on the same file system. The gate is
//! `Sdk::send_transfer_blocking`, the path of a caller already off the UI thread (the Kotlin layer
//! calls it on `Dispatchers.IO`); the async `Sdk::send_transfer` (the hop to the store thread and
//! back, for callers on an executor: Swift, Rust) is reported beside it.

use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection};
use sendonce::{Sdk, SdkConfig, TransferRequest};

use crate::report::{r3, Report, Row};
use crate::stats::{fmt, spread, summarize, Summary};

/// Which of the SDK's confirmations a side measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Confirm {
    /// `Sdk::send_transfer_blocking`: committed on the caller's thread.
    Blocking,
    /// `Sdk::send_transfer` awaited: committed on the store thread.
    Async,
}

impl Confirm {
    /// The side's name on the `child tap` command line.
    pub fn side(self) -> &'static str {
        match self {
            Confirm::Blocking => "sdk",
            Confirm::Async => "sdk-async",
        }
    }

    /// One confirmation.
    async fn once(self, sdk: &Sdk) {
        match self {
            Confirm::Blocking => sdk.send_transfer_blocking(request()),
            Confirm::Async => sdk.send_transfer(request()).await,
        }
        .expect("confirmation");
    }
}

/// A transfer listener that keeps nothing (the platform layers' one updates a list).
struct Listener;

impl sendonce::TransferListener for Listener {
    fn on_transfer_changed(&self, transfer: sendonce::Transfer) {
        std::hint::black_box(transfer);
    }
}

fn request() -> TransferRequest {
    TransferRequest {
        to_user_id: "usr_bench_recipient".into(),
        amount_minor: 50_000,
        currency: "BDT".into(),
        note: Some("rent".into()),
    }
}

/// The baseline: the SDK's own row written by hand, one statement in autocommit.
struct Raw {
    conn: Connection,
    /// The row's columns the SDK fills from the operation: body, type, method, path, headers.
    op: (Vec<u8>, String, String, String, String),
}

/// The SDK's insert, as `sdk/src/store/insert.rs` writes a new row.
const INSERT: &str =
    "INSERT INTO transfers (local_id, idem_key, to_user_id, amount_minor, currency, note, body, \
     state, created_at_ms, updated_at_ms, next_attempt_at_ms, op_type, method, path, headers) \
     VALUES (?1,?2,?3,?4,?5,?6,?7,'pending',?8,?8,?8,?9,?10,?11,?12)";

impl Raw {
    /// A file the SDK made (its schema, indexes and file settings, never a copy that can drift),
    /// holding one transfer it confirmed, whose operation columns the baseline writes again.
    async fn open(path: &Path) -> Raw {
        let config = SdkConfig::builder("http://127.0.0.1:9", path)
            .build()
            .expect("config");
        let sdk = Sdk::open(config).expect("sdk opens");
        sdk.set_network_available(false).expect("offline");
        sdk.send_transfer(request()).await.expect("send_transfer");
        sdk.close();
        let conn = Connection::open(path).expect("open raw db");
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .expect("wal");
        assert!(mode.eq_ignore_ascii_case("wal"));
        conn.execute_batch("PRAGMA synchronous=FULL;")
            .expect("pragmas");
        // Start from an empty WAL, whatever the SDK's close left (it checkpoints after it
        // returns): the raw side's own checkpoints then fall at the same inserts every run.
        while conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
            .expect("checkpoint")
            != 0
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let op = conn
            .query_row(
                "SELECT body, op_type, method, path, headers FROM transfers",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .expect("the SDK's row");
        Raw { conn, op }
    }

    /// One durable insert; ids are made before the clock starts (the baseline is the write alone).
    fn insert(&self) -> f64 {
        let (id, key) = (
            uuid::Uuid::now_v7().to_string(),
            uuid::Uuid::new_v4().to_string(),
        );
        let r = request();
        let now = 1_700_000_000_000i64;
        let (body, op_type, method, path, headers) = &self.op;
        let start = Instant::now();
        // One statement in autocommit is one transaction (as the SDK's insert); cached, so the
        // baseline does not pay for parsing either.
        self.conn
            .prepare_cached(INSERT)
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    key,
                    r.to_user_id,
                    r.amount_minor,
                    r.currency,
                    r.note,
                    body,
                    now,
                    op_type,
                    method,
                    path,
                    headers
                ])
            })
            .expect("insert");
        start.elapsed().as_secs_f64()
    }
}

/// For profiling (`sendonce-bench child tap sdk|raw N DIR`): N confirmations of one side only.
pub async fn single(side: &str, n: usize, dir: &Path) {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let start = Instant::now();
    let db = tmp
        .path()
        .join(if side == "raw" { "raw.db" } else { "sdk.db" });
    if side == "raw" {
        let raw = Raw::open(&db).await;
        for _ in 0..n {
            raw.insert();
        }
        print_wal_bytes(&db);
    } else {
        let confirm = if side == Confirm::Async.side() {
            Confirm::Async
        } else {
            Confirm::Blocking
        };
        let config = SdkConfig::builder("http://127.0.0.1:9", &db)
            .build()
            .expect("config");
        let sdk = Sdk::open(config).expect("sdk opens");
        sdk.set_network_available(false).expect("offline");
        sdk.add_listener(std::sync::Arc::new(Listener));
        for _ in 0..n {
            confirm.once(&sdk).await;
        }
        print_wal_bytes(&db);
        sdk.close();
    }
    println!(
        "{n} {side} confirmations in {:.3} s",
        start.elapsed().as_secs_f64()
    );
}

/// Prints the size of `db`'s WAL, before closing checkpoints it away: below either side's
/// checkpoint threshold it is every frame the run's commits appended (`counts::tap_wal_bytes`).
fn print_wal_bytes(db: &Path) {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let bytes = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    println!("wal_bytes {bytes}");
}

/// Runs figure 1 in `dir` (which decides the file system).
/// Samples (ms) of both sides, and per-round ratios of their p50 and p99.
struct Pairs {
    sdk: Summary,
    raw: Summary,
    ratio50: Summary,
    ratio99: Summary,
}

/// `rounds` × `per_round` ABAB pairs of `confirm` and the raw insert, with both files in `dir`.
async fn pairs(dir: &Path, rounds: usize, per_round: usize, confirm: Confirm) -> Pairs {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let config = SdkConfig::builder("http://127.0.0.1:9", tmp.path().join("sdk.db"))
        .access_token("unused")
        .build()
        .expect("config");
    let sdk = Sdk::open(config).expect("sdk opens");
    // Nothing is sent: the sender stays idle, so only the confirm path is timed.
    sdk.set_network_available(false).expect("offline");
    // As the Kotlin and Swift layers do: each confirmation is published to a listener.
    sdk.add_listener(std::sync::Arc::new(Listener));
    let raw = Raw::open(&tmp.path().join("raw.db")).await;

    let sdk_once = || async {
        let start = Instant::now();
        confirm.once(&sdk).await;
        start.elapsed().as_secs_f64() * 1e3
    };
    for _ in 0..10 {
        sdk_once().await;
        raw.insert();
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut ratio50, mut ratio99) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for i in 0..per_round {
            // ABAB, and which side goes first alternates.
            if (i + round) % 2 == 0 {
                ra.push(sdk_once().await);
                rb.push(raw.insert() * 1e3);
            } else {
                rb.push(raw.insert() * 1e3);
                ra.push(sdk_once().await);
            }
        }
        let (sa, sb) = (summarize(&ra), summarize(&rb));
        ratio50.push(sa.p50 / sb.p50);
        ratio99.push(sa.p99 / sb.p99);
        a.extend(ra);
        b.extend(rb);
    }
    sdk.close();
    Pairs {
        sdk: summarize(&a),
        raw: summarize(&b),
        ratio50: summarize(&ratio50),
        ratio99: summarize(&ratio99),
    }
}

/// [`pairs`] with the caller and every SDK thread on one CPU: what is left of the gap when no
/// hop has to wake the other, idle CPU (None where pinning is not possible).
fn pinned_pairs(dir: &Path, rounds: usize, per_round: usize) -> Option<Pairs> {
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        // Threads started from here (the SDK's runtime, its store thread) inherit the mask.
        pin_to_this_cpu()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(rt.block_on(pairs(&dir, rounds, per_round, Confirm::Async)))
    })
    .join()
    .ok()
    .flatten()
}

#[cfg(target_os = "linux")]
fn pin_to_this_cpu() -> Option<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; both calls act on the calling thread only.
    unsafe {
        let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0)
            .then_some(())
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to_this_cpu() -> Option<()> {
    None
}

/// Tap-to-durable p50 target (ratio to the raw insert + commit), issue 33.
const P50_TARGET: f64 = 1.15;
/// Tap-to-durable p99 target.
const P99_TARGET: f64 = 1.25;

/// Runs figure 1 in `dir` (which decides the file system), and again on `fast_dir` (tmpfs: no
/// fsync cost, so what is left is the CPU work of each side).
pub async fn run(
    report: &mut Report,
    dir: &Path,
    fast_dir: &Path,
    rounds: usize,
    per_round: usize,
) {
    let disk = pairs(dir, rounds, per_round, Confirm::Blocking).await;
    let disk_async = pairs(dir, rounds.div_ceil(2), per_round, Confirm::Async).await;
    let mem = pairs(fast_dir, rounds.div_ceil(2), per_round, Confirm::Blocking).await;
    let mem_async = pairs(fast_dir, rounds.div_ceil(2), per_round, Confirm::Async).await;
    let one_cpu = pinned_pairs(fast_dir, rounds.div_ceil(2), per_round);
    let (sa, sb, rr50, rr99) = (disk.sdk, disk.raw, disk.ratio50, disk.ratio99);
    let (r50, r99) = (sa.p50 / sb.p50, sa.p99 / sb.p99);
    let (a50, a99) = (
        disk_async.sdk.p50 / disk_async.raw.p50,
        disk_async.sdk.p99 / disk_async.raw.p99,
    );
    // What a confirmation costs over the raw insert where no fsync hides it.
    let gap_us = |p: &Pairs| (p.sdk.p50 - p.raw.p50) * 1e3;

    report.rows.push(
        Row::new(
            "1",
            "tap-to-durable p50 (ms), committed on the caller's thread",
        )
        .subject(format!("{} (MAD {})", fmt(sa.p50), fmt(sa.mad)))
        .baseline(format!(
            "{} (MAD {}) raw insert+commit",
            fmt(sb.p50),
            fmt(sb.mad)
        ))
        .ratio(format!("{} · per round {}", fmt(r50), spread(&rr50)))
        .target(format!("≤ {P50_TARGET}"), r50 <= P50_TARGET),
    );
    report.rows.push(
        Row::new(
            "1",
            "tap-to-durable p99 (ms), committed on the caller's thread",
        )
        .subject(fmt(sa.p99))
        .baseline(fmt(sb.p99))
        .ratio(format!("{} · per round {}", fmt(r99), spread(&rr99)))
        .target(format!("≤ {P99_TARGET}"), r99 <= P99_TARGET),
    );
    report.rows.push(
        Row::new(
            "1",
            "tap-to-durable p50/p99 (ms), async: committed on the store thread",
        )
        .subject(format!(
            "{}/{}",
            fmt(disk_async.sdk.p50),
            fmt(disk_async.sdk.p99)
        ))
        .baseline(format!(
            "{}/{}",
            fmt(disk_async.raw.p50),
            fmt(disk_async.raw.p99)
        ))
        .ratio(format!("{} · {}", fmt(a50), fmt(a99))),
    );
    for (pairs, how) in [(&mem, "on the caller's thread"), (&mem_async, "async")] {
        report.rows.push(
            Row::new(
                "1",
                format!(
                    "same on {} (no fsync), {how}: p50/p99 ms",
                    fast_dir.display()
                ),
            )
            .subject(format!("{}/{}", fmt(pairs.sdk.p50), fmt(pairs.sdk.p99)))
            .baseline(format!("{}/{}", fmt(pairs.raw.p50), fmt(pairs.raw.p99)))
            .ratio(format!(
                "{} · +{} µs per confirmation",
                fmt(pairs.sdk.p50 / pairs.raw.p50),
                fmt(gap_us(pairs))
            )),
        );
    }
    if let Some(one) = &one_cpu {
        report.rows.push(
            Row::new(
                "1",
                format!(
                    "same on {}, async, caller and SDK threads pinned to one CPU: p50/p99 ms",
                    fast_dir.display()
                ),
            )
            .subject(format!("{}/{}", fmt(one.sdk.p50), fmt(one.sdk.p99)))
            .baseline(format!("{}/{}", fmt(one.raw.p50), fmt(one.raw.p99)))
            .ratio(format!(
                "{} · +{} µs per confirmation; the other {} µs of the async gap are the hops' wake-ups of an idle CPU",
                fmt(one.sdk.p50 / one.raw.p50),
                fmt(gap_us(one)),
                fmt(gap_us(&mem_async) - gap_us(one))
            )),
        );
    }
    let ms = |p: &Pairs| {
        serde_json::json!({"sdk_ms_p50": r3(p.sdk.p50), "sdk_ms_p99": r3(p.sdk.p99),
            "raw_ms_p50": r3(p.raw.p50), "raw_ms_p99": r3(p.raw.p99)})
    };
    report.key("tap_to_durable_ratio_p50", r3(r50));
    report.key("tap_to_durable_ratio_p99", r3(r99));
    report.key("tap_to_durable_async_ratio_p50", r3(a50));
    report.key("tap_to_durable_async_ratio_p99", r3(a99));
    report.key(
        "tap_to_durable",
        serde_json::json!({
            "path": "send_transfer_blocking",
            "sdk_ms": {"p10": r3(sa.p10), "p50": r3(sa.p50), "p90": r3(sa.p90), "p99": r3(sa.p99), "mad": r3(sa.mad), "n": sa.n},
            "raw_ms": {"p10": r3(sb.p10), "p50": r3(sb.p50), "p90": r3(sb.p90), "p99": r3(sb.p99), "mad": r3(sb.mad), "n": sb.n},
            "overhead_ms_p50": r3(sa.p50 - sb.p50),
            "per_round_ratio_p50": {"p10": r3(rr50.p10), "p50": r3(rr50.p50), "p90": r3(rr50.p90)},
            "per_round_ratio_p99": {"p10": r3(rr99.p10), "p50": r3(rr99.p50), "p90": r3(rr99.p90)},
            "dir": dir.display().to_string(),
            "async": ms(&disk_async),
            "tmpfs": ms(&mem),
            "tmpfs_async": ms(&mem_async),
            "tmpfs_dir": fast_dir.display().to_string(),
            "tmpfs_async_one_cpu": one_cpu.as_ref().map_or(serde_json::Value::Null, ms),
        }),
    );
    report.note(
        "1 tap-to-durable",
        format!(
            "{rounds} rounds × {per_round} pairs, SDK and raw alternating one by one (ABAB, first side swapped every round), \
             both files in one temporary directory under `{}` (same file system). SDK: `Sdk::send_transfer_blocking` on the \
             bench's thread (the path of a caller already off the UI thread: the Kotlin layer calls it on `Dispatchers.IO`) \
             with the network marked unavailable so the sender stays idle and one transfer listener registered (as \
             the Kotlin and Swift layers register one, so each confirmation is published); it validates, mints the key and local id, \
             serialises the body and commits the `transfers` row (one cached statement, WAL/synchronous=FULL) on the \
             caller's thread, then tells listeners; a WAL checkpoint it makes due is the store thread's. Async \
             (`Sdk::send_transfer` awaited, {} rounds): the same commit on the SDK's store thread, fed by a channel, which \
             answers the caller before it publishes. Baseline: the same \
             `transfers` row (in a file the SDK made, so its schema, indexes and file settings; the body, operation \
             type, method, path and headers read back from a transfer the SDK confirmed there) inserted with one cached statement in \
             autocommit (one transaction) by rusqlite on a WAL/synchronous=FULL connection, ids made outside the timed \
             region; SQLite's own auto-checkpoint (the SDK checkpoints between commits instead). \
             Overhead at p50: {} ms.",
            dir.display(),
            rounds.div_ceil(2),
            fmt(sa.p50 - sb.p50)
        ),
    );
}
