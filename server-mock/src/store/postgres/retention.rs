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
use sendonce_server::store::DbError;

/// Removes up to [`TRIM_CHUNK`] rows of each kind (per consumer for the inbox).
pub(super) async fn trim_chunk<C: GenericClient>(c: &C, cut: Cutoffs) -> Result<Trimmed, DbError> {
    // The newest outbox row always stays, so "its event left the outbox" reads as "its id is
    // below the smallest id still there" even when every event was trimmed.
    let outbox = exec(
        c,
        "DELETE FROM outbox WHERE event_id IN (
             SELECT event_id FROM outbox ORDER BY event_id LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND published AND created_at_ms < $1
           AND event_id < (SELECT MAX(event_id) FROM outbox)",
        &[&cut.outbox, &TRIM_CHUNK],
    )
    .await?;
    let mut inbox = 0;
    for consumer in Consumer::ALL {
        inbox += exec(
            c,
            "DELETE FROM inbox WHERE consumer = $3 AND event_id IN (
                 SELECT event_id FROM inbox WHERE consumer = $3
                 ORDER BY event_id LIMIT $2 FOR UPDATE SKIP LOCKED)
               AND event_id < (SELECT MIN(event_id) FROM outbox) AND processed_at_ms < $1",
            &[&cut.inbox, &TRIM_CHUNK, &consumer.name()],
        )
        .await?;
    }
    let sms = exec(
        c,
        "DELETE FROM sms WHERE sms_id IN (
             SELECT sms_id FROM sms ORDER BY sms_id LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND created_at_ms < $1",
        &[&cut.sms, &TRIM_CHUNK],
    )
    .await?;
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok(Trimmed {
        outbox: n(outbox),
        inbox: n(inbox),
        sms: n(sms),
    })
}
