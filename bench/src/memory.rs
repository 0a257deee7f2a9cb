//! Figure 7, memory: SDK resident memory with 10,000 unfinished transfers (offline profile) vs
//! the same SDK with none; server resident memory after 500,000 requests vs after warm-up.
//! Both are measured in child processes (`sendonce-bench child …`) so nothing else is counted.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::report::{r3, Report, Row};
use crate::stats::{fmt, summarize};

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn rss_kib(pid: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Bytes SQLite has allocated in this process (all connections: page caches, schemas, statements), KiB.
pub fn sqlite_heap_kib() -> i64 {
    // SAFETY: a read of SQLite's global memory counter; no arguments, no state.
    unsafe { rusqlite::ffi::sqlite3_memory_used() / 1024 }
}

/// Child: opens an SDK (offline profile) in `dir`, confirms `n` transfers, waits until each was
/// attempted once, and prints its memory as JSON.
pub fn child_sdk(dir: &Path, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (before, _) = rss_kib("self");
    let config = sendonce::SdkConfig::builder("http://127.0.0.1:9", dir.join("sdk.db"))
        .access_token("t")
        .network_profile(sendonce::NetworkProfile::Offline)
        .build()
        .expect("config");
    let sdk = sendonce::Sdk::open(config).expect("sdk");
    let started = Instant::now();
    rt.block_on(async {
        for i in 0..n {
            sdk.send_transfer(sendonce::TransferRequest {
                to_user_id: format!("usr_{i:08}"),
                amount_minor: 1 + i as i64,
                currency: "BDT".into(),
                note: Some("pending while offline".into()),
            })
            .await
            .expect("send");
        }
        // Every transfer has met the offline network once (attempts are not budgeted until then).
        while (sdk.network_stats().requests as usize) < n
            && started.elapsed() < Duration::from_secs(120)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    let (steady, hwm) = rss_kib("self");
    let sqlite_kib = sqlite_heap_kib();
    let listed = sdk.unfinished_transfers().map(|v| v.len()).unwrap_or(0);
    let (after_list, _) = rss_kib("self");
    println!(
        "{}",
        serde_json::json!({"n": n, "before_open_kib": before, "steady_kib": steady, "hwm_kib": hwm,
            "after_list_kib": after_list, "listed": listed, "attempted": sdk.network_stats().requests,
            "sqlite_heap_kib": sqlite_kib,
            "seconds": started.elapsed().as_secs_f64()})
    );
    sdk.close();
}

/// Child: runs server-mock on `db`, prints its base URL, serves until stdin closes.
pub fn child_server(db: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let srv = crate::server::start(db, Duration::ZERO).await;
        println!("{}", srv.base_url());
        let _ = std::io::stdout().flush();
        let _ = tokio::task::spawn_blocking(|| {
            let mut s = String::new();
            while std::io::stdin()
                .read_line(&mut s)
                .map(|n| n > 0)
                .unwrap_or(false)
            {}
        })
        .await;
        srv.shutdown().await;
    });
}

fn sdk_child(dir: &Path, n: usize) -> serde_json::Value {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(exe)
        .args([
            "child",
            "sdk-rss",
            tmp.path().to_str().expect("utf-8"),
            &n.to_string(),
        ])
        .output()
        .expect("child");
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Sends `count` `GET /v1/wallet` over `conns` keep-alive connections, `depth` pipelined each.
async fn drive(addr: &str, token: &str, count: usize, conns: usize, depth: usize) -> usize {
    let req =
        format!("GET /v1/wallet HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n\r\n");
    let req = Arc::new(req.repeat(depth).into_bytes());
    let mut tasks = Vec::new();
    for c in 0..conns {
        let share = count / conns + usize::from(c < count % conns);
        let (addr, req) = (addr.to_string(), req.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(&addr).await.expect("connect");
            s.set_nodelay(true).ok();
            let (mut buf, mut ok, mut done) = (Vec::with_capacity(64 * 1024), 0usize, 0usize);
            let mut chunk = vec![0u8; 64 * 1024];
            while done < share {
                let batch = depth.min(share - done);
                let per = req.len() / depth;
                s.write_all(&req[..per * batch]).await.expect("write");
                let mut got = 0;
                while got < batch {
                    match parse_one(&buf) {
                        Some((used, status)) => {
                            buf.drain(..used);
                            got += 1;
                            ok += usize::from(status == 200);
                        }
                        None => {
                            let n = s.read(&mut chunk).await.expect("read");
                            assert!(n > 0, "server closed the connection");
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                }
                done += batch;
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.expect("driver");
    }
    ok
}

/// Parses one complete HTTP/1.1 response at the start of `buf`: (bytes used, status).
fn parse_one(buf: &[u8]) -> Option<(usize, u16)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= end + len).then_some((end + len, status))
}

async fn server_rss(dir: &Path, total: usize) -> serde_json::Value {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let db = tmp.path().join("server.db");
    let exe = std::env::current_exe().expect("exe");
    let mut child = Command::new(exe)
        .args(["child", "server", db.to_str().expect("utf-8")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server child");
    let pid = child.id().to_string();
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("base url");
    let base = line.trim().to_string();
    let addr = base.trim_start_matches("http://").to_string();
    let c = crate::server::client();
    let user = crate::server::create_user(&c, &base, "reader", 1_000).await;
    let (idle, _) = rss_kib(&pid);
    let mut points = vec![serde_json::json!({"requests": 0, "rss_kib": idle})];
    let (mut sent, mut ok) = (0usize, 0usize);
    let started = Instant::now();
    let marks = [10_000usize, 100_000, 250_000, 500_000, 750_000];
    for upto in marks.into_iter().filter(|m| *m < total).chain([total]) {
        let n = upto.saturating_sub(sent);
        ok += drive(&addr, &user.token, n, 32, 8).await;
        sent = upto;
        let (rss, hwm) = rss_kib(&pid);
        points.push(serde_json::json!({"requests": sent, "rss_kib": rss, "hwm_kib": hwm}));
    }
    let secs = started.elapsed().as_secs_f64();
    drop(child.stdin.take());
    let _ = child.wait();
    serde_json::json!({"points": points, "ok": ok, "sent": sent, "seconds": r3(secs), "req_per_s": r3(sent as f64 / secs)})
}

/// Runs figure 7. `fast_dir` (tmpfs) holds the SDK files: 10,000 fsyncs would only measure the disk.
pub async fn run(
    report: &mut Report,
    fast_dir: &Path,
    dir: &Path,
    pending: usize,
    requests: usize,
    rounds: usize,
) {
    let (mut empty, mut full, mut runs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [0, pending]
        } else {
            [pending, 0]
        };
        for n in order {
            let v = sdk_child(fast_dir, n);
            let mib = v["steady_kib"].as_f64().unwrap_or(f64::NAN) / 1024.0;
            if n == 0 {
                empty.push(mib)
            } else {
                full.push(mib)
            }
            runs.push(v);
        }
    }
    let (e, f) = (summarize(&empty), summarize(&full));
    let per_transfer_b = (f.p50 - e.p50) * 1024.0 * 1024.0 / pending as f64;
    report.rows.push(
        Row::new(
            "7",
            format!("SDK RSS with {pending} unfinished transfers (MiB)"),
        )
        .subject(format!(
            "{} (runs {}–{})",
            fmt(f.p50),
            fmt(f.min),
            fmt(f.max)
        ))
        .baseline(format!("{} same SDK, 0 transfers", fmt(e.p50)))
        .ratio(format!(
            "{} · +{} B per transfer",
            fmt(f.p50 / e.p50),
            fmt(per_transfer_b)
        )),
    );
    report.key("sdk_rss_mib_10k_pending", r3(f.p50));
    report.key("sdk_rss_mib_0_pending", r3(e.p50));
    let srv = server_rss(dir, requests).await;
    let points = srv["points"].as_array().cloned().unwrap_or_default();
    let at = |i: usize| {
        points
            .get(i)
            .and_then(|p| p["rss_kib"].as_f64())
            .unwrap_or(f64::NAN)
            / 1024.0
    };
    let (warm, last) = (at(1), at(points.len().saturating_sub(1)));
    report.rows.push(
        Row::new(
            "7",
            format!("server RSS after {requests} GET /v1/wallet (MiB)"),
        )
        .subject(format!(
            "{} ({} req/s)",
            fmt(last),
            fmt(srv["req_per_s"].as_f64().unwrap_or(f64::NAN))
        ))
        .baseline(format!("{} after 10,000 (idle {})", fmt(warm), fmt(at(0))))
        .ratio(fmt(last / warm)),
    );
    report.key("server_rss_mib_1m_requests", r3(last));
    report.key(
        "memory",
        serde_json::json!({"sdk_runs": runs, "server": srv}),
    );
    report.note(
        "7 memory",
        format!(
            "SDK: a child process opens the SDK under the `offline` profile on tmpfs (`{}`; 10,000 confirmations \
             × 3 fsyncs would only measure the disk), confirms N transfers, waits until each has met the offline \
             network once (so all are `Retrying`), and reads its own VmRSS; N = {pending} and N = 0 alternate, \
             {rounds} runs each. The JSON also has the RSS after listing all unfinished transfers once. Server: \
             server-mock in a child process (2 worker threads, SQLite file in `{}`), driven with {requests} \
             `GET /v1/wallet` (authenticated: token look-up + ledger sum, no writes) over 32 keep-alive \
             connections, 8 pipelined each, from a raw HTTP/1.1 client; VmRSS read from /proc at checkpoints.",
            fast_dir.display(),
            dir.display()
        ),
    );
}
