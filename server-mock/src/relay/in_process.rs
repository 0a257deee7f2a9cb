//! The in-process relay: drains the outbox to the consumers in this process, whenever a
//! commit wakes it or every poll interval.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::App;
use crate::outbox::BATCH;

/// Poll interval when nobody wakes the relay.
const POLL: Duration = Duration::from_millis(50);

/// Runs until shutdown: drains unpublished events whenever woken or every poll interval.
///
/// Woken by a commit, it goes straight to a batch (there is an event); only a poll tick
/// reads first, so an idle relay never opens a write transaction. A batch shorter than
/// [`BATCH`] drained the outbox: the relay sleeps again without reading it once more, and a
/// commit meanwhile has left its wake-up permit (`Notify::notify_one` stores one), so nothing
/// waits for the poll. (One read and one blocking-pool trip less per batch: when requests
/// come one at a time, a batch per request.)
pub async fn run(app: App, mut shutdown: watch::Receiver<bool>) {
    let mut woken = false;
    loop {
        let pending = if woken {
            Ok(true)
        } else {
            app.store().outbox_pending().await
        };
        if !matches!(pending, Ok(false)) {
            loop {
                match app.store().publish_batch(app.clock.now_ms()).await {
                    Ok(n) if n >= BATCH => {}
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(%e, "relay batch failed; retrying on the next tick");
                        break;
                    }
                }
            }
        }
        woken = tokio::select! {
            _ = shutdown.changed() => return,
            _ = app.relay_wake.notified() => true,
            _ = tokio::time::sleep(POLL) => false,
        };
    }
}
