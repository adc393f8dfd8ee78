#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_device::fuzz::device_link(data));
