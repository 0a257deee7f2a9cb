//! A seed replays its ride: the same report twice (real-time section aside), and the same picture.

use std::process::Command;

use serde_json::Value;

/// Runs `sendonce-sim ride --json ARGS --timeline FILE`; returns the report without its real-time
/// section, and the SVG.
fn ride(args: &[&str], svg: &std::path::Path) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sendonce-sim"))
        .args(["ride", "--json"])
        .args(args)
        .arg("--timeline")
        .arg(svg)
        .output()
        .expect("sendonce-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "ride failed: {stdout}\n{stderr}"
    );
    let mut report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    assert!(report["real_time"]["real_ms"].is_u64(), "{report:#}");
    report.as_object_mut().unwrap().remove("real_time");
    (report, std::fs::read_to_string(svg).expect("the timeline"))
}

/// Every fault a deterministic ride has (no server process is killed): app kills, double taps, phone
/// and server clock jumps, stranded phones, 503s, answers dropped after commit, duplicate deliveries,
/// gateway steps slower than the key lock (with the dashboard's look-ups), portal pages.
const FAULTS: [&str; 20] = [
    "--users",
    "6",
    "--transfers",
    "6",
    "--kill-rate",
    "0.2",
    "--server-faults",
    "0.05",
    "--clock-jump-rate",
    "0.1",
    "--slow-gateway-rate",
    "0.1",
    "--server-clock-jump-rate",
    "0.05",
    "--proxy-garbage-rate",
    "0.02",
    "--stranded",
    "0.2",
    "--impatient-rate",
    "0.2",
];

#[test]
fn one_seed_twice_gives_the_same_report_and_the_same_picture() {
    let dir = tempfile::tempdir().unwrap();
    for profile in ["train", "lb-replay"] {
        let mut args = FAULTS.to_vec();
        args.extend(["--profile", profile, "--seed", "7"]);
        let (a, svg_a) = ride(&args, &dir.path().join("a.svg"));
        let (b, svg_b) = ride(&args, &dir.path().join("b.svg"));
        assert_eq!(a["deterministic"], true, "{a:#}");
        assert_eq!(a["invariants_ok"], true, "{a:#}");
        assert!(a["attempts"].as_u64().unwrap() > 0, "{a:#}");
        assert_eq!(a, b, "{profile}: seed 7 gave two different reports");
        assert_eq!(
            svg_a, svg_b,
            "{profile}: seed 7 gave two different timelines"
        );
    }
    // And a seed is a seed: another one rides otherwise.
    let mut args = FAULTS.to_vec();
    args.extend(["--profile", "train", "--seed", "8"]);
    let (c, _) = ride(&args, &dir.path().join("c.svg"));
    let mut args = FAULTS.to_vec();
    args.extend(["--profile", "train", "--seed", "7"]);
    let (a, _) = ride(&args, &dir.path().join("a.svg"));
    assert_ne!(a, c, "seeds 7 and 8 gave the same ride");
}

/// A ride whose server process is SIGKILLed runs in real time and says it is not deterministic.
#[test]
fn a_ride_that_kills_the_server_says_it_is_not_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = ride(
        &[
            "--users",
            "3",
            "--transfers",
            "3",
            "--server-kill-rate",
            "0.1",
            "--seed",
            "2",
        ],
        &dir.path().join("k.svg"),
    );
    assert_eq!(r["deterministic"], false, "{r:#}");
    assert!(
        r["not_deterministic_because"]
            .as_str()
            .is_some_and(|w| w.contains("SIGKILL")),
        "{r:#}"
    );
}
