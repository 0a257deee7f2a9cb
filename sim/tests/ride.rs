//! The one-command ride, end to end through the binary: a sound SDK passes, a broken one is caught.

use std::process::Command;

use serde_json::Value;

fn ride(args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .args(["ride", "--json", "--profile", "train"])
        .args(args)
        .output()
        .expect("sendonce-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON report ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

#[test]
fn a_small_train_ride_holds_every_invariant() {
    let (code, r, stderr) = ride(&[
        "--users",
        "5",
        "--transfers",
        "6",
        "--seed",
        "7",
        "--kill-rate",
        "0.2",
        "--server-faults",
        "0.05",
    ]);
    assert_eq!(code, 0, "ride failed: {r:#}\n{stderr}");
    assert_eq!(r["invariants_ok"], true);
    assert_eq!(r["double_debits"], 0);
    assert_eq!(r["lost"], 0);
    // 5 users x 6 transfers; a tap after a definitive no is a new intent, so there can be a few more.
    let transfers = r["transfers"].as_u64().unwrap();
    assert!(transfers >= 30, "{r:#}");
    assert_eq!(
        r["confirmed"].as_u64().unwrap(),
        transfers,
        "every transfer on a phone was confirmed on screen"
    );
    let ended: u64 = ["succeeded", "rejected", "failed"]
        .iter()
        .map(|f| r[f].as_u64().unwrap())
        .sum();
    assert_eq!(ended, transfers, "every transfer final: {r:#}");
    for field in ["needs_attention", "attempts", "lost_responses", "kills"] {
        assert!(r[field].is_u64(), "{field} missing: {r:#}");
    }
}

#[test]
fn a_key_per_retry_is_caught_as_double_debit() {
    // Larger than the passing ride: each lost response (~30% on the train) is a chance of a second debit,
    // and 60 transfers make a ride without one vanishingly rare.
    let (code, r, stderr) = ride(&[
        "--seed",
        "7",
        "--users",
        "6",
        "--transfers",
        "10",
        "--new-key-per-retry",
    ]);
    assert_eq!(code, 1, "the broken SDK must fail the ride: {r:#}");
    assert_eq!(r["invariants_ok"], false);
    assert!(
        r["double_debits"].as_u64().unwrap() > 0,
        "no double debit found: {r:#}"
    );
    assert!(
        stderr.contains("FAIL no double debit"),
        "no clear message on stderr: {stderr}"
    );
    assert!(
        stderr.contains("debited"),
        "the message names the double debit: {stderr}"
    );
}

/// The server broken during the ride: gateway steps slower than the key lock, the server process
/// SIGKILLed and restarted on its file, its clock jumping both ways.
const SERVER_FAULTS: [&str; 6] = [
    "--slow-gateway-rate",
    "0.2",
    "--server-kill-rate",
    "0.05",
    "--server-clock-jump-rate",
    "0.05",
];

#[test]
fn a_ride_against_a_broken_server_holds_every_invariant() {
    let mut args = SERVER_FAULTS.to_vec();
    args.extend(["--seed", "3"]);
    let (code, r, stderr) = ride(&args);
    assert_eq!(code, 0, "ride failed: {r:#}\n{stderr}");
    assert_eq!(r["invariants_ok"], true);
    assert_eq!(r["slow_gateway_rate"], 0.2);
    assert!(
        r["server_kills"].is_u64() && r["server_clock_jumps"].is_u64(),
        "{r:#}"
    );
}
/// The same ride against a server without the fence (test-only build, feature server-mock/unfenced): the
/// users' dashboards look up slow requests after their lease ran out and are told "not found", and then
/// those requests debit. The checker must see it.
#[test]
fn the_unfenced_server_is_caught() {
    let mut args = SERVER_FAULTS.to_vec();
    args.extend(["--seed", "3", "--unsafe-no-fence"]);
    let (code, r, stderr) = ride(&args);
    assert_eq!(
        code, 1,
        "the unfenced server must fail the ride: {r:#}\n{stderr}"
    );
    assert_eq!(r["unfenced"], true);
    assert!(
        stderr.contains("FAIL server agrees with its ledger")
            && stderr.contains("but the ledger has debit"),
        "no clear message on stderr: {stderr}"
    );
}

/// An intermediary answers in the server's place now and then (a portal's 200 HTML, a proxy's 404
/// text), and the phones' clocks jump often: only the server's own answers end a transfer.
#[test]
fn portal_and_proxy_pages_never_end_a_transfer() {
    let (code, r, stderr) = ride(&[
        "--proxy-garbage-rate",
        "0.05",
        "--clock-jump-rate",
        "0.2",
        "--seed",
        "11",
    ]);
    assert_eq!(code, 0, "ride failed: {r:#}\n{stderr}");
    assert!(
        r["proxy_garbage"].as_u64().unwrap() > 0,
        "no page was injected: {r:#}"
    );
    assert_eq!(r["invariants_ok"], true);
}

/// The same portal-and-proxy ride with the SDK's classification from before it trusted only the server's
/// own answers (test-only build, feature sendonce/legacy-classify): a portal's 200 becomes a success the
/// server never gave, a proxy's 404 a rejection of money that moved. The checker must see it.
#[test]
fn the_legacy_classification_is_caught() {
    let (code, r, stderr) = ride(&[
        "--proxy-garbage-rate",
        "0.05",
        "--clock-jump-rate",
        "0.2",
        "--seed",
        "11",
        "--unsafe-legacy-classify",
    ]);
    assert_eq!(
        code, 1,
        "the legacy classification must fail the ride: {r:#}\n{stderr}"
    );
    assert!(
        stderr.contains("FAIL device view = server view"),
        "no clear message on stderr: {stderr}"
    );
}

/// The unfenced server caught without killing a process: a deterministic ride, so the seed replays the
/// lease counterexample (`--timeline` draws it).
#[test]
fn the_unfenced_server_is_caught_in_a_deterministic_ride() {
    let (code, r, stderr) = ride(&[
        "--slow-gateway-rate",
        "0.2",
        "--seed",
        "3",
        "--unsafe-no-fence",
    ]);
    assert_eq!(
        code, 1,
        "the unfenced server must fail the ride: {r:#}\n{stderr}"
    );
    assert_eq!(r["deterministic"], true, "{r:#}");
    assert!(
        stderr.contains("FAIL server agrees with its ledger")
            && stderr.contains("but the ledger has debit"),
        "no clear message on stderr: {stderr}"
    );
}
