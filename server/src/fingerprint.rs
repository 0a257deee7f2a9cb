//! The request fingerprint stored with a key: a retry must carry the same request, byte
//! for byte, or it is another request under a used key (422).

use sha2::{Digest, Sha256};

/// Fingerprint of the canonical request (method, path, exact body bytes).
pub fn request_hash(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(body);
    h.finalize().to_vec()
}

#[cfg(test)]
mod tests {
    use super::request_hash;

    #[test]
    fn hash_covers_method_path_body() {
        let a = request_hash("POST", "/v1/transfers", b"{}");
        assert_eq!(a, request_hash("POST", "/v1/transfers", b"{}"));
        assert_ne!(a, request_hash("POST", "/v1/transfers", b"{ }"));
        assert_ne!(a, request_hash("PUT", "/v1/transfers", b"{}"));
    }
}
