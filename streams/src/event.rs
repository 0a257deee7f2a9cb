//! What travels on the topics: one `TransferDone` per outbox event, keyed by the payer.

use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use serde::{Deserialize, Serialize};

/// The relay's topic: every committed transfer, at least once.
pub const DONE: &str = "transfers.done";
/// The fraud check's output the wallet and the SMS consumers read.
pub const APPROVED: &str = "transfers.approved";
/// Transfers the fraud check holds for review (no credit, no SMS).
pub const FLAGGED: &str = "transfers.flagged";
/// Large transfers, approved or flagged, whose payer the SMS consumer tells: the fraud
/// check writes them in the Kafka transaction of its decision and sends nothing itself.
pub const LARGE: &str = "transfers.large";
/// Every topic, in the order events flow through them.
pub const TOPICS: [&str; 4] = [DONE, APPROVED, FLAGGED, LARGE];
/// The kind of the relay's events (and of the fraud check's decisions).
pub const TRANSFER_DONE: &str = "TransferDone";
/// The kind of the fraud check's events on [`LARGE`].
pub const LARGE_TRANSFER: &str = "LargeTransfer";
/// Header carrying the outbox event id (also in the payload), for tracing.
pub const EVENT_ID_HEADER: &str = "event-id";

/// The transfer as server-mock stores it in its outbox (fields the consumers use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferDone {
    /// The transfer's id.
    pub transfer_id: String,
    /// The payer (the message key).
    pub from_user_id: String,
    /// The recipient (credited, gets the SMS).
    pub to_user_id: String,
    /// Amount in minor units.
    pub amount_minor: i64,
    /// ISO currency code.
    pub currency: String,
}

/// One message's payload: the outbox event id and the transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The outbox event id (for tracing: ids can be reissued after a restore of the
    /// server's database, so no consumer dedupes on it).
    pub event_id: i64,
    /// [`TRANSFER_DONE`], or [`LARGE_TRANSFER`]; with the transfer id, the inbox key.
    pub kind: String,
    /// The transfer.
    pub transfer: TransferDone,
}

/// Why a message cannot be handled.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The payload is not an envelope.
    #[error("unreadable payload: {0}")]
    Payload(#[from] serde_json::Error),
    /// The payload is empty (a tombstone).
    #[error("empty payload")]
    Empty,
    /// The payload is an envelope no producer of ours writes: an unknown kind, an empty id,
    /// an amount that is not positive. Its effect (a credit of a negative amount is a debit)
    /// must never run.
    #[error("invalid event: {0}")]
    Invalid(&'static str),
}

impl Envelope {
    /// Builds the envelope of one outbox row (`payload` is the transfer's JSON).
    pub fn from_outbox(event_id: i64, payload: &str) -> Result<Self, EventError> {
        Ok(Self {
            event_id,
            kind: TRANSFER_DONE.to_string(),
            transfer: serde_json::from_str(payload)?,
        })
    }

    /// Reads a message's payload.
    pub fn from_message(msg: &impl Message) -> Result<Self, EventError> {
        Self::decode(msg.payload())
    }

    /// Reads a payload (`None`: a tombstone): an envelope that [`Envelope::check`] accepts, or why not.
    pub fn decode(payload: Option<&[u8]>) -> Result<Self, EventError> {
        let event: Self = serde_json::from_slice(payload.ok_or(EventError::Empty)?)?;
        event.check()?;
        Ok(event)
    }

    /// What every event the relay and the fraud check write satisfies; the consumers act on
    /// nothing else (a topic is written by more than one program, and a replayed or restored
    /// topic by older ones).
    pub fn check(&self) -> Result<(), EventError> {
        let t = &self.transfer;
        if self.kind != TRANSFER_DONE && self.kind != LARGE_TRANSFER {
            return Err(EventError::Invalid("unknown kind"));
        }
        if t.transfer_id.is_empty() || t.from_user_id.is_empty() || t.to_user_id.is_empty() {
            return Err(EventError::Invalid("empty transfer or user id"));
        }
        if t.amount_minor <= 0 {
            return Err(EventError::Invalid("amount_minor must be positive"));
        }
        if t.currency.len() != 3 || !t.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(EventError::Invalid(
                "currency must be three capital letters",
            ));
        }
        Ok(())
    }

    /// The payload bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an envelope always serialises")
    }

    /// The message key: the payer, so one user's events stay in one partition, in order.
    pub fn key(&self) -> &str {
        &self.transfer.from_user_id
    }

    /// The headers every message of this event carries.
    pub fn headers(&self) -> OwnedHeaders {
        let id = self.event_id.to_string();
        OwnedHeaders::new().insert(Header {
            key: EVENT_ID_HEADER,
            value: Some(id.as_bytes()),
        })
    }
}

/// The event id a message's header carries, if any.
pub fn header_event_id(msg: &impl Message) -> Option<i64> {
    let headers = msg.headers()?;
    headers
        .iter()
        .find(|h| h.key == EVENT_ID_HEADER)
        .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(kind: &str, amount_minor: i64, currency: &str) -> Vec<u8> {
        Envelope {
            event_id: 7,
            kind: kind.into(),
            transfer: TransferDone {
                transfer_id: "t-1".into(),
                from_user_id: "alice".into(),
                to_user_id: "bob".into(),
                amount_minor,
                currency: currency.into(),
            },
        }
        .to_bytes()
    }

    #[test]
    fn what_the_relay_writes_decodes_unchanged() {
        for kind in [TRANSFER_DONE, LARGE_TRANSFER] {
            let bytes = payload(kind, 1250, "EUR");
            let event = Envelope::decode(Some(&bytes)).unwrap();
            assert_eq!(event.to_bytes(), bytes);
        }
    }

    /// Found by the `event` fuzz target within a second of its first run, from one seed: any
    /// well-formed envelope was accepted — an unknown kind (fuzz/regressions/event/), an empty
    /// id, or a negative amount, whose credit by the wallet is a debit.
    #[test]
    fn an_envelope_no_producer_writes_is_refused() {
        for bytes in [
            payload(TRANSFER_DONE, -500, "EUR"),
            payload(TRANSFER_DONE, 0, "EUR"),
            payload("Refund", 500, "EUR"),
            payload(TRANSFER_DONE, 500, "eur"),
            payload(TRANSFER_DONE, 500, ""),
        ] {
            let err = Envelope::decode(Some(&bytes)).unwrap_err();
            assert!(matches!(err, EventError::Invalid(_)), "{err}");
        }
        assert!(matches!(Envelope::decode(None), Err(EventError::Empty)));
        assert!(matches!(
            Envelope::decode(Some(b"{\"event_id\":1")),
            Err(EventError::Payload(_))
        ));
    }
}
