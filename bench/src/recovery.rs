//! Figure 4, recovery: from `set_network_available(true)` to Succeeded for a transfer that was
//! waiting out a long backoff, vs one request round trip of the same kind.

use std::path::Path;
use std::time::{Duration, Instant};

use sendonce::{
    NetworkProfile, RetryPolicy, Sdk, SdkConfig, Transfer, TransferRequest, TransferState,
};

use crate::report::{r3, Report, Row};
use crate::server;
use crate::stats::{fmt, summarize};

/// Attempts already failed before the network returns, cycled over the samples.
const BACKOFF_STATES: [u32; 4] = [1, 2, 3, 5];

async fn wait_until(sdk: &Sdk, id: &str, pred: impl Fn(&Transfer) -> bool) -> Transfer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = sdk.transfer(id).expect("transfer");
        if pred(&t) || Instant::now() > deadline {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Runs figure 4 with both databases in `dir`.
pub async fn run(report: &mut Report, dir: &Path, samples: usize) {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let db = tmp.path().join("server.db");
    let gateway = server_mock::ServerConfig::default().gateway_delay;
    let srv = server::start(db.to_str().expect("utf-8"), gateway).await;
    let base = srv.base_url();
    let client = server::client();
    let user = server::create_user(&client, &base, "payer", 1_000_000_000_000_000).await;
    let to = server::create_user(&client, &base, "payee", 0)
        .await
        .user_id;

    let retry = RetryPolicy {
        base: Duration::from_secs(600),
        cap: Duration::from_secs(3600),
        // Generous budget: the samples follow each other faster than any real outage would.
        budget_burst: 100_000,
        ..RetryPolicy::default()
    };
    let config = SdkConfig::builder(&base, tmp.path().join("sdk.db"))
        .access_token(&user.token)
        .retry(retry)
        .build()
        .expect("config");
    let sdk = Sdk::open(config).expect("sdk");
    let request = || TransferRequest {
        to_user_id: to.clone(),
        amount_minor: 100,
        currency: "BDT".into(),
        note: None,
    };
    let transfers_url = format!("{base}/v1/transfers");
    let plain_url = format!("{base}/v1/bench/plain");
    let (mut rec, mut rtt, mut plain, mut backoff_left_s) = (vec![], vec![], vec![], vec![]);
    let mut not_succeeded = 0;
    for i in 0..samples + 2 {
        // Offline: the first attempt and the extra ones fail and schedule ever longer backoffs.
        sdk.set_network_profile(NetworkProfile::Offline, i as u64)
            .expect("profile");
        let t = sdk.send_transfer(request()).await.expect("send");
        let want = BACKOFF_STATES[i % BACKOFF_STATES.len()];
        for k in 1..=want {
            if k > 1 {
                sdk.set_network_available(true).expect("wake");
            }
            wait_until(&sdk, &t.local_id, |t| {
                t.attempts >= k && t.state == TransferState::Retrying
            })
            .await;
        }
        // The phone notices the outage, then the radio comes back.
        sdk.set_network_available(false).expect("down");
        sdk.set_network_profile(NetworkProfile::Off, 0)
            .expect("profile");
        let waiting = sdk.transfer(&t.local_id).expect("transfer");
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);

        // ABAB: baseline round trips around the measured recovery, order alternating.
        let key = uuid::Uuid::new_v4().to_string();
        let body = server::transfer_body(&to, 100);
        let baseline_first = i % 2 == 0;
        let mut rt = None;
        if baseline_first {
            rt = Some(
                server::post(
                    &client,
                    &transfers_url,
                    &user.token,
                    Some(&key),
                    body.clone(),
                )
                .await,
            );
        }
        let start = Instant::now();
        sdk.set_network_available(true).expect("up");
        let done = sdk.wait_for_outcome(&t.local_id).await.expect("outcome");
        let took = start.elapsed().as_secs_f64() * 1e3;
        if !baseline_first {
            rt = Some(
                server::post(
                    &client,
                    &transfers_url,
                    &user.token,
                    Some(&key),
                    body.clone(),
                )
                .await,
            );
        }
        let p = server::post(&client, &plain_url, &user.token, None, body).await;
        if i < 2 {
            continue; // warm-up
        }
        if done.state != TransferState::Succeeded {
            not_succeeded += 1;
        }
        rec.push(took);
        rtt.push(rt.map(|a| a.secs * 1e3).unwrap_or(f64::NAN));
        plain.push(p.secs * 1e3);
        backoff_left_s.push((waiting.next_attempt_at_ms.unwrap_or(now_ms) - now_ms) as f64 / 1e3);
    }
    sdk.close();
    srv.shutdown().await;

    let (r, b, pl, left) = (
        summarize(&rec),
        summarize(&rtt),
        summarize(&plain),
        summarize(&backoff_left_s),
    );
    let excess_p50 = r.p50 - b.p50;
    let excess_p99 = r.p99 - b.p99;
    report.rows.push(
        Row::new("4", "recovery: network back → Succeeded, p50/p99 ms")
            .subject(format!("{}/{}", fmt(r.p50), fmt(r.p99)))
            .baseline(format!(
                "{}/{} one POST /v1/transfers round trip",
                fmt(b.p50),
                fmt(b.p99)
            ))
            .ratio(format!(
                "+{} ms p50, +{} ms p99",
                fmt(excess_p50),
                fmt(excess_p99)
            ))
            .target("≤ 1 RTT + 10 ms", excess_p50 <= 10.0 && excess_p99 <= 10.0),
    );
    report.rows.push(
        Row::new("4", "backoff still to wait when the network came back (s)")
            .subject(format!(
                "p10 {} · p50 {} · p90 {}",
                fmt(left.p10),
                fmt(left.p50),
                fmt(left.p90)
            ))
            .baseline(format!(
                "plain-insert RTT {}/{} ms",
                fmt(pl.p50),
                fmt(pl.p99)
            )),
    );
    report.key("recovery_ms_p99", r3(r.p99));
    report.key("recovery_ms_p50", r3(r.p50));
    report.key("round_trip_ms_p50", r3(b.p50));
    report.key(
        "recovery",
        serde_json::json!({
            "recovery_ms": {"p10": r3(r.p10), "p50": r3(r.p50), "p90": r3(r.p90), "p99": r3(r.p99), "max": r3(r.max), "n": r.n},
            "transfer_rtt_ms": {"p10": r3(b.p10), "p50": r3(b.p50), "p90": r3(b.p90), "p99": r3(b.p99)},
            "plain_rtt_ms": {"p50": r3(pl.p50), "p99": r3(pl.p99)},
            "backoff_left_s": {"min": r3(left.min), "p50": r3(left.p50), "max": r3(left.max)},
            "not_succeeded": not_succeeded,
            "gateway_delay_ms": gateway.as_millis() as u64,
        }),
    );
    report.note(
        "4 recovery",
        format!(
            "{samples} samples (after 2 warm-up). Each sample confirms a transfer under the `offline` network profile with \
             retry base 10 min, cap 1 h, full jitter, and lets 1, 2, 3 or 5 attempts fail (cycled), so the transfer is \
             `Retrying` with {}–{} s of backoff left. Then `set_network_available(false)`, profile `off` (radio back), \
             and the clock starts at `set_network_available(true)` and stops when `wait_for_outcome` returns Succeeded \
             ({not_succeeded} did not). Baseline, interleaved before/after on alternate samples: one POST /v1/transfers \
             with a fresh key through a warm keep-alive reqwest client, same server (gateway_delay {} ms, SQLite file in \
             `{}`), same user. The retry budget is set large so back-to-back samples do not drain it.",
            fmt(left.min),
            fmt(left.max),
            gateway.as_millis(),
            dir.display()
        ),
    );
}
