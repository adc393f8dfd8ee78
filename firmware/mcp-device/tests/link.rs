//! `DeviceLink`: hello texts, the server hello, the `mcp` envelope, goodbye and notifications.

mod common;

use common::{Dev, full_device, stock_device};
use mcp_device::{AudioParams, DeviceLink, Inbound, McpServer, Transport, hello};

const AUDIO: &str = r#""audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}"#;
const SERVER_AUDIO: &str = r#""audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}"#;
const KEY: &str = "0123456789abcdef0123456789ABCDEF";
const NONCE: &str = "01000000deadbeef0000000000000000";

fn ws(version: u8) -> DeviceLink<Dev> {
    DeviceLink::new(full_device(), Transport::WebSocket { binary_version: version })
}

fn mqtt() -> DeviceLink<Dev> {
    DeviceLink::new(full_device(), Transport::Mqtt)
}

fn ws_server_hello(session: &str) -> String {
    format!(r#"{{"type":"hello","transport":"websocket","session_id":"{session}",{SERVER_AUDIO}}}"#)
}

fn mqtt_server_hello(session: &str, udp: &str) -> String {
    format!(r#"{{"type":"hello","transport":"udp","session_id":"{session}",{SERVER_AUDIO},"udp":{udp}}}"#)
}

fn good_udp() -> String {
    format!(r#"{{"server":"192.168.1.100","port":8888,"encryption":"aes-128-ctr","key":"{KEY}","nonce":"{NONCE}"}}"#)
}

/// Feeds `text` and returns what the link said and wrote.
fn feed(link: &mut DeviceLink<Dev>, text: &str) -> (Inbound, String) {
    let mut out = String::new();
    let what = link.on_text(text, &mut out);
    (what, out)
}

#[test]
fn websocket_hello_for_each_binary_version() {
    for (asked, sent) in [(0u8, 1), (1, 1), (2, 2), (3, 3), (9, 3)] {
        let mut link = ws(asked);
        assert_eq!(
            link.hello(),
            format!(r#"{{"type":"hello","version":{sent},"features":{{"mcp":true,"glyph_push":false}},"transport":"websocket",{AUDIO}}}"#),
            "binary_version {asked}"
        );
    }
}

#[test]
fn mqtt_hello_is_the_reference_text() {
    // Reference §2.2, byte for byte.
    let reference = r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true,"glyph_push":false},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
    assert_eq!(mqtt().hello(), reference);
}

#[test]
fn hello_with_server_aec_and_other_audio() {
    let audio = AudioParams { sample_rate: 24000, channels: 2, frame_duration: 20 };
    assert_eq!(
        hello(Transport::WebSocket { binary_version: 2 }, audio, true),
        r#"{"type":"hello","version":2,"features":{"aec":true,"mcp":true,"glyph_push":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":24000,"channels":2,"frame_duration":20}}"#
    );
    assert_eq!(
        hello(Transport::Mqtt, AudioParams::default(), true),
        format!(r#"{{"type":"hello","version":3,"transport":"udp","features":{{"aec":true,"mcp":true,"glyph_push":false}},{AUDIO}}}"#)
    );
    assert_eq!(AudioParams::default(), AudioParams { sample_rate: 16000, channels: 1, frame_duration: 60 });
}

#[test]
fn websocket_server_hello_stores_the_session_and_replies_carry_it() {
    let mut link = ws(1);
    assert_eq!(link.session_id(), None);
    let (what, out) = feed(&mut link, &ws_server_hello("sess-1"));
    assert_eq!(what, Inbound::Hello { session_id: "sess-1".into() });
    assert_eq!(out, "", "the server hello is not answered");
    assert_eq!(link.session_id(), Some("sess-1"));

    let (what, out) = feed(&mut link, r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#);
    assert_eq!(what, Inbound::Mcp { replied: true });
    assert_eq!(out, r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#);

    let (what, out) = feed(
        &mut link,
        r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"tools/call","id":3,"params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":50}}}}"#,
    );
    assert_eq!(what, Inbound::Mcp { replied: true });
    assert_eq!(
        out,
        r#"{"session_id":"sess-1","type":"mcp","payload":{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}"#
    );
    assert_eq!(link.server.state().volume, 50);
}

#[test]
fn errors_are_wrapped_too() {
    let mut link = ws(1);
    feed(&mut link, &ws_server_hello("s"));
    let (what, out) = feed(&mut link, r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":2,"method":"nope"}}"#);
    assert_eq!(what, Inbound::Mcp { replied: true });
    assert_eq!(
        out,
        r#"{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not implemented: nope"}}}"#
    );
    let (what, out) = feed(&mut link, r#"{"type":"mcp","payload":{"id":2,"method":"ping"}}"#);
    assert_eq!(what, Inbound::Mcp { replied: true });
    assert_eq!(
        out,
        r#"{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request: jsonrpc must be \"2.0\""}}}"#
    );
}

#[test]
fn replies_are_appended_to_what_out_already_holds() {
    let mut link = ws(1);
    let mut out = String::from("X");
    link.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#, &mut out);
    assert_eq!(out, r#"X{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#);
    link.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#, &mut out);
    assert_eq!(out, r#"X{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#);
}

#[test]
fn notifications_and_responses_in_the_envelope_get_no_reply() {
    let mut link = ws(1);
    feed(&mut link, &ws_server_hello("s"));
    for payload in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
    ] {
        let (what, out) = feed(&mut link, &format!(r#"{{"session_id":"s","type":"mcp","payload":{payload}}}"#));
        assert_eq!(what, Inbound::Mcp { replied: false }, "{payload}");
        assert_eq!(out, "", "{payload}");
    }
}

#[test]
fn before_any_hello_the_session_id_is_empty() {
    let mut link = DeviceLink::new(stock_device(), Transport::Mqtt);
    let (_, out) = feed(&mut link, r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#);
    assert_eq!(out, r#"{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#);
}

#[test]
fn server_hello_without_session_id_gives_an_empty_one() {
    let mut link = ws(1);
    let (what, _) = feed(&mut link, r#"{"type":"hello","transport":"websocket"}"#);
    assert_eq!(what, Inbound::Hello { session_id: String::new() });
    assert_eq!(link.session_id(), Some(""));
    let (what, _) = feed(&mut link, r#"{"type":"hello","transport":"websocket","session_id":7}"#);
    assert_eq!(what, Inbound::Hello { session_id: String::new() });
}

#[test]
fn session_id_is_escaped_in_the_envelope() {
    let mut link = ws(1);
    feed(&mut link, r#"{"type":"hello","transport":"websocket","session_id":"a\"b\\c"}"#);
    assert_eq!(link.session_id(), Some("a\"b\\c"));
    let (_, out) = feed(&mut link, r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#);
    assert_eq!(out, r#"{"session_id":"a\"b\\c","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}"#);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session_id"], "a\"b\\c");
}

#[test]
fn server_hello_with_wrong_or_missing_transport_is_bad() {
    let mut link = ws(1);
    for text in [
        r#"{"type":"hello","transport":"udp","session_id":"x"}"#,
        r#"{"type":"hello","session_id":"x"}"#,
        r#"{"type":"hello","transport":null,"session_id":"x"}"#,
        r#"{"type":"hello","transport":1,"session_id":"x"}"#,
        r#"{"type":"hello","transport":"WebSocket","session_id":"x"}"#,
    ] {
        assert_eq!(feed(&mut link, text), (Inbound::BadHello("server hello transport must be \"websocket\"".into()), String::new()), "{text}");
        assert_eq!(link.session_id(), None);
    }
    let mut link = mqtt();
    let (what, _) = feed(&mut link, &ws_server_hello("x"));
    assert_eq!(what, Inbound::BadHello("server hello transport must be \"udp\"".into()));
    assert_eq!(link.session_id(), None);
}

#[test]
fn mqtt_server_hello_with_a_good_udp_block() {
    let mut link = mqtt();
    let (what, out) = feed(&mut link, &mqtt_server_hello("m-1", &good_udp()));
    assert_eq!(what, Inbound::Hello { session_id: "m-1".into() });
    assert_eq!(out, "");
    assert_eq!(link.session_id(), Some("m-1"));
    // The port bounds are inclusive; `encryption` is not checked.
    for port in ["1", "65535"] {
        let udp = format!(r#"{{"server":"h","port":{port},"key":"{KEY}","nonce":"{NONCE}"}}"#);
        assert_eq!(feed(&mut mqtt(), &mqtt_server_hello("m", &udp)).0, Inbound::Hello { session_id: "m".into() }, "{port}");
    }
}

#[test]
fn mqtt_server_hello_udp_checks() {
    let bad = |udp: &str| {
        let mut link = mqtt();
        let (what, out) = feed(&mut link, &mqtt_server_hello("m", udp));
        assert_eq!(out, "");
        assert_eq!(link.session_id(), None, "{udp}");
        match what {
            Inbound::BadHello(why) => why,
            other => panic!("{udp}: {other:?}"),
        }
    };
    let no_udp = r#"{"type":"hello","transport":"udp","session_id":"m"}"#;
    assert_eq!(feed(&mut mqtt(), no_udp).0, Inbound::BadHello("server hello has no udp block".into()));

    let server_msg = "udp.server must be a string";
    assert_eq!(bad(&format!(r#"{{"port":8888,"key":"{KEY}","nonce":"{NONCE}"}}"#)), server_msg);
    assert_eq!(bad(&format!(r#"{{"server":1,"port":8888,"key":"{KEY}","nonce":"{NONCE}"}}"#)), server_msg);

    assert_eq!(bad(&format!(r#"{{"server":"h","key":"{KEY}","nonce":"{NONCE}"}}"#)), "udp.port must be a number");
    assert_eq!(bad(&format!(r#"{{"server":"h","port":"8888","key":"{KEY}","nonce":"{NONCE}"}}"#)), "udp.port must be a number");
    for port in ["0", "65536", "-1", "8888.5", "1e10"] {
        assert_eq!(
            bad(&format!(r#"{{"server":"h","port":{port},"key":"{KEY}","nonce":"{NONCE}"}}"#)),
            "udp.port must be an integer in 1..65535",
            "{port}"
        );
    }

    for (key, nonce, why) in [
        (&KEY[..31], NONCE, "udp.key must be 32 hex digits"),
        ("0123456789abcdef0123456789abcdeg", NONCE, "udp.key must be 32 hex digits"),
        ("", NONCE, "udp.key must be 32 hex digits"),
        (KEY, &NONCE[..30], "udp.nonce must be 32 hex digits"),
        (KEY, "01000000deadbeef000000000000000 ", "udp.nonce must be 32 hex digits"),
        (KEY, "01000000deadbeef00000000000000000", "udp.nonce must be 32 hex digits"),
    ] {
        assert_eq!(bad(&format!(r#"{{"server":"h","port":1,"key":"{key}","nonce":"{nonce}"}}"#)), why, "{key} {nonce}");
    }
    assert_eq!(bad(r#"{"server":"h","port":1,"nonce":"01000000deadbeef0000000000000000"}"#), "udp.key must be 32 hex digits");
    assert_eq!(bad(&format!(r#"{{"server":"h","port":1,"key":"{KEY}","nonce":5}}"#)), "udp.nonce must be 32 hex digits");
    // A WebSocket link does not look at udp at all.
    let mut link = ws(1);
    assert_eq!(
        feed(&mut link, r#"{"type":"hello","transport":"websocket","session_id":"w","udp":5}"#).0,
        Inbound::Hello { session_id: "w".into() }
    );
}

#[test]
fn goodbye_only_for_the_current_session() {
    let mut link = mqtt();
    // Before any session: ignored.
    assert_eq!(feed(&mut link, r#"{"type":"goodbye","session_id":"m-1"}"#).0, Inbound::Ignored("goodbye for another session"));
    feed(&mut link, &mqtt_server_hello("m-1", &good_udp()));
    for other in [r#"{"type":"goodbye","session_id":"m-2"}"#, r#"{"type":"goodbye"}"#, r#"{"type":"goodbye","session_id":1}"#] {
        assert_eq!(feed(&mut link, other), (Inbound::Ignored("goodbye for another session"), String::new()), "{other}");
        assert_eq!(link.session_id(), Some("m-1"));
    }
    assert_eq!(feed(&mut link, r#"{"type":"goodbye","session_id":"m-1"}"#), (Inbound::Goodbye, String::new()));
    assert_eq!(link.session_id(), None);
    // A second goodbye for the ended session is ignored.
    assert_eq!(feed(&mut link, r#"{"type":"goodbye","session_id":"m-1"}"#).0, Inbound::Ignored("goodbye for another session"));
}

#[test]
fn device_goodbye_names_the_session_and_ends_it() {
    let mut link = mqtt();
    feed(&mut link, &mqtt_server_hello("m-9", &good_udp()));
    assert_eq!(link.goodbye(), r#"{"session_id":"m-9","type":"goodbye"}"#);
    assert_eq!(link.session_id(), None);
    assert_eq!(link.goodbye(), r#"{"session_id":"","type":"goodbye"}"#);
}

#[test]
fn hello_clears_the_session() {
    let mut link = ws(2);
    feed(&mut link, &ws_server_hello("old"));
    assert_eq!(link.session_id(), Some("old"));
    link.hello();
    assert_eq!(link.session_id(), None);
}

#[test]
fn other_message_types_go_to_the_application() {
    let mut link = ws(1);
    for kind in ["tts", "stt", "llm", "system", "alert", "custom", "iot", ""] {
        let (what, out) = feed(&mut link, &format!(r#"{{"type":"{kind}","state":"start"}}"#));
        assert_eq!(what, Inbound::Other { kind: kind.into() });
        assert_eq!(out, "");
    }
}

#[test]
fn unusable_messages_are_ignored() {
    let mut link = ws(1);
    for (text, why) in [
        ("not json", "not JSON"),
        ("", "not JSON"),
        (r#"{"type":"mcp","payload":{}"#, "not JSON"),
        (r#"{"payload":{}}"#, "no message type"),
        (r#"{"type":5}"#, "no message type"),
        ("[1]", "no message type"),
        ("\"mcp\"", "no message type"),
        (r#"{"type":"mcp"}"#, "mcp message without an object payload"),
        (r#"{"type":"mcp","payload":"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"}"#, "mcp message without an object payload"),
        (r#"{"type":"mcp","payload":[{"jsonrpc":"2.0","id":1,"method":"ping"}]}"#, "mcp message without an object payload"),
        (r#"{"type":"mcp","payload":null}"#, "mcp message without an object payload"),
    ] {
        assert_eq!(feed(&mut link, text), (Inbound::Ignored(why), String::new()), "{text}");
    }
}

#[test]
fn notifications_are_drained_in_the_envelope() {
    let mut link = ws(1);
    let mut out = String::new();
    assert!(!link.next_notification(&mut out), "nothing queued yet");
    assert_eq!(out, "");
    feed(&mut link, &ws_server_hello("s-2"));
    for volume in [40, 41] {
        let call = format!(
            r#"{{"type":"mcp","payload":{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"self.audio_speaker.set_volume","arguments":{{"volume":{volume}}}}}}}}}"#
        );
        assert_eq!(feed(&mut link, &call).0, Inbound::Mcp { replied: true });
    }
    link.server.outbox().notify("notifications/custom", &serde_json::json!({"n": 1}));

    let mut drained = Vec::new();
    loop {
        let mut out = String::new();
        if !link.next_notification(&mut out) {
            assert_eq!(out, "");
            break;
        }
        drained.push(out);
    }
    assert_eq!(
        drained,
        [
            r#"{"session_id":"s-2","type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":40,"oldState":70,"what":"audio_speaker.volume"}}}"#,
            r#"{"session_id":"s-2","type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/state_changed","params":{"newState":41,"oldState":40,"what":"audio_speaker.volume"}}}"#,
            r#"{"session_id":"s-2","type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/custom","params":{"n":1}}}"#,
        ]
    );
}

#[test]
fn link_over_a_plain_server() {
    // The link is generic over the device state; a unit state works.
    let mut link = DeviceLink::new(McpServer::new("b", "1", ()), Transport::WebSocket { binary_version: 3 });
    let mut out = String::new();
    let what = link.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":"x","method":"tools/list"}}"#, &mut out);
    assert_eq!(what, Inbound::Mcp { replied: true });
    assert_eq!(out, r#"{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":"x","result":{"tools":[]}}}"#);
}
