//! libFuzzer entry of the `body` target; the property is [`sendonce_fuzz::body::check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sendonce_fuzz::body::check(data));
