//! A phone's clock in a ride: fast (`speed` x tokio's clock), and jumping when the user changes it.
//!
//! It counts tokio's time, not the OS's: on a deterministic ride's paused runtime a seed gives the
//! same times on every run, and on a real-time ride tokio's clock is the real one.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sendonce::Clock;
use tokio::time::Instant;

/// Simulated time of a phone.
#[derive(Debug)]
pub struct PhoneClock {
    origin: Instant,
    origin_ms: i64,
    speed: f64,
    jumped_ms: AtomicI64,
}

impl PhoneClock {
    /// A clock at `start_ms` now, running `speed` times faster than tokio's clock.
    pub fn new(start_ms: i64, speed: f64) -> Self {
        Self {
            origin: Instant::now(),
            origin_ms: start_ms,
            speed: speed.max(1e-3),
            jumped_ms: AtomicI64::new(0),
        }
    }

    /// Moves the clock by `ms` (negative: backwards, as a user changing the device time would).
    pub fn jump(&self, ms: i64) {
        self.jumped_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Simulated ms since the ride started, jumps left out: the timeline's axis.
    pub fn ride_ms(&self) -> i64 {
        self.monotonic_ms() - self.origin_ms
    }

    /// Sum of every jump so far.
    pub fn jumped_ms(&self) -> i64 {
        self.jumped_ms.load(Ordering::SeqCst)
    }
}

impl Clock for PhoneClock {
    fn now_ms(&self) -> i64 {
        self.monotonic_ms() + self.jumped_ms()
    }
    fn monotonic_ms(&self) -> i64 {
        let elapsed = self.origin.elapsed().as_secs_f64() * 1000.0 * self.speed;
        self.origin_ms + elapsed as i64
    }
    fn real_duration(&self, ms: i64) -> Duration {
        Duration::from_secs_f64(ms.max(0) as f64 / 1000.0 / self.speed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn runs_fast_on_tokio_time_and_jumps_without_moving_the_axis() {
        let c = PhoneClock::new(1_000, 200.0);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(c.now_ms(), 3_000);
        c.jump(-500);
        assert_eq!((c.now_ms(), c.ride_ms()), (2_500, 2_000));
        assert_eq!(c.real_duration(2_000), Duration::from_millis(10));
    }
}
