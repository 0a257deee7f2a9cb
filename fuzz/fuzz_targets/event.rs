//! libFuzzer entry of the `event` target; the property is [`sendonce_fuzz::event::check`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sendonce_fuzz::event::check(data));
