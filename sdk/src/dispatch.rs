//! The listeners' side of the SDK: tasks that hand every published transfer and event to the app's
//! listeners, off the sender's and the confirmation's path, in order; a listener that fell behind
//! is given every transfer's persisted state again.

use std::sync::Arc;

use crate::core::Core;

/// Delivers every published transfer to the transfer listeners (a task of the SDK's runtime).
pub(crate) async fn listeners(core: Arc<Core>) {
    let events = core.events.subscribe();
    // A listener builds its list from these deliveries (the Kotlin and Swift layers do): after a lag
    // it would keep a stale row for every change it missed, so it is given every transfer's persisted
    // state again. Resending an unchanged one is harmless: a delivery is a state, not a delta.
    let resync = || resync_listeners(&core);
    dispatch(events, "transfer", |t| core.notify_listeners(t), resync).await;
}

/// Gives every listener every transfer's persisted state again, a page at a time: a long history
/// is never held in memory at once (the whole list at once cost a process that fell behind with
/// 10,000 transfers tens of MiB it kept), and with no listener there is nothing to read.
fn resync_listeners(core: &Core) {
    if !core.has_listeners() {
        return;
    }
    let mut after: Option<String> = None;
    loop {
        let page = match core.store.page(after.as_deref(), RESYNC_PAGE) {
            Ok(page) => page,
            Err(e) => {
                // A cursor pruned meanwhile included: the next lag resyncs again.
                tracing::warn!(error = %e, "listeners fell behind and the resync could not read the store");
                return;
            }
        };
        page.iter().for_each(|t| core.notify_listeners(t));
        match page.last() {
            Some(last) if page.len() == RESYNC_PAGE as usize => after = Some(last.local_id.clone()),
            _ => return,
        }
    }
}

/// Transfers read per page of a listeners' resync.
const RESYNC_PAGE: u32 = 256;

/// Delivers every event to the event listeners (a task of the SDK's runtime).
pub(crate) async fn events(core: Arc<Core>) {
    let events = core.sdk_events.subscribe();
    // Events are moments (an attempt, an answer), not states: a missed one cannot be sent again.
    dispatch(events, "event", |e| core.notify_event_listeners(e), || {}).await;
}

/// Hands every item of `items` to `deliver`, in order, off the sender's path, until the SDK closes; after
/// the listeners fell so far behind that items were dropped, calls `lagged` once they catch up.
async fn dispatch<T: Clone>(
    mut items: tokio::sync::broadcast::Receiver<T>,
    kind: &str,
    deliver: impl Fn(&T),
    lagged: impl Fn(),
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match items.recv().await {
            Ok(item) => deliver(&item),
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    kind,
                    "listeners fell behind; some items were skipped"
                );
                // What is still buffered is older than what `lagged` reads now: skip it, or it would be
                // delivered after the fresher state. (Every later change is published after its commit,
                // so each listener still ends on every transfer's newest state.)
                while !matches!(
                    items.try_recv(),
                    Err(tokio::sync::broadcast::error::TryRecvError::Empty
                        | tokio::sync::broadcast::error::TryRecvError::Closed)
                ) {}
                lagged();
            }
            Err(RecvError::Closed) => return,
        }
    }
}
