//! libFuzzer entry of the `problem` target; the property is [`sendonce_fuzz::problem::check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sendonce_fuzz::problem::check(data));
