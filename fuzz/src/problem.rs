//! Target `problem`: error bodies both ways. Even first byte: the SDK reads an arbitrary body
//! sent with the server's error media type (the code and detail it takes must be the body's own,
//! and nothing without a code is final). Odd first byte: server-mock writes a problem with an
//! arbitrary detail, and the SDK must read back exactly its code and detail.

use sendonce::transport::HttpResponse;
use sendonce::{classify_with, Locator, ResponseContract, Verdict};
use sendonce_server::{Problem, PROBLEM_JSON};

use crate::answer::{contract, KEY};
use crate::oracle::{judge, located};

/// Codes server-mock answers with, and their statuses (a sample: the SDK's reading does not
/// depend on which).
const SERVER_CODES: [(&str, u16); 7] = [
    ("invalid_request", 400),
    ("insufficient_funds", 402),
    ("recipient_not_found", 404),
    ("recipient_balance_limit", 422),
    ("idempotency_key_reused", 422),
    ("idempotency_key_in_use", 409),
    ("rate_limited", 429),
];

/// The property; panics with the answer when it breaks.
pub fn check(data: &[u8]) {
    let [mode, pick, rest @ ..] = data else {
        return;
    };
    if mode.is_multiple_of(2) {
        read_any(contract(mode / 2), 400 + u16::from(*pick) % 200, rest);
    } else {
        read_back(SERVER_CODES[usize::from(*pick) % SERVER_CODES.len()], rest);
    }
}

fn read_any(c: ResponseContract, status: u16, body: &[u8]) {
    let r = HttpResponse {
        status,
        headers: vec![("content-type".into(), c.problem.content_type.clone())],
        body: body.to_vec(),
    };
    let verdict = classify_with(&c, &Ok(r.clone()), KEY);
    if let Err(why) = judge(&c, &r, KEY, &verdict) {
        panic!("{why}: {verdict:?} for {r:?}");
    }
    if let Verdict::Rejected(rejection) | Verdict::Failed(rejection) = &verdict {
        let detail = located(&Locator::Body(c.problem.detail.clone()), &r).unwrap_or_default();
        assert_eq!(rejection.detail, detail, "detail not the body's: {r:?}");
    }
}

fn read_back((code, status): (&'static str, u16), detail: &[u8]) {
    let detail = String::from_utf8_lossy(detail).into_owned();
    let status = axum::http::StatusCode::from_u16(status).expect("a valid status");
    let problem = Problem::new(status, code, detail.clone());
    let r = HttpResponse {
        status: problem.status.as_u16(),
        headers: vec![("content-type".into(), PROBLEM_JSON.into())],
        body: problem.body_bytes(),
    };
    let verdict = classify_with(&ResponseContract::default(), &Ok(r.clone()), KEY);
    match (code, &verdict) {
        ("idempotency_key_in_use" | "rate_limited", Verdict::Retry { .. }) => {}
        ("idempotency_key_reused", Verdict::Failed(rejection)) => {
            assert_eq!(rejection.detail, detail);
        }
        (_, Verdict::Rejected(rejection)) => {
            assert_eq!(
                (rejection.code.as_str(), &rejection.detail),
                (code, &detail)
            );
        }
        _ => panic!("server-mock's {code} read as {verdict:?}"),
    }
}
