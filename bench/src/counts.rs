//! Counts that do not move with the machine's load (issue 33): instructions per operation,
//! counted by `valgrind --tool=callgrind` on a child process that does N operations and on
//! one that does M, so that start-up and shutdown cancel: (I(M) − I(N)) ÷ (M − N).
//!
//! Figure 1: a confirmation (`child tap sdk`: every thread of the SDK, the store thread's
//! commit included) against the raw insert + commit (`child tap raw`). Figure 3: the server
//! alone (`child server`, server-mock in a process of its own as figure 7 runs it, driven over loopback by this
//! process, which callgrind does not see), one request at a time, the relay's delivery
//! included (the run settles before it ends), for the first request, the contract's floor,
//! the peer and the plain insert.
//!
//! Instructions are the CPU's work, not its waits (fsync, wake-ups): the timed ratios stay
//! what users feel; these are what a change of code moves and a neighbour's build does not.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::report::{r3, Report, Row};
use crate::server::{self, FIRST_OVER_FLOOR_TARGET};
use crate::stats::fmt;

/// Figure 1's gate (issue 33): a confirmation at most this many times the raw insert + commit.
pub const TAP_INSTR_TARGET: f64 = 1.5;

/// Whether callgrind can run here; `Err` says why not.
fn callgrind_available() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("valgrind --version exited {}", o.status)),
        Err(e) => Err(format!("valgrind not found ({e})")),
    }
}

/// The total instructions callgrind counted for `args` run as a child of this executable,
/// with `drive` given the child's stdout and stdin while it runs.
fn instructions(
    out: &Path,
    args: &[&str],
    drive: impl FnOnce(&mut BufReader<std::process::ChildStdout>, std::process::ChildStdin),
) -> u64 {
    let exe = std::env::current_exe().expect("own executable");
    let mut child = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .arg("child")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("valgrind starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    drive(&mut stdout, child.stdin.take().expect("stdin"));
    let status = child.wait().expect("valgrind ends");
    assert!(status.success(), "callgrind child {args:?}: {status}");
    let text = std::fs::read_to_string(out).expect("callgrind output");
    let _ = std::fs::remove_file(out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("callgrind's total")
}

/// Instructions per operation: runs of `small` and `large` operations, differenced. Each is
/// the least of `tries` runs: what else a process does (a runtime's idle turns, a thread
/// finishing its shutdown) only ever adds instructions, so the least is the operations' own.
fn per_op(small: usize, large: usize, tries: usize, run: impl Fn(usize) -> u64) -> f64 {
    let least = |n| (0..tries).map(|_| run(n)).min().expect("a run");
    let (a, b) = (least(small), least(large));
    b.saturating_sub(a) as f64 / (large - small) as f64
}

/// Figure 1's counts: a confirmation against the raw insert + commit, in `dir`.
pub fn tap_to_durable(report: &mut Report, dir: &Path, quick: bool) {
    if let Err(why) = callgrind_available() {
        report.note("1 instructions", format!("not counted: {why}"));
        return;
    }
    // 1000 apart whether quick or not: the SDK checkpoints once every 500 commits, so the
    // difference holds exactly two of its checkpoints (and the raw side's, every 1000 WAL
    // pages, at the same inserts every run).
    let (small, large, tries) = (100, 1100, if quick { 1 } else { 3 });
    let out = dir.join("callgrind.tap.out");
    let dir_arg = dir.display().to_string();
    let side = |side: &str| {
        per_op(small, large, tries, |n| {
            let n = n.to_string();
            instructions(&out, &["tap", side, &n, &dir_arg], |o, _| {
                let _ = o.lines().count();
            })
        })
    };
    let (sdk, raw) = (side("sdk"), side("raw"));
    let sdk_async = side("sdk-async");
    let ratio = sdk / raw;
    report.rows.push(
        Row::new(
            "1",
            "tap-to-durable, instructions per confirmation (callgrind, every thread)",
        )
        .subject(format!("{:.1} k", sdk / 1e3))
        .baseline(format!("{:.1} k raw insert+commit", raw / 1e3))
        .ratio(fmt(ratio))
        .target(format!("≤ {TAP_INSTR_TARGET}"), ratio <= TAP_INSTR_TARGET),
    );
    report.rows.push(
        Row::new(
            "1",
            "tap-to-durable, async, instructions per confirmation (callgrind, every thread)",
        )
        .subject(format!("{:.1} k", sdk_async / 1e3))
        .baseline(format!("{:.1} k raw insert+commit", raw / 1e3))
        .ratio(fmt(sdk_async / raw)),
    );
    tap_wal_bytes(report, dir);
    report.key("tap_to_durable_instr_ratio", r3(ratio));
    report.key(
        "tap_to_durable_instr",
        serde_json::json!({"sdk": sdk.round(), "sdk_async": sdk_async.round(), "raw": raw.round(), "runs": [small, large]}),
    );
    report.note(
        "1 instructions",
        format!(
            "callgrind (`valgrind --tool=callgrind`, every thread of the process) on `sendonce-bench \
             child tap sdk|sdk-async|raw N {}` with N = {small} and {large}, the least of {tries} runs each; per \
             confirmation = the difference ÷ {}, so opening, closing and start-up cancel.",
            dir.display(),
            large - small
        ),
    );
}

/// Figure 1's WAL bytes per confirmation against the raw insert's: runs of 50 and 150, below
/// both sides' checkpoint thresholds (the SDK: every 500 commits; SQLite's own: 1,000 pages), so
/// the WAL holds every frame their commits appended, differenced as the instructions are.
fn tap_wal_bytes(report: &mut Report, dir: &Path) {
    let (small, large) = (50, 150);
    let exe = std::env::current_exe().expect("own executable");
    let wal = |side: &str, n: usize| -> f64 {
        let out = Command::new(&exe)
            .args([
                "child",
                "tap",
                side,
                &n.to_string(),
                &dir.display().to_string(),
            ])
            .output()
            .expect("tap child runs");
        assert!(out.status.success(), "tap child {side} {n}: {}", out.status);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("wal_bytes ")?.trim().parse().ok())
            .expect("the child's WAL size")
    };
    let per = |side: &str| (wal(side, large) - wal(side, small)) / (large - small) as f64;
    let (sdk, raw) = (per("sdk"), per("raw"));
    let ratio = sdk / raw;
    report.rows.push(
        Row::new("1", "tap-to-durable, WAL bytes per confirmation")
            .subject(format!("{sdk:.0} B"))
            .baseline(format!("{raw:.0} B raw insert+commit"))
            .ratio(fmt(ratio))
            .target(format!("≤ {TAP_WAL_TARGET}"), ratio <= TAP_WAL_TARGET),
    );
    report.key("tap_to_durable_wal_bytes_ratio", r3(ratio));
    report.key(
        "tap_to_durable_wal_bytes",
        serde_json::json!({"sdk": sdk.round(), "raw": raw.round(), "runs": [small, large]}),
    );
}

/// Figure 1's WAL gate: a confirmation writes the row the raw insert writes, and nothing else.
pub const TAP_WAL_TARGET: f64 = 1.05;

/// Figure 3's counts: server-mock's instructions per request of each kind, one at a time.
pub fn server(report: &mut Report, dir: &Path, quick: bool) {
    if let Err(why) = callgrind_available() {
        report.note("3 instructions", format!("not counted: {why}"));
        return;
    }
    let (small, large, tries) = if quick { (20, 120, 1) } else { (50, 350, 3) };
    let out = dir.join("callgrind.server.out");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut per = std::collections::BTreeMap::new();
    for (kind, path) in server::COUNTED {
        let count = per_op(small, large, tries, |n| {
            let db = dir.join(format!("count-{kind}-{n}.db"));
            let db_arg = db.display().to_string();
            let counted = instructions(&out, &["server", &db_arg], |o, stdin| {
                let mut url = String::new();
                o.read_line(&mut url).expect("the child's URL");
                rt.block_on(drive(url.trim(), path, n));
                drop(stdin); // the child shuts down, and callgrind writes its count
            });
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(PathBuf::from(format!("{db_arg}{suffix}")));
            }
            counted
        });
        per.insert(kind, count);
    }
    let (first, floor, peer, plain) = (per["first"], per["floor"], per["peer"], per["plain"]);
    let row = |what: &str, a: f64, b: f64, of: &str| {
        Row::new(
            "3",
            format!("server instructions per request, one at a time: {what}"),
        )
        .subject(format!("{:.0} k", a / 1e3))
        .baseline(format!("{:.0} k {of}", b / 1e3))
        .ratio(fmt(a / b))
    };
    report
        .rows
        .push(row("first vs plain", first, plain, "plain insert"));
    report.rows.push(
        row("first vs contract floor", first, floor, "floor").target(
            format!("≤ {FIRST_OVER_FLOOR_TARGET}"),
            first / floor <= FIRST_OVER_FLOOR_TARGET,
        ),
    );
    report.rows.push(row("first vs peer", first, peer, "peer"));
    report
        .rows
        .push(row("peer vs plain", peer, plain, "plain insert"));
    report.key("server_first_over_plain_instr_ratio", r3(first / plain));
    report.key("server_first_over_floor_instr_ratio", r3(first / floor));
    report.key("server_first_over_peer_instr_ratio", r3(first / peer));
    report.key(
        "server_instr",
        serde_json::json!({"first": first.round(), "floor": floor.round(), "peer": peer.round(),
                           "plain": plain.round(), "runs": [small, large]}),
    );
    report.note(
        "3 instructions",
        format!(
            "callgrind on server-mock alone (`sendonce-bench child server DB`: the bench's \
             configuration, SQLite file in `{}`), driven over loopback by the bench process: 4 users, \
             then N requests one at a time and `POST /v1/test/settle` (the relay's delivery is part \
             of a request's cost), N = {small} and {large}, the least of {tries} runs each; per request = the difference ÷ {}.",
            dir.display(),
            large - small
        ),
    );
}

/// `n` requests to `path`, one at a time, from 4 users; then the relay settles.
async fn drive(base: &str, path: &str, n: usize) {
    let client = server::client();
    let mut users = Vec::new();
    for i in 0..4 {
        users.push(server::create_user(&client, base, &format!("s{i}"), 1_000_000_000).await);
    }
    let to = server::create_user(&client, base, "to", 0).await.user_id;
    let url = format!("{base}{path}");
    for i in 0..n {
        let user = &users[i % users.len()];
        let body = server::transfer_body(&to, 1);
        let key = (path == "/v1/transfers").then(|| uuid::Uuid::new_v4().to_string());
        let a = server::post(&client, &url, &user.token, key.as_deref(), body).await;
        assert_eq!(a.status, 201, "{path}: request {i}");
    }
    let settle = client
        .post(format!("{base}/v1/test/settle"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("settle");
    assert!(settle.status().is_success(), "settle: {}", settle.status());
}
