//! When to try again: a pure function of what is persisted, so it survives restarts.

use crate::config::RetryPolicy;

/// The persisted facts the schedule depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleInput {
    /// Confirmation time (ms).
    pub created_at_ms: i64,
    /// Attempts already made.
    pub attempts: u32,
    /// Start of the last attempt (ms).
    pub last_attempt_at_ms: i64,
    /// `Retry-After` of the last answer, if any (ms).
    pub retry_after_ms: Option<i64>,
    /// Per-transfer seed (derived from the key) so jitter is reproducible.
    pub jitter_seed: u64,
}

/// What the schedule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextAttempt {
    /// Try again at this time (ms).
    At(i64),
    /// The give-up horizon is reached: stop sending.
    GiveUp,
}

/// Full jitter: random(0, min(cap, base * 2^(attempts-1))), `Retry-After` honoured and clamped to the cap.
pub fn next_attempt(policy: &RetryPolicy, input: &ScheduleInput) -> NextAttempt {
    let cap = policy.cap.as_millis() as i64;
    let delay = match input.retry_after_ms {
        Some(after) => after.clamp(0, cap),
        None => {
            let exp = input.attempts.saturating_sub(1).min(40);
            let ceiling = (policy.base.as_millis() as i64)
                .saturating_mul(1i64 << exp)
                .min(cap);
            if policy.jitter {
                (jitter_fraction(input.jitter_seed, input.attempts) * ceiling as f64) as i64
            } else {
                ceiling
            }
        }
    };
    let at = input.last_attempt_at_ms.saturating_add(delay);
    let horizon = input
        .created_at_ms
        .saturating_add(policy.give_up_after.as_millis() as i64);
    if at >= horizon {
        NextAttempt::GiveUp
    } else {
        NextAttempt::At(at)
    }
}

/// A uniform number in [0, 1) from (seed, attempt): the same inputs give the same jitter.
pub fn jitter_fraction(seed: u64, attempt: u32) -> f64 {
    let x = splitmix64(seed ^ (attempt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A stable seed from text (FNV-1a), e.g. from an idempotency key.
pub fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64: a tiny, well-studied mixer; enough for jitter and simulation, not for secrets.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Token bucket that bounds retries so one broken server is not hammered by every phone at once.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    burst: f64,
    per_ms: f64,
    tokens: f64,
    last_ms: i64,
}

impl RetryBudget {
    /// A full bucket.
    pub fn new(policy: &RetryPolicy, now_ms: i64) -> Self {
        let burst = policy.budget_burst as f64;
        Self {
            burst,
            per_ms: policy.budget_per_second / 1000.0,
            tokens: burst,
            last_ms: now_ms,
        }
    }

    /// Takes one retry token, or says when one will be there.
    pub fn take(&mut self, now_ms: i64) -> Result<(), i64> {
        let elapsed = (now_ms - self.last_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed * self.per_ms).min(self.burst);
        // Re-base on every call: after the clock is set back, refilling resumes from the new time
        // instead of waiting for the clock to catch up with the old one.
        self.last_ms = now_ms;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            // `as` saturates and the add too: a policy that slipped past validation cannot overflow here.
            Err(now_ms.saturating_add(((1.0 - self.tokens) / self.per_ms).ceil() as i64))
        }
    }
}

/// When a transfer woken in the background sends its next request: spread uniformly over
/// `window_ms` from `now_ms` by the transfer's own seed, so a fleet whose network returns at the same
/// instant does not arrive at the same instant. Never later than a time it already had.
pub fn background_wake_at(now_ms: i64, window_ms: i64, seed: u64, scheduled_ms: i64) -> i64 {
    // Its own stream of numbers: the retry jitter of attempt 0 is not reused.
    let offset = (jitter_fraction(seed ^ WAKE_SALT, u32::MAX) * window_ms.max(0) as f64) as i64;
    let spread = now_ms.saturating_add(offset);
    if scheduled_ms > now_ms {
        spread.min(scheduled_ms)
    } else {
        spread
    }
}

const WAKE_SALT: u64 = 0x5745_414B_4555_5031;
