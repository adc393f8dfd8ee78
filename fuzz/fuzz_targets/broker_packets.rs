#![no_main]

// The embedded MQTT broker: packets of a few clients decoded and routed through its state.
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpdev::mqtt::broker::fuzz_packets(data));
