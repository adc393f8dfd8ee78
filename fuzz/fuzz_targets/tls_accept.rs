#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpdev::fuzz::tls_accept(data));
