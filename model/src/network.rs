//! The network between phones and server: an unordered bag of messages (so any order is possible), and the
//! HTTP answers the server gives, encoded as the real server encodes them so the SDK's `classify` reads them.

use sendonce::transport::HttpResponse;

use crate::model::{Key, Protocol, Said, State};
use crate::phone::{self, Wire};
use crate::server;

/// Where an answer goes: the phone, its transfer, and which of its requests it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reply {
    /// Phone id.
    pub phone: u8,
    /// Transfer index on that phone.
    pub transfer: u8,
    /// Request tag (see `Transfer::tag`).
    pub tag: u8,
}

/// What the server answered, in the terms of the contract (DESIGN.md, "Server contract").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Answer {
    /// 201 with the transfer (or its replay).
    Created {
        /// The transfer's key, named in the body.
        key: Key,
        /// `Idempotent-Replayed: true`.
        replayed: bool,
    },
    /// A by-key look-up's 200 with the transfer.
    Found {
        /// The transfer's key.
        key: Key,
    },
    /// 402 `insufficient_funds`, stored (or replayed).
    Insufficient {
        /// `Idempotent-Replayed: true`.
        replayed: bool,
    },
    /// 404 `transfer_not_found` from a by-key look-up, or a closed key's replay of it.
    NotFound {
        /// `Idempotent-Replayed: true`.
        replayed: bool,
    },
    /// 409 `idempotency_key_in_use` with `Retry-After: 1`.
    InUse,
    /// 422 `idempotency_key_reused`.
    Reused,
}

impl Answer {
    /// What this answer tells about its key, for invariant 6 (a 409 or 422 promises nothing).
    pub fn said(self, key: Key) -> Option<Said> {
        match self {
            Answer::Created { .. } | Answer::Found { .. } => Some(Said::Debited(key)),
            Answer::Insufficient { .. } | Answer::NotFound { .. } => Some(Said::NotDebited(key)),
            Answer::InUse | Answer::Reused => None,
        }
    }

    /// The HTTP answer as server-mock sends it (status, headers, body shape).
    pub fn http(self) -> HttpResponse {
        let json = |status: u16, body: String, replayed: bool| {
            let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
            if replayed {
                headers.push(("idempotent-replayed".into(), "true".into()));
            }
            HttpResponse {
                status,
                headers,
                body: body.into_bytes(),
            }
        };
        let transfer = |key: Key| {
            format!(
                r#"{{"transfer_id":"tr-{}","idempotency_key":"{}","amount_minor":1,"currency":"BDT"}}"#,
                key.wire(),
                key.wire()
            )
        };
        let problem = |status: u16, code: &str, replayed: bool, retry_after: bool| {
            let mut r = json(
                status,
                format!(
                    r#"{{"type":"about:blank","status":{status},"code":"{code}","detail":""}}"#
                ),
                replayed,
            );
            r.headers[0].1 = "application/problem+json".into();
            if retry_after {
                r.headers.push(("retry-after".into(), "1".into()));
            }
            r
        };
        match self {
            Answer::Created { key, replayed } => json(201, transfer(key), replayed),
            Answer::Found { key } => json(200, transfer(key), false),
            Answer::Insufficient { replayed } => {
                problem(402, "insufficient_funds", replayed, false)
            }
            Answer::NotFound { replayed } => problem(404, "transfer_not_found", replayed, false),
            Answer::InUse => problem(409, "idempotency_key_in_use", false, true),
            Answer::Reused => problem(422, "idempotency_key_reused", false, false),
        }
    }
}

/// One message in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Msg {
    /// `POST /v1/transfers` with `Idempotency-Key` and the persisted body.
    Post {
        /// The key.
        key: Key,
        /// The body id.
        body: u8,
        /// Whom to answer.
        reply: Reply,
    },
    /// `GET /v1/transfers?idempotency_key=K`.
    Get {
        /// The key.
        key: Key,
        /// Whom to answer.
        reply: Reply,
    },
    /// The server's answer on its way back.
    Answer {
        /// Whom it answers.
        reply: Reply,
        /// What it says.
        answer: Answer,
    },
}

impl Msg {
    /// Whom this message concerns.
    pub fn reply(&self) -> Reply {
        match *self {
            Msg::Post { reply, .. } | Msg::Get { reply, .. } | Msg::Answer { reply, .. } => reply,
        }
    }
}

/// Messages in flight, kept sorted: a multiset, so states differing only in send order are one state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Network {
    /// Sorted messages.
    pub msgs: Vec<Msg>,
}

impl Network {
    /// Puts a message on the wire.
    pub fn push(&mut self, m: Msg) {
        let at = self.msgs.partition_point(|x| x <= &m);
        self.msgs.insert(at, m);
    }

    /// Whether something for this request (itself, or its answer) is still in flight.
    pub fn awaits(&self, phone: u8, transfer: u8, tag: u8) -> bool {
        let want = Reply {
            phone,
            transfer,
            tag,
        };
        self.msgs.iter().any(|m| m.reply() == want)
    }
}

/// Message i arrives: a request at the server, an answer at its phone (dropped there if stale).
pub fn deliver(m: &Protocol, s: &mut State, i: usize) {
    match s.net.msgs.remove(i) {
        Msg::Post { key, body, reply } => server::post(s, key, body, reply),
        Msg::Get { key, reply } => server::get_by_key(s, key, reply),
        Msg::Answer { reply, answer } => {
            let tr = &s.phones[reply.phone as usize].transfers[reply.transfer as usize];
            // The connection it came on is gone (timed out, app killed): nobody reads it.
            if tr.tag == reply.tag && matches!(tr.wire, Wire::Awaiting { .. }) {
                phone::conclude(m, s, reply.phone, reply.transfer, Ok(answer.http()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sendonce::{classify, Verdict};

    use super::*;

    const KEY: Key = Key { phone: 0, n: 0 };

    fn verdict(a: Answer) -> Verdict {
        classify(&Ok(a.http()), &KEY.wire())
    }

    #[test]
    fn the_sdk_reads_each_encoded_answer_as_the_contract_says() {
        for a in [
            Answer::Created {
                key: KEY,
                replayed: false,
            },
            Answer::Created {
                key: KEY,
                replayed: true,
            },
            Answer::Found { key: KEY },
        ] {
            assert!(matches!(verdict(a), Verdict::Succeeded { .. }), "{a:?}");
        }
        for a in [
            Answer::Insufficient { replayed: false },
            Answer::NotFound { replayed: true },
        ] {
            assert!(matches!(verdict(a), Verdict::Rejected(_)), "{a:?}");
        }
        assert_eq!(
            verdict(Answer::InUse),
            Verdict::Retry {
                retry_after_ms: Some(1000),
                error: "409 the first attempt is still running on the server".into()
            }
        );
        assert!(matches!(verdict(Answer::Reused), Verdict::Failed(_)));
        // A transfer that names another key proves nothing for this one.
        let other = Answer::Created {
            key: Key { phone: 0, n: 1 },
            replayed: false,
        };
        assert!(matches!(verdict(other), Verdict::Retry { .. }));
    }
}
