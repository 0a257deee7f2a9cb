//! Cancelling a long wait from a language whose cancellation does not reach the Rust future.
//!
//! Kotlin's generated code frees (drops) the Rust future when the calling coroutine is cancelled;
//! Swift's polls it to completion whatever happens to the Task (uniffi 0.32 has no Swift
//! cancellation: mozilla/uniffi-rs#2771). So the Swift layer hands the waits (`wait_for_outcome`,
//! `resolve`, `drain`) a `CancelSignal` and cancels it from `withTaskCancellationHandler`: the wait's
//! future is dropped there and then, and the call ends with `SendOnceError::Cancelled`.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::{Result, SendOnceError};

/// Cancels one async call of the SDK: `cancel()` drops the call's Rust future and the call throws
/// `Cancelled`. Cancelling after the call returned does nothing.
#[derive(uniffi::Object)]
pub struct CancelSignal {
    cancelled: watch::Sender<bool>,
}

#[uniffi::export]
impl CancelSignal {
    /// A signal not yet cancelled.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            cancelled: watch::Sender::new(false),
        })
    }

    /// Cancels the call that holds this signal (a plain flag and a wake-up: no I/O, safe anywhere).
    pub fn cancel(&self) {
        self.cancelled.send_replace(true);
    }

    /// True once `cancel()` was called.
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }
}

/// Runs `call` until it finishes or `signal` is cancelled, whichever comes first; on cancel `call` is
/// dropped (its awaits end there, as they would on Kotlin's cancellation).
pub(crate) async fn unless_cancelled<T>(
    signal: Option<Arc<CancelSignal>>,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(signal) = signal else {
        return call.await;
    };
    let mut cancelled = signal.cancelled.subscribe();
    tokio::select! {
        biased;
        _ = cancelled.wait_for(|c| *c) => Err(SendOnceError::Cancelled),
        result = call => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_cancelled_signal_drops_the_call_and_says_cancelled() {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(dropped.clone());
        let signal = CancelSignal::new();
        let call = tokio::spawn(unless_cancelled(Some(signal.clone()), async move {
            let _guard = guard;
            std::future::pending::<Result<()>>().await
        }));
        tokio::task::yield_now().await;
        assert!(!dropped.load(Ordering::SeqCst));
        signal.cancel();
        assert_eq!(call.await.unwrap(), Err(SendOnceError::Cancelled));
        assert!(
            dropped.load(Ordering::SeqCst),
            "the waiting future was dropped"
        );
    }

    #[tokio::test]
    async fn cancelled_before_the_call_it_never_runs_and_without_a_signal_it_runs() {
        let signal = CancelSignal::new();
        signal.cancel();
        let ran = AtomicBool::new(false);
        let result = unless_cancelled(Some(signal), async {
            ran.store(true, Ordering::SeqCst);
            Ok(1)
        })
        .await;
        assert_eq!(result, Err(SendOnceError::Cancelled));
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(unless_cancelled(None, async { Ok(2) }).await, Ok(2));
    }
}
