//! Keeps panics on the Rust side: each export runs inside [`guard`] or [`guard_async`], so a bug becomes
//! [`SendOnceError::Internal`] instead of unwinding into the JVM or the Swift runtime.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::error::{Result, SendOnceError};

/// Runs a synchronous export; a panic becomes `Internal`.
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(SendOnceError::from_panic(p)))
}

/// Runs an async export; a panic while polling becomes `Internal`.
pub(crate) async fn guard_async<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    CatchUnwind(Box::pin(f)).await
}

struct CatchUnwind<F>(Pin<Box<F>>);

impl<T, F: Future<Output = Result<T>>> Future for CatchUnwind<F> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => Poll::Ready(Err(SendOnceError::from_panic(payload))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_internal() {
        let err = guard::<()>(|| panic!("boom")).unwrap_err();
        assert_eq!(
            err,
            SendOnceError::Internal {
                detail: "panic: boom".into()
            }
        );
    }

    #[test]
    fn an_async_panic_becomes_internal() {
        let mut first = true;
        let mut fut = Box::pin(guard_async::<()>(std::future::poll_fn(move |cx| {
            if first {
                first = false;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            panic!("{}", String::from("later"))
        })));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let Poll::Ready(Err(err)) = fut.as_mut().poll(&mut cx) else {
            panic!("expected an error")
        };
        assert_eq!(
            err,
            SendOnceError::Internal {
                detail: "panic: later".into()
            }
        );
    }

    #[test]
    fn values_pass_through() {
        assert_eq!(guard(|| Ok(3)).unwrap(), 3);
    }
}
