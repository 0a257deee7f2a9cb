//! Time as the SDK sees it: real, or simulated so a 24-hour horizon passes in seconds.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the epoch.
    fn now_ms(&self) -> i64;
    /// Real time to wait for `ms` of this clock's time to pass.
    fn real_duration(&self, ms: i64) -> Duration;
    /// Time that only moves forward at this clock's pace (ms from an arbitrary origin); a jump of
    /// `now_ms` does not move it. It measures how long the SDK has been sending, so the user's clock
    /// cannot end a transfer. A clock without such a source falls back to `now_ms` (jumps then count).
    fn monotonic_ms(&self) -> i64 {
        self.now_ms()
    }
}

/// Origin of the process's monotonic time.
static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// The device's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
    fn real_duration(&self, ms: i64) -> Duration {
        Duration::from_millis(ms.max(0) as u64)
    }
    fn monotonic_ms(&self) -> i64 {
        let start = PROCESS_START.get_or_init(Instant::now);
        i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that runs `speed` times faster than real time and can jump.
///
/// It counts tokio's time (the real time, except on a runtime whose clock is paused: a
/// deterministic simulation's), so simulated time and the SDK's timers agree.
#[derive(Debug)]
pub struct SimClock {
    origin: tokio::time::Instant,
    origin_ms: i64,
    speed: f64,
    jumped_ms: AtomicI64,
}

impl SimClock {
    /// A clock starting at `start_ms` running `speed` times faster than real time.
    pub fn new(start_ms: i64, speed: f64) -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            origin_ms: start_ms,
            speed: speed.max(1e-3),
            jumped_ms: AtomicI64::new(0),
        }
    }

    /// Moves the clock by `ms` (negative jumps backwards, as a user changing the device time would).
    pub fn jump(&self, ms: i64) {
        self.jumped_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        self.monotonic_ms() + self.jumped_ms.load(Ordering::SeqCst)
    }
    fn monotonic_ms(&self) -> i64 {
        let elapsed = self.origin.elapsed().as_secs_f64() * 1000.0 * self.speed;
        self.origin_ms + elapsed as i64
    }
    fn real_duration(&self, ms: i64) -> Duration {
        Duration::from_secs_f64(ms.max(0) as f64 / 1000.0 / self.speed)
    }
}
