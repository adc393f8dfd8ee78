//! Onboarding through the xiaozhi MQTT gateway, known as such (`behind_cache`): no first list
//! is taken on its own, whatever the Device-Id (issue 45.3).

use std::time::{Duration, Instant};

use serde_json::json;

use super::tests::{config, events, identity, reply, sent, tools, up_to_list};
use super::*;

/// The same, from a connection known to come through the gateway (`behind_cache`), a Device-Id
/// the hub never saw: its first list (8 of 32) is never shown; the device is ready with all 32
/// once two listings agree, and that agreeing listing was the confirmation (no more listings).
/// A direct device with the same first list is ready at once (above).
#[test]
fn through_a_gateway_a_new_ids_partial_first_list_is_never_shown() {
    let t0 = Instant::now();
    let mut cfg = config();
    cfg.behind_cache = true;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let list = up_to_list(&mut s, t0);
    assert!(events(&s.on_text(&reply(&list["id"], json!({"tools": tools(8)})), t0)).is_empty(), "a first list through a cache stands alone");
    assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Listing, 0), "nothing is shown meanwhile");
    let mut listings = 1;
    let (ready, now) = loop {
        let now = s.next_deadline().unwrap();
        let out = sent(&s.on_tick(now));
        let Some(ask) = out.iter().find(|f| f["payload"]["method"] == "tools/list") else { continue };
        listings += 1;
        let done = events(&s.on_text(&reply(&ask["payload"]["id"], json!({"tools": tools(32)})), now));
        if !done.is_empty() {
            break (done, now);
        }
    };
    assert_eq!(ready, vec![Event::Ready { tools: 32 }], "ready once, with every tool");
    assert_eq!(listings, 3, "8, then 32 and 32 that agree");
    assert!(now - t0 < Duration::from_secs(4), "{:?}", now - t0);
    // The agreement was the confirmation: the keepalive is next, no further listing.
    assert_eq!(s.next_deadline(), Some(now + Duration::from_secs(60)));
}

