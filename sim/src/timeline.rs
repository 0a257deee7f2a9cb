//! What happened when, per phone, over the ride's simulated time: recorded during the ride,
//! drawn by `svg` (`sendonce-sim ride --timeline FILE.svg`).

use std::sync::{Arc, Mutex};

use sendonce::TransferState;

/// One thing on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// An attempt started (the SDK marked it on the wire).
    Attempt,
    /// The server answered (seen at the wire tap, before the network could lose it).
    Answer {
        /// HTTP status.
        status: u16,
        /// `Idempotent-Replayed: true`.
        replayed: bool,
    },
    /// The server dropped the connection without an answer (an injected fault, or a restart).
    Dropped,
    /// The attempt ended without an answer reaching the phone (request or answer lost, timeout).
    Lost,
    /// The attempt was refused in a tunnel.
    Offline,
    /// The transfer reached a final state (or NeedsAttention).
    Final(TransferState),
    /// The app was killed.
    Kill,
    /// The phone's clock was changed by this many ms.
    ClockJump(i64),
    /// The phone lost its signal for the rest of the ride.
    SignalLost,
    /// The server's clock jumped by this many ms.
    ServerClockJump(i64),
    /// The server process was SIGKILLed and restarted.
    ServerKill,
    /// The network came back for every phone; the settle phase starts.
    Settle,
}

/// A mark on a lane at a ride time.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The phone (`None`: the server's lane).
    pub phone: Option<usize>,
    /// Simulated ms since the ride started (clock jumps left out).
    pub at_ms: i64,
    /// What happened.
    pub mark: Mark,
}

/// Every event of a ride, in the order they were recorded.
#[derive(Debug, Default)]
pub struct Timeline {
    events: Mutex<Vec<Event>>,
    /// Simulated time when the ride started: every clock of the ride starts there.
    start_ms: i64,
}

/// Shared by the phones, their taps and listeners, and the chaos loop.
pub type SharedTimeline = Arc<Timeline>;

impl Timeline {
    /// An empty timeline for a ride whose clocks start at `start_ms`.
    pub fn new(start_ms: i64) -> Self {
        Self {
            events: Mutex::default(),
            start_ms,
        }
    }

    /// Ride time of a clock's monotonic reading (its jumps left out).
    pub fn at(&self, monotonic_ms: i64) -> i64 {
        monotonic_ms - self.start_ms
    }

    /// Records `mark` on `phone`'s lane when a ride clock's monotonic time reads `monotonic_ms`.
    pub fn record(&self, phone: Option<usize>, monotonic_ms: i64, mark: Mark) {
        let at_ms = self.at(monotonic_ms);
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Event { phone, at_ms, mark });
    }

    /// A copy of every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The mark a transfer's new state stands for, if any.
pub fn mark_of_state(state: TransferState, last_error: Option<&str>) -> Option<Mark> {
    match state {
        TransferState::Sending => Some(Mark::Attempt),
        TransferState::Retrying => {
            let error = last_error.unwrap_or_default();
            if error.contains("offline") {
                Some(Mark::Offline)
            } else if error.contains("timed out") {
                Some(Mark::Lost)
            } else {
                None
            }
        }
        s if s.is_settled() => Some(Mark::Final(s)),
        _ => None,
    }
}

/// The lanes of the picture: each phone's tunnels (from its network simulator's seed and its own,
/// jumping clock) up to the settle phase, and when a stranded phone lost its signal.
pub fn lanes(
    plan: &crate::device::Plan,
    devices: &[crate::device::Device],
    start_ms: i64,
    events: &[Event],
) -> Vec<crate::svg::Lane> {
    let end = events.iter().map(|e| e.at_ms).max().unwrap_or(0);
    let settle = events
        .iter()
        .find(|e| e.mark == Mark::Settle)
        .map_or(end, |e| e.at_ms);
    let step = (end / 2_000).max(1_000);
    devices
        .iter()
        .map(|d| {
            let seed = plan.seed ^ d.index as u64;
            let tunnels = plan
                .profile
                .settings(seed)
                .filter(|s| s.tunnel_every_ms > 0)
                .map(|settings| {
                    let sim = sendonce::netsim::SimTransport::new(
                        Arc::new(Nowhere),
                        Arc::new(sendonce::SystemClock),
                        settings,
                    );
                    spans(0, settle, step, |at| {
                        let jumped: i64 = d.jumps.iter().filter(|j| j.0 <= at).map(|j| j.1).sum();
                        sim.in_tunnel(start_ms + at + jumped)
                    })
                })
                .unwrap_or_default();
            crate::svg::Lane {
                label: format!("phone {}", d.index),
                tunnels,
                signal_lost_at: d.signal_lost_at,
            }
        })
        .collect()
}

/// The spans of `from..to` (sampled every `step`) where `on` holds.
fn spans(from: i64, to: i64, step: i64, on: impl Fn(i64) -> bool) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut open: Option<i64> = None;
    let mut at = from;
    while at <= to {
        match (on(at), open) {
            (true, None) => open = Some(at),
            (false, Some(a)) => {
                out.push((a, at));
                open = None;
            }
            _ => {}
        }
        at += step;
    }
    if let Some(a) = open {
        out.push((a, to));
    }
    out
}

/// A transport that is never called: the tunnel schedule needs a simulator, not a network.
struct Nowhere;

impl sendonce::transport::Transport for Nowhere {
    fn send(
        &self,
        _: sendonce::transport::HttpRequest,
    ) -> sendonce::transport::BoxFuture<
        '_,
        Result<sendonce::transport::HttpResponse, sendonce::transport::TransportError>,
    > {
        Box::pin(async { Err(sendonce::transport::TransportError::Offline) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_of_a_predicate() {
        let s = super::spans(0, 100, 10, |t| (20..50).contains(&t) || t >= 90);
        assert_eq!(s, vec![(20, 50), (90, 100)]);
    }
}
