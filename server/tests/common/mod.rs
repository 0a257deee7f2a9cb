//! What the key-table tests of both stores share: one request's key row as a claim asks for
//! it, and the status a claim's outcome answers.

use sendonce_server::decision::Claim;
use sendonce_server::expiry::bucket_width_ms;
use sendonce_server::store::NewKey;
use sendonce_server::Instance;

/// The key window of every test: 48 h (day buckets).
pub const WINDOW: i64 = 48 * 3_600_000;

/// The claim of user `u1`'s request `body` under `key`, by lock `lock` of `who`, at `now`.
pub fn new_key<'a>(
    who: &'a Instance,
    key: &'a str,
    hash: &'a [u8],
    body: &'a [u8],
    lock: &'a str,
    now: i64,
) -> NewKey<'a> {
    NewKey {
        user_id: "u1",
        key,
        hash,
        lock_id: lock,
        lease: who.lease(),
        body,
        now_ms: now,
        bucket_width_ms: bucket_width_ms(WINDOW),
    }
}

/// 0 for a claim that got the key, else the status the row already there answers.
pub fn status_of(claim: Claim) -> u16 {
    match claim {
        Claim::Acquired => 0,
        Claim::Exists(existing) => existing.answer().status,
    }
}
