//! Target `key`: the server's `Idempotency-Key` parsing. Properties: never panics; a key it
//! accepts is 1–255 printable ASCII characters; a bare token is taken as sent, and every bare
//! token of visible ASCII up to 255 is accepted; quoting an accepted key as an RFC 8941
//! sf-string reads back the same key.

use sendonce_server::key::{parse_key, MAX_KEY_LEN};

/// The property; panics with the input when it breaks.
pub fn check(data: &[u8]) {
    let parsed = parse_key(data);
    let bare = data.first() != Some(&b'"');
    let visible = data.iter().all(|b| (0x21..=0x7e).contains(b));
    if bare && visible && (1..=MAX_KEY_LEN).contains(&data.len()) {
        assert_eq!(
            parsed.as_deref().ok(),
            std::str::from_utf8(data).ok(),
            "{data:?}"
        );
    }
    let Ok(key) = parsed else {
        return;
    };
    assert!((1..=MAX_KEY_LEN).contains(&key.len()), "{key:?}");
    assert!(key.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{key:?}");
    if bare {
        assert_eq!(key.as_bytes(), data);
    }
    let quoted = format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""));
    assert_eq!(parse_key(quoted.as_bytes()).as_ref(), Ok(&key), "{quoted}");
}
