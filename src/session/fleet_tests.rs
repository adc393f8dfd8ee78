//! A fleet's sessions: keepalives of devices onboarded at once are spread, sessions share their
//! hub-wide configuration and keep their own fields, and a published description is a snapshot.

use std::time::{Duration, Instant};

use serde_json::json;

use super::tests::{HELLO, config, identity, initialize_in, reply, sent, session, tool};
use super::*;

/// Issue 24: a fleet onboarded in one burst pings spread over a quarter of the keepalive, evenly,
/// never later than the keepalive itself.
#[test]
fn keepalives_of_a_fleet_onboarded_at_once_are_spread() {
    let every = Duration::from_secs(60);
    let periods: Vec<Duration> = (0..10_000).map(|_| super::spread_keepalive(every, 25, &uuid::Uuid::new_v4().to_string())).collect();
    assert!(periods.iter().all(|p| *p <= every && *p >= Duration::from_secs(45)), "outside [45 s, 60 s]");
    // In 100 ms buckets over the 15 s window, 150 buckets of about 67 pings each: none holds
    // more than twice its share (all at once would be 10,000 in one).
    let mut buckets = [0u32; 151];
    for p in &periods {
        buckets[((every - *p).as_millis() / 100) as usize] += 1;
    }
    let max = *buckets.iter().max().unwrap();
    assert!(max <= 2 * 10_000 / 150, "a 100 ms bucket holds {max} pings");
    assert!(buckets[..150].iter().all(|&n| n > 0), "a gap in the spread");
    // The same session keeps its period (a hash, not a draw), and without jitter it is exact.
    assert_eq!(super::spread_keepalive(every, 25, "abc"), super::spread_keepalive(every, 25, "abc"));
    assert_eq!(super::spread_keepalive(every, 0, "abc"), every);
}

/// The session's own schedule uses its spread period: the first ping is due within it.
#[test]
fn a_session_pings_at_its_own_spread_period() {
    let now = Instant::now();
    let mut cfg = config();
    cfg.keepalive_jitter_pct = 25;
    let expected = super::spread_keepalive(cfg.keepalive, 25, &cfg.session_id);
    assert!(expected < Duration::from_secs(60), "s1's period is jittered: {expected:?}");
    let mut s = Session::new(identity(), "websocket", cfg, now);
    let out = sent(&s.on_text(r#"{"type":"hello"}"#, now));
    let out = sent(&s.on_text(&reply(&out[1]["payload"]["id"], json!({})), now));
    s.on_text(&reply(&out[1]["payload"]["id"], json!({"tools":[tool("a")]})), now);
    assert_eq!(s.info().phase, Phase::Ready);
    let confirm = sent(&s.on_tick(now + Duration::from_millis(1500)));
    let at = now + Duration::from_millis(1500);
    s.on_text(&reply(&confirm[0]["payload"]["id"], json!({"tools":[tool("a")]})), at);
    assert_eq!(s.next_deadline(), Some(at + expected));
    assert!(s.on_tick(at + expected - Duration::from_millis(1)).is_empty());
    assert_eq!(sent(&s.on_tick(at + expected))[0]["payload"]["method"], "ping");
}

/// A device that just connected is onboarded without a hello after a grace time, or by its
/// hello if that comes first: one onboarding either way.
#[test]
fn begin_at_onboards_a_silent_device_later_and_a_hello_first_onboards_it_once() {
    let t0 = Instant::now();
    let at = t0 + Duration::from_secs(1);
    let mut silent = session(t0);
    silent.begin_at(at);
    assert_eq!(silent.next_deadline(), Some(at));
    assert!(silent.on_tick(at - Duration::from_millis(1)).is_empty());
    initialize_in(&silent.on_tick(at));
    let mut talker = session(t0);
    talker.begin_at(at);
    initialize_in(&talker.on_text(HELLO, t0));
    assert!(sent(&talker.on_tick(at)).is_empty(), "no second initialize");
}

/// A fleet's sessions share what is the same for all of them, and keep what is theirs: two
/// sessions of one hub hold one configuration; their session ids, vision tokens and jittered
/// keepalives stay their own, and a hub with other settings gets its own configuration.
#[test]
fn sessions_share_their_hub_wide_configuration_and_keep_their_own_fields() {
    let now = Instant::now();
    let mut one = config();
    one.keepalive_jitter_pct = 25;
    let mut two = one.clone();
    two.session_id = "s2".into();
    two.vision_token = "vt2".into();
    let (a, b) = (Session::new(identity(), "websocket", one.clone(), now), Session::new(identity(), "websocket", two, now));
    assert!(std::sync::Arc::ptr_eq(&a.cfg, &b.cfg), "one configuration for the hub's sessions");
    assert_eq!((a.info().session_id.as_str(), b.info().session_id.as_str()), ("s1", "s2"));
    assert_eq!((&*a.vision_token, &*b.vision_token), ("vt", "vt2"));
    assert!(a.cfg.session_id.is_empty() && a.cfg.vision_token.is_empty(), "no session's own field is in the shared part");
    assert_ne!(a.keepalive, b.keepalive, "each session pings on its own period (spread by its session id)");
    // The vision URL is shared by the devices that came in on one address; another address's
    // devices get their own configuration, and their initialize carries their own URL.
    let mut elsewhere = one.clone();
    elsewhere.vision_url = "http://10.0.0.9:8000/mcp/vision/explain".into();
    let mut d = Session::new(identity(), "websocket", elsewhere, now);
    assert!(!std::sync::Arc::ptr_eq(&a.cfg, &d.cfg));
    let init = sent(&d.on_text(HELLO, now)).into_iter().find(|v| v["payload"]["method"] == "initialize").expect("an initialize");
    assert_eq!(init["payload"]["params"]["capabilities"]["vision"], serde_json::json!({"url": "http://10.0.0.9:8000/mcp/vision/explain", "token": "vt"}));
    let mut other = one;
    other.max_tools = 7;
    let c = Session::new(identity(), "websocket", other, now);
    assert!(!std::sync::Arc::ptr_eq(&a.cfg, &c.cfg));
    assert_eq!(c.cfg.max_tools, 7);
    // A session's server hello is written from its own session id.
    let mut ws = config();
    ws.server_hello = ServerHello::WebSocket;
    ws.session_id = "s9".into();
    let mut s = Session::new(identity(), "websocket", ws, now);
    let hello = sent(&s.on_text(r#"{"type":"hello"}"#, now)).into_iter().find(|v| v["type"] == "hello").expect("a server hello");
    assert_eq!((hello["session_id"].as_str(), hello["transport"].as_str()), (Some("s9"), Some("websocket")));
}

/// What a link published is a snapshot: the session's next change copies the description
/// instead of changing what readers hold, and a description nobody else holds is not copied.
#[test]
fn a_published_description_is_a_snapshot_and_an_unshared_one_is_not_copied() {
    let now = Instant::now();
    let mut s = session(now);
    let published = s.shared_info().clone();
    s.on_text(r#"{"type":"hello","version":1}"#, now);
    assert!(published.hello.is_none() && s.info().hello.is_some(), "the published description did not change");
    assert!(!std::sync::Arc::ptr_eq(&published, s.shared_info()));
    drop(published);
    let before = std::sync::Arc::as_ptr(s.shared_info());
    s.on_binary(10);
    assert_eq!(std::sync::Arc::as_ptr(s.shared_info()), before, "no copy while nothing else holds it");
    assert_eq!(s.info().counters.binary_frames, 1);
}
