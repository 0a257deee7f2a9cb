//! Which API a ride's phones speak (`--api`), and how the wire tap reads it: the key of a request,
//! the order an answer names, its error code, and whether it says no money moved. Every reading
//! follows the SDK's own response contract of that API, so the tap and the phones agree.

use std::sync::LazyLock;

use sendonce::transport::{HttpRequest, HttpResponse, Method};
use sendonce::{RejectionReason, ResponseContract};

/// The server's API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// server-mock's transfers (`send_transfer`, the default contract).
    #[default]
    ServerMock,
    /// A bank's own payment orders (`crate::bank`): operations under the bank's contract.
    Bank,
}

static SERVER_MOCK: LazyLock<ResponseContract> = LazyLock::new(ResponseContract::default);
static BANK: LazyLock<ResponseContract> = LazyLock::new(crate::bank::contract);

impl Api {
    /// The response contract the phones are configured with.
    pub fn contract(self) -> &'static ResponseContract {
        match self {
            Self::ServerMock => &SERVER_MOCK,
            Self::Bank => &BANK,
        }
    }

    /// Where the ride's note (unique per intent) sits in a request body.
    fn note_pointer(self) -> &'static str {
        match self {
            Self::ServerMock => "/note",
            Self::Bank => "/metadata/note",
        }
    }

    /// The key a request is about: its key header, or the key in a look-up's path or query.
    pub fn key_of(self, request: &HttpRequest) -> Option<String> {
        let c = self.contract();
        if request.method == Method::Get {
            let (before, after) = c.lookup.path.split_once("{key}")?;
            let rest = request.url.split_once(before)?.1;
            let end = [after, "&", "#"]
                .iter()
                .filter(|s| !s.is_empty())
                .filter_map(|s| rest.find(s))
                .min()
                .unwrap_or(rest.len());
            return Some(rest[..end].to_string());
        }
        let header = &c.key_header;
        let found = request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(header));
        found.map(|(_, v)| v.clone())
    }

    /// The ride's note in a request body.
    pub fn note_of(self, body: &[u8]) -> Option<String> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        v.pointer(self.note_pointer())?.as_str().map(str::to_string)
    }

    /// The server's error code in `response`, if it is an error in the server's own format.
    pub fn code_of(self, response: &HttpResponse) -> Option<String> {
        let p = &self.contract().problem;
        let ours = response
            .header("content-type")
            .is_some_and(|t| t.starts_with(p.content_type.as_str()));
        let v: serde_json::Value = serde_json::from_slice(&response.body).ok()?;
        let code = v.pointer(&p.code)?.as_str()?;
        ours.then(|| code.to_string())
    }

    /// The operation a success names (server-mock's transfer id, the bank's order id).
    pub fn operation_id_of(self, response: &HttpResponse) -> Option<String> {
        self.contract().operation_id.find(response)
    }

    /// The replay header's name as people write it (`Idempotent-Replayed`, `X-Replayed`), for the report.
    pub fn replay_header_name(self) -> String {
        let header = self.contract().replayed_header.clone().unwrap_or_default();
        let words = header.split('-').map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        });
        words.collect::<Vec<_>>().join("-")
    }

    /// Whether the answer is a stored one given again (the contract's replay header says `true`).
    pub fn is_replay(self, response: &HttpResponse) -> bool {
        let header = self.contract().replayed_header.as_deref();
        header
            .and_then(|h| response.header(h))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Whether an answer says no money moved under its key: an insufficient-funds refusal, or the
    /// look-up's not-found (which closes the key for good).
    pub fn says_not_moved(
        self,
        response: &HttpResponse,
        code: Option<&str>,
        look_up: bool,
    ) -> bool {
        let c = self.contract();
        let Some(code) = code else { return false };
        let refused = c
            .refusals
            .iter()
            .any(|r| r.code == code && r.reason == RejectionReason::InsufficientFunds);
        let closed =
            look_up && response.status == 404 && c.lookup.not_found_codes.iter().any(|n| n == code);
        refused || closed
    }
}
