//! Rides against the second backend (`--api bank`): a bank's own API, with its own paths, key
//! header, error codes and strong customer authentication, driven through the SDK's operations and
//! response contract. The checker holds it to every invariant of server-mock's rides, plus
//! "parked is parked".

use std::process::Command;

use serde_json::Value;

/// `sendonce-sim ride --api bank --json ARGS`: exit code and report (real-time section removed).
fn ride(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .args(["ride", "--api", "bank", "--json"])
        .args(args)
        .output()
        .expect("sendonce-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let mut report: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    if let Some(o) = report.as_object_mut() {
        o.remove("real_time");
    }
    (out.status.code(), report, format!("{stdout}\n{stderr}"))
}

fn verdict<'a>(report: &'a Value, name: &str) -> &'a Value {
    let all = report["invariants"].as_array().expect("verdicts");
    all.iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no verdict {name:?} in {report:#}"))
}

/// Every fault a deterministic bank ride has: app kills, double taps, clock changes, stranded phones
/// (a day past the give-up horizon, some while parked), impatient look-ups, 503s, answers dropped
/// after the order executed, portal and proxy pages.
const FAULTS: [&str; 16] = [
    "--users",
    "10",
    "--transfers",
    "6",
    "--kill-rate",
    "0.2",
    "--server-faults",
    "0.05",
    "--clock-jump-rate",
    "0.1",
    "--proxy-garbage-rate",
    "0.05",
    "--stranded",
    "0.3",
    "--impatient-rate",
    "0.2",
];

#[test]
fn the_bank_ride_of_seed_5_holds_every_invariant_and_replays() {
    let mut args = FAULTS.to_vec();
    args.extend(["--seed", "5"]);
    let (code, first, out) = ride(&args);
    assert_eq!(code, Some(0), "{out}");
    for v in first["invariants"].as_array().unwrap() {
        assert_eq!(v["ok"], true, "{v:#}");
    }
    // Strong customer authentication happened, and every parked order still ended.
    let parked = verdict(&first, "parked is parked");
    let waited: u64 = parked["summary"]
        .as_str()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(waited > 0, "no order waited for the customer: {parked:#}");
    assert_eq!(first["not_final"], 0, "{first:#}");
    assert!(first["succeeded"].as_u64().unwrap() > 0, "{first:#}");
    assert!(first["deterministic"].as_bool().unwrap(), "{first:#}");
    // The report counts replays by the bank's own header, not server-mock's.
    assert_eq!(first["replay_header"], "X-Replayed", "{first:#}");
    let (_, again, _) = ride(&args);
    assert_eq!(first, again, "the same seed gave another report");
}

/// The checker is not blind on the bank either: an SDK that mints a key per retry is caught.
#[test]
fn a_new_key_per_retry_is_caught_on_the_bank() {
    // Small and briefly settled: each retry's new key is a new order, so such a ride never quiets down.
    let (code, report, out) = ride(&[
        "--users",
        "3",
        "--transfers",
        "3",
        "--seed",
        "5",
        "--settle-secs",
        "5",
        "--new-key-per-retry",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        verdict(&report, "one key per transfer")["ok"],
        false,
        "{out}"
    );
    assert!(report["double_debits"].as_u64().unwrap() > 0, "{out}");
}

/// What only server-mock has is refused by name, never silently ignored.
#[test]
fn server_mock_faults_are_refused_on_the_bank() {
    for flag in [
        ["--server-kill-rate", "0.1"],
        ["--slow-gateway-rate", "0.1"],
        ["--server-clock-jump-rate", "0.1"],
    ] {
        let (code, _, out) = ride(&flag);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains(flag[0]) && out.contains("--api bank"), "{out}");
    }
}

/// README's command, as it is written there: the default ride, seed 5.
#[test]
fn the_readme_bank_ride_is_ok() {
    let (code, report, out) = ride(&["--seed", "5"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(verdict(&report, "parked is parked")["ok"], true, "{out}");
}
