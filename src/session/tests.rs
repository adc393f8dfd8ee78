use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

fn identity() -> Identity {
    Identity { device_id: "aa:bb:cc:dd:ee:01".into(), client_id: Some("c".into()), token: None, protocol_version: 1 }
}

fn session(now: Instant) -> Session {
    let mut cfg = SessionConfig::new("s1", r#"{"type":"hello","transport":"websocket","session_id":"s1"}"#.into());
    cfg.vision_url = "http://hub/vision".into();
    cfg.vision_token = "vt".into();
    Session::new(identity(), "websocket", cfg, now)
}

fn sent(out: &[Output]) -> Vec<Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(t) => Some(serde_json::from_str(t).unwrap()),
            _ => None,
        })
        .collect()
}

fn reply(id: &Value, result: Value) -> String {
    json!({"session_id":"s1","type":"mcp","payload":{"jsonrpc":"2.0","id":id,"result":result}}).to_string()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "", "inputSchema": {"type":"object","properties":{}}})
}

/// Drives hello -> initialize -> pages; returns the session ready with `pages` of tools.
fn onboard(now: Instant, pages: &[Vec<&str>]) -> Session {
    let mut s = session(now);
    let out = sent(&s.on_text(r#"{"type":"hello","version":1,"features":{"mcp":true}}"#, now));
    assert_eq!(out[0]["type"], "hello");
    let init = &out[1]["payload"];
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["capabilities"]["vision"], json!({"url":"http://hub/vision","token":"vt"}));
    let out = sent(&s.on_text(&reply(&init["id"], json!({"protocolVersion":"2024-11-05","serverInfo":{"name":"b","version":"1"}})), now));
    assert_eq!(out[0]["payload"], json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert!(out[0]["payload"].get("id").is_none(), "notifications/initialized carries no id");
    let mut list = out[1]["payload"].clone();
    for (i, page) in pages.iter().enumerate() {
        assert_eq!(list["method"], "tools/list");
        let tools: Vec<Value> = page.iter().map(|n| tool(n)).collect();
        let mut result = json!({"tools": tools});
        if i + 1 < pages.len() {
            result["nextCursor"] = json!(pages[i + 1][0]);
        }
        let out = sent(&s.on_text(&reply(&list["id"], result), now));
        if i + 1 < pages.len() {
            list = out[0]["payload"].clone();
            assert_eq!(list["params"]["cursor"], pages[i + 1][0]);
        } else {
            assert!(out.is_empty());
        }
    }
    s
}

#[test]
fn onboarding_lists_every_page_and_becomes_ready() {
    let now = Instant::now();
    let s = onboard(now, &[vec!["a", "b"], vec!["c"], vec!["d"]]);
    assert_eq!(s.info().phase, Phase::Ready);
    assert_eq!(s.info().tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    assert_eq!(s.info().server_name().as_deref(), Some("b"));
}

#[test]
fn a_cursor_that_does_not_advance_stops_the_listing() {
    let now = Instant::now();
    let mut s = session(now);
    let out = sent(&s.on_text(r#"{"type":"hello"}"#, now));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], json!({})), now));
    let mut list = out[1]["payload"].clone();
    let mut events = Vec::new();
    for _ in 0..3 {
        let o = s.on_text(&reply(&list["id"], json!({"tools":[tool("a")],"nextCursor":"a"})), now);
        events.extend(o.iter().filter_map(|o| if let Output::Event(e) = o { Some(e.clone()) } else { None }));
        match sent(&o).first() {
            Some(next) => list = next["payload"].clone(),
            None => break,
        }
    }
    assert_eq!(s.info().phase, Phase::Ready);
    assert_eq!(s.info().tools.len(), 1, "a device that ignores the cursor does not duplicate tools");
    assert!(events.iter().any(|e| matches!(e, Event::Warning { message } if message.contains("did not advance"))));
}

#[test]
fn calls_time_out_and_late_replies_are_dropped_not_delivered_to_the_next_call() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    let first = sent(&s.request(1, "tools/call", Some(json!({"name":"a"})), Duration::from_secs(5), now));
    let first_id = first[0]["payload"]["id"].clone();
    assert_eq!(s.next_deadline(), Some(now + Duration::from_secs(5)));
    let out = s.on_tick(now + Duration::from_secs(5));
    assert_eq!(out, vec![Output::Reply { ticket: 1, outcome: Err(CallError::Timeout(Duration::from_secs(5))) }]);

    let second = sent(&s.request(2, "tools/call", Some(json!({"name":"a"})), Duration::from_secs(5), now));
    let second_id = second[0]["payload"]["id"].clone();
    assert_ne!(first_id, second_id);
    let late = s.on_text(&reply(&first_id, json!({"late": true})), now);
    assert!(matches!(&late[..], [Output::Event(Event::LateReply { id })] if *id == first_id));
    let out = s.on_text(&reply(&second_id, json!({"ok": 2})), now);
    assert_eq!(out, vec![Output::Reply { ticket: 2, outcome: Ok(json!({"ok": 2})) }]);
    assert_eq!(s.info().counters.late_replies, 1);
}

#[test]
fn errors_without_code_and_unescaped_messages_reach_the_caller() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    let id = sent(&s.request(7, "tools/call", None, Duration::from_secs(5), now))[0]["payload"]["id"].clone();
    let out = s.on_text(&json!({"type":"mcp","payload":{"jsonrpc":"2.0","id":id,"error":{"message":"Unknown tool: x"}}}).to_string(), now);
    let Output::Reply { ticket: 7, outcome: Err(CallError::Device(e)) } = &out[0] else { panic!("{out:?}") };
    assert_eq!((e.code, e.message.as_str()), (None, "Unknown tool: x"));

    let id = sent(&s.request(8, "tools/call", None, Duration::from_secs(5), now))[0]["payload"]["id"].clone();
    let broken = format!(r#"{{"session_id":"s1","type":"mcp","payload":{{"jsonrpc":"2.0","id":{id},"error":{{"message":"Unknown tool: a"b"}}}}}}"#);
    let out = s.on_text(&broken, now);
    assert!(matches!(&out[0], Output::Event(Event::Malformed { .. })));
    let Output::Reply { ticket: 8, outcome: Err(CallError::Device(e)) } = &out[1] else { panic!("{out:?}") };
    assert_eq!(e.message, r#"Unknown tool: a"b"#);
}

#[test]
fn disconnect_ends_every_waiting_call() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    s.request(1, "tools/call", None, Duration::from_secs(5), now);
    s.request(2, "tools/call", None, Duration::from_secs(5), now);
    let mut out = s.on_disconnect();
    out.sort_by_key(|o| if let Output::Reply { ticket, .. } = o { *ticket } else { 0 });
    assert_eq!(out, vec![
        Output::Reply { ticket: 1, outcome: Err(CallError::Disconnected) },
        Output::Reply { ticket: 2, outcome: Err(CallError::Disconnected) },
    ]);
    assert_eq!(s.info().phase, Phase::Disconnected);
}

#[test]
fn keepalive_pings_before_the_device_inactivity_limit() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    assert_eq!(s.next_deadline(), Some(now + Duration::from_secs(60)));
    assert!(s.on_tick(now + Duration::from_secs(59)).is_empty());
    let out = sent(&s.on_tick(now + Duration::from_secs(60)));
    assert_eq!(out[0]["payload"]["method"], "ping");
    // The stock firmware answers ping with an error: harmless, nobody is told.
    let id = out[0]["payload"]["id"].clone();
    let err = json!({"type":"mcp","payload":{"jsonrpc":"2.0","id":id,"error":{"message":"Method not implemented: ping"}}});
    assert!(s.on_text(&err.to_string(), now + Duration::from_secs(61)).is_empty());
}

#[test]
fn an_empty_list_is_listed_again_and_list_changed_relists() {
    let now = Instant::now();
    let mut s = session(now);
    let out = sent(&s.on_text(r#"{"type":"hello"}"#, now));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], json!({})), now));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools":[]})), now));
    assert!(out.is_empty());
    assert_eq!(s.info().phase, Phase::Listing);
    let retry_at = now + Duration::from_secs(2);
    assert_eq!(s.next_deadline(), Some(retry_at));
    let out = sent(&s.on_tick(retry_at));
    assert_eq!(out[0]["payload"]["method"], "tools/list");
    let done = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools":[tool("late")]})), retry_at);
    assert!(done.iter().any(|o| matches!(o, Output::Event(Event::Ready { tools: 1 }))));

    let out = sent(&s.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#, retry_at));
    assert_eq!(out[0]["payload"]["params"]["cursor"], "");
    let done = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools":[tool("late"), tool("new")]})), retry_at);
    assert!(done.iter().any(|o| matches!(o, Output::Event(Event::ToolsChanged { tools: 2 }))));
}

#[test]
fn hostile_frames_are_counted_and_survived() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    for bad in ["", "{", "[]", "null", r#"{"type":1}"#, r#"{"type":"mcp","payload":"x"}"#, r#"{"type":"mcp","payload":{"id":1}}"#] {
        let out = s.on_text(bad, now);
        assert!(matches!(&out[..], [Output::Event(Event::Malformed { .. })]), "{bad}: {out:?}");
    }
    s.on_binary(320);
    assert_eq!(s.info().counters.malformed, 7);
    assert_eq!((s.info().counters.binary_frames, s.info().counters.binary_bytes), (1, 320));
    assert!(matches!(&s.on_text(r#"{"type":"listen","state":"start"}"#, now)[..], [Output::Event(Event::Message { kind, .. })] if kind == "listen"));
}

#[test]
fn unanswered_keepalives_are_not_counted_as_timeouts() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    let ping_at = now + Duration::from_secs(60);
    assert_eq!(sent(&s.on_tick(ping_at))[0]["payload"]["method"], "ping");
    assert!(s.on_tick(ping_at + Duration::from_secs(10)).is_empty());
    assert_eq!(s.info().counters.timeouts, 0);
    s.request(1, "tools/call", None, Duration::from_secs(1), ping_at);
    s.on_tick(ping_at + Duration::from_secs(11));
    assert_eq!(s.info().counters.timeouts, 1);
}

/// MQTT: onboarding without a hello, ids from a base, callers ended while the link is down, and
/// an answer over the size limit ending its call with a reason.
#[test]
fn mqtt_begin_id_base_fail_callers_and_oversize() {
    let now = Instant::now();
    let mut cfg = SessionConfig::new("s1", "{}".into());
    cfg.id_base = 1_000_000_000;
    cfg.system_info = Some(json!({"board": {"name": "b"}}));
    let mut s = Session::new(identity(), "mqtt", cfg, now);
    assert_eq!(s.info().system_info.as_ref().map(|r| r.get().to_string()), Some(r#"{"board":{"name":"b"}}"#.to_string()));
    let out = sent(&s.begin(now));
    assert_eq!((out[0]["payload"]["method"].as_str(), out[0]["payload"]["id"].as_i64()), (Some("initialize"), Some(1_000_000_001)));
    assert_eq!(s.info().phase, Phase::Initializing);

    let out = s.request(7, "tools/call", Some(json!({"name": "t"})), Duration::from_secs(60), now);
    let id = sent(&out)[0]["payload"]["id"].clone();
    let failed = s.fail_callers(CallError::Link("broker gone".into()));
    assert_eq!(failed, vec![Output::Reply { ticket: 7, outcome: Err(CallError::Link("broker gone".into())) }]);
    assert!(s.on_text(&reply(&id, json!({})), now).iter().any(|o| matches!(o, Output::Event(Event::LateReply { .. }))));

    let out = s.request(8, "tools/call", Some(json!({"name": "t"})), Duration::from_secs(60), now);
    let id = sent(&out)[0]["payload"]["id"].clone();
    let big = reply(&id, json!({"text": "x".repeat(500)}));
    let out = s.on_oversize(&big, 100);
    assert!(matches!(&out[..], [Output::Event(Event::Malformed { .. }), Output::Reply { ticket: 8, outcome: Err(CallError::Link(why)) }] if why.contains("over the 100-byte payload limit")));
    assert_eq!(s.info().counters.malformed, 1);
}
