//! Figure 5b, radio cost on a train: requests per successful transfer under the `train` network
//! profile (real SDK against server-mock, `SimClock` so tunnels pass fast) vs the theoretical
//! minimum for the profile's loss rates.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sendonce::{NetworkProfile, Sdk, SdkConfig, SimClock, TransferRequest, TransferState};

use crate::report::{r3, Report, Row};
use crate::server;
use crate::stats::fmt;

/// Probability that one request put on the wire brings back an answer under these settings.
/// Order as in `netsim::SimTransport::simulate`: lost before the server, hung until the timeout,
/// answer lost after the server committed (duplicates do not change what the client sees).
pub fn answer_probability(s: &sendonce::NetsimSettings) -> f64 {
    (1.0 - s.drop_request_rate) * (1.0 - s.timeout_rate) * (1.0 - s.drop_response_rate)
}

/// Runs figure 5b; `dir` holds both databases (use tmpfs: the figure counts requests, not time).
pub async fn run(report: &mut Report, dir: &Path, transfers: usize, speed: f64) {
    let tmp = tempfile::tempdir_in(dir).expect("tempdir");
    let srv = server::start(
        tmp.path().join("server.db").to_str().expect("utf-8"),
        Duration::ZERO,
    )
    .await;
    let base = srv.base_url();
    let client = server::client();
    let user = server::create_user(&client, &base, "rider", 1_000_000_000_000_000).await;
    let to = server::create_user(&client, &base, "friend", 0)
        .await
        .user_id;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let seed = 7;
    let config = SdkConfig::builder(&base, tmp.path().join("sdk.db"))
        .access_token(&user.token)
        .clock(Arc::new(SimClock::new(now, speed)))
        .build()
        .expect("config");
    let sdk = Sdk::open(config).expect("sdk");
    sdk.set_network_profile(NetworkProfile::Train, seed)
        .expect("train");
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..transfers {
        let t = sdk
            .send_transfer(TransferRequest {
                to_user_id: to.clone(),
                amount_minor: 100,
                currency: "BDT".into(),
                note: None,
            })
            .await
            .expect("send");
        ids.push(t.local_id);
    }
    let mut succeeded = 0usize;
    let deadline = Duration::from_secs(120);
    for id in &ids {
        let left = deadline.saturating_sub(started.elapsed());
        if let Ok(Ok(t)) = tokio::time::timeout(left, sdk.wait_for_outcome(id)).await {
            if t.state == TransferState::Succeeded {
                succeeded += 1;
            }
        }
    }
    let real_s = started.elapsed().as_secs_f64();
    let st = sdk.network_stats();
    sdk.close();
    let server_stats = server::test_api(
        &client,
        &base,
        reqwest::Method::GET,
        "/v1/test/stats",
        serde_json::Value::Null,
    )
    .await;
    srv.shutdown().await;

    let settings = NetworkProfile::Train
        .settings(seed)
        .expect("train settings");
    let p = answer_probability(&settings);
    let minimum = 1.0 / p;
    let on_wire = st.requests - st.offline;
    let per = on_wire as f64 / succeeded.max(1) as f64;
    let ratio = per / minimum;
    // Requests until the first answer are geometric(p): standard error of the mean over n transfers.
    let se = (1.0 - p).sqrt() / p / (succeeded.max(1) as f64).sqrt();
    report.rows.push(
        Row::new("5", "train: requests on the wire per successful transfer")
            .subject(format!(
                "{} ({on_wire} requests, {succeeded}/{transfers} succeeded)",
                fmt(per)
            ))
            .baseline(format!(
                "theoretical minimum 1/p = {} ± {} s.e. (p = {} answered)",
                fmt(minimum),
                fmt(se),
                fmt(p)
            ))
            .ratio(fmt(ratio)),
    );
    report.rows.push(
        Row::new(
            "5",
            "train: attempts refused in tunnels (no radio) per transfer",
        )
        .subject(fmt(st.offline as f64 / succeeded.max(1) as f64))
        .baseline("0 (a client that knew the tunnel times)"),
    );
    report.key("requests_per_transfer_train", r3(per));
    report.key("requests_per_transfer_train_minimum", r3(minimum));
    report.key(
        "train",
        serde_json::json!({
            "transfers": transfers, "succeeded": succeeded, "netsim": {
                "requests": st.requests, "offline": st.offline, "dropped_requests": st.dropped_requests,
                "dropped_responses": st.dropped_responses, "duplicated": st.duplicated, "timeouts": st.timeouts},
            "answer_probability": r3(p), "minimum_requests_per_transfer": r3(minimum),
            "ratio_to_minimum": r3(ratio), "standard_error": r3(se), "sim_speed": speed, "real_seconds": r3(real_s),
            "server_stats": server_stats,
        }),
    );
    report.note(
        "5b train",
        format!(
            "Real SDK (default retry policy) against server-mock (gateway_delay 0), profile `train` seed {seed}: \
             latency {}±{} ms, request lost {:.0} %, hung to timeout {:.0} %, answer lost after commit {:.0} %, \
             duplicated {:.0} %, tunnels ~{} s every ~{} min; SDK clock `SimClock` at {speed}× so the ride \
             took {real_s:.1} s. {transfers} transfers confirmed back to back. Requests on the wire = netsim \
             requests − refused in a tunnel. Minimum: a request gets an answer with p = (1−lost)(1−hung)(1−answer \
             lost) = {}, so any client that must hear an answer needs 1/p requests on average (duplicates do not \
             change what the client sees). Both SQLite files on `{}` (this figure counts requests, not time).",
            settings.latency_ms,
            settings.latency_jitter_ms,
            settings.drop_request_rate * 100.0,
            settings.timeout_rate * 100.0,
            settings.drop_response_rate * 100.0,
            settings.duplicate_rate * 100.0,
            settings.tunnel_length_ms / 1000,
            settings.tunnel_every_ms / 60_000,
            fmt(p),
            dir.display()
        ),
    );
}
