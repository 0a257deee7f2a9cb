//! Target `body`: server-mock's parsing and validation of a transfer body, before anything is
//! read or stored. Properties: never panics; every refusal is a 4xx problem whose body the SDK
//! reads as the server's definitive `invalid_request`; every body it accepts holds, read
//! independently as JSON, an amount within the limit in the caller's currency, to someone
//! else, with a note of at most 280 characters and no control character.

use sendonce::transport::HttpResponse;
use sendonce::{classify_with, RejectionReason, ResponseContract, Verdict};
use sendonce_server::PROBLEM_JSON;
use server_mock::transfer::{check_body, parse, Caller, MAX_AMOUNT_MINOR, MAX_NOTE_CHARS};

use crate::answer::KEY;

/// The fields of a transfer body, declared again here: the oracle's own reading.
#[derive(serde::Deserialize)]
struct Fields {
    to_user_id: String,
    amount_minor: i64,
    currency: String,
    note: Option<String>,
}

/// The property; panics with the body when it breaks.
pub fn check(data: &[u8]) {
    let Some((limit, body)) = data.split_first_chunk::<8>() else {
        return;
    };
    // The test API can lower the limit; any value in 1..=MAX is one the server can run with.
    let max = 1 + i64::from_le_bytes(*limit).rem_euclid(MAX_AMOUNT_MINOR);
    let caller = Caller {
        user_id: "alice".into(),
        currency: "EUR".into(),
    };
    match parse(body).and_then(|p| check_body(max, &caller, &p).map(|()| p)) {
        Err(problem) => {
            assert_eq!(problem.status.as_u16(), 400, "{problem}");
            let r = HttpResponse {
                status: 400,
                headers: vec![("content-type".into(), PROBLEM_JSON.into())],
                body: problem.body_bytes(),
            };
            let verdict = classify_with(&ResponseContract::default(), &Ok(r), KEY);
            assert!(
                matches!(&verdict, Verdict::Rejected(r) if r.reason == RejectionReason::InvalidRequest),
                "{problem} read as {verdict:?}"
            );
        }
        Ok(accepted) => {
            // Only the fields it checks: an unknown field may hold a number beyond f64 (valid JSON,
            // RFC 8259 sets no limit, and ignored), which serde_json::Value cannot hold.
            let v: Fields = serde_json::from_slice(body).expect("accepted, so these fields parse");
            assert!(
                (1..=max).contains(&v.amount_minor),
                "amount {} over {max}",
                v.amount_minor
            );
            assert_eq!(v.amount_minor, accepted.amount_minor);
            assert_eq!(v.currency, "EUR");
            assert_ne!(v.to_user_id, "alice");
            if let Some(note) = v.note {
                assert!(note.chars().count() <= MAX_NOTE_CHARS);
                assert!(!note.chars().any(char::is_control), "{note:?}");
            }
        }
    }
}
