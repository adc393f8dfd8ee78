//! Onboarding a device whose answers come later than the onboarding timeout, or not at all for a
//! while: what a hub behind on its reading (a cluster while its fleet joins) sees of every device.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":true}}"#;

fn session(now: Instant) -> Session {
    let mut cfg = SessionConfig::new("s1", r#"{"type":"hello","transport":"websocket","session_id":"s1"}"#);
    cfg.keepalive_jitter_pct = 0;
    cfg.confirm_relist = None;
    Session::new(Identity { device_id: "aa:bb:cc:dd:ee:02".into(), client_id: Some("c".into()), token: None, protocol_version: 1 }, "websocket", cfg, now)
}

fn requests(out: &[Output]) -> Vec<Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(t) => serde_json::from_str::<Value>(t).ok().map(|v| v["payload"].clone()),
            _ => None,
        })
        .filter(|p| p.get("id").is_some())
        .collect()
}

fn failures(out: &[Output]) -> usize {
    out.iter().filter(|o| matches!(o, Output::Event(Event::OnboardingFailed { .. }))).count()
}

/// The device's answer to one request: two pages of tools.
fn answer(request: &Value) -> String {
    let result = match (request["method"].as_str(), request["params"]["cursor"].as_str()) {
        (Some("initialize"), _) => json!({"protocolVersion": "2024-11-05", "serverInfo": {"name": "slow", "version": "1"}}),
        (Some("tools/list"), Some("")) => json!({"tools": [{"name": "self.a", "inputSchema": {"type": "object"}}], "nextCursor": "p2"}),
        (Some("tools/list"), _) => json!({"tools": [{"name": "self.b", "inputSchema": {"type": "object"}}]}),
        _ => json!({}),
    };
    json!({"session_id": "s1", "type": "mcp", "payload": {"jsonrpc": "2.0", "id": request["id"], "result": result}}).to_string()
}

/// Runs the session against a device that answers each request `latency` after it was sent,
/// from `answers_from` on (requests before are never answered), until `until`. Returns the
/// moment the device was first ready with both tools (if it was), the failed onboardings and
/// the `initialize` requests sent.
fn run(latency: Duration, answers_from: Duration, until: Duration) -> (Option<Duration>, usize, usize) {
    let t0 = Instant::now();
    let mut s = session(t0);
    let mut due: VecDeque<(Instant, Value)> = VecDeque::new();
    let (mut failed, mut initializes, mut ready) = (0, 0, None);
    let take = |out: Vec<Output>, now: Instant, due: &mut VecDeque<(Instant, Value)>, failed: &mut usize, initializes: &mut usize| {
        *failed += failures(&out);
        for r in requests(&out) {
            *initializes += usize::from(r["method"] == "initialize");
            if now - t0 >= answers_from {
                due.push_back((now + latency, r));
            }
        }
    };
    let out = s.on_text(HELLO, t0);
    take(out, t0, &mut due, &mut failed, &mut initializes);
    loop {
        let next_answer = due.front().map(|(at, _)| *at);
        let Some(now) = [next_answer, s.next_deadline()].into_iter().flatten().min() else { break };
        if now - t0 > until {
            break;
        }
        let out = if next_answer == Some(now) {
            let (_, r) = due.pop_front().unwrap();
            s.on_text(&answer(&r), now)
        } else {
            s.on_tick(now)
        };
        take(out, now, &mut due, &mut failed, &mut initializes);
        if ready.is_none() && s.info().phase == Phase::Ready && !s.info().onboarding.failed && s.info().tools.len() == 2 {
            ready = Some(now - t0);
        }
    }
    (ready, failed, initializes)
}

/// A device (or a hub behind on its reading) whose every answer comes 12 s after the request,
/// past the 10 s onboarding timeout: each step's answer is taken when it comes, while the step is
/// retried, and the device is onboarded without a failure. Before, every attempt's answer came
/// after the attempt had been given up, and the onboarding failed with five timeouts.
#[test]
fn answers_that_come_after_the_timeout_still_onboard_the_device() {
    let (ready, failed, _) = run(Duration::from_secs(12), Duration::ZERO, Duration::from_secs(600));
    assert_eq!(failed, 0, "no onboarding failed");
    let ready = ready.expect("the device is ready with both tools");
    assert!(ready < Duration::from_secs(120), "ready after {ready:?}");
}

/// A device that answers nothing for its first 150 s (a hub that could not hear it while a
/// fleet joined), then answers at once: its onboarding fails, and the hub onboards it again on
/// its own, 30 s and then 60 s after each failure, without waiting for a hello.
#[test]
fn a_failed_onboarding_is_tried_again_while_the_device_stays_connected() {
    let (ready, failed, initializes) = run(Duration::from_millis(5), Duration::from_secs(150), Duration::from_secs(900));
    assert!(failed >= 2, "{failed} failed onboardings before the device answered");
    let ready = ready.expect("the device is onboarded once it answers");
    // Failures end near 54 s and 54 + 30 + 54 s; the third onboarding starts 60 s after that.
    assert_eq!(failed, 2);
    assert!(ready > Duration::from_secs(120) && ready < Duration::from_secs(260), "ready after {ready:?}");
    assert_eq!(initializes, 5 * failed + 1);
}

/// Attacker: a device that never answers. Onboarding it again costs at most one round of five
/// attempts every 5 minutes: 14 rounds in an hour.
#[test]
fn a_device_that_never_answers_costs_a_bounded_number_of_onboardings() {
    let (ready, failed, initializes) = run(Duration::ZERO, Duration::from_secs(7200), Duration::from_secs(3600));
    assert_eq!(ready, None);
    assert!((10..=15).contains(&failed), "{failed} onboardings in an hour");
    // Five `initialize` a round, the last round perhaps still under way.
    assert!((5 * failed..=5 * (failed + 1)).contains(&initializes), "{initializes} initialize for {failed} failed onboardings");
}
