//! Idempotency keys: header parsing, request fingerprints and the key table.

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::db::DbError;

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

/// State of an existing key row found on conflict.
#[derive(Debug, Clone)]
pub enum Existing {
    /// Another request with this key is still running.
    InProgress { same_request: bool },
    /// Finished: stored status and exact stored body.
    Completed {
        same_request: bool,
        status: u16,
        body: Vec<u8>,
    },
}

/// Result of trying to claim a key.
#[derive(Debug, Clone)]
pub enum Claim {
    /// We inserted the row and own it until we complete or release it.
    Acquired,
    /// The row already existed.
    Exists(Existing),
}

/// Width of an expiry bucket: a day, or the key window if shorter (seconds-long test windows).
pub fn bucket_width_ms(key_window_ms: i64) -> i64 {
    key_window_ms.clamp(1_000, 86_400_000)
}

/// Everything needed to insert a key row.
pub struct NewKey<'a> {
    /// Owner of the key (keys are scoped per user).
    pub user_id: &'a str,
    /// The normalised key.
    pub key: &'a str,
    /// Fingerprint of the request.
    pub hash: &'a [u8],
    /// Random id of this attempt, so only the owner can complete the row.
    pub lock_id: &'a str,
    /// The lease: which server process holds the lock, and when it took it.
    pub lease: Lease<'a>,
    /// The exact request body (the reaper finishes an authorised transfer from it).
    pub body: &'a [u8],
    /// Server time now.
    pub now_ms: i64,
    /// Expiry bucket width.
    pub bucket_width_ms: i64,
}

/// When a lock was taken, in the holder's monotonic time (a wall-clock jump moves neither).
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    /// Random id of the server process (one per start).
    pub instance: &'a str,
    /// Milliseconds since that process started.
    pub mono_ms: i64,
}

/// Phase 1: insert the key row `IN_PROGRESS`; the primary key decides a race.
///
/// One transaction (`db::atomically`): its own on a bare connection, or the group job's.
pub fn claim(conn: &mut Connection, k: &NewKey<'_>) -> Result<Claim, DbError> {
    crate::db::atomically(conn, |tx| claim_in(tx, k))
}

fn claim_in(tx: &Connection, k: &NewKey<'_>) -> Result<Claim, DbError> {
    let inserted = tx
        .prepare_cached(
            "INSERT OR ROLLBACK INTO idempotency_keys
            (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, created_at_ms, bucket,
             lock_instance, lock_mono_ms, request_body)
         VALUES (?1, ?2, ?3, 'in_progress', ?4, ?5, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (user_id, idem_key) DO NOTHING",
        )?
        .execute(params![
            k.user_id,
            k.key,
            k.hash,
            k.lock_id,
            k.now_ms,
            k.now_ms.div_euclid(k.bucket_width_ms),
            k.lease.instance,
            k.lease.mono_ms,
            k.body
        ])?;
    if inserted == 1 {
        return Ok(Claim::Acquired);
    }
    match read(tx, k.user_id, k.key)? {
        Some(row) => Ok(Claim::Exists(row.into_existing(k.hash))),
        // Unreachable inside one IMMEDIATE transaction; answer "busy" rather than guess.
        None => Ok(Claim::Exists(Existing::InProgress { same_request: true })),
    }
}

/// A key row as stored.
#[derive(Debug, Clone)]
pub struct KeyRow {
    /// Stored request fingerprint.
    pub hash: Vec<u8>,
    /// `in_progress` or `completed`.
    pub completed: bool,
    /// Stored status when completed.
    pub status: Option<u16>,
    /// Stored body when completed.
    pub body: Option<Vec<u8>>,
}

impl KeyRow {
    /// What this row means for a request with fingerprint `hash`. A closed key (see
    /// [`close_unexecuted`]) answers every request with its stored 404.
    pub fn into_existing(self, hash: &[u8]) -> Existing {
        let same_request = self.hash == hash || self.hash.is_empty();
        match (self.completed, self.status, self.body) {
            (true, Some(status), Some(body)) => Existing::Completed {
                same_request,
                status,
                body,
            },
            _ => Existing::InProgress { same_request },
        }
    }
}

/// Reads the key row for (user, key), if any.
pub fn read(conn: &Connection, user_id: &str, key: &str) -> Result<Option<KeyRow>, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT request_hash, state, response_status, response_body
             FROM idempotency_keys WHERE user_id = ?1 AND idem_key = ?2",
        )?
        .query_row(params![user_id, key], |r| {
            Ok(KeyRow {
                hash: r.get(0)?,
                completed: r.get::<_, String>(1)? == "completed",
                status: r.get(2)?,
                body: r.get(3)?,
            })
        })
        .optional()?)
}

/// The fence: whether the key row is still `IN_PROGRESS` under `lock_id`. Checked inside
/// the transaction that moves money, so a request whose lock was lost (reaped, expired,
/// finished by the reaper) moves nothing.
pub fn holds(conn: &Connection, user_id: &str, key: &str, lock_id: &str) -> Result<bool, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM idempotency_keys
             WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
        )?
        .query_row(params![user_id, key, lock_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Completes the row we own with its response; a no-op if the reaper took it from us.
pub fn complete(
    conn: &Connection,
    user_id: &str,
    key: &str,
    lock_id: &str,
    status: u16,
    body: &[u8],
) -> Result<bool, DbError> {
    let n = conn
        .prepare_cached(
            "UPDATE OR ROLLBACK idempotency_keys
         SET state = 'completed', response_status = ?4, response_body = ?5
         WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
        )?
        .execute(params![user_id, key, lock_id, status, body])?;
    Ok(n == 1)
}

/// Closes a key nothing ran under (no row, no debit): a completed row with an empty
/// fingerprint and the given 404 answer, so the "not executed" a status look-up just said
/// stays true — a late duplicate of the request replays it instead of moving money.
/// Returns `None` when this call closed the key, or the row a concurrent request wrote first.
pub fn close_unexecuted(
    conn: &mut Connection,
    user_id: &str,
    key: &str,
    now_ms: i64,
    bucket_width_ms: i64,
    body: &[u8],
) -> Result<Option<KeyRow>, DbError> {
    crate::db::atomically(conn, |tx| {
        let inserted = tx
            .prepare_cached(
                "INSERT INTO idempotency_keys
            (user_id, idem_key, request_hash, state, lock_id, locked_at_ms, created_at_ms, bucket,
             response_status, response_body)
         VALUES (?1, ?2, x'', 'completed', '', ?3, ?3, ?4, 404, ?5)
         ON CONFLICT (user_id, idem_key) DO NOTHING",
            )?
            .execute(params![
                user_id,
                key,
                now_ms,
                now_ms.div_euclid(bucket_width_ms),
                body
            ])?;
        Ok(if inserted == 1 {
            None
        } else {
            read(tx, user_id, key)?
        })
    })
}

/// Releases (deletes) the row we own, so a retry executes from scratch.
pub fn release(conn: &Connection, user_id: &str, key: &str, lock_id: &str) -> Result<(), DbError> {
    conn.prepare_cached(
        "DELETE FROM idempotency_keys
         WHERE user_id = ?1 AND idem_key = ?2 AND lock_id = ?3 AND state = 'in_progress'",
    )?
    .execute(params![user_id, key, lock_id])?;
    Ok(())
}

/// Drops every bucket that is entirely older than the key window: one range delete,
/// never row by row. Returns the number of rows removed.
pub fn expire(conn: &Connection, now_ms: i64, key_window_ms: i64) -> Result<usize, DbError> {
    let width = bucket_width_ms(key_window_ms);
    // Bucket b holds keys created in [b*w, (b+1)*w); it may go once (b+1)*w <= now - window.
    let first_kept = now_ms.saturating_sub(key_window_ms).div_euclid(width);
    Ok(conn.execute(
        "DELETE FROM idempotency_keys WHERE bucket < ?1",
        params![first_kept],
    )?)
}

/// Like [`expire`], but removes at most `limit` rows of the expired buckets (in bucket
/// order, through the expiry index): the reaper calls it in a loop, one transaction per
/// chunk, so expiring a big bucket never holds the writer for long. Returns the rows removed.
pub fn expire_chunk(
    conn: &Connection,
    now_ms: i64,
    key_window_ms: i64,
    limit: usize,
) -> Result<usize, DbError> {
    let width = bucket_width_ms(key_window_ms);
    let first_kept = now_ms.saturating_sub(key_window_ms).div_euclid(width);
    Ok(conn
        .prepare_cached(
            "DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN
                (SELECT user_id, idem_key FROM idempotency_keys
                 WHERE bucket < ?1 ORDER BY bucket, created_at_ms LIMIT ?2)",
        )?
        .execute(params![
            first_kept,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ])?)
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

    #[test]
    fn hash_covers_method_path_body() {
        let a = request_hash("POST", "/v1/transfers", b"{}");
        assert_eq!(a, request_hash("POST", "/v1/transfers", b"{}"));
        assert_ne!(a, request_hash("POST", "/v1/transfers", b"{ }"));
        assert_ne!(a, request_hash("PUT", "/v1/transfers", b"{}"));
    }

    #[test]
    fn buckets_keep_keys_at_least_a_window() {
        let window = 48 * 3_600_000;
        let w = bucket_width_ms(window);
        assert_eq!(w, 86_400_000);
        let created = 10 * w + 5;
        let bucket = created.div_euclid(w);
        // Not yet a full window old: its bucket survives.
        let now = created + window - 1;
        assert!(bucket >= (now - window).div_euclid(w));
        assert_eq!(bucket_width_ms(2_000), 2_000);
    }
}
