//! Figure 5a, retry storm: 10,000 clients whose network returns at the same instant after a long
//! outage, each driven by the SDK's own pure schedule (`sendonce::schedule::next_attempt`).
//! Peak requests in any 100 ms window over the mean, full jitter vs none.

use sendonce::schedule::{
    background_wake_at, next_attempt, seed_of, splitmix64, NextAttempt, ScheduleInput,
};
use sendonce::RetryPolicy;

use crate::report::{r3, Report, Row};
use crate::stats::{fmt, summarize};

const WINDOW_MS: i64 = 100;

/// What the fleet did after the network came back.
#[derive(Debug, Clone, Copy)]
pub struct Storm {
    pub peak: usize,
    pub mean: f64,
    pub peak_over_mean: f64,
    /// Attempts made (and failed) during the outage, per client.
    pub outage_attempts_per_client: f64,
    /// Time until the last client's first request after the return (s).
    pub drain_s: f64,
}

/// How the fleet's first request after the outage is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Return {
    /// The retry schedule alone (the radios stayed up, the outage was upstream).
    Schedule,
    /// The SDK's foreground `set_network_available(true)`: every waiting transfer is sent at once.
    WakeAll,
    /// A background wake-up (`drain`, or the network signal in the background): each transfer's
    /// next request spread over the wake window by `schedule::background_wake_at`, as the SDK does.
    BackgroundWake,
}

/// Simulates `clients` whose transfers were confirmed within `start_spread_ms` of the outage start,
/// that retry on schedule through an outage of `outage_ms`; the first attempt after it succeeds.
pub fn simulate(
    clients: usize,
    policy: &RetryPolicy,
    start_spread_ms: i64,
    outage_ms: i64,
    wake: Return,
    seed: u64,
) -> Storm {
    let horizon = policy.cap.as_millis() as i64; // every client is back within one cap
    let windows = (horizon / WINDOW_MS) as usize;
    let mut counts = vec![0usize; windows + 1];
    let mut outage_attempts = 0u64;
    let mut last_back = 0i64;
    for i in 0..clients {
        let r = splitmix64(seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let created = ((r >> 11) as f64 / (1u64 << 53) as f64 * start_spread_ms as f64) as i64;
        let jitter_seed = splitmix64(r);
        let (mut attempts, mut last) = (1u32, created);
        outage_attempts += 1;
        let back_at = match wake {
            // The host app's connectivity signal wakes every waiting retry at once (SDK behaviour).
            Return::WakeAll => outage_ms,
            // The phone was offline (its sender idle, every transfer due by now): each first request is
            // spread by the SDK's own function, seeded by the transfer's key (a UUID; any key gives the
            // same law), over the default wake window.
            Return::BackgroundWake => {
                let key = format!("{r:016x}{jitter_seed:016x}");
                background_wake_at(outage_ms, wake_window_ms(policy), seed_of(&key), created)
            }
            Return::Schedule => loop {
                let input = ScheduleInput {
                    created_at_ms: created,
                    attempts,
                    last_attempt_at_ms: last,
                    retry_after_ms: None,
                    jitter_seed,
                };
                match next_attempt(policy, &input) {
                    NextAttempt::At(t) if t < outage_ms => {
                        outage_attempts += 1;
                        attempts += 1;
                        last = t;
                    }
                    NextAttempt::At(t) => break t,
                    NextAttempt::GiveUp => break i64::MAX,
                }
            },
        };
        if back_at == i64::MAX {
            continue;
        }
        let offset = back_at - outage_ms;
        last_back = last_back.max(offset);
        let w = ((offset / WINDOW_MS) as usize).min(windows);
        counts[w] += 1;
    }
    let peak = counts.iter().copied().max().unwrap_or(0);
    let total: usize = counts.iter().sum();
    let mean = total as f64 / windows as f64;
    Storm {
        peak,
        mean,
        peak_over_mean: peak as f64 / mean,
        outage_attempts_per_client: outage_attempts as f64 / clients as f64,
        drain_s: last_back as f64 / 1e3,
    }
}

/// The SDK's default background wake window, bounded by the cap as the SDK bounds it.
fn wake_window_ms(policy: &RetryPolicy) -> i64 {
    let window = sendonce::SdkConfig::builder("https://example.com", "unused.db")
        .build()
        .map(|c| c.background_wake_window)
        .unwrap_or(policy.cap);
    window.min(policy.cap).as_millis() as i64
}

fn storm_json(s: &Storm) -> serde_json::Value {
    serde_json::json!({"peak_per_100ms": s.peak, "mean_per_100ms": r3(s.mean), "peak_over_mean": r3(s.peak_over_mean),
        "outage_attempts_per_client": r3(s.outage_attempts_per_client), "last_client_back_s": r3(s.drain_s)})
}

/// Runs figure 5a (pure simulation, a second or so).
pub fn run(report: &mut Report) {
    let clients = 10_000;
    let outage_ms = 30 * 60_000;
    let jitter = RetryPolicy::default();
    let none = RetryPolicy {
        jitter: false,
        ..RetryPolicy::default()
    };
    let seed = 0x5EED_u64;
    let mut details = serde_json::Map::new();
    let mut headline = (0.0, 0.0);
    for (spread_ms, label) in [
        (1_000, "confirmed within 1 s"),
        (300_000, "confirmed over 5 min"),
    ] {
        // Five fleets (seeds); the table shows the median one and the range.
        let runs = |p: &RetryPolicy| -> Vec<Storm> {
            (0..5)
                .map(|k| simulate(clients, p, spread_ms, outage_ms, Return::Schedule, seed + k))
                .collect()
        };
        let (js, ns) = (runs(&jitter), runs(&none));
        let median = |v: &[Storm]| {
            let mut v = v.to_vec();
            v.sort_by(|a, b| a.peak_over_mean.total_cmp(&b.peak_over_mean));
            v[v.len() / 2]
        };
        let range = |v: &[Storm]| {
            let r = summarize(&v.iter().map(|s| s.peak_over_mean).collect::<Vec<_>>());
            format!("{}–{}", fmt(r.min), fmt(r.max))
        };
        let (j, n) = (median(&js), median(&ns));
        if spread_ms == 1_000 {
            headline = (j.peak_over_mean, n.peak_over_mean);
        }
        report.rows.push(
            Row::new(
                "5",
                format!("storm, schedule only, {label}: peak/mean req per 100 ms"),
            )
            .subject(format!(
                "jitter {} (peak {} vs mean {}; 5 fleets {})",
                fmt(j.peak_over_mean),
                j.peak,
                fmt(j.mean),
                range(&js)
            ))
            .baseline(format!(
                "no jitter {} (peak {}; 5 fleets {})",
                fmt(n.peak_over_mean),
                n.peak,
                range(&ns)
            ))
            .ratio(format!(
                "{} (jitter ÷ none)",
                fmt(j.peak_over_mean / n.peak_over_mean)
            )),
        );
        details.insert(
            format!("schedule_only_spread_{spread_ms}ms"),
            serde_json::json!({"jitter": storm_json(&j), "no_jitter": storm_json(&n)}),
        );
    }
    let wj = simulate(clients, &jitter, 1_000, outage_ms, Return::WakeAll, seed);
    let wn = simulate(clients, &none, 1_000, outage_ms, Return::WakeAll, seed);
    report.rows.push(
        Row::new(
            "5",
            "storm with the SDK's network-available wake-up: peak/mean",
        )
        .subject(format!(
            "jitter {} (peak {})",
            fmt(wj.peak_over_mean),
            wj.peak
        ))
        .baseline(format!(
            "no jitter {} (peak {})",
            fmt(wn.peak_over_mean),
            wn.peak
        ))
        .ratio(fmt(wj.peak_over_mean / wn.peak_over_mean)),
    );
    details.insert(
        "wake_all_on_network_signal".into(),
        serde_json::json!({"jitter": storm_json(&wj), "no_jitter": storm_json(&wn)}),
    );
    let bj = simulate(
        clients,
        &jitter,
        1_000,
        outage_ms,
        Return::BackgroundWake,
        seed,
    );
    let bn = simulate(
        clients,
        &none,
        1_000,
        outage_ms,
        Return::BackgroundWake,
        seed,
    );
    report.rows.push(
        Row::new(
            "5",
            "storm with the SDK's background wake-up (drain, network back in the background): peak/mean",
        )
        .subject(format!(
            "jitter {} (peak {})",
            fmt(bj.peak_over_mean),
            bj.peak
        ))
        .baseline(format!(
            "foreground wake-up {} (peak {})",
            fmt(wj.peak_over_mean),
            wj.peak
        ))
        .ratio(format!(
            "{} (background ÷ foreground); no jitter in the retries: {}",
            fmt(bj.peak_over_mean / wj.peak_over_mean),
            fmt(bn.peak_over_mean)
        )),
    );
    details.insert(
        "background_wake".into(),
        serde_json::json!({"jitter": storm_json(&bj), "no_jitter": storm_json(&bn)}),
    );
    report.key(
        "storm_peak_over_mean_background_wakeup",
        r3(bj.peak_over_mean),
    );
    report.key("storm_peak_over_mean_jitter", r3(headline.0));
    report.key("storm_peak_over_mean_no_jitter", r3(headline.1));
    report.key("storm", serde_json::Value::Object(details));
    report.note(
        "5a retry storm",
        format!(
            "Simulation of {clients} clients with the SDK's own pure schedule (`schedule::next_attempt`, default policy: \
             base 0.5 s, cap 60 s; jitter on vs `RetryPolicy.jitter = false`). Each client confirmed a transfer at the \
             start of a {} min outage (uniformly within 1 s — the outage cut them off mid-send — or over 5 min), every \
             attempt during the outage fails, and the first attempt after the network returns succeeds. Requests after \
             the return are counted in 100 ms windows over one cap (60 s, by when every client has come back); \
             peak/mean = largest window ÷ average window. Headline keys use the 1 s spread, schedule only, i.e. the \
             phones' radios stayed up and the outage was upstream. The last row models what the SDK does when the \
             host app calls `set_network_available(true)` in the foreground: every waiting retry is woken at once, \
             whatever the jitter. The background row (`drain`, or the network signal after `set_in_foreground(false)`) \
             models phones that were offline through the outage (the sender idle, every transfer due when the network \
             returns) and times each first request with the SDK's own `schedule::background_wake_at` over the \
             default wake window (60 s, one cap), seeded by the transfer's key. \
             Five fleets (seeds) per case; the table shows the median fleet and the range. No run with 10,000 real \
             SDK instances: each has its own runtime, sender and SQLite file, which two cores cannot host at once; the \
             simulation calls the same pure function the sender uses, so the request times are the SDK's.",
            outage_ms / 60_000
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyone_comes_back_exactly_once() {
        let p = RetryPolicy::default();
        for wake in [Return::Schedule, Return::WakeAll, Return::BackgroundWake] {
            let s = simulate(500, &p, 1_000, 600_000, wake, 1);
            assert!((s.mean * 600.0 - 500.0).abs() < 1e-6);
            assert!(s.peak >= 1);
        }
    }

    #[test]
    fn lockstep_without_jitter_is_a_spike() {
        let none = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        let s = simulate(1_000, &none, 0, 600_000, Return::Schedule, 1);
        assert_eq!(s.peak, 1_000);
    }

    #[test]
    fn a_background_wake_up_spreads_the_herd_the_foreground_one_does_not() {
        let p = RetryPolicy::default();
        let fg = simulate(5_000, &p, 1_000, 1_800_000, Return::WakeAll, 3);
        let bg = simulate(5_000, &p, 1_000, 1_800_000, Return::BackgroundWake, 3);
        assert_eq!(fg.peak, 5_000);
        assert!(bg.peak_over_mean <= 3.0, "{bg:?}");
    }
}
