//! How to read a server's answers: where a success names the key and the operation's id, which
//! problem codes are definitive refusals, key-in-use, authentication or "action required", and how
//! to look an operation up by its key.
//!
//! The truth rules are the same for every contract (DESIGN.md invariant 7): a success must name this
//! attempt's key; a refusal must be the server's own error format with a stable code. A contract
//! that leaves no way to tell the server's answer from an intermediary's is refused by
//! [`ResponseContract::validate`] with `InvalidConfig`, never silently downgraded.

use crate::error::{Result, SdkError};
use crate::model::{RejectionReason, RequiredAction};
use crate::transport::HttpResponse;

/// Where a value is found in an answer (`AnswerLocator` in Kotlin and Swift).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Enum),
    uniffi(name = "AnswerLocator")
)]
pub enum Locator {
    /// A JSON pointer (RFC 6901) into the body, e.g. `/idempotency_key`, `/data/id`.
    Body(#[cfg_attr(feature = "uniffi", uniffi(name = "pointer"))] String),
    /// A response header (case-insensitive name).
    Header(#[cfg_attr(feature = "uniffi", uniffi(name = "name"))] String),
}

impl Locator {
    /// The string (or integer, as text) found there, if any.
    pub fn find(&self, r: &HttpResponse) -> Option<String> {
        match self {
            Self::Header(name) => r.header(name).map(str::to_owned),
            Self::Body(pointer) => {
                let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
                text_at(&v, pointer)
            }
        }
    }

    fn check(&self, what: &str) -> Result<()> {
        let ok = match self {
            Self::Body(p) => p.starts_with('/') && p.len() > 1,
            Self::Header(h) => {
                !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }
        };
        if ok {
            Ok(())
        } else {
            Err(invalid(format!(
                "{what}: {self:?} is neither a JSON pointer below the root nor a header name"
            )))
        }
    }
}

fn text_at(v: &serde_json::Value, pointer: &str) -> Option<String> {
    match v.pointer(pointer)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The server's own error format.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ProblemFormat {
    /// Media type of the server's errors, e.g. `application/problem+json`. Must be specific to errors
    /// (`+json` suffix or a vendor type): a proxy's `text/html` or generic `application/json` is not one.
    #[cfg_attr(feature = "uniffi", uniffi(default = "application/problem+json"))]
    pub content_type: String,
    /// JSON pointer to the stable code.
    #[cfg_attr(feature = "uniffi", uniffi(default = "/code"))]
    pub code: String,
    /// JSON pointer to the human-readable detail.
    #[cfg_attr(feature = "uniffi", uniffi(default = "/detail"))]
    pub detail: String,
}

/// A problem code that is a definitive refusal, and the typed reason the app switches over.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct RefusalCode {
    /// The server's stable code, e.g. `insufficient_funds`.
    pub code: String,
    /// What the app sees in `Rejected`.
    pub reason: RejectionReason,
}

impl RefusalCode {
    /// `code` refuses with `reason`.
    pub fn new(code: impl Into<String>, reason: RejectionReason) -> Self {
        Self {
            code: code.into(),
            reason,
        }
    }
}

/// What an "action required" answer carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ActionRule {
    /// Problem codes that mean "the customer must complete a step first" (3-D Secure, SCA, a code).
    pub codes: Vec<String>,
    /// Where the answer names the URL to open, if anywhere.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub url: Option<Locator>,
    /// Where the answer names the challenge id, if anywhere.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub challenge_id: Option<Locator>,
}

/// How to look an operation up by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct LookupRoute {
    /// Path with `{key}` (percent-encoded on use), e.g. `/v1/transfers?idempotency_key={key}`.
    pub path: String,
    /// Problem codes of the server's own "no operation with this key" (it closes the key with it).
    pub not_found_codes: Vec<String>,
}

/// How to read a server's answers. [`ResponseContract::default`] is server-mock's.
///
/// The one type of the contract in Rust, Kotlin and Swift (a uniffi record under the `uniffi`
/// feature): the bindings convert nothing by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ResponseContract {
    /// Request header that carries the idempotency key (`idempotency-key` by default).
    #[cfg_attr(feature = "uniffi", uniffi(default = "idempotency-key"))]
    pub key_header: String,
    /// Where a success names the idempotency key it answers: the proof that it is the server's answer
    /// to this request. `None` is refused at configuration (nothing would tell a portal's 200 apart).
    pub key_echo: Option<Locator>,
    /// Where a success names the operation's id on the server.
    pub operation_id: Locator,
    /// Header that marks a replayed answer (`true`), if the server sends one.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub replayed_header: Option<String>,
    /// The server's error format.
    pub problem: ProblemFormat,
    /// Codes that are definitive refusals, with their typed reason.
    pub refusals: Vec<RefusalCode>,
    /// Any other code of the server's own 4xx is a definitive refusal (`Other(code)`) too; when false,
    /// an unknown code is treated as "unknown, send again".
    #[cfg_attr(feature = "uniffi", uniffi(default = false))]
    pub other_codes_refuse: bool,
    /// Codes that mean "the first attempt with this key is still running": retry after `Retry-After`.
    #[cfg_attr(feature = "uniffi", uniffi(default = []))]
    pub key_in_use: Vec<String>,
    /// Codes that mean "this key was used with another body": a bug, failed at once, never retried.
    #[cfg_attr(feature = "uniffi", uniffi(default = []))]
    pub key_reused: Vec<String>,
    /// Codes that mean "credentials" (besides any server problem with status 401 or 403).
    #[cfg_attr(feature = "uniffi", uniffi(default = []))]
    pub auth: Vec<String>,
    /// "Action required" answers, if the server has them.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub action_required: Option<ActionRule>,
    /// The look-up by key.
    pub lookup: LookupRoute,
}

impl Default for ResponseContract {
    /// server-mock's contract: today's wire, unchanged.
    fn default() -> Self {
        Self {
            key_header: "idempotency-key".into(),
            key_echo: Some(Locator::Body("/idempotency_key".into())),
            operation_id: Locator::Body("/transfer_id".into()),
            replayed_header: Some("idempotent-replayed".into()),
            problem: ProblemFormat {
                content_type: "application/problem+json".into(),
                code: "/code".into(),
                detail: "/detail".into(),
            },
            refusals: [
                "insufficient_funds",
                "recipient_not_found",
                "recipient_balance_limit",
                "invalid_request",
            ]
            .into_iter()
            .map(|c| RefusalCode::new(c, RejectionReason::of_code(c)))
            .collect(),
            other_codes_refuse: true,
            key_in_use: vec!["idempotency_key_in_use".into()],
            key_reused: vec!["idempotency_key_reused".into()],
            auth: Vec::new(),
            action_required: None,
            lookup: LookupRoute {
                path: "/v1/transfers?idempotency_key={key}".into(),
                not_found_codes: vec!["transfer_not_found".into()],
            },
        }
    }
}

impl ResponseContract {
    /// Refuses a contract under which an intermediary's answer could end an operation.
    pub fn validate(&self) -> Result<()> {
        let Some(echo) = &self.key_echo else {
            return Err(invalid(
                "key_echo is required: without the key in the success, a captive portal's 200 would end an operation",
            ));
        };
        echo.check("key_echo")?;
        self.operation_id.check("operation_id")?;
        let ct = self.problem.content_type.trim().to_ascii_lowercase();
        let specific = (ct.starts_with("application/")
            && (ct.ends_with("+json") || ct.contains("/vnd.")))
            && !ct.contains(';');
        if !specific {
            return Err(invalid(format!(
                "problem content type {:?} is not specific to the server's errors (a proxy sends text/html or application/json too); use e.g. application/problem+json",
                self.problem.content_type
            )));
        }
        for (what, pointer) in [
            ("problem code", &self.problem.code),
            ("problem detail", &self.problem.detail),
        ] {
            Locator::Body(pointer.clone()).check(what)?;
        }
        if !self.lookup.path.starts_with('/')
            || self.lookup.path.starts_with("//")
            || !self.lookup.path.contains("{key}")
        {
            return Err(invalid(format!(
                "look-up path {:?} must start with one '/' and contain {{key}}",
                self.lookup.path
            )));
        }
        if self.lookup.not_found_codes.is_empty() {
            return Err(invalid(
                "look-up needs the server's own not-found code: a bare 404 comes from proxies too",
            ));
        }
        let mut seen: Vec<(&str, &str)> = Vec::new();
        let action_codes = self.action_required.iter().flat_map(|a| a.codes.iter());
        let classes = [
            (
                "refusal",
                self.refusals.iter().map(|r| &r.code).collect::<Vec<_>>(),
            ),
            ("key in use", self.key_in_use.iter().collect()),
            ("key reused", self.key_reused.iter().collect()),
            ("auth", self.auth.iter().collect()),
            ("action required", action_codes.collect()),
        ];
        for (class, codes) in classes {
            for code in codes {
                if code.trim().is_empty() {
                    return Err(invalid(format!(
                        "an empty {class} code matches nothing the server says"
                    )));
                }
                if let Some((other, _)) = seen.iter().find(|(_, c)| *c == code.as_str()) {
                    if *other != class {
                        return Err(invalid(format!(
                            "code {code:?} is both {other} and {class}"
                        )));
                    }
                }
                seen.push((class, code));
            }
        }
        if let Some(action) = &self.action_required {
            if action.codes.is_empty() {
                return Err(invalid("action_required without codes"));
            }
            if let Some(l) = &action.url {
                l.check("action url")?;
            }
            if let Some(l) = &action.challenge_id {
                l.check("action challenge id")?;
            }
        }
        Locator::Header(self.key_header.clone()).check("key header")?;
        if let Some(h) = &self.replayed_header {
            Locator::Header(h.clone()).check("replayed header")?;
        }
        Ok(())
    }

    /// The server's error in `r`, if it is one: its format and a non-empty code.
    pub(crate) fn problem(&self, r: &HttpResponse) -> Problem {
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let code = text_at(&v, &self.problem.code).unwrap_or_default();
        let detail = text_at(&v, &self.problem.detail).unwrap_or_default();
        let media = r.header("content-type").is_some_and(|t| {
            t.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case(self.problem.content_type.trim())
        });
        Problem {
            from_server: media && !code.is_empty(),
            code: if code.is_empty() {
                "unknown".into()
            } else {
                code
            },
            detail,
        }
    }

    /// The operation id of a success that names `expected_key`; `None` for anything else.
    pub(crate) fn success_for(&self, r: &HttpResponse, expected_key: &str) -> Option<String> {
        let echo = self.key_echo.as_ref()?.find(r)?;
        if echo != expected_key {
            return None;
        }
        let id = self.operation_id.find(r)?;
        (!id.is_empty()).then_some(id)
    }

    /// True when the answer says it is a replay of an earlier one.
    pub(crate) fn is_replay(&self, r: &HttpResponse) -> bool {
        self.replayed_header
            .as_deref()
            .and_then(|h| r.header(h))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// The typed reason of a refusal code, if it is one.
    pub(crate) fn refusal(&self, code: &str) -> Option<RejectionReason> {
        if let Some(RefusalCode { reason, .. }) = self.refusals.iter().find(|r| r.code == code) {
            return Some(reason.clone());
        }
        self.other_codes_refuse
            .then(|| RejectionReason::Other(code.to_string()))
    }

    /// The look-up path of a key.
    pub(crate) fn lookup_path(&self, key: &str) -> String {
        self.lookup.path.replace("{key}", &percent_encode(key))
    }

    /// True only for the server's own "no operation with this key".
    pub(crate) fn is_not_found(&self, r: &HttpResponse) -> bool {
        let p = self.problem(r);
        (400..500).contains(&r.status)
            && p.from_server
            && self.lookup.not_found_codes.contains(&p.code)
    }

    /// What an action-required answer asks for, if `r` is one.
    pub(crate) fn required_action(&self, r: &HttpResponse, p: &Problem) -> Option<RequiredAction> {
        let rule = self.action_required.as_ref()?;
        if !p.from_server || !rule.codes.contains(&p.code) {
            return None;
        }
        Some(RequiredAction {
            code: p.code.clone(),
            url: rule.url.as_ref().and_then(|l| l.find(r)),
            challenge_id: rule.challenge_id.as_ref().and_then(|l| l.find(r)),
        })
    }
}

/// The fields of a server error the SDK uses.
#[derive(Debug, Default)]
pub(crate) struct Problem {
    pub code: String,
    pub detail: String,
    /// The server's own format and a non-empty code.
    pub from_server: bool,
}

fn invalid(why: impl Into<String>) -> SdkError {
    SdkError::InvalidConfig(format!("response contract: {}", why.into()))
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
pub(crate) fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
