//! Writes that must land: retried a few times with backoff when the store cannot write right now.

use std::time::Duration;

use tokio::time::sleep;

use crate::error::{Result, SdkError};

/// Tries of one write before it is given up (the transfer then goes back to the schedule).
const TRIES: u32 = 6;
/// Wait after the first failed try; doubled after each (about 3 s in all).
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// Runs `write` until it succeeds, fails for a reason that waiting cannot fix, or `TRIES` ran out.
///
/// A full disk or an I/O error is often gone a moment later (the OS frees cache, the app deletes a
/// file); the answer being written is worth a few seconds of waiting.
pub(super) async fn durably<T>(local_id: &str, mut write: impl FnMut() -> Result<T>) -> Result<T> {
    let mut pause = FIRST_PAUSE;
    let mut tries = 0;
    loop {
        tries += 1;
        match write() {
            Ok(value) => return Ok(value),
            Err(e) if tries < TRIES && may_pass(&e) => {
                tracing::warn!(local_id, error = %e, tries, "outcome could not be recorded; writing it again in {pause:?}");
                sleep(pause).await;
                pause *= 2;
            }
            Err(e) => {
                tracing::error!(local_id, error = %e, tries, "outcome not written; the transfer is handed back to the sender");
                return Err(e);
            }
        }
    }
}

/// Errors that can be gone on the next try.
fn may_pass(e: &SdkError) -> bool {
    matches!(
        e,
        SdkError::StorageFull(_) | SdkError::StorageUnavailable(_)
    )
}
