//! PostgreSQL: the retention trim (`crate::retention` says what may go and why).
//!
//! Each statement looks only at the oldest rows of its table (a primary-key range) and skips
//! rows another instance is trimming or the relay has claimed (`SKIP LOCKED`), so N
//! instances trim side by side without waiting on each other. Each runs in its own implicit
//! transaction under the session's lock and statement timeouts.

use deadpool_postgres::GenericClient;

use super::exec;
use crate::consumers::Consumer;
use crate::retention::{Cutoffs, Trimmed, TRIM_CHUNK};
use sendonce_server::store::postgres::{inbox, outbox};
use sendonce_server::store::DbError;

/// Removes up to [`TRIM_CHUNK`] rows of each kind (per consumer for the inbox).
pub(super) async fn trim_chunk<C: GenericClient>(c: &C, cut: Cutoffs) -> Result<Trimmed, DbError> {
    // The library's trims: an unpublished event never goes, nor an inbox record whose event
    // is still in the outbox (a replay would deliver it again).
    let outbox = outbox::trim(c, cut.outbox, TRIM_CHUNK).await?;
    let mut inbox = 0;
    for consumer in Consumer::ALL {
        inbox += inbox::trim(c, consumer.name(), cut.inbox, TRIM_CHUNK).await?;
    }
    let sms = exec(
        c,
        "DELETE FROM sms WHERE sms_id IN (
             SELECT sms_id FROM sms ORDER BY sms_id LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND created_at_ms < $1",
        &[&cut.sms, &TRIM_CHUNK],
    )
    .await?;
    Ok(Trimmed {
        outbox,
        inbox,
        sms: usize::try_from(sms).unwrap_or(usize::MAX),
    })
}
