#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hub_link::fuzz::x509(data));
