//! Idempotency keys of a deterministic ride: UUID v4s from each phone's seeded stream, so a key's
//! bytes (which seed its retry jitter) are the same on every run.

use std::sync::Mutex;

use crate::rng::Rng;

/// A UUID v4 from the phone's seeded stream: unique within the ride, the same on every run.
pub fn seeded_key(keys: &Mutex<Rng>) -> String {
    let mut rng = keys.lock().unwrap_or_else(|p| p.into_inner());
    let bits = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
    uuid_v4(bits)
}

fn uuid_v4(bits: u128) -> String {
    // Version 4 and the RFC 4122 variant, as a minted key would carry.
    let b = (bits & !(0xF << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{b:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeded_keys_look_like_v4_uuids() {
        let key = super::uuid_v4(u128::MAX);
        assert_eq!(key, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(super::uuid_v4(0), "00000000-0000-4000-8000-000000000000");
    }
}
