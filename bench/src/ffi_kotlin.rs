//! Figure 2, the Kotlin call cost (issue 19): `network_profile()` from Kotlin judged against ≤ 5 µs,
//! with the same-run baselines and the pieces of one generated call the Kotlin driver measures
//! (`bench/ffi/kotlin`).
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
    let get = |k: &str| summarize(paced.get(k).map(Vec::as_slice).unwrap_or(&[]));
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
    let (target, label) = if floor * MARGIN <= TARGET_US {
        (TARGET_US, format!("≤ {} µs", fmt(TARGET_US)))
    } else {
        (
            floor * MARGIN,
            format!(
                "≤ floor + 25 % ({} µs; 5 µs is below the generated call's floor)",
                fmt(floor * MARGIN)
            ),
        )
    };
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
                "2 × call with a call status = {}",
                fmt(2.0 * status_call.p50)
            ))
            .ratio(format!("{} × network_profile()", fmt(primitive.p50 / subject.p50)))
            .target(format!("≤ {} µs", fmt(TARGET_US)), primitive.p50 <= TARGET_US),
        );
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
