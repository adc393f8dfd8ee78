//! The device's `hello`, in its WebSocket and MQTT forms (reference §1.2 and §2.2).

use alloc::string::String;

use crate::json::push_int;

/// Audio parameters the device announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioParams {
    pub sample_rate: u32,
    pub channels: u8,
    pub frame_duration: u16,
}

impl Default for AudioParams {
    fn default() -> Self {
        Self { sample_rate: 16000, channels: 1, frame_duration: 60 }
    }
}

/// How the device reaches its backend; it decides the hello's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// WebSocket, with the binary protocol version (1, 2 or 3) of the `Protocol-Version` header.
    WebSocket { binary_version: u8 },
    /// MQTT for JSON plus UDP for audio; the hello's `version` is always 3.
    Mqtt,
}

/// Builds the hello text. Key order is the stock firmware's; `features.aec` is added only when set.
pub fn hello(transport: Transport, audio: AudioParams, server_aec: bool) -> String {
    let mut s = String::with_capacity(192);
    s.push_str("{\"type\":\"hello\",\"version\":");
    let (version, transport_name) = match transport {
        Transport::WebSocket { binary_version } => (binary_version.clamp(1, 3), "websocket"),
        Transport::Mqtt => (3, "udp"),
    };
    push_int(&mut s, version.into());
    if matches!(transport, Transport::Mqtt) {
        s.push_str(",\"transport\":\"udp\"");
    }
    s.push_str(",\"features\":{");
    if server_aec {
        s.push_str("\"aec\":true,");
    }
    s.push_str("\"mcp\":true,\"glyph_push\":false}");
    if matches!(transport, Transport::WebSocket { .. }) {
        s.push_str(",\"transport\":\"");
        s.push_str(transport_name);
        s.push('"');
    }
    s.push_str(",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":");
    push_int(&mut s, audio.sample_rate.into());
    s.push_str(",\"channels\":");
    push_int(&mut s, audio.channels.into());
    s.push_str(",\"frame_duration\":");
    push_int(&mut s, audio.frame_duration.into());
    s.push_str("}}");
    s
}
