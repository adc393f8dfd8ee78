#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpdev::links::ws_handshake::fuzz_answer(data));
