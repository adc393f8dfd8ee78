use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

pub(super) fn identity() -> Identity {
    Identity { device_id: "aa:bb:cc:dd:ee:01".into(), client_id: Some("c".into()), token: None, protocol_version: 1 }
}

pub(super) fn config() -> SessionConfig {
    let mut cfg = SessionConfig::new("s1", r#"{"type":"hello","transport":"websocket","session_id":"s1"}"#);
    // Exact times below; the spread has its own tests.
    cfg.keepalive_jitter_pct = 0;
    cfg.vision_url = "http://hub/vision".into();
    cfg.vision_token = "vt".into();
    cfg
}

/// A session without the confirmation re-list (tests of other features count every frame).
pub(super) fn session(now: Instant) -> Session {
    let mut cfg = config();
    cfg.confirm_relist = None;
    Session::new(identity(), "websocket", cfg, now)
}

pub(super) fn sent(out: &[Output]) -> Vec<Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(t) => Some(serde_json::from_str(t).unwrap()),
            _ => None,
        })
        .collect()
}

pub(super) fn reply(id: &Value, result: Value) -> String {
    json!({"session_id":"s1","type":"mcp","payload":{"jsonrpc":"2.0","id":id,"result":result}}).to_string()
}

pub(super) fn tool(name: &str) -> Value {
    json!({"name": name, "description": "", "inputSchema": {"type":"object","properties":{}}})
}

/// Drives hello -> initialize -> pages; returns the session ready with `pages` of tools.
pub(super) fn onboard(now: Instant, pages: &[Vec<&str>]) -> Session {
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
    assert_eq!(s.info().tools_warning, None);
    assert!(!s.onboarding.is_active(), "a ready device holds no listing state");
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
    assert!(matches!(&late[..], [Output::Event(Event::LateReply { id })] if **id == first_id));
    let out = s.on_text(&reply(&second_id, json!({"ok": 2})), now);
    assert_eq!(out, vec![Output::Reply { ticket: 2, outcome: Ok(RawResult::from_value(&json!({"ok": 2}))) }]);
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
    // The empty list was a retry: ready once a second listing agrees.
    assert!(events(&s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools":[tool("late")]})), retry_at)).is_empty());
    let retry_at = s.next_deadline().unwrap();
    let out = sent(&s.on_tick(retry_at));
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
    for bad in ["", "{", "[]", "null", r#"{"type":1}"#, r#"{"type":"mcp","payload":"x"}"#, r#"{"type":"mcp","payload":{"result":1}}"#] {
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
    let mut cfg = SessionConfig::new("s1", "{}");
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
    let out = s.on_text(&reply(&id, json!({})), now);
    assert!(out.iter().any(|o| matches!(o, Output::Event(Event::LateReply { .. }))));
    // After the link was down, the device's next message onboards it again (it may have restarted).
    assert_eq!(sent(&out)[0]["payload"]["method"], "initialize");

    let out = s.request(8, "tools/call", Some(json!({"name": "t"})), Duration::from_secs(60), now);
    let id = sent(&out)[0]["payload"]["id"].clone();
    let big = reply(&id, json!({"text": "x".repeat(500)}));
    let out = s.on_oversize(&big, 100);
    assert!(matches!(&out[..], [Output::Event(Event::Malformed { .. }), Output::Reply { ticket: 8, outcome: Err(CallError::Link(why)) }] if why.contains("over the 100-byte payload limit")));
    assert_eq!(s.info().counters.malformed, 1);
}

// --- Gateways, retries, re-lists, caps, hellos, floods -------------------------------------

pub(super) fn events(out: &[Output]) -> Vec<Event> {
    out.iter().filter_map(|o| if let Output::Event(e) = o { Some(e.clone()) } else { None }).collect()
}

pub(super) fn tools(n: usize) -> Vec<Value> {
    (0..n).map(|i| tool(&format!("self.t{i:02}"))).collect()
}

pub(super) fn id_only(id: &Value) -> String {
    json!({"session_id":"s1","type":"mcp","payload":{"jsonrpc":"2.0","id":id}}).to_string()
}

pub(super) const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":true}}"#;
pub(super) const INIT_RESULT: fn() -> Value = || json!({"protocolVersion":"2024-11-05","serverInfo":{"name":"gw","version":"1"}});

/// hello -> initialize answered -> the first tools/list request (its payload).
pub(super) fn up_to_list(s: &mut Session, now: Instant) -> Value {
    let out = sent(&s.on_text(HELLO, now));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], INIT_RESULT()), now));
    assert_eq!(out[1]["payload"]["method"], "tools/list");
    out[1]["payload"].clone()
}

#[test]
fn a_well_behaved_device_is_ready_at_once_without_any_retry_and_the_confirmation_changes_nothing() {
    let t0 = Instant::now();
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    let out = s.on_text(&reply(&list["id"], json!({"tools": tools(3)})), t0);
    // Ready on the very frame of the last page, at the same instant: no retry delay at all.
    assert_eq!(events(&out), vec![Event::Ready { tools: 3 }]);
    assert_eq!(s.info().phase, Phase::Ready);
    assert_eq!(s.info().onboarding, OnboardingStatus { attempt: 1, max_attempts: 5, last_error: None, failed: false });
    // The one confirmation re-list, 1.5 s later, in the background.
    let confirm_at = t0 + Duration::from_millis(1500);
    assert_eq!(s.next_deadline(), Some(confirm_at));
    assert!(s.on_tick(confirm_at - Duration::from_millis(1)).is_empty());
    let out = sent(&s.on_tick(confirm_at));
    assert_eq!((out.len(), out[0]["payload"]["method"].as_str(), out[0]["payload"]["params"]["cursor"].as_str()), (1, Some("tools/list"), Some("")));
    assert_eq!(s.info().phase, Phase::Ready, "a re-list never takes a device out of ready");
    let version = s.info().version();
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": tools(3)})), confirm_at);
    assert!(out.is_empty(), "the same list again: no event, nothing sent: {out:?}");
    assert_eq!(s.info().version(), version);
    // Only one confirmation: after it, the next thing to do is the keepalive.
    assert_eq!(s.next_deadline(), Some(confirm_at + Duration::from_secs(60)));
}

/// The xiaozhi MQTT gateway, cold cache: an id-only answer to `initialize`, then one to the retry.
#[test]
fn gateway_id_only_initialize_is_a_failed_step_retried_with_backoff() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let out = sent(&s.on_text(HELLO, t0));
    let out = s.on_text(&id_only(&out[1]["payload"]["id"]), t0);
    assert!(sent(&out).is_empty());
    assert_eq!(events(&out), vec![Event::OnboardingRetry { attempt: 2, of: 5, error: format!("initialize: {}", jsonrpc::EMPTY_REPLY), retry_in_ms: 50 }]);
    assert_eq!(s.info().phase, Phase::Initializing);
    assert_eq!(s.info().onboarding.last_error.as_deref(), Some("initialize: the reply has neither result nor error"));
    assert_eq!(s.next_deadline(), Some(t0 + Duration::from_millis(50)));
    assert!(s.on_tick(t0 + Duration::from_millis(49)).is_empty());
    let t1 = t0 + Duration::from_millis(50);
    let out = sent(&s.on_tick(t1));
    assert_eq!(out[0]["payload"]["method"], "initialize");
    let out = s.on_text(&id_only(&out[0]["payload"]["id"]), t1);
    assert!(matches!(&events(&out)[..], [Event::OnboardingRetry { attempt: 3, retry_in_ms: 200, .. }]));
    let t2 = t1 + Duration::from_millis(200);
    let out = sent(&s.on_tick(t2));
    let out = sent(&s.on_text(&reply(&out[0]["payload"]["id"], INIT_RESULT()), t2));
    // Onboarding needed a retry: ready once a second listing agrees with the first.
    assert!(events(&s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": tools(32)})), t2)).is_empty());
    assert_eq!(s.info().phase, Phase::Listing);
    let t3 = s.next_deadline().unwrap();
    assert_eq!(t3, t2 + Duration::from_millis(1500));
    let out = sent(&s.on_tick(t3));
    let done = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": tools(32)})), t3);
    assert_eq!(events(&done), vec![Event::Ready { tools: 32 }]);
    assert_eq!(s.info().onboarding.attempt, 3);
    assert!(t3 - t0 < Duration::from_secs(2));
    // Agreed lists are confirmed: no further confirmation re-list, the keepalive is next.
    assert_eq!(s.next_deadline(), Some(t3 + Duration::from_secs(60)));
}

/// The gateway's partial first list (8 of 32): ready with 8 at once, all 32 after the confirmation.
#[test]
fn gateway_partial_first_list_is_completed_by_the_confirmation_relist() {
    let t0 = Instant::now();
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    assert_eq!(events(&s.on_text(&reply(&list["id"], json!({"tools": tools(8)})), t0)), vec![Event::Ready { tools: 8 }]);
    let at = s.next_deadline().unwrap();
    assert!(at - t0 <= Duration::from_secs(2));
    let out = sent(&s.on_tick(at));
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": tools(32)})), at);
    assert_eq!(events(&out), vec![Event::ToolsChanged { tools: 32 }]);
    assert_eq!((s.info().tools.len(), s.info().phase), (32, Phase::Ready));
}

/// The gateway's empty list, then the full one: listed again after 2 s, within a bounded time.
#[test]
fn gateway_empty_list_ends_fully_onboarded() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let list = up_to_list(&mut s, t0);
    assert!(s.on_text(&reply(&list["id"], json!({"tools": []})), t0).is_empty());
    let at = s.next_deadline().unwrap();
    assert!(at - t0 <= Duration::from_secs(2));
    let out = sent(&s.on_tick(at));
    assert!(s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": tools(32)})), at).is_empty());
    let at = s.next_deadline().unwrap();
    let out = sent(&s.on_tick(at));
    let done = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": tools(32)})), at);
    assert_eq!(events(&done), vec![Event::Ready { tools: 32 }]);
    assert!(at - t0 <= Duration::from_secs(4));
}

#[test]
fn onboarding_gives_up_after_bounded_attempts_names_the_step_and_a_later_hello_starts_over() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let list = up_to_list(&mut s, t0);
    let out = sent(&s.on_text(&reply(&list["id"], json!({"tools": tools(2), "nextCursor": "p2"})), t0));
    assert_eq!(out[0]["payload"]["params"]["cursor"], "p2");
    // Page 2 is never answered: each timeout is a failed step, sent again, 5 attempts in all.
    let mut now = t0;
    let mut all = Vec::new();
    let mut page2_requests = 1;
    while let Some(at) = s.next_deadline() {
        if s.info().onboarding.failed {
            break;
        }
        now = at;
        let out = s.on_tick(now);
        page2_requests += sent(&out).iter().filter(|f| f["payload"]["params"]["cursor"] == "p2").count();
        all.extend(events(&out));
    }
    assert_eq!(page2_requests, 5);
    let retries: Vec<u64> = all.iter().filter_map(|e| if let Event::OnboardingRetry { retry_in_ms, .. } = e { Some(*retry_in_ms) } else { None }).collect();
    assert_eq!(retries, [50, 200, 1000, 3000]);
    let msg = "onboarding failed at tools/list page 2: no answer within 10s (5 attempts)";
    assert_eq!(all.last(), Some(&Event::OnboardingFailed { error: msg.into(), attempts: 5 }));
    assert_eq!(s.info().onboarding_error.as_deref(), Some(msg));
    assert!(s.info().onboarding.failed && s.info().phase == Phase::Ready);
    assert_eq!(s.info().tools.len(), 2, "what page 1 gave is kept");
    assert!(now - t0 < Duration::from_secs(60), "bounded: {:?}", now - t0);
    // A hello (the device reopens a voice session) starts it over.
    let out = sent(&s.on_text(HELLO, now));
    assert_eq!(out[1]["payload"]["method"], "initialize");
    assert_eq!(s.info().onboarding, OnboardingStatus { attempt: 1, max_attempts: 5, last_error: None, failed: false });
    assert_eq!(s.info().onboarding_error, None);
}

/// Attacker: a device that says hello as fast as it may, to be onboarded again and again. It
/// gets at most `max_onboardings` (4) per 30 s, the first included; the next waits for the window
/// to end (planned once, warned once), and no hello is left unanswered meanwhile.
#[test]
fn hellos_restart_a_failed_onboarding_within_the_onboarding_budget() {
    let t0 = Instant::now();
    let mut cfg = config();
    cfg.onboarding_attempts = 1;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let mut initializes = 0;
    let mut warnings = 0;
    let mut now = t0;
    for _ in 0..100 {
        now += Duration::from_millis(100);
        let out = s.on_text(HELLO, now);
        warnings += events(&out).iter().filter(|e| matches!(e, Event::Warning { message } if message.contains("more than 4 times in 30 s"))).count();
        let frames = sent(&out);
        assert_eq!(frames[0]["type"], "hello", "every hello is answered");
        if let Some(init) = frames.iter().find(|f| f["payload"]["method"] == "initialize") {
            initializes += 1;
            // Each onboarding fails at once, so every hello may restart it.
            s.on_text(&id_only(&init["payload"]["id"]), now);
            assert!(s.info().onboarding.failed);
        }
    }
    assert_eq!((initializes, warnings), (4, 1), "within 10 s: the budget, then one warning");
    // The put-off onboarding starts when the window ends, without another hello.
    assert_eq!(s.next_deadline(), Some(t0 + Duration::from_millis(100) + Duration::from_secs(30)));
    let out = sent(&s.on_tick(t0 + Duration::from_millis(100) + Duration::from_secs(30)));
    assert_eq!(out[0]["payload"]["method"], "initialize");
}

#[test]
fn caps_stop_the_listing_keep_what_fits_and_warn() {
    let t0 = Instant::now();
    let mut cfg = config();
    cfg.confirm_relist = None;
    cfg.max_tools = 5;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let list = up_to_list(&mut s, t0);
    let out = sent(&s.on_text(&reply(&list["id"], json!({"tools": tools(3), "nextCursor": "x"})), t0));
    let page2: Vec<Value> = (3..6).map(|i| tool(&format!("self.t{i:02}"))).collect();
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": page2, "nextCursor": "y"})), t0);
    assert!(sent(&out).is_empty(), "no page 3 after the cap");
    assert!(matches!(&events(&out)[..], [Event::Warning { message }, Event::Ready { tools: 5 }] if message.contains("kept the first 5 tools")));
    assert_eq!(s.info().tools.len(), 5);
    assert!(s.info().tools_warning.as_deref().is_some_and(|w| w.contains("1000") || w.contains("5 tools")));

    // Bytes: a device whose tools are huge keeps only what fits in max_tool_bytes.
    let mut cfg = config();
    cfg.confirm_relist = None;
    cfg.max_tool_bytes = 4096;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let list = up_to_list(&mut s, t0);
    let big: Vec<Value> = (0..10).map(|i| json!({"name": format!("big{i}"), "description": "d".repeat(1000), "inputSchema": {}})).collect();
    s.on_text(&reply(&list["id"], json!({"tools": big})), t0);
    let kept: usize = s.info().tools.iter().map(|t| t.json.get().len()).sum();
    assert!(kept <= 4096 && s.info().tools.len() == 3, "{} tools, {kept} bytes", s.info().tools.len());
    assert!(s.info().tools_warning.is_some());
}

#[test]
fn repeated_hellos_get_the_server_hello_but_never_restart_onboarding_and_floods_are_capped() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let out = sent(&s.on_text(HELLO, t0));
    assert_eq!(out[1]["payload"]["method"], "initialize");
    // A second hello on the same connection (a link that sees connections: the same instance)
    // while initializing: server hello only.
    let again = sent(&s.on_text(HELLO, t0));
    assert_eq!((again.len(), again[0]["type"].as_str()), (1, Some("hello")));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], INIT_RESULT()), t0));
    s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": tools(1)})), t0);
    assert_eq!(s.info().phase, Phase::Ready);
    // An MQTT begin after the hello does not start a second onboarding either.
    assert!(s.begin(t0).is_empty());
    // A flood of hellos in one second: at most max_answers_per_sec (20) server hellos, no initialize.
    let t1 = t0 + Duration::from_secs(5);
    let mut frames = Vec::new();
    let mut warnings = 0;
    for _ in 0..1000 {
        let out = s.on_text(HELLO, t1);
        warnings += events(&out).iter().filter(|e| matches!(e, Event::Warning { .. })).count();
        frames.extend(sent(&out));
    }
    assert_eq!(frames.len(), 20);
    assert!(frames.iter().all(|f| f["type"] == "hello"));
    assert_eq!((s.info().counters.unanswered, warnings), (980, 1));
    // The next second, hellos are answered again.
    assert_eq!(sent(&s.on_text(HELLO, t1 + Duration::from_secs(1))).len(), 1);
}

#[test]
fn device_requests_get_an_error_that_does_not_echo_them_and_floods_are_capped() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    let method = "x".repeat(100_000);
    let req = json!({"type":"mcp","payload":{"jsonrpc":"2.0","id":5,"method":method}}).to_string();
    let out = sent(&s.on_text(&req, t0));
    let message = out[0]["payload"]["error"]["message"].as_str().unwrap();
    assert_eq!(out[0]["payload"]["error"]["code"], -32601);
    assert!(message.len() < 150, "{} bytes echoed", message.len());
    let t1 = t0 + Duration::from_secs(1);
    let mut answered = 0;
    for _ in 0..1000 {
        answered += sent(&s.on_text(&req, t1)).len();
    }
    assert_eq!(answered, 20);
    assert_eq!(s.info().counters.unanswered, 980);
}

#[test]
fn refresh_relists_a_ready_device_and_starts_a_failed_onboarding_over() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    let out = sent(&s.request(9, REFRESH_METHOD, None, Duration::from_secs(5), t0));
    assert_eq!((out.len(), out[0]["payload"]["method"].as_str()), (1, Some("tools/list")), "the refresh itself never reaches the device");
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a"), tool("b")]})), t0);
    let reply_of = |out: &[Output]| out.iter().find_map(|o| if let Output::Reply { ticket: 9, outcome } = o { Some(outcome.clone()) } else { None });
    let answer = reply_of(&out).expect("the refresh is answered").unwrap();
    assert_eq!(answer.to_value()["tools"].as_array().unwrap().len(), 2);
    assert!(events(&out).contains(&Event::ToolsChanged { tools: 2 }));

    // A device whose onboarding failed: the refresh starts it over from initialize.
    let mut cfg = config();
    cfg.onboarding_attempts = 1;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let out = sent(&s.on_text(HELLO, t0));
    s.on_text(&reply(&out[1]["payload"]["id"], json!(null)).replace(r#""result":null"#, r#""error":{"message":"no"}"#), t0);
    assert!(s.info().onboarding.failed);
    assert_eq!(s.info().onboarding_error.as_deref(), Some("onboarding failed at initialize: error reply: no (1 attempts)"));
    let out = sent(&s.request(9, REFRESH_METHOD, None, Duration::from_secs(5), t0));
    assert_eq!(out[0]["payload"]["method"], "initialize");
    // Not answered in time: the refresh times out like any call.
    let out = s.on_tick(t0 + Duration::from_secs(5));
    assert_eq!(reply_of(&out), Some(Err(CallError::Timeout(Duration::from_secs(5)))));
}

#[test]
fn version_moves_with_what_a_cli_sees_not_with_counters() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    let v = s.info().version();
    s.on_binary(100);
    s.on_text(r#"{"type":"listen","state":"start"}"#, t0);
    assert_eq!(s.info().version(), v);
    let out = sent(&s.on_text(r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#, t0));
    s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a"), tool("b")]})), t0);
    assert!(s.info().version() > v);
}

#[test]
fn a_goodbye_ends_the_device_session_and_its_next_hello_onboards_again() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    // A hello without a goodbye (a new voice session): the server hello only.
    let again = sent(&s.on_text(HELLO, t0));
    assert_eq!((again.len(), again[0]["type"].as_str()), (1, Some("hello")));
    // The device says goodbye (it reboots), then hello: onboarded again, its tools listed anew.
    assert!(sent(&s.on_text(r#"{"type":"goodbye","session_id":"s"}"#, t0)).is_empty());
    let out = sent(&s.on_text(HELLO, t0));
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!((out[0]["type"].as_str(), out[1]["payload"]["method"].as_str()), (Some("hello"), Some("initialize")));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], INIT_RESULT()), t0));
    let done = s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": [tool("a"), tool("b")]})), t0);
    assert_eq!(events(&done), vec![Event::ToolsChanged { tools: 2 }]);
    assert_eq!(s.info().phase, Phase::Ready);
    // Once: the hello after that is a voice session again.
    let out2 = sent(&s.on_text(HELLO, t0));
    assert_eq!(out2.len(), 1, "{out2:?}");
}

/// Requests are written straight from their parts, as the stock firmware's own order has them
/// (`jsonrpc`, `id`, `method`, `params`), with a tree built only for a trace, which shows the same.
#[test]
fn a_request_is_written_in_the_envelopes_order_and_traced_as_sent() {
    let now = Instant::now();
    let mut s = onboard(now, &[vec!["a"]]);
    for (params, trace) in [(Some(json!({"name": "a", "arguments": {"x": "\"q\""}})), false), (None, false), (Some(json!([1])), true)] {
        s.trace = trace;
        let out = s.request(1, "tools/call", params.clone(), Duration::from_secs(5), now);
        let text = out.iter().find_map(|o| if let Output::Send(t) = o { Some(t.clone()) } else { None }).expect("a frame");
        let id = serde_json::from_str::<Value>(&text).unwrap()["payload"]["id"].clone();
        let mut payload = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call"});
        if let Some(p) = &params {
            payload["params"] = p.clone();
        }
        assert_eq!(text, crate::wire::envelope::mcp_text("s1", &payload));
        let traced = out.iter().find_map(|o| if let Output::Event(Event::Traffic { payload, .. }) = o { Some((**payload).clone()) } else { None });
        assert_eq!(traced, trace.then_some(payload));
    }
}

/// The initialize a session sent in `out`, checked to carry the vision settings.
pub(super) fn initialize_in(out: &[Output]) -> Value {
    let init = sent(out).into_iter().find(|f| f["payload"]["method"] == "initialize").unwrap_or_else(|| panic!("no initialize in {out:?}"));
    assert_eq!(init["payload"]["params"]["capabilities"]["vision"], json!({"url":"http://hub/vision","token":"vt"}));
    init["payload"].clone()
}

/// An MQTT session through a broker the hub does not run (no confirmation re-list).
fn external_broker_session(now: Instant) -> Session {
    let mut cfg = config();
    cfg.confirm_relist = None;
    cfg.hello_may_be_new_instance = true;
    Session::new(identity(), "mqtt", cfg, now)
}

/// A restart during onboarding, through a broker the hub does not run: the old instance never
/// answers, the new one says hello. It is onboarded from `initialize` and ends with every tool,
/// not at 0 tools or a failed onboarding.
#[test]
fn a_hello_while_onboarding_starts_it_over_and_the_new_instance_ends_fully_onboarded() {
    let t0 = Instant::now();
    let mut s = external_broker_session(t0);
    let old = initialize_in(&s.on_text(HELLO, t0));
    let t1 = t0 + Duration::from_secs(3);
    let init = initialize_in(&s.on_text(HELLO, t1));
    assert_ne!(init["id"], old["id"]);
    // The old instance's answer, had it come, would not count for the new onboarding.
    assert!(sent(&s.on_text(&reply(&old["id"], INIT_RESULT()), t1)).is_empty());
    let out = sent(&s.on_text(&reply(&init["id"], INIT_RESULT()), t1));
    let done = s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": tools(11)})), t1);
    assert_eq!(events(&done), vec![Event::Ready { tools: 11 }]);
    assert_eq!((s.info().phase, s.info().onboarding.failed), (Phase::Ready, false));
    // Nothing the old onboarding left behind fires later.
    assert_eq!(s.next_deadline(), Some(t1 + Duration::from_secs(60)));
}

/// Through a broker the hub does not run, a hello cannot be told from a new instance's: each
/// one onboards again (new `initialize` with vision, new list), as xiaozhi-esp32-server does.
#[test]
fn through_a_broker_the_hub_does_not_run_every_hello_onboards_again_with_the_new_tools() {
    let t0 = Instant::now();
    let mut s = external_broker_session(t0);
    let init = initialize_in(&s.on_text(HELLO, t0));
    let out = sent(&s.on_text(&reply(&init["id"], INIT_RESULT()), t0));
    s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": tools(7)})), t0);
    assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Ready, 7));
    // The device restarted with other firmware and says hello on the same topics.
    let t1 = t0 + Duration::from_secs(5);
    let init = initialize_in(&s.on_text(HELLO, t1));
    assert_eq!(s.info().phase, Phase::Initializing, "a waiter for `ready` waits for the new list");
    let out = sent(&s.on_text(&reply(&init["id"], INIT_RESULT()), t1));
    let done = s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": tools(11)})), t1);
    assert_eq!(events(&done), vec![Event::ToolsChanged { tools: 11 }]);
    assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Ready, 11));
}

/// An OTA check-in (a boot) marks the device: its next message, whatever it is, onboards it
/// again; the one after does not.
#[test]
fn after_an_ota_check_in_the_next_message_onboards_again() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    s.may_have_restarted();
    let listen = r#"{"type":"listen","state":"detect","text":"hi"}"#;
    let init = initialize_in(&s.on_text(listen, t0));
    let out = sent(&s.on_text(&reply(&init["id"], INIT_RESULT()), t0));
    s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools": [tool("a"), tool("b")]})), t0);
    assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Ready, 2));
    assert!(sent(&s.on_text(listen, t0)).is_empty());
    // A session that never onboarded has nothing to redo: its first hello onboards it.
    let mut fresh = session(t0);
    fresh.may_have_restarted();
    assert!(sent(&fresh.on_text(listen, t0)).is_empty());
}
