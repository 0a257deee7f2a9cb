//! libFuzzer entry of the `classify` target; the property is [`sendonce_fuzz::classify::check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sendonce_fuzz::classify::check(data));
