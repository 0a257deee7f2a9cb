//! Found by `sendonce-sim ride --kill-rate 0.3 --clock-jump-rate 0.1 --seed 2` (two phones took 34 s real,
//! ~1.9 h simulated, to settle once the network was back): after the phone's clock is set back, the retry
//! budget (token bucket) refills only once the clock catches up with the last time it saw, so an exhausted
//! bucket parks every retry ("retry budget exhausted" every ~500 ms) for as long as the clock went back.
//!
//! Regression test (fixed in the SDK: `RetryBudget::take` re-bases on a clock that went backwards).

use sendonce::schedule::RetryBudget;
use sendonce::RetryPolicy;

#[test]
fn the_retry_budget_refills_after_the_clock_is_set_back() {
    let policy = RetryPolicy {
        budget_burst: 1,
        budget_per_second: 1.0,
        ..RetryPolicy::default()
    };
    let t0 = 1_800_000_000_000;
    let mut budget = RetryBudget::new(&policy, t0);
    assert!(budget.take(t0).is_ok(), "a full bucket gives one token");
    assert!(budget.take(t0).is_err(), "then it is empty");
    let back = t0 - 6 * 3_600_000; // the user sets the clock back 6 hours
    let (mut now, mut waited) = (back, 0);
    while budget.take(now).is_err() && waited < 7 * 3_600_000 {
        now += 60_000;
        waited += 60_000;
    }
    assert!(
        waited <= 60_000,
        "after the clock went back 6 h the bucket (1 token/s) stayed empty for {} min of the new clock",
        waited / 60_000
    );
}
