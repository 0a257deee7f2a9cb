//! The one-command ride, end to end through the binary: a sound SDK passes, a broken one is caught.

mod support;

use support::Ride;

/// A ride on the train profile.
fn ride(args: &[&str]) -> Ride {
    support::ride(&[&["--profile", "train"], args].concat())
}

#[test]
fn a_small_train_ride_holds_every_invariant() {
    let ride = ride(&[
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
    let r = ride.assert_holds();
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
    let ride = ride(&[
        "--seed",
        "7",
        "--users",
        "6",
        "--transfers",
        "10",
        "--new-key-per-retry",
    ]);
    // The message names the double debit.
    let r = ride.assert_caught("the broken SDK", &["FAIL no double debit", "debited"]);
    assert!(
        r["double_debits"].as_u64().unwrap() > 0,
        "no double debit found: {r:#}"
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

/// What the checker says when a request that lost its lock still debited.
const UNFENCED_FAILS: [&str; 2] = [
    "FAIL server agrees with its ledger",
    "but the ledger has debit",
];

#[test]
fn a_ride_against_a_broken_server_holds_every_invariant() {
    let ride = ride(&[&SERVER_FAULTS[..], &["--seed", "3"]].concat());
    let r = ride.assert_holds();
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
    let ride = ride(&[&SERVER_FAULTS[..], &["--seed", "3", "--unsafe-no-fence"]].concat());
    let r = ride.assert_caught("the unfenced server", &UNFENCED_FAILS);
    assert_eq!(r["unfenced"], true);
}

/// An intermediary answers in the server's place now and then (a portal's 200 HTML, a proxy's 404
/// text), and the phones' clocks jump often: only the server's own answers end a transfer.
const PROXY_FAULTS: [&str; 6] = [
    "--proxy-garbage-rate",
    "0.05",
    "--clock-jump-rate",
    "0.2",
    "--seed",
    "11",
];

#[test]
fn portal_and_proxy_pages_never_end_a_transfer() {
    let ride = ride(&PROXY_FAULTS);
    let r = ride.assert_holds();
    assert!(
        r["proxy_garbage"].as_u64().unwrap() > 0,
        "no page was injected: {r:#}"
    );
}

/// The same portal-and-proxy ride with the SDK's classification from before it trusted only the server's
/// own answers (test-only build, feature sendonce/legacy-classify): a portal's 200 becomes a success the
/// server never gave, a proxy's 404 a rejection of money that moved. The checker must see it.
#[test]
fn the_legacy_classification_is_caught() {
    let ride = ride(&[&PROXY_FAULTS[..], &["--unsafe-legacy-classify"]].concat());
    ride.assert_caught(
        "the legacy classification",
        &["FAIL device view = server view"],
    );
}

/// The unfenced server caught without killing a process: a deterministic ride, so the seed replays the
/// lease counterexample (`--timeline` draws it).
#[test]
fn the_unfenced_server_is_caught_in_a_deterministic_ride() {
    let ride = ride(&[
        "--slow-gateway-rate",
        "0.2",
        "--seed",
        "3",
        "--unsafe-no-fence",
    ]);
    let r = ride.assert_caught("the unfenced server", &UNFENCED_FAILS);
    assert_eq!(r["deterministic"], true, "{r:#}");
}
