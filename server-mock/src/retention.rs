//! What the server keeps after the contract no longer needs it, and for how long: published
//! outbox events, the consumers' inbox rows and the SMS records (issue 29 item 10).
//!
//! Without it these tables grow by one row per transfer forever. The rule that keeps it
//! safe: an inbox row is what stops a redelivered event from crediting or texting twice, and
//! the in-process relay can redeliver an event only while it is in the outbox (a replay
//! marks outbox rows unpublished again). So an inbox row goes only once its event has left
//! the outbox *and* it is older than the inbox window; the window is also checked at start
//! to be at least the outbox retention, as DESIGN.md asks. Rows go oldest first, in bounded
//! chunks, so a trim never holds the writer for long; an unpublished event is never removed.
//! (The Kafka consumers in `streams/` keep their own inboxes, bounded by the broker's
//! horizon: `streams/src/horizon.rs`.)

use std::time::Duration;

use rusqlite::{params, Connection};

use crate::consumers::Consumer;
use sendonce_server::store::sqlite::{inbox, outbox};
use sendonce_server::store::DbError;

/// Rows removed per statement: small enough that requests' commits pass in between.
pub const TRIM_CHUNK: i64 = 512;

/// How long each kind of row is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A published outbox event is kept this long after it was written; a replay from an
    /// older point finds nothing to replay.
    pub outbox: Duration,
    /// An inbox row is kept this long after its event was handled, and always while its
    /// event is still in the outbox. At least [`Retention::outbox`].
    pub inbox: Duration,
    /// The record of a sent SMS.
    pub sms: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            outbox: Duration::from_secs(7 * 86_400),
            // A day above the outbox: a handled time earlier than its event's written time
            // (a clock stepped back in between) still leaves the inbox row the longer-lived.
            inbox: Duration::from_secs(8 * 86_400),
            sms: Duration::from_secs(30 * 86_400),
        }
    }
}

impl Retention {
    /// The window rule: an inbox that forgets before the outbox does would let a replay of
    /// a still-stored event act twice.
    pub fn check(&self) -> Result<(), String> {
        if self.inbox < self.outbox {
            return Err(format!(
                "--inbox-window ({} s) must be at least --outbox-retention ({} s): a replay of an \
                 event still in the outbox would credit and text again",
                self.inbox.as_secs(),
                self.outbox.as_secs()
            ));
        }
        Ok(())
    }

    /// The times before which each kind of row may go, at `now_ms`.
    pub fn cutoffs(&self, now_ms: i64) -> Cutoffs {
        let before =
            |d: Duration| now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Cutoffs {
            outbox: before(self.outbox),
            inbox: before(self.inbox),
            sms: before(self.sms),
        }
    }
}

/// Rows written (outbox, SMS) or handled (inbox) before these times may be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cutoffs {
    /// Published outbox events written before this.
    pub outbox: i64,
    /// Inbox rows handled before this (whose event has left the outbox).
    pub inbox: i64,
    /// SMS records written before this.
    pub sms: i64,
}

/// Rows one trim removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Published outbox events.
    pub outbox: usize,
    /// Inbox rows.
    pub inbox: usize,
    /// SMS records.
    pub sms: usize,
}

impl Trimmed {
    /// All rows removed.
    pub fn total(&self) -> usize {
        self.outbox + self.inbox + self.sms
    }
}

/// SQLite: removes up to [`TRIM_CHUNK`] rows of each kind (per consumer for the inbox); the
/// caller repeats while a chunk was full.
///
/// Only the oldest rows are looked at (a primary-key range, never a scan of the table), so a
/// trim costs the same however large the tables are; the
/// newest outbox row always stays, so "its event left the outbox" can be read as "its id is
/// below the smallest id still there" even when every event was trimmed.
pub fn trim_chunk(conn: &Connection, cut: Cutoffs) -> Result<Trimmed, DbError> {
    let outbox = outbox::trim(conn, cut.outbox, TRIM_CHUNK)?;
    let mut inbox = 0;
    for consumer in Consumer::ALL {
        inbox += inbox::trim(conn, consumer.name(), cut.inbox, TRIM_CHUNK)?;
    }
    let sms = conn
        .prepare_cached(
            "DELETE FROM sms WHERE sms_id IN (SELECT sms_id FROM sms ORDER BY sms_id LIMIT ?2)
               AND created_at_ms < ?1",
        )?
        .execute(params![cut.sms, TRIM_CHUNK])?;
    Ok(Trimmed { outbox, inbox, sms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_shorter_than_the_outbox_is_refused() {
        let r = Retention {
            outbox: Duration::from_secs(10),
            inbox: Duration::from_secs(9),
            sms: Duration::from_secs(1),
        };
        assert!(r.check().unwrap_err().contains("--inbox-window"));
        assert!(Retention::default().check().is_ok());
    }
}
