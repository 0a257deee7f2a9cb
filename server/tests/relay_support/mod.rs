//! A publisher for the relay tests of both stores: two relays that read the same events
//! both publish them to it.

use std::sync::Mutex;
use std::time::Duration;

use sendonce_server::engine::Publish;
use sendonce_server::Event;
use tokio::sync::Barrier;

/// Records every event id it is handed, after waiting (bounded) until `n` relays have
/// each been handed a batch — so relays that read the same events all publish them.
pub struct Meeting {
    seen: Mutex<Vec<i64>>,
    all: Barrier,
}

impl Meeting {
    /// A meeting of `n` relays.
    pub fn of(n: usize) -> Self {
        Self {
            seen: Mutex::default(),
            all: Barrier::new(n),
        }
    }

    /// The ids published so far, sorted (a duplicate shows twice).
    pub fn seen(&self) -> Vec<i64> {
        let mut seen = self.seen.lock().unwrap().clone();
        seen.sort_unstable();
        seen
    }
}

impl Publish for Meeting {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        // Not a timed assertion: the wait only bounds how long a lone relay looks for company.
        let _ = tokio::time::timeout(Duration::from_millis(500), self.all.wait()).await;
        let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
        self.seen.lock().unwrap().extend(&ids);
        Ok(ids)
    }
}
