//! The ride's report: numbers and verdicts, for people or as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::checker::Verdict;

/// What a ride did and whether every invariant held. Times are simulated ms unless named `real`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Network profile during the ride.
    pub profile: String,
    /// The header that marks a replayed answer under the ride's API (`Idempotent-Replayed` on
    /// server-mock, `X-Replayed` on the bank).
    pub replay_header: String,
    /// Seed.
    pub seed: u64,
    /// Users (phones).
    pub users: usize,
    /// Transfers each user confirmed.
    pub transfers_per_user: usize,
    /// Kill probability per transfer.
    pub kill_rate: f64,
    /// Simulated ms per real ms.
    pub speed: f64,
    /// The SDK's debug flag that must make the checker fail.
    pub new_key_per_retry: bool,
    /// Transfers in the phones' stores.
    pub transfers: usize,
    /// Transfers users saw confirmed on screen.
    pub confirmed: usize,
    /// Sends tapped twice at once.
    pub double_taps: u64,
    /// Confirms that returned an error.
    pub confirm_errors: usize,
    /// Final: the money moved.
    pub succeeded: usize,
    /// Final: a definitive no (e.g. insufficient funds).
    pub rejected: usize,
    /// Final: never executed (found by status look-up) or a bug.
    pub failed: usize,
    /// Transfers that reached NeedsAttention (resolved by status look-up).
    pub needs_attention: usize,
    /// Transfers not final at quiescence.
    pub not_final: usize,
    /// Debits beyond the first per key or per confirmed transfer.
    pub double_debits: u64,
    /// Confirmed transfers missing or not final at quiescence.
    pub lost: u64,
    /// Final transfers whose device view differs from the server's.
    pub mismatches: u64,
    /// Debits no phone accounts for.
    pub orphan_debits: u64,
    /// Attempts (requests started) over all transfers.
    pub attempts: u64,
    /// Transfers whose success came back as a replay.
    pub replays_seen: usize,
    /// Transfer POSTs that reached the server.
    pub wire_posts: u64,
    /// Status look-ups that reached the server.
    pub wire_look_ups: u64,
    /// Answers with the replay header (`Idempotent-Replayed: true` on server-mock).
    pub wire_replays: u64,
    /// 409 `idempotency_key_in_use` answers.
    pub conflicts_409: u64,
    /// 5xx answers.
    pub server_5xx: u64,
    /// Answers lost after the server committed (injected).
    pub lost_responses: u64,
    /// Requests lost before the server (injected).
    pub lost_requests: u64,
    /// Requests hung until the timeout (injected).
    pub timeouts: u64,
    /// Requests delivered twice (injected).
    pub duplicated: u64,
    /// Requests refused inside a tunnel.
    pub offline_refusals: u64,
    /// App kills (SDK closed mid-flight, reopened).
    pub kills: u64,
    /// Phones stranded for a day (clock past the give-up horizon).
    pub stranded_users: usize,
    /// `resolve` calls the app made to settle NeedsAttention.
    pub resolves: u64,
    /// "Check status" taps (`resolve`) on unfinished transfers during the ride.
    pub impatient_checks: u64,
    /// Send tapped again on a re-attached confirm screen after a restart.
    pub retaps_after_restart: u64,
    /// Phone clock changes during the ride.
    pub clock_jumps: u64,
    /// Server keys still in progress after settle.
    pub keys_in_progress: i64,
    /// Probability that a gateway step outlived the key lock.
    pub slow_gateway_rate: f64,
    /// Test-only: the server ran without the fence.
    pub unfenced: bool,
    /// Server processes SIGKILLed and restarted during the ride.
    pub server_kills: u64,
    /// Server wall-clock jumps during the ride.
    pub server_clock_jumps: u64,
    /// Status look-ups by the users' web dashboards (slow requests only).
    pub dashboard_look_ups: u64,
    /// Answers an intermediary replaced with a portal or proxy page.
    pub proxy_garbage: u64,
    /// Confirm to success, median (phones whose clock jumped excluded).
    pub time_to_confirm_p50_ms: i64,
    /// Confirm to success, 99th percentile (phones whose clock jumped excluded).
    pub time_to_confirm_p99_ms: i64,
    /// Simulated length of the ride phase.
    pub simulated_ride_ms: i64,
    /// The same seed gives the same report (real-time section aside) on every run and machine.
    pub deterministic: bool,
    /// Why not, for a ride that is not deterministic (real processes killed, `--real-time`).
    pub not_deterministic_because: Option<String>,
    /// Real time: differs between runs, even deterministic ones.
    pub real_time: RealTime,
    /// Every invariant held.
    pub invariants_ok: bool,
    /// One verdict per invariant.
    pub invariants: Vec<Verdict>,
}

/// The report's real-time section: the only part of a deterministic ride that varies between runs.
#[derive(Debug, Clone, Serialize)]
pub struct RealTime {
    /// Real time of the whole run.
    pub real_ms: u64,
    /// Real time the phones took to settle once the network was back.
    pub settle_real_ms: u64,
    /// How late a 10 ms timer fired during a real-time ride (99th percentile, real ms): times
    /// `speed`, the simulated time a busy machine adds to every wait (0 on a deterministic ride).
    pub timer_lag_p99_real_ms: i64,
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `1h 02m`, `3m 12s`, `4.2 s`, `350 ms`.
pub fn duration(ms: i64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

impl Report {
    /// The human report.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let per = |n: u64| {
            if self.transfers == 0 {
                0.0
            } else {
                n as f64 / self.transfers as f64
            }
        };
        let _ = writeln!(
            o,
            "sendonce ride: profile {}, {} users x {} transfers, seed {}, kill rate {}, {}x simulated time{}",
            self.profile,
            self.users,
            self.transfers_per_user,
            self.seed,
            self.kill_rate,
            self.speed,
            if self.new_key_per_retry { ", BROKEN SDK (--new-key-per-retry)" } else { "" }
        );
        let _ = writeln!(
            o,
            "  ride {} simulated; {}\n",
            duration(self.simulated_ride_ms),
            match &self.not_deterministic_because {
                None => "deterministic: the same seed replays this report".to_string(),
                Some(why) =>
                    format!("NOT deterministic ({why}): the same seed may give another report"),
            }
        );
        let _ = writeln!(
            o,
            "transfers        {} on the phones ({} confirmed on screen, {} double taps)",
            self.transfers, self.confirmed, self.double_taps
        );
        let _ = writeln!(
            o,
            "  succeeded      {} ({} as replays)",
            self.succeeded, self.replays_seen
        );
        let _ = writeln!(o, "  rejected       {}", self.rejected);
        let _ = writeln!(o, "  failed         {}", self.failed);
        let _ = writeln!(
            o,
            "  needs attention {} (resolved by status look-up; {} stranded phones)",
            self.needs_attention, self.stranded_users
        );
        let _ = writeln!(o, "  not final      {}", self.not_final);
        let _ = writeln!(
            o,
            "attempts         {} ({:.2} per transfer)",
            self.attempts,
            per(self.attempts)
        );
        let _ = writeln!(
            o,
            "server saw       {} POSTs, {} replays ({}), {} x 409 in progress, {} x 5xx, {} status look-ups",
            self.wire_posts, self.wire_replays, self.replay_header, self.conflicts_409, self.server_5xx, self.wire_look_ups
        );
        let _ = writeln!(
            o,
            "network faults   {} lost responses, {} lost requests, {} timeouts, {} duplicated, {} refused in tunnels, {} portal/proxy pages",
            self.lost_responses, self.lost_requests, self.timeouts, self.duplicated, self.offline_refusals, self.proxy_garbage
        );
        let _ = writeln!(
            o,
            "kills            {} (SDK closed mid-flight, reopened on the same file; Send tapped again after {} of them)\n\
             user actions     {} \"check status\" taps while unfinished, {} phone clock changes",
            self.kills,
            self.retaps_after_restart,
            self.impatient_checks,
            self.clock_jumps
        );
        let _ = writeln!(
            o,
            "server faults    {} SIGKILLs + restarts, {} clock jumps, slow gateway rate {} ({} dashboard look-ups of slow requests){}",
            self.server_kills,
            self.server_clock_jumps,
            self.slow_gateway_rate,
            self.dashboard_look_ups,
            if self.unfenced {
                " (UNFENCED test build)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            o,
            "time to confirm  p50 {}, p99 {} (simulated; phones whose clock jumped excluded)\n",
            duration(self.time_to_confirm_p50_ms),
            duration(self.time_to_confirm_p99_ms)
        );
        let _ = writeln!(o, "invariants");
        for v in &self.invariants {
            let _ = writeln!(
                o,
                "  {}  {}: {}",
                if v.ok { "PASS" } else { "FAIL" },
                v.name,
                v.summary
            );
            for f in &v.failures {
                let _ = writeln!(o, "          - {f}");
            }
        }
        let _ = writeln!(
            o,
            "\n{}: double debits {}, lost {}, view mismatches {}, unexplained debits {}",
            if self.invariants_ok {
                "RIDE OK"
            } else {
                "RIDE FAILED"
            },
            self.double_debits,
            self.lost,
            self.mismatches,
            self.orphan_debits
        );
        self.real_time_section(&mut o);
        o
    }

    /// The part that varies between runs, last and apart.
    fn real_time_section(&self, o: &mut String) {
        let r = &self.real_time;
        let _ = writeln!(
            o,
            "\nreal time (varies between runs)\n  whole run {}, phones settled in {} once the network was back",
            duration(r.real_ms as i64),
            duration(r.settle_real_ms as i64)
        );
        let lag_sim_ms = (r.timer_lag_p99_real_ms as f64 * self.speed) as i64;
        if lag_sim_ms > 5_000 {
            let _ = writeln!(
                o,
                "  the machine was busy: timers fired up to {} ms late (= {} simulated at {}x), so simulated\n\
                 \x20 times above are inflated; the invariants still hold or fail as shown (try --speed 50)",
                r.timer_lag_p99_real_ms,
                duration(lag_sim_ms),
                self.speed
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_durations() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[], 99.0), 0);
        assert_eq!(percentile(&[7], 1.0), 7);
        assert_eq!(duration(350), "350 ms");
        assert_eq!(duration(4_200), "4.2 s");
        assert_eq!(duration(192_000), "3m 12s");
        assert_eq!(duration(3_720_000), "1h 02m");
    }
}
