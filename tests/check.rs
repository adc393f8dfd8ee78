//! `mcpdev check`: against the simulator (every check passes), against `sim --profile stock`
//! (exactly the documented deviations), and against a scripted device that breaks one rule at a
//! time (every check can fail or warn). JUnit output is parsed as XML.

use std::process::Stdio;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const DEADLINE: Duration = Duration::from_secs(60);

struct Checker {
    child: tokio::process::Child,
    url: String,
}

/// Starts `mcpdev check --json --listen 127.0.0.1:0 …` and reads the URL it listens on.
async fn start_check(extra: &[&str]) -> Checker {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"));
    cmd.args(["check", "--json", "--listen", "127.0.0.1:0", "--wait", "90s"])
        .args(if extra.contains(&"--timeout") { &[][..] } else { &["--timeout", "5s"][..] })
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn mcpdev check");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(DEADLINE, async {
        loop {
            let line = lines.next_line().await.unwrap().expect("check says where it listens");
            if let Some(rest) = line.strip_prefix("listening on ") {
                return rest.split_whitespace().next().unwrap().to_string();
            }
        }
    })
    .await
    .expect("check listens");
    tokio::spawn(async move { while let Ok(Some(l)) = lines.next_line().await { eprintln!("check: {l}") } });
    Checker { child, url }
}

impl Checker {
    /// Waits for the exit; returns the exit code and the JSON report.
    async fn finish(mut self) -> (i32, Value) {
        let mut out = String::new();
        let mut stdout = self.child.stdout.take().unwrap();
        tokio::time::timeout(DEADLINE, stdout.read_to_string(&mut out)).await.expect("check ends").unwrap();
        let status = tokio::time::timeout(DEADLINE, self.child.wait()).await.unwrap().unwrap();
        (status.code().unwrap_or(-1), serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}")))
    }
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["results"].as_array().unwrap().iter().map(|c| (c["id"].as_str().unwrap().to_string(), c["status"].as_str().unwrap().to_string())).collect()
}

fn not_passed(report: &Value) -> Vec<(String, String)> {
    let mut v: Vec<_> = statuses(report).into_iter().filter(|(_, s)| s != "pass").collect();
    v.sort();
    v
}

async fn against_sim(profile: &str, extra: &[&str]) -> (i32, Value) {
    let checker = start_check(extra).await;
    let mut sim = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["sim", "--profile", profile, "--extra-tools", "1", "--url", &checker.url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = checker.finish().await;
    let _ = sim.kill().await;
    out
}

#[tokio::test]
async fn every_check_passes_against_the_simulator() {
    let junit = tempfile::NamedTempFile::new().unwrap();
    let (code, report) = against_sim("stock-tools", &["--call", "sim.extra.*", "--fuzz", "20", "--junit", junit.path().to_str().unwrap()]).await;
    assert_eq!(not_passed(&report), vec![], "{report:#}");
    assert_eq!(code, 0);
    let ids: Vec<String> = statuses(&report).into_iter().map(|(id, _)| id).collect();
    assert!(ids.len() >= 28, "the core checks and the calls ran: {ids:?}");
    assert!(ids.contains(&"calls.sim.extra.tool_0001".to_string()));
    assert!(ids.contains(&"fuzz.sim.extra.tool_0001".to_string()), "--fuzz ran: {ids:?}");
    assert!(report["timing"]["methods"]["tools/list"]["p99_ms"].is_number(), "{report:#}");
    let xml = std::fs::read_to_string(junit.path()).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("valid XML");
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), ids.len());
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("failure")).count(), 0);
}

#[tokio::test]
async fn the_stock_profile_shows_exactly_the_documented_deviations() {
    let junit = tempfile::NamedTempFile::new().unwrap();
    let (code, report) = against_sim("stock", &["--call", "sim.extra.tool_0001", "--junit", junit.path().to_str().unwrap()]).await;
    let expected: Vec<(String, String)> = [
        ("calls.sim.extra.tool_0001.wrong_type", "warn"),
        ("hygiene.error_escaping", "fail"),
        ("hygiene.ids", "warn"),
        ("hygiene.invalid_params", "warn"),
        ("hygiene.ping", "warn"),
        ("hygiene.unknown_method", "warn"),
        ("hygiene.unknown_tool", "warn"),
        ("tools_list.paging", "warn"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(not_passed(&report), expected, "{report:#}");
    assert_eq!(code, 10, "a failed check exits 10");
    let xml = std::fs::read_to_string(junit.path()).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("valid XML even with the device's broken JSON in a message");
    let failed: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .map(|n| n.parent().unwrap().attribute("name").unwrap())
        .collect();
    assert_eq!(failed, vec!["hygiene.error_escaping"]);
}

#[tokio::test]
async fn through_a_hub_the_raw_frame_checks_are_skipped_and_the_rest_run() {
    let mut hub = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["serve", "--json", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", "--demo", "1", "--demo-profile", "stock"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(hub.stdout.take().unwrap()).lines();
    let listening: Value = serde_json::from_str(&tokio::time::timeout(DEADLINE, lines.next_line()).await.unwrap().unwrap().unwrap()).unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpdev"))
        .args(["check", "--json", "--hub", listening["host"].as_str().unwrap(), "--wait", "30s", "--timeout", "2s"])
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let skipped: Vec<String> = not_passed(&report).into_iter().filter(|(_, s)| s == "skip").map(|(id, _)| id).collect();
    assert_eq!(skipped, ["envelope.session_id", "envelope.type", "hygiene.error_escaping", "hygiene.ids", "hygiene.in_flight", "hygiene.malformed_json", "hygiene.notification_no_reply", "initialize.initialized_no_reply", "timing.onboarding"], "{report:#}");
    // The stock demo device's deviations that requests alone show are still found.
    let warned: Vec<String> = not_passed(&report).into_iter().filter(|(_, s)| s == "warn").map(|(id, _)| id).collect();
    assert_eq!(warned, ["hygiene.invalid_params", "hygiene.ping", "hygiene.unknown_method", "hygiene.unknown_tool", "tools_list.paging"], "{report:#}");
    assert_eq!(out.status.code(), Some(0), "warnings only: exit 0");
}

#[tokio::test]
async fn strict_turns_warnings_into_failures() {
    // The default profile with --strict: nothing warns, so it still passes; the stock profile's
    // warnings alone (no --call, escaping aside) are enough to fail under --strict.
    let (code, report) = against_sim("stock", &["--strict"]).await;
    assert_eq!(report["summary"]["strict"], true);
    assert!(report["summary"]["warn"].as_u64().unwrap() >= 4, "{report:#}");
    assert_eq!(code, 10);
}

// ---- a scripted device that breaks one rule at a time ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    None,
    DeviceIdNotMac,
    NoAudioParams,
    NoMcpFeature,
    VisionRefused,
    BadProtocolVersion,
    NoToolsCapability,
    NoServerInfo,
    RepliesToInitialized,
    CursorLoops,
    DuplicateTool,
    UnstableOrder,
    UserToolLeaks,
    CrashOnBadCursor,
    HugePage,
    BadName,
    NoDescription,
    RequiredNotDeclared,
    UnknownMethodResult,
    UnknownToolSuccess,
    AcceptsBadArguments,
    StringIdAsNumber,
    NoPing,
    OneAtATime,
    UnescapedErrors,
    RepliesToNotifications,
    CrashOnMalformed,
    CallHangs,
    WrongTypeDefaulted,
    SlowOnboarding,
    AcceptsOutOfRange,
    CrashesOnOutOfRange,
    EmptySessionId,
    NoSessionId,
    ForeignSessionId,
    UntypedReply,
    StringPayload,
    EmptyServerName,
    SilentOnNonObjectArguments,
    SilentOnUnknownTools,
}

/// The check each rule breaks and what it must be reported as.
const CASES: &[(Rule, &str, &str)] = &[
    (Rule::DeviceIdNotMac, "hello.headers", "fail"),
    // Backends default a missing audio_params: tolerated.
    (Rule::NoAudioParams, "hello.fields", "warn"),
    (Rule::NoMcpFeature, "hello.features_mcp", "fail"),
    (Rule::VisionRefused, "initialize.vision", "fail"),
    (Rule::BadProtocolVersion, "initialize.protocol_version", "fail"),
    (Rule::NoToolsCapability, "initialize.capabilities_tools", "fail"),
    (Rule::NoServerInfo, "initialize.server_info", "warn"),
    (Rule::EmptyServerName, "initialize.server_info", "warn"),
    (Rule::RepliesToInitialized, "initialize.initialized_no_reply", "fail"),
    (Rule::CursorLoops, "tools_list.paging", "fail"),
    (Rule::DuplicateTool, "tools_list.unique", "fail"),
    (Rule::UnstableOrder, "tools_list.stable_order", "fail"),
    (Rule::UserToolLeaks, "tools_list.user_tools", "fail"),
    (Rule::CrashOnBadCursor, "tools_list.invalid_cursor", "fail"),
    (Rule::HugePage, "tools_list.page_size", "fail"),
    (Rule::BadName, "tools_list.names", "fail"),
    (Rule::NoDescription, "tools_list.descriptions", "warn"),
    (Rule::RequiredNotDeclared, "tools_list.input_schema", "fail"),
    (Rule::UnknownMethodResult, "hygiene.unknown_method", "fail"),
    (Rule::UnknownToolSuccess, "hygiene.unknown_tool", "fail"),
    // No backend sends non-object arguments, and stock firmware defaults wrong types: tolerated.
    (Rule::AcceptsBadArguments, "hygiene.invalid_params", "warn"),
    (Rule::SilentOnNonObjectArguments, "hygiene.invalid_params", "warn"),
    (Rule::StringIdAsNumber, "hygiene.ids", "warn"),
    (Rule::NoPing, "hygiene.ping", "warn"),
    (Rule::OneAtATime, "hygiene.in_flight", "fail"),
    (Rule::UnescapedErrors, "hygiene.error_escaping", "fail"),
    (Rule::RepliesToNotifications, "hygiene.notification_no_reply", "fail"),
    (Rule::CrashOnMalformed, "hygiene.malformed_json", "fail"),
    (Rule::CallHangs, "calls.a", "fail"),
    (Rule::WrongTypeDefaulted, "calls.b.wrong_type", "warn"),
    (Rule::SlowOnboarding, "timing.onboarding", "fail"),
    (Rule::AcceptsOutOfRange, "fuzz.a", "fail"),
    (Rule::CrashesOnOutOfRange, "fuzz.a", "fail"),
    // py-xiaozhi's empty session_id, none, or another session's: tolerated by backends.
    (Rule::EmptySessionId, "envelope.session_id", "warn"),
    (Rule::NoSessionId, "envelope.session_id", "warn"),
    (Rule::ForeignSessionId, "envelope.session_id", "warn"),
    // A reply backends cannot route: no type, or a payload that is not an object.
    (Rule::UntypedReply, "envelope.type", "fail"),
    (Rule::StringPayload, "envelope.type", "fail"),
];

fn tools(rule: Rule, with_user: bool) -> Vec<Value> {
    let a = json!({"name": if rule == Rule::BadName { "bad name!" } else { "a" }, "description": "Tool a.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": if rule == Rule::RequiredNotDeclared { json!(["n", "m"]) } else { json!(["n"]) }}});
    let desc = match rule {
        Rule::NoDescription => String::new(),
        Rule::HugePage => "x".repeat(9000),
        _ => "Tool b.".into(),
    };
    let b = json!({"name": "b", "description": desc, "inputSchema": {"type": "object", "properties": {"loud": {"type": "boolean", "default": false}}}});
    let u = json!({"name": "u", "description": "User only.", "inputSchema": {"type": "object", "properties": {}}, "annotations": {"audience": ["user"]}});
    let mut v = vec![a, b];
    if with_user || rule == Rule::UserToolLeaks {
        v.push(u);
    }
    v
}

/// The answer to one request, or `None` for no answer.
fn answer(rule: Rule, req: &Value, state: &mut State) -> Option<Value> {
    let method = req["method"].as_str().unwrap_or_default();
    let params = &req["params"];
    if method == "tools/list" && params == &json!({"cursor": ""}) {
        state.plain_lists_in_a_row += 1;
    } else {
        state.plain_lists_in_a_row = 0;
    }
    let ok = |r: Value| Some(json!({"result": r}));
    let err = |code: i64, m: &str| Some(json!({"error": {"code": code, "message": m}}));
    match method {
        "initialize" if rule == Rule::VisionRefused && params["capabilities"]["vision"].is_object() => err(-32602, "no vision"),
        "initialize" => {
            let mut r = json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}});
            match rule {
                Rule::BadProtocolVersion => r["protocolVersion"] = json!("1.0"),
                Rule::NoToolsCapability => r["capabilities"] = json!({}),
                Rule::NoServerInfo => r.as_object_mut().unwrap().remove("serverInfo").map(|_| ()).unwrap(),
                Rule::EmptyServerName => r["serverInfo"]["name"] = json!(" "),
                _ => {}
            }
            ok(r)
        }
        "ping" if rule == Rule::NoPing => None,
        "ping" if matches!(rule, Rule::UntypedReply | Rule::StringPayload) => ok(json!({"pong": true})),
        "ping" => ok(json!({})),
        "tools/list" => {
            if rule == Rule::OneAtATime && state.plain_lists_in_a_row > 4 {
                return None;
            }
            let with_user = params["withUserTools"] == true;
            let mut all = tools(rule, with_user);
            if rule == Rule::UnstableOrder && params["cursor"] == "" {
                state.listings += 1;
                if state.listings.is_multiple_of(2) {
                    all.swap(0, 1);
                }
            }
            let first = all[0]["name"].clone();
            match params["cursor"].as_str().unwrap_or_default() {
                "" => ok(json!({"tools": [all[0]], "nextCursor": all[1]["name"]})),
                c if all.iter().any(|t| t["name"] == c) => {
                    let rest: Vec<Value> = all.iter().skip_while(|t| t["name"] != c).cloned().collect();
                    let mut page = json!({"tools": rest});
                    if rule == Rule::CursorLoops {
                        page["nextCursor"] = json!(c);
                    }
                    if rule == Rule::DuplicateTool {
                        page["tools"].as_array_mut().unwrap().push(all.iter().find(|t| t["name"] == first).unwrap().clone());
                    }
                    ok(page)
                }
                _ if rule == Rule::CrashOnBadCursor => {
                    state.crash = true;
                    None
                }
                _ => err(-32602, "Invalid cursor"),
            }
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default();
            let args = &params["arguments"];
            let known = tools(rule, true).iter().any(|t| t["name"] == name);
            if !known {
                if rule == Rule::SilentOnUnknownTools {
                    return None;
                }
                if rule == Rule::UnescapedErrors {
                    state.raw = Some(format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32602,\"message\":\"Unknown tool: {name}\"}}}}", req["id"]));
                    return None;
                }
                return if rule == Rule::UnknownToolSuccess { ok(json!({"content": [], "isError": false})) } else { err(-32602, &format!("Unknown tool: {name}")) };
            }
            if !args.is_object() {
                if rule == Rule::SilentOnNonObjectArguments {
                    return None;
                }
                return if rule == Rule::AcceptsBadArguments { ok(json!({"content": [], "isError": false})) } else { err(-32602, "Invalid arguments") };
            }
            if name == "a" {
                if rule == Rule::CallHangs {
                    return None;
                }
                match args["n"].as_i64() {
                    None => return err(-32602, "n must be an integer"),
                    Some(n) if !(0..=100).contains(&n) && rule == Rule::CrashesOnOutOfRange => {
                        state.crash = true;
                        return None;
                    }
                    Some(n) if !(0..=100).contains(&n) && rule != Rule::AcceptsOutOfRange => return err(-32602, "n out of range"),
                    _ => {}
                }
            }
            if name == "b" && !args["loud"].is_boolean() && !args["loud"].is_null() && rule != Rule::WrongTypeDefaulted {
                return err(-32602, "loud must be a boolean");
            }
            ok(json!({"content": [{"type": "text", "text": "true"}], "isError": false}))
        }
        _ if rule == Rule::UnknownMethodResult => ok(json!({})),
        _ => err(-32601, "Method not found"),
    }
}

#[derive(Default)]
struct State {
    plain_lists_in_a_row: u32,
    listings: u32,
    crash: bool,
    raw: Option<String>,
}

async fn scripted_device(url: String, rule: Rule) {
    let mut req = url.into_client_request().unwrap();
    let id = if rule == Rule::DeviceIdNotMac { "not-a-mac" } else { "02:00:00:00:00:99" };
    req.headers_mut().insert("Device-Id", id.parse().unwrap());
    req.headers_mut().insert("Client-Id", "fake-client".parse().unwrap());
    req.headers_mut().insert("Protocol-Version", "1".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("connects to check");
    let mut hello = json!({"type":"hello","version":1,"features":{"mcp": rule != Rule::NoMcpFeature},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}});
    if rule == Rule::NoAudioParams {
        hello.as_object_mut().unwrap().remove("audio_params");
    }
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let mut state = State::default();
    let mut session = String::new();
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            if rule == Rule::CrashOnMalformed {
                return;
            }
            continue;
        };
        if v["type"] == "hello" {
            session = v["session_id"].as_str().unwrap_or_default().to_string();
            continue;
        }
        let p = &v["payload"];
        let sid = match rule {
            Rule::EmptySessionId => json!(""),
            Rule::ForeignSessionId => json!("another-session"),
            _ => json!(session),
        };
        let envelope = |payload: String| {
            let ping_reply = payload.contains("\"pong\"");
            match rule {
                Rule::UntypedReply if ping_reply => format!("{{\"session_id\":{sid},\"payload\":{payload}}}"),
                Rule::StringPayload if ping_reply => format!("{{\"session_id\":{sid},\"type\":\"mcp\",\"payload\":{}}}", json!(payload)),
                Rule::NoSessionId => format!("{{\"type\":\"mcp\",\"payload\":{payload}}}"),
                _ => format!("{{\"session_id\":{sid},\"type\":\"mcp\",\"payload\":{payload}}}"),
            }
        };
        if p.get("id").is_none() {
            let replies = match p["method"].as_str() {
                Some("notifications/initialized") => rule == Rule::RepliesToInitialized,
                _ => rule == Rule::RepliesToNotifications,
            };
            if replies {
                ws.send(Message::text(envelope(json!({"jsonrpc":"2.0","id":null,"result":{}}).to_string()))).await.unwrap();
            }
            continue;
        }
        if rule == Rule::SlowOnboarding && p["method"] == "initialize" {
            // The behaviour under test: a device slow to answer.
            tokio::time::sleep(Duration::from_millis(3500)).await;
        }
        let reply = answer(rule, p, &mut state);
        if state.crash {
            return;
        }
        if let Some(raw) = state.raw.take() {
            ws.send(Message::text(envelope(raw))).await.unwrap();
        }
        if let Some(mut r) = reply {
            r["jsonrpc"] = json!("2.0");
            r["id"] = if rule == Rule::StringIdAsNumber && p["id"].is_string() { json!(0) } else { p["id"].clone() };
            if ws.send(Message::text(envelope(r.to_string()))).await.is_err() {
                return;
            }
        }
    }
}

async fn check_rule(rule: Rule) -> (i32, Value) {
    let checker = start_check(&["--call", "a", "--call", "b", "--fuzz", "12", "--max-onboarding", "3s"]).await;
    let device = tokio::spawn(scripted_device(checker.url.clone(), rule));
    let out = checker.finish().await;
    device.abort();
    out
}

#[tokio::test]
async fn the_scripted_device_passes_when_it_breaks_nothing() {
    let (code, report) = check_rule(Rule::None).await;
    assert_eq!(not_passed(&report), vec![], "{report:#}");
    assert_eq!(code, 0);
}

#[tokio::test]
async fn every_check_catches_a_device_that_breaks_its_rule() {
    let runs = CASES.iter().map(|&(rule, id, status)| async move { (rule, id, status, check_rule(rule).await) });
    let mut wrong = Vec::new();
    for (rule, id, status, (code, report)) in futures_util::future::join_all(runs).await {
        let got = statuses(&report).into_iter().find(|(i, _)| i == id).map(|(_, s)| s);
        if got.as_deref() != Some(status) {
            wrong.push(format!("{rule:?}: {id} is {got:?}, expected {status}"));
        }
        if status == "fail" && code != 10 {
            wrong.push(format!("{rule:?}: exit code {code}, expected 10"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn status_of<'a>(report: &'a Value, id: &str) -> (&'a str, &'a str) {
    let c = report["results"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no {id} in {report:#}"));
    (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
}

#[tokio::test]
async fn one_missing_answer_is_counted_once() {
    let (silent, hangs, crashes) = futures_util::join!(check_rule(Rule::SilentOnUnknownTools), check_rule(Rule::CallHangs), check_rule(Rule::CrashOnMalformed));
    // Unknown tools get no answer: hygiene.unknown_tool fails; the tool named with quotes is the
    // same missing answer, so error_escaping is skipped and says who counted it.
    let (_, report) = silent;
    assert_eq!(status_of(&report, "hygiene.unknown_tool").0, "fail", "{report:#}");
    let (status, reason) = status_of(&report, "hygiene.error_escaping");
    assert_eq!(status, "skip", "{report:#}");
    assert!(reason.contains("counted once, by hygiene.unknown_tool"), "{reason}");
    assert_eq!(report["summary"]["fail"], 1, "one missing answer, one failure: {report:#}");

    // Tool a never answers: calls.a owns it, though hygiene.invalid_params (a wrong type for a)
    // met it first; fuzz.a does not send its calls at all.
    let (code, report) = hangs;
    assert_eq!(code, 10);
    assert_eq!(status_of(&report, "calls.a").0, "fail", "{report:#}");
    for id in ["hygiene.invalid_params", "fuzz.a"] {
        let (status, reason) = status_of(&report, id);
        assert_eq!(status, "skip", "{id}: {report:#}");
        assert!(reason.contains("calls.a"), "{id}: {reason}");
    }
    assert_eq!(report["summary"]["fail"], 1, "{report:#}");

    // A device that goes away fails the check that drove it away; the checks after it are skipped.
    let (_, report) = crashes;
    assert_eq!(status_of(&report, "hygiene.malformed_json").0, "fail", "{report:#}");
    for id in ["calls.a", "fuzz.a", "calls.b"] {
        let (status, reason) = status_of(&report, id);
        assert_eq!(status, "skip", "{id}: {report:#}");
        assert!(reason.contains("hygiene.malformed_json"), "{id}: {reason}");
    }
    assert_eq!(report["summary"]["fail"], 1, "{report:#}");
}

#[tokio::test]
async fn an_envelope_deviation_says_what_the_device_sent() {
    let (_, report) = check_rule(Rule::EmptySessionId).await;
    let (status, reason) = status_of(&report, "envelope.session_id");
    assert_eq!(status, "warn");
    assert!(reason.contains("an empty one") && reason.contains("backends tolerate it"), "{reason}");
    assert_eq!(status_of(&report, "envelope.type").0, "pass", "{report:#}");
    let (_, report) = check_rule(Rule::UntypedReply).await;
    let (status, reason) = status_of(&report, "envelope.type");
    assert_eq!(status, "fail");
    assert!(reason.contains("without a string type") && reason.contains("pong"), "{reason}");
}

/// The Python of `.ci/venv`, where `.ci/test` installs xiaozhi-sdk (as tests/interop_xiaozhi_sdk.rs).
fn sdk_python() -> std::path::PathBuf {
    let from_env = std::env::var_os("MCPDEV_TEST_PYTHON").map(std::path::PathBuf::from);
    let fallback = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/python");
    from_env.iter().chain([&fallback]).find(|p| p.exists()).cloned().unwrap_or_else(|| panic!("no Python with xiaozhi-sdk: run .ci/test or set MCPDEV_TEST_PYTHON"))
}

#[tokio::test]
async fn the_xiaozhi_sdk_device_report() {
    let checker = start_check(&["--timeout", "3s", "--call", "set_volume", "--call", "get_device_status"]).await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/xiaozhi_sdk_device.py");
    let mut sdk = tokio::process::Command::new(sdk_python())
        .arg(&script)
        .args(["--url", &checker.url, "--mac", "aa:bb:cc:00:00:07"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (code, report) = checker.finish().await;
    let _ = sdk.kill().await;
    let expected: Vec<(String, String)> = [
        // It never answers an unknown tool: counted once, by hygiene.unknown_tool, not again by
        // error_escaping (its tool named with quotes is unknown too).
        ("hygiene.error_escaping", "skip"),
        // It validates no arguments: set_volume runs with volume="mcpdev-check-not-a-number"
        // (tolerated: the stock firmware runs wrong types with their defaults).
        ("hygiene.invalid_params", "warn"),
        // It never answers an unknown method; ping is one to it, counted by unknown_method.
        ("hygiene.ping", "skip"),
        ("hygiene.unknown_method", "fail"),
        ("hygiene.unknown_tool", "fail"),
        // Its serverInfo.name is "".
        ("initialize.server_info", "warn"),
        // It ignores the cursor.
        ("tools_list.invalid_cursor", "warn"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(not_passed(&report), expected, "{report:#}");
    assert_eq!(code, 10);
    assert_eq!(report["device_id"], "aa:bb:cc:00:00:07");
}
