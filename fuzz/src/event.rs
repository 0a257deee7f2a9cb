//! Target `event`: the Kafka consumers' decoding of a message payload. Properties: never
//! panics; an accepted event is one our producers write (known kind, ids, a positive amount, a
//! currency code), it re-encodes to an event that decodes equal, and its amount reads back from
//! the SMS text's rendering.

use sendonce_streams::event::{Envelope, LARGE_TRANSFER, TRANSFER_DONE};
use sendonce_streams::sms::format_minor;

/// The property; panics with the payload when it breaks.
pub fn check(data: &[u8]) {
    let Ok(event) = Envelope::decode(Some(data)) else {
        return;
    };
    let t = &event.transfer;
    assert!(
        [TRANSFER_DONE, LARGE_TRANSFER].contains(&event.kind.as_str()),
        "kind {:?}",
        event.kind
    );
    assert!(t.amount_minor > 0, "amount {}", t.amount_minor);
    assert!(!t.transfer_id.is_empty() && !t.to_user_id.is_empty() && !t.from_user_id.is_empty());
    assert!(t.currency.len() == 3 && t.currency.bytes().all(|b| b.is_ascii_uppercase()));
    let again = Envelope::decode(Some(&event.to_bytes())).expect("re-encoded event decodes");
    assert_eq!(again, event);
    let shown = format_minor(t.amount_minor).replace('.', "");
    assert_eq!(shown.parse::<i64>().ok(), Some(t.amount_minor), "{shown}");
}
