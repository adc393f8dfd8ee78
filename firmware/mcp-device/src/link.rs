//! The device's side of one connection: the xiaozhi envelope around the MCP server.
//!
//! I/O-free: the transport (a WebSocket or MQTT client, on the chip or in `mcpdev sim`) feeds it
//! every text message and sends whatever it writes out.

use alloc::string::{String, ToString};
use serde_json::Value;

use crate::hello::{AudioParams, Transport, hello};
use crate::json::push_str_literal;
use crate::server::{Answer, McpServer};

/// What an incoming text message was, after the link handled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// The server's hello was accepted; the session id (empty if the server gave none).
    Hello { session_id: String },
    /// The server's hello was unusable (the stock firmware would time out or crash on it).
    BadHello(String),
    /// An MCP message; a reply was written if one is due.
    Mcp { replied: bool },
    /// The server ended the session (MQTT `goodbye` with our session id).
    Goodbye,
    /// Another message type (`tts`, `stt`, `llm`, `system`, `alert`, …) for the application.
    Other { kind: String },
    /// Not JSON, no string `type`, or an `mcp` message without an object payload.
    Ignored(&'static str),
}

/// One connection's state: the transport, the session id the server gave, and the MCP server.
pub struct DeviceLink<S> {
    pub server: McpServer<S>,
    transport: Transport,
    audio: AudioParams,
    session_id: Option<String>,
}

impl<S> DeviceLink<S> {
    pub fn new(server: McpServer<S>, transport: Transport) -> Self {
        Self { server, transport, audio: AudioParams::default(), session_id: None }
    }

    /// Switches the transport (the firmware learns it from an OTA check-in), for the next hello.
    pub fn set_transport(&mut self, transport: Transport) {
        self.transport = transport;
    }

    /// The hello to send right after connecting. Clears the session id, as the stock firmware does.
    pub fn hello(&mut self) -> String {
        self.session_id = None;
        hello(self.transport, self.audio, false)
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Handles one incoming text message, appending any reply (a whole envelope) to `out`.
    pub fn on_text(&mut self, text: &str, out: &mut String) -> Inbound {
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            return Inbound::Ignored("not JSON");
        };
        let Some(kind) = msg.get("type").and_then(Value::as_str) else {
            return Inbound::Ignored("no message type");
        };
        match kind {
            "hello" => self.on_server_hello(&msg),
            "mcp" => {
                let Some(payload) = msg.get("payload").filter(|p| p.is_object()) else {
                    return Inbound::Ignored("mcp message without an object payload");
                };
                let start = out.len();
                self.push_envelope_head(out);
                let replied = match self.server.answer(payload, out) {
                    Answer::Written(replied) => replied,
                    Answer::Page(page) => {
                        // The parsed message is not kept next to the page.
                        drop(msg);
                        self.server.write_page(&page, out);
                        true
                    }
                };
                if replied {
                    out.push('}');
                    Inbound::Mcp { replied: true }
                } else {
                    out.truncate(start);
                    Inbound::Mcp { replied: false }
                }
            }
            "goodbye" => {
                let theirs = msg.get("session_id").and_then(Value::as_str);
                if self.session_id.is_some() && theirs == self.session_id.as_deref() {
                    self.session_id = None;
                    Inbound::Goodbye
                } else {
                    Inbound::Ignored("goodbye for another session")
                }
            }
            other => Inbound::Other { kind: other.to_string() },
        }
    }

    /// Wraps the next queued notification in an envelope and appends it to `out`.
    pub fn next_notification(&mut self, out: &mut String) -> bool {
        let Some(n) = self.server.outbox().pop() else { return false };
        self.push_envelope_head(out);
        out.push_str(&n);
        out.push('}');
        true
    }

    /// `{"session_id":"S","type":"goodbye"}`, the device closing an MQTT session.
    pub fn goodbye(&mut self) -> String {
        let mut s = String::from("{\"session_id\":");
        push_str_literal(&mut s, self.session_id.as_deref().unwrap_or_default());
        s.push_str(",\"type\":\"goodbye\"}");
        self.session_id = None;
        s
    }

    fn push_envelope_head(&self, out: &mut String) {
        out.push_str("{\"session_id\":");
        push_str_literal(out, self.session_id.as_deref().unwrap_or_default());
        out.push_str(",\"type\":\"mcp\",\"payload\":");
    }

    fn on_server_hello(&mut self, msg: &Value) -> Inbound {
        let transport = msg.get("transport").and_then(Value::as_str);
        let expected = match self.transport {
            Transport::WebSocket { .. } => "websocket",
            Transport::Mqtt => "udp",
        };
        if transport != Some(expected) {
            return Inbound::BadHello(alloc::format!("server hello transport must be \"{expected}\""));
        }
        if matches!(self.transport, Transport::Mqtt)
            && let Err(why) = check_udp_block(msg.get("udp"))
        {
            return Inbound::BadHello(why.to_string());
        }
        let session_id = msg.get("session_id").and_then(Value::as_str).unwrap_or_default();
        self.session_id = Some(session_id.to_string());
        Inbound::Hello { session_id: session_id.to_string() }
    }
}

/// The checks the stock firmware applies to an MQTT hello's `udp` block (reference §2.2).
fn check_udp_block(udp: Option<&Value>) -> Result<(), &'static str> {
    let udp = udp.ok_or("server hello has no udp block")?;
    udp.get("server").and_then(Value::as_str).ok_or("udp.server must be a string")?;
    let port = udp.get("port").and_then(Value::as_number).ok_or("udp.port must be a number")?;
    // Negative, fractional and huge numbers are numbers too, just not usable ports.
    if !port.as_u64().is_some_and(|p| (1..=65535).contains(&p)) {
        return Err("udp.port must be an integer in 1..65535");
    }
    for (key, why) in [("key", "udp.key must be 32 hex digits"), ("nonce", "udp.nonce must be 32 hex digits")] {
        let hex = udp.get(key).and_then(Value::as_str).ok_or(why)?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(why);
        }
    }
    Ok(())
}
