//! Bearer tokens at rest: only their SHA-256 is stored, so a copy of the database file does
//! not let anyone act as the users in it; each token has an expiry and can be revoked.

use sha2::{Digest, Sha256};

/// The authenticated user making a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Their id.
    pub user_id: String,
    /// Their wallet currency.
    pub currency: String,
}

/// How long a token minted by the test API lives unless asked otherwise.
pub const DEFAULT_TOKEN_TTL_MS: i64 = 30 * 86_400_000;

/// What the `users.token` column holds for `token`.
pub fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_stable_and_prefixed() {
        let h = token_hash("tok_1");
        assert_eq!(h, token_hash("tok_1"));
        assert_ne!(h, token_hash("tok_2"));
        assert!(h.starts_with("sha256:") && h.len() == 71 && !h.contains("tok_1"));
    }
}
