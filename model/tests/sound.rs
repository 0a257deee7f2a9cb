//! The protocol as built passes every property at the CI bound.

use sendonce_model::{check, Bound};

#[test]
fn the_sound_model_passes_at_the_ci_bound() {
    let report = check(Bound::CI, None);
    println!("{}", report.render());
    assert!(report.passed(), "{}", report.render());
    // Guards against a model that stopped exploring (every fault reachable, enough states).
    assert!(report.unique > 100_000, "only {} states", report.unique);
}
