//! Property tests of the retry schedule: a pure function of persisted state.

use std::time::Duration;

use proptest::prelude::*;
use sendonce::schedule::{jitter_fraction, next_attempt, NextAttempt, RetryBudget, ScheduleInput};
use sendonce::RetryPolicy;

fn policy(base_ms: u64, cap_ms: u64, horizon_ms: u64) -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(base_ms),
        cap: Duration::from_millis(cap_ms),
        give_up_after: Duration::from_millis(horizon_ms),
        ..RetryPolicy::default()
    }
}

proptest! {
    #[test]
    fn delay_never_exceeds_cap_nor_the_exponential_ceiling(
        base in 1u64..5_000, extra in 0u64..120_000, attempts in 1u32..200,
        last in 0i64..1_000_000_000, seed in any::<u64>(), retry_after in proptest::option::of(0i64..10_000_000),
    ) {
        let cap = base + extra;
        let p = policy(base, cap, u64::MAX / 4);
        let input = ScheduleInput { created_at_ms: 0, attempts, last_attempt_at_ms: last, retry_after_ms: retry_after, jitter_seed: seed };
        match next_attempt(&p, &input) {
            NextAttempt::At(at) => {
                let delay = at - last;
                prop_assert!(delay >= 0);
                prop_assert!(delay <= cap as i64, "delay {delay} above cap {cap}");
                if retry_after.is_none() {
                    let ceiling = (base as i64).saturating_mul(1i64 << (attempts - 1).min(40)).min(cap as i64);
                    prop_assert!(delay <= ceiling);
                } else {
                    prop_assert_eq!(delay, retry_after.unwrap().min(cap as i64), "Retry-After honoured, clamped to the cap");
                }
            }
            NextAttempt::GiveUp => prop_assert!(false, "no give-up with an infinite horizon"),
        }
    }

    #[test]
    fn never_schedules_past_the_horizon(
        horizon in 1u64..100_000_000, created in 0i64..1_000_000, since in 0i64..200_000_000,
        attempts in 1u32..60, seed in any::<u64>(),
    ) {
        let p = policy(500, 60_000, horizon);
        let input = ScheduleInput { created_at_ms: created, attempts, last_attempt_at_ms: created + since, retry_after_ms: None, jitter_seed: seed };
        match next_attempt(&p, &input) {
            NextAttempt::At(at) => prop_assert!(at < created + horizon as i64),
            // Giving up early would abandon a transfer: only when even the longest delay crosses the horizon.
            NextAttempt::GiveUp => prop_assert!(since + 60_000 >= horizon as i64),
        }
    }

    #[test]
    fn the_same_persisted_state_gives_the_same_time(attempts in 1u32..50, last in 0i64..1_000_000, seed in any::<u64>()) {
        let p = RetryPolicy::default();
        let input = ScheduleInput { created_at_ms: 0, attempts, last_attempt_at_ms: last, retry_after_ms: None, jitter_seed: seed };
        prop_assert_eq!(next_attempt(&p, &input), next_attempt(&p, &input));
    }
}

#[test]
fn jitter_spreads_uniformly_over_the_whole_window() {
    // 10,000 clients at the same attempt: the fractions should cover [0,1) evenly (10 buckets within ±15%).
    let mut buckets = [0u32; 10];
    for seed in 0..10_000u64 {
        let f = jitter_fraction(seed.wrapping_mul(0x2545_F491_4F6C_DD1D), 5);
        assert!((0.0..1.0).contains(&f));
        buckets[(f * 10.0) as usize] += 1;
    }
    for (i, n) in buckets.iter().enumerate() {
        assert!(
            (850..=1150).contains(n),
            "bucket {i} has {n} of 10000: jitter is not spread"
        );
    }
}

#[test]
fn gives_up_once_the_next_attempt_would_cross_the_horizon() {
    let p = policy(500, 60_000, 24 * 3600 * 1000);
    let day = 24 * 3600 * 1000;
    let input = ScheduleInput {
        created_at_ms: 0,
        attempts: 30,
        last_attempt_at_ms: day - 1,
        retry_after_ms: Some(1000),
        jitter_seed: 1,
    };
    assert_eq!(next_attempt(&p, &input), NextAttempt::GiveUp);
    let early = ScheduleInput {
        last_attempt_at_ms: day - 10_000,
        ..input
    };
    assert_eq!(next_attempt(&p, &early), NextAttempt::At(day - 9_000));
}

#[test]
fn retry_budget_allows_a_burst_then_paces() {
    let p = RetryPolicy {
        budget_burst: 3,
        budget_per_second: 1.0,
        ..RetryPolicy::default()
    };
    let mut b = RetryBudget::new(&p, 0);
    assert!(b.take(0).is_ok() && b.take(0).is_ok() && b.take(0).is_ok());
    assert_eq!(b.take(0), Err(1000));
    assert!(b.take(1000).is_ok());
}
