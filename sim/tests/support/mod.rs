//! What the ride tests share: running `sendonce-sim ride --json`, and the verdicts they assert.

// Each test file uses only some of these.
#![allow(dead_code)]

use std::process::Command;

use serde_json::Value;

/// One finished ride: its exit code, its JSON report and its stderr.
pub struct Ride {
    /// 0: every invariant held; 1: the checker failed the ride; 2: it could not run.
    pub code: i32,
    /// The `--json` report.
    pub report: Value,
    /// The FAIL lines and logs.
    pub stderr: String,
}

/// Runs `sendonce-sim ride --json ARGS` with `env` added to its environment.
pub fn ride_with_env(args: &[&str], env: &[(&str, &str)]) -> Ride {
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .args(["ride", "--json"])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("sendonce-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON report ({e}): {stdout}\n{stderr}"));
    Ride {
        code: out.status.code().unwrap_or(-1),
        report,
        stderr,
    }
}

/// Runs `sendonce-sim ride --json ARGS`.
pub fn ride(args: &[&str]) -> Ride {
    ride_with_env(args, &[])
}

impl Ride {
    /// The ride passed: exit 0, every invariant held, no double debit, no lost transfer.
    pub fn assert_holds(&self) -> &Value {
        let r = &self.report;
        assert_eq!(self.code, 0, "ride failed: {r:#}\n{}", self.stderr);
        assert_eq!(r["invariants_ok"], true, "{r:#}");
        assert_eq!(r["double_debits"], 0, "{r:#}");
        assert_eq!(r["lost"], 0, "{r:#}");
        r
    }

    /// The checker failed the ride (`what` broke it), saying every one of `fails` on stderr.
    pub fn assert_caught(&self, what: &str, fails: &[&str]) -> &Value {
        let r = &self.report;
        assert_eq!(
            self.code, 1,
            "{what} must fail the ride: {r:#}\n{}",
            self.stderr
        );
        assert_eq!(r["invariants_ok"], false, "{r:#}");
        for fail in fails {
            assert!(
                self.stderr.contains(fail),
                "no {fail:?} on stderr: {}",
                self.stderr
            );
        }
        r
    }

    /// The report says the ride ran in real time, naming every one of `causes`.
    pub fn assert_real_time_because(&self, causes: &[&str]) {
        let r = &self.report;
        assert_eq!(r["deterministic"], false, "{r:#}");
        let why = r["not_deterministic_because"].as_str().unwrap_or("");
        for cause in causes {
            assert!(why.contains(cause), "{cause:?} not named: {r:#}");
        }
    }
}

/// Runs `scripts/<script> crash` once `after` has passed (a database or broker failing in the middle of
/// a ride); the handle gives how long after the call the crashed service was back.
pub fn crash_after(
    script: &'static str,
    after: std::time::Duration,
) -> std::thread::JoinHandle<std::time::Duration> {
    let started = std::time::Instant::now();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        run_script(script, "crash");
        started.elapsed()
    })
}

/// Runs `scripts/<script> <command>`, panicking with its stderr if it fails.
fn run_script(script: &str, command: &str) {
    let path = format!("{}/../scripts/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&path)
        .arg(command)
        .output()
        .unwrap_or_else(|e| panic!("scripts/{script} runs: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The last `lines` lines of the cluster's log (`SENDONCE_PG_DIR/postgres.log`), if there is one.
fn pg_log_tail(lines: usize) -> String {
    let Ok(dir) = std::env::var("SENDONCE_PG_DIR") else {
        return "(SENDONCE_PG_DIR not set)".into();
    };
    let log = std::fs::read_to_string(format!("{dir}/postgres.log")).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The ride delivered credits downstream (its "one credit and one SMS per debit" verdict counts some).
pub fn assert_credits_delivered(report: &Value) {
    let downstream = report["invariants"]
        .as_array()
        .and_then(|v| {
            v.iter()
                .find(|v| v["name"] == "one credit and one SMS per debit")
        })
        .expect("the downstream verdict");
    assert!(
        !downstream["summary"]
            .as_str()
            .unwrap_or("")
            .contains(" 0 credits"),
        "{report:#}"
    );
}

/// The PostgreSQL crash ride (`ride_postgres_crash*.rs`): three instances on `db` behind the balancer,
/// `scripts/pg crash` two seconds in, on `seed`, with `extra` arguments. Panics if the ride ended
/// before the crash (it would prove nothing). Needs the cluster's `SENDONCE_PG_DIR` for the crash.
pub fn pg_crash_ride(db: &str, seed: &str, extra: &[&str]) -> Ride {
    // The crash's recovery replays the ride's WAL, not what the suites before it wrote
    // (after them, recovery on a loaded machine outran the ride's settle phase).
    run_script("pg", "checkpoint");
    let started = std::time::Instant::now();
    let crash = crash_after("pg", std::time::Duration::from_secs(2));
    let args = [
        &[
            "--db",
            db,
            "--instances",
            "3",
            "--profile",
            "lb-replay",
            "--users",
            "8",
            "--transfers",
            // Enough that the ride outlasts the crash (2 s in, back ~0.6 s later) with margin.
            "24",
            "--seed",
            seed,
        ][..],
        extra,
    ]
    .concat();
    let ride = ride(&args);
    let ride_took = started.elapsed();
    let crashed_at = crash.join().expect("the crash thread");
    eprintln!("PostgreSQL back after {crashed_at:?}; the ride took {ride_took:?}");
    if ride.code != 0 {
        // What the cluster did around the crash: the test-all logs go with a CI clone.
        eprintln!("the cluster's log ends:\n{}", pg_log_tail(60));
    }
    assert!(
        crashed_at < ride_took,
        "the ride ended ({ride_took:?}) before PostgreSQL crashed ({crashed_at:?}): it proves nothing: {:#}",
        ride.report
    );
    ride
}
