//! The cargo-fuzz entry point for [`DeviceLink`] (`firmware/fuzz/`), replayed on stable by
//! `tests/fuzz_corpus.rs`. Panics only when an invariant breaks: that panic is the finding.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::Value;

use crate::{AudioParams, Call, Content, DeviceLink, Inbound, McpServer, Property, Tool, ToolError, ToolOutput, Transport, hello};

/// The state the fuzzed tools act on.
#[derive(Default)]
pub struct FuzzState {
    volume: i64,
    text: String,
}

fn tools() -> Vec<Tool<FuzzState>> {
    vec![
        Tool::new("self.get_device_status", "Status.", |s: &mut FuzzState, _: &mut Call<'_>| {
            Ok(ToolOutput::json(&serde_json::json!({"volume": s.volume, "text": s.text})))
        }),
        Tool::new("self.audio_speaker.set_volume", "Volume.", |s: &mut FuzzState, call: &mut Call<'_>| {
            let new = call.args.int("volume")?;
            let old = core::mem::replace(&mut s.volume, new);
            call.outbox.state_changed("audio_speaker.volume", old.into(), new.into());
            Ok(true.into())
        })
        .property(Property::integer("volume").range(0, 100)),
        Tool::new("test.echo", "Echo.", |s: &mut FuzzState, call: &mut Call<'_>| {
            s.text = String::from(call.args.str("text")?);
            Ok(ToolOutput::text(s.text.clone()).with(Content::Image { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() }))
        })
        .property(Property::string("text"))
        .property(Property::boolean("loud").default(false))
        .property(Property::integer("times").default(1).range(-5, 5)),
        Tool::new("test.fail", "Fails.", |_: &mut FuzzState, _: &mut Call<'_>| Err(ToolError::new("failed \"on purpose\"\\"))),
        Tool::new("self.reboot", "Reboot.", |_: &mut FuzzState, _: &mut Call<'_>| Ok(ToolOutput::error("no"))).user_only(),
    ]
}

/// Lines (split on `\n`) into a [`DeviceLink`]: `H` sends our hello (WebSocket), `M` switches to
/// MQTT and sends the hello, `N` drains one notification, `G` says goodbye; any other line is a
/// text message from the server.
///
/// Invariants: no panic; what the link writes (reply envelopes, notifications, hello, goodbye) is
/// JSON carrying the link's session id; a reply is written exactly when it says so, and nothing
/// else is ever written to `out`.
pub fn device_link(data: &[u8]) {
    let mut server = McpServer::new("fuzz", "1", FuzzState::default()).with_page_limit(512);
    for tool in tools() {
        server.add_tool(tool).expect("the fuzz tools are valid");
    }
    let mut link = DeviceLink::new(server, Transport::WebSocket { binary_version: 1 });
    let mut out = String::new();
    for line in data.split(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(line);
        match line.first() {
            Some(b'H') => {
                json(&link.hello());
            }
            Some(b'M') => {
                link.set_transport(Transport::Mqtt);
                json(&hello(Transport::Mqtt, AudioParams::default(), true));
                json(&link.hello());
            }
            Some(b'N') => {
                let before = out.len();
                if link.next_notification(&mut out) {
                    envelope(&link, &out[before..]);
                } else {
                    assert_eq!(out.len(), before, "no notification, yet something was written");
                }
            }
            Some(b'G') => {
                json(&link.goodbye());
            }
            _ => {
                let before = out.len();
                let what = link.on_text(&text, &mut out);
                match what {
                    Inbound::Mcp { replied: true } => envelope(&link, &out[before..]),
                    _ => assert_eq!(out.len(), before, "{what:?}, yet something was written: {}", &out[before..]),
                }
            }
        }
        if out.len() > 1 << 16 {
            out.clear();
        }
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("the link wrote text that is not JSON ({e}): {text}"))
}

fn envelope<S>(link: &DeviceLink<S>, text: &str) {
    let v = json(text);
    assert_eq!(v.get("type").and_then(Value::as_str), Some("mcp"), "{text}");
    assert_eq!(v.get("session_id").and_then(Value::as_str), Some(link.session_id().unwrap_or_default()), "{text}");
    assert!(v.get("payload").is_some_and(Value::is_object), "an envelope without an object payload: {text}");
}
