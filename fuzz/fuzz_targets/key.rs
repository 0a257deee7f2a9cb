//! libFuzzer entry of the `key` target; the property is [`sendonce_fuzz::key::check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sendonce_fuzz::key::check(data));
