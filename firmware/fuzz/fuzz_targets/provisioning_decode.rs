#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| provisioning::fuzz::decode_record(data));
