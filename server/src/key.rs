//! The `Idempotency-Key` request header: what a valid key is.
//!
//! A key is 1–255 visible ASCII characters, or an RFC 8941 sf-string (`"abc"` means `abc`,
//! since the IETF draft defines the header as one). Keys are scoped per principal by the
//! store, never here.

use axum::http::{HeaderMap, StatusCode};

use crate::problem::Problem;

/// The header's name, as sent by the SDK and parsed here.
pub const HEADER: &str = "idempotency-key";

/// Longest accepted key, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// Why an `Idempotency-Key` header value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// No header at all.
    Missing,
    /// Present but not 1–255 visible ASCII (or a malformed sf-string).
    Invalid(&'static str),
}

/// Parses an `Idempotency-Key` value: 1–255 visible ASCII characters, or an RFC 8941
/// sf-string (`"abc"` means `abc`, since the IETF draft defines the header that way).
pub fn parse_key(raw: &[u8]) -> Result<String, KeyError> {
    let key = if raw.first() == Some(&b'"') {
        parse_sf_string(raw)?
    } else {
        if !raw.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(KeyError::Invalid("key must be visible ASCII"));
        }
        String::from_utf8_lossy(raw).into_owned()
    };
    if key.is_empty() {
        return Err(KeyError::Invalid("key must not be empty"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(KeyError::Invalid("key must be at most 255 characters"));
    }
    Ok(key)
}

/// Unquotes an sf-string: printable ASCII (space allowed), `\"` and `\\` escapes only.
fn parse_sf_string(raw: &[u8]) -> Result<String, KeyError> {
    let bad = KeyError::Invalid("malformed quoted key");
    let inner = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .ok_or_else(|| bad.clone())?;
    let mut out = String::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e @ (b'"' | b'\\')) => out.push(char::from(e)),
                _ => return Err(bad),
            },
            b'"' => return Err(bad),
            0x20..=0x7e => out.push(char::from(b)),
            _ => return Err(bad),
        }
    }
    Ok(out)
}

/// Reads the one `Idempotency-Key` header of a request: none is 400
/// `idempotency_key_missing`, two or a bad value 400 `idempotency_key_invalid`.
pub fn from_headers(headers: &HeaderMap) -> Result<String, Problem> {
    let mut values = headers.get_all(HEADER).iter();
    let result = match (values.next(), values.next()) {
        (None, _) => Err(KeyError::Missing),
        (Some(_), Some(_)) => Err(KeyError::Invalid("send exactly one Idempotency-Key header")),
        (Some(v), None) => parse_key(v.as_bytes()),
    };
    result.map_err(problem)
}

/// The contract's 400 for a key that is missing or not valid.
pub fn problem(e: KeyError) -> Problem {
    match e {
        KeyError::Missing => Problem::new(
            StatusCode::BAD_REQUEST,
            "idempotency_key_missing",
            "this request requires an Idempotency-Key header",
        ),
        KeyError::Invalid(why) => {
            Problem::new(StatusCode::BAD_REQUEST, "idempotency_key_invalid", why)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_quoted_keys() {
        assert_eq!(parse_key(b"abc-123"), Ok("abc-123".into()));
        assert_eq!(parse_key(b"\"abc\""), Ok("abc".into()));
        assert_eq!(parse_key(b"\"a\\\"b\""), Ok("a\"b".into()));
        assert_eq!(parse_key(b"\"a b\""), Ok("a b".into()));
        assert!(parse_key(b"").is_err());
        assert!(parse_key(b"\"\"").is_err());
        assert!(parse_key(b"a b").is_err());
        assert!(parse_key(b"\"abc").is_err());
        assert!(parse_key(b"\"a\\nb\"").is_err());
        assert!(parse_key("é".as_bytes()).is_err());
        assert!(parse_key(&[b'k'; 255]).is_ok());
        assert!(parse_key(&[b'k'; 256]).is_err());
    }
}
