#![no_main]

// libFuzzer wants `()`: call the target itself, not `mcpdev::fuzz::run` (whose `bool` says
// whether the name was known).
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpdev::fuzz::admission_requests(data));
