#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpdev::fuzz::run("admission_requests", data));
