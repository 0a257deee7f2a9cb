//! Measures replay vs first-request latency (and the no-idempotency baseline).
//!
//! `cargo run -p server-mock --release --example latency [-- N]`
//!
//! Sequential requests over one keep-alive connection against an in-process server on a
//! real SQLite file (WAL, synchronous=FULL). Reported, never asserted.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use server_mock::{start, ServerConfig};

struct Stats {
    p50: Duration,
    p90: Duration,
    p99: Duration,
    mean: Duration,
}

fn summarize(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let total: Duration = samples.iter().sum();
    Stats {
        p50: pick(0.5),
        p90: pick(0.9),
        p99: pick(0.99),
        mean: total / samples.len() as u32,
    }
}

fn line(name: &str, s: &Stats) {
    println!(
        "{name:<34} p50 {:>8.3} ms  p90 {:>8.3} ms  p99 {:>8.3} ms  mean {:>8.3} ms",
        s.p50.as_secs_f64() * 1e3,
        s.p90.as_secs_f64() * 1e3,
        s.p99.as_secs_f64() * 1e3,
        s.mean.as_secs_f64() * 1e3
    );
}

async fn user(client: &reqwest::Client, url: &str, balance: i64) -> (String, String) {
    let v: Value = client
        .post(format!("{url}/v1/test/users"))
        .json(&json!({"display_name": "bench", "balance_minor": balance, "currency": "BDT"}))
        .send()
        .await
        .expect("create user")
        .json()
        .await
        .expect("json");
    (
        v["user_id"].as_str().unwrap_or_default().to_string(),
        v["token"].as_str().unwrap_or_default().to_string(),
    )
}

async fn timed(
    client: &reqwest::Client,
    url: &str,
    path: &str,
    token: &str,
    key: Option<&str>,
    body: &str,
    want: u16,
) -> Duration {
    let mut req = client
        .post(format!("{url}{path}"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    let t = Instant::now();
    let r = req.send().await.expect("send");
    let status = r.status().as_u16();
    let _ = r.bytes().await.expect("body");
    let elapsed = t.elapsed();
    assert_eq!(status, want, "{path}");
    elapsed
}

async fn run(n: usize, gateway: Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ServerConfig {
        db: dir.path().join("bench.db").to_string_lossy().into_owned(),
        gateway_delay: gateway,
        ..ServerConfig::default()
    };
    let server = start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("start");
    let url = server.base_url();
    let client = reqwest::Client::new();
    let (_, token) = user(&client, &url, 1_000_000_000_000).await;
    let (to, _) = user(&client, &url, 0).await;
    let body = json!({"to_user_id": to, "amount_minor": 1, "currency": "BDT"}).to_string();

    // Warm-up: connection, statement cache, page cache.
    for i in 0..20 {
        timed(
            &client,
            &url,
            "/v1/transfers",
            &token,
            Some(&format!("w{i}")),
            &body,
            201,
        )
        .await;
        timed(&client, &url, "/v1/bench/plain", &token, None, &body, 201).await;
    }
    let mut first = Vec::with_capacity(n);
    let mut replay = Vec::with_capacity(n);
    let mut plain = Vec::with_capacity(n);
    // Interleaved so drift (disk, other load) hits all three alike.
    for i in 0..n {
        first.push(
            timed(
                &client,
                &url,
                "/v1/transfers",
                &token,
                Some(&format!("k{i}")),
                &body,
                201,
            )
            .await,
        );
        replay.push(
            timed(
                &client,
                &url,
                "/v1/transfers",
                &token,
                Some("k0"),
                &body,
                201,
            )
            .await,
        );
        plain.push(timed(&client, &url, "/v1/bench/plain", &token, None, &body, 201).await);
    }
    println!("gateway delay {} ms, n = {n}", gateway.as_millis());
    let (f, r, p) = (summarize(first), summarize(replay), summarize(plain));
    line("first request (claim+gateway+tx)", &f);
    line("replay (stored response)", &r);
    line("plain insert, no idempotency", &p);
    println!(
        "replay is {:.1}x faster than a first request (p50); first request costs {:.3} ms more than the plain insert (p50)\n",
        f.p50.as_secs_f64() / r.p50.as_secs_f64(),
        (f.p50.as_secs_f64() - p.p50.as_secs_f64()) * 1e3
    );
    server.shutdown().await;
}

#[tokio::main]
async fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    run(n, Duration::from_millis(5)).await;
    run(n, Duration::ZERO).await;
}
