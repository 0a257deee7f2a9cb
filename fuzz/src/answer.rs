//! How a fuzz input becomes an HTTP answer: the fuzzer mutates status, headers and body as
//! plain bytes, so a seed can be written by hand.
//!
//! Layout: byte 0 picks the response contract (even: server-mock's, odd: the bank's); bytes 1–2
//! the status (`100 + u16 % 500`); then header lines `name: value` up to an empty line, then the body.

use sendonce::transport::HttpResponse;
use sendonce::ResponseContract;

/// The key every fuzzed attempt was sent with.
pub const KEY: &str = "k-fuzz-0001";

/// The two contracts an answer is read under: server-mock's and a bank's (action-required, header echo).
pub fn contract(selector: u8) -> ResponseContract {
    if selector.is_multiple_of(2) {
        ResponseContract::default()
    } else {
        sendonce_sim::bank::contract()
    }
}

/// The contract and the answer encoded in `data`; `None` when it is too short.
pub fn decode(data: &[u8]) -> Option<(ResponseContract, HttpResponse)> {
    let (&selector, rest) = data.split_first()?;
    let (status, rest) = rest.split_first_chunk::<2>()?;
    let status = 100 + u16::from_le_bytes(*status) % 500;
    let (head, body) = match rest.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&rest[..at], &rest[at + 2..]),
        None => (&[][..], rest),
    };
    let headers = String::from_utf8_lossy(head)
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    Some((
        contract(selector),
        HttpResponse {
            status,
            headers,
            body: body.to_vec(),
        },
    ))
}

/// The bytes [`decode`] reads back as this answer (for seeds).
pub fn encode(selector: u8, status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = vec![selector];
    out.extend_from_slice(&(status - 100).to_le_bytes());
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\n").as_bytes());
    }
    out.push(b'\n');
    if headers.is_empty() {
        out.push(b'\n');
    }
    out.extend_from_slice(body);
    out
}
