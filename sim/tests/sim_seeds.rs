//! `scripts/sim-seeds` stops at a failing seed and prints the command that replays it; that command
//! gives the same report again.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The report of a `--json` ride out of mixed output, without its real-time section.
fn report_in(text: &str) -> Value {
    let start = text.find("{\n").expect("a JSON report");
    let end = start + text[start..].find("\n}").expect("the report's end") + 2;
    let mut r: Value = serde_json::from_str(&text[start..end]).expect("valid JSON");
    r.as_object_mut().unwrap().remove("real_time");
    r
}

#[test]
fn a_failing_seed_is_printed_with_the_command_that_replays_it() {
    let bin = env!("CARGO_BIN_EXE_sendonce-sim");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/sim-seeds");
    // The SDK broken on purpose (a new key per retry): seed 7's ride fails with a double debit.
    let out = Command::new("bash")
        .arg(&script)
        .arg("2")
        .env("SIM_BIN", bin)
        .env("SIM_FIRST_SEED", "7")
        .env(
            "SIM_ARGS",
            "--profile train --users 6 --transfers 10 --new-key-per-retry --json",
        )
        .output()
        .expect("scripts/sim-seeds runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "the seed must fail: {text}");
    assert!(text.contains("FAILED at seed 7"), "{text}");
    let replay = text
        .lines()
        .skip_while(|l| !l.starts_with("replay (deterministic"))
        .nth(1)
        .unwrap_or_else(|| panic!("no replay command: {text}"))
        .trim();
    let args: Vec<&str> = replay
        .strip_prefix(bin)
        .unwrap_or_else(|| panic!("the command runs {bin}: {replay}"))
        .split_whitespace()
        .collect();
    assert!(args.ends_with(&["--seed", "7"]), "{replay}");
    let again = Command::new(bin)
        .args(&args)
        .output()
        .expect("the replay runs");
    assert_eq!(again.status.code(), Some(1), "the replay fails too");
    let first = report_in(&text);
    assert_eq!(
        first["double_debits"].as_u64().map(|n| n > 0),
        Some(true),
        "{first:#}"
    );
    assert_eq!(
        first,
        report_in(&String::from_utf8_lossy(&again.stdout)),
        "the replay gave another report"
    );
}
