//! Figure 2, FFI: a cheap SDK query called from Kotlin (JVM/JNA) and Swift through the uniffi
//! bindings vs the same call in Rust. (First version: Rust side only.)

use crate::report::Report;

/// Runs figure 2.
pub fn run(report: &mut Report, _quick: bool) {
    report.note("2 FFI", "not measured in this version");
}
