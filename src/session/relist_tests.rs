//! Believing a device's tool list: a shorter or partial-looking list is listed again until two
//! listings agree, `list_changed` during a listing gives one more listing (and a storm of them at
//! most one a second), and a device that never stops looking partial is ready after bounded
//! re-lists (issues 22 and 33).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::tests::{HELLO, INIT_RESULT, config, events, id_only, identity, onboard, reply, sent, tool, tools, up_to_list};
use super::*;

#[test]
fn a_shorter_relist_is_believed_only_when_two_listings_agree() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a", "b", "c"]]);
    let changed = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#;
    let out = sent(&s.on_text(changed, t0));
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a")]})), t0);
    assert!(events(&out).is_empty(), "{out:?}");
    assert_eq!(s.info().tools.len(), 3, "a truncated-looking list is not taken yet");
    let again = t0 + Duration::from_secs(1);
    assert_eq!(s.next_deadline(), Some(again));
    let out = sent(&s.on_tick(again));
    assert!(s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a"), tool("b"), tool("c")]})), again).is_empty());
    assert_eq!(s.info().tools.len(), 3);
    // Really shorter: two listings in a row say so (a list_changed within a second of the last
    // listing waits for the second's end).
    assert!(sent(&s.on_text(changed, again)).is_empty());
    let next = again + Duration::from_secs(1);
    let out = sent(&s.on_tick(next));
    s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a")]})), next);
    let later = next + Duration::from_secs(1);
    let out = sent(&s.on_tick(later));
    let out = s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a")]})), later);
    assert_eq!(events(&out), vec![Event::ToolsChanged { tools: 1 }]);
}

#[test]
fn list_changed_floods_during_a_listing_give_one_more_listing() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    let changed = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#;
    let first = sent(&s.on_text(changed, t0));
    assert_eq!(first.len(), 1);
    for _ in 0..100 {
        assert!(sent(&s.on_text(changed, t0)).is_empty(), "no new listing while one runs");
    }
    assert!(sent(&s.on_text(&reply(&first[0]["payload"]["id"], json!({"tools": [tool("a")]})), t0)).is_empty(), "not again within a second");
    let next = t0 + Duration::from_secs(1);
    assert_eq!(s.next_deadline(), Some(next));
    let out = sent(&s.on_tick(next));
    assert_eq!(out.len(), 1, "exactly one more listing: {out:?}");
    assert!(sent(&s.on_text(&reply(&out[0]["payload"]["id"], json!({"tools": [tool("a")]})), next)).is_empty());
}

/// Issue 22 item 9: a device that sends `list_changed` without end, and answers every listing at
/// once, is listed at most once a second, and its tools are replaced only when they changed.
#[test]
fn a_list_changed_storm_is_listed_at_most_once_a_second() {
    let t0 = Instant::now();
    let mut s = onboard(t0, &[vec!["a"]]);
    let changed = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#;
    let (mut listings, mut changes) = (0, 0);
    // Ten seconds of a notification every 5 ms, each listing answered at once, with a list that
    // flips between two versions.
    for step in 0..2000u64 {
        let now = t0 + Duration::from_millis(5 * step);
        let mut out = s.on_text(changed, now);
        out.extend(s.on_tick(now));
        for frame in sent(&out) {
            if frame["payload"]["method"] == "tools/list" {
                listings += 1;
                let tools = if listings % 2 == 0 { json!([tool("a")]) } else { json!([tool("a"), tool("b")]) };
                let answered = s.on_text(&reply(&frame["payload"]["id"], json!({"tools": tools})), now);
                changes += events(&answered).iter().filter(|e| matches!(e, Event::ToolsChanged { .. })).count();
            }
        }
    }
    assert!((9..=11).contains(&listings), "{listings} listings in 10 s of list_changed");
    assert!(changes <= listings, "{changes} tool changes for {listings} listings");
    assert!(changes >= 2, "the changed lists were taken: {changes}");
}

/// A gateway-style device: `initialize` needed a retry, then the first list is partial (20 of
/// 32). The device is not `ready`, and shows no tools, until two listings in a row agree.
#[test]
fn after_a_retry_a_partial_first_list_is_never_ready() {
    let t0 = Instant::now();
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let out = sent(&s.on_text(HELLO, t0));
    s.on_text(&id_only(&out[1]["payload"]["id"]), t0);
    let t1 = s.next_deadline().unwrap();
    let out = sent(&s.on_tick(t1));
    let out = sent(&s.on_text(&reply(&out[0]["payload"]["id"], INIT_RESULT()), t1));
    let mut list = out[1]["payload"].clone();
    let mut now = t1;
    for (n, ready) in [(20, false), (32, false), (32, true)] {
        let out = s.on_text(&reply(&list["id"], json!({"tools": tools(n)})), now);
        if ready {
            assert_eq!(events(&out), vec![Event::Ready { tools: 32 }]);
            break;
        }
        assert!(events(&out).is_empty(), "{out:?}");
        assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Listing, 0), "nothing partial is shown");
        now = s.next_deadline().unwrap();
        list = sent(&s.on_tick(now))[0]["payload"].clone();
        assert_eq!(list["method"], "tools/list");
    }
    assert_eq!((s.info().phase, s.info().tools.len()), (Phase::Ready, 32));

    // Attacker: a device whose list differs every time cannot keep itself onboarding for ever.
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let out = sent(&s.on_text(HELLO, t0));
    s.on_text(&id_only(&out[1]["payload"]["id"]), t0);
    let t1 = s.next_deadline().unwrap();
    let out = sent(&s.on_tick(t1));
    let out = sent(&s.on_text(&reply(&out[0]["payload"]["id"], INIT_RESULT()), t1));
    let mut list = out[1]["payload"].clone();
    let mut now = t1;
    for n in 1.. {
        let out = s.on_text(&reply(&list["id"], json!({"tools": tools(n)})), now);
        if s.info().phase == Phase::Ready {
            assert!(events(&out).iter().any(|e| matches!(e, Event::Warning { message } if message.contains("no two listings"))), "{out:?}");
            assert_eq!((n, s.info().tools.len()), (4, 4), "max_relists (3) more listings, then the last is taken");
            break;
        }
        now = s.next_deadline().unwrap();
        list = sent(&s.on_tick(now))[0]["payload"].clone();
    }
}

/// Issue 33: answers to the listing of `s` (its next `tools/list` request is `list`), one listing
/// per entry of `listings` (each a list of pages, `(tools, next_cursor)`), each listing after the
/// session's next deadline; the events of the last page of each listing.
fn list_as(s: &mut Session, mut list: Value, mut now: Instant, listings: &[&[(usize, Option<&str>)]]) -> Vec<Vec<Event>> {
    let mut ends = Vec::new();
    for (k, pages) in listings.iter().enumerate() {
        if k > 0 {
            now = s.next_deadline().expect("another listing is planned");
            list = sent(&s.on_tick(now)).into_iter().next().expect("a tools/list")["payload"].clone();
        }
        let mut listed = 0;
        for (n, next) in pages.iter() {
            assert_eq!(list["method"], "tools/list");
            // Each page its own tools, as a device pages its list.
            let mut result = json!({"tools": tools(listed + n)[listed..]});
            listed += n;
            if let Some(c) = next {
                result["nextCursor"] = json!(c);
            }
            let out = s.on_text(&reply(&list["id"], result), now);
            match sent(&out).into_iter().find(|f| f["payload"]["method"] == "tools/list") {
                Some(f) if next.is_some() => list = f["payload"].clone(),
                _ => ends.push(events(&out)),
            }
        }
    }
    ends
}

/// A cache still filling answers with the pages it has so far: the last page, without a
/// `nextCursor`, is as full as the pages before it. Not shown; listed until two listings agree.
#[test]
fn a_last_page_as_full_as_the_pages_before_it_is_listed_again_before_ready() {
    let t0 = Instant::now();
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    let ends = list_as(&mut s, list, t0, &[&[(8, Some("x")), (8, None)], &[(8, Some("x")), (8, Some("y")), (4, None)], &[(8, Some("x")), (8, Some("y")), (4, None)]]);
    assert_eq!(ends[0], Vec::<Event>::new(), "the 16 of a cut list are never shown");
    assert_eq!(ends[1], Vec::<Event>::new(), "20 after 16: not yet two alike");
    assert_eq!(ends[2], vec![Event::Ready { tools: 20 }]);
    // The pages are kept for recordings, as the device cut them.
    let pages: Vec<(usize, Option<&str>)> = s.info().tool_pages.as_ref().unwrap().iter().map(|p| (p.tools, p.next_cursor.as_deref())).collect();
    assert_eq!(pages, [(8, Some("x")), (8, Some("y")), (4, None)]);

    // A device whose pages are simply short at the end is ready at once; a single page is one
    // page, with nothing to keep.
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    assert_eq!(list_as(&mut s, list, t0, &[&[(8, Some("x")), (3, None)]])[0], vec![Event::Ready { tools: 11 }]);
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    assert_eq!(list_as(&mut s, list, t0, &[&[(8, None)]])[0], vec![Event::Ready { tools: 8 }]);
    assert!(s.info().tool_pages.is_none());
}

/// `list_changed` while the device is being listed: the list may predate the change, so it is
/// listed again before `ready`, once, not in the background after it.
#[test]
fn a_list_changed_during_onboarding_holds_ready_until_a_listing_agrees() {
    let t0 = Instant::now();
    let mut s = Session::new(identity(), "websocket", config(), t0);
    let list = up_to_list(&mut s, t0);
    let changed = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#;
    assert!(sent(&s.on_text(changed, t0)).is_empty(), "the listing under way is not doubled");
    let ends = list_as(&mut s, list, t0, &[&[(8, None)], &[(32, None)], &[(32, None)]]);
    assert_eq!((ends[0].is_empty(), ends[1].is_empty()), (true, true), "{ends:?}");
    assert_eq!(ends[2], vec![Event::Ready { tools: 32 }]);
    let ready_at = s.next_deadline().unwrap() - Duration::from_secs(60);
    assert!(sent(&s.on_tick(ready_at + Duration::from_secs(5))).is_empty(), "no listing left over after ready");
}

/// A new connection's first list shorter than the list the hub knew for the device: held until a
/// second listing agrees, whether the device was still filling (32) or really shrank (8).
#[test]
fn a_first_list_shorter_than_the_device_listed_before_is_listed_again() {
    let t0 = Instant::now();
    let known = |n: usize| {
        let mut cfg = config();
        cfg.known_tools = n;
        let mut s = Session::new(identity(), "websocket", cfg, t0);
        let list = up_to_list(&mut s, t0);
        (s, list)
    };
    let (mut s, list) = known(32);
    let ends = list_as(&mut s, list, t0, &[&[(8, None)], &[(32, None)], &[(32, None)]]);
    assert_eq!((ends[0].len(), ends[1].len(), &ends[2]), (0, 0, &vec![Event::Ready { tools: 32 }]));
    let (mut s, list) = known(32);
    let ends = list_as(&mut s, list, t0, &[&[(8, None)], &[(8, None)]]);
    assert_eq!((ends[0].len(), &ends[1]), (0, &vec![Event::Ready { tools: 8 }]));
    // As many as before, or more: ready at once.
    let (mut s, list) = known(8);
    assert_eq!(list_as(&mut s, list, t0, &[&[(8, None)]])[0], vec![Event::Ready { tools: 8 }]);
}

/// Attacker: a device that looks cut short every time, with a list that never agrees and a
/// `list_changed` during every listing, still ends: `max_relists` more listings, then ready with
/// the last list and a warning, in bounded time.
#[test]
fn a_device_that_never_stops_looking_partial_is_ready_after_bounded_relists() {
    let t0 = Instant::now();
    let mut cfg = config();
    cfg.known_tools = 1000;
    let mut s = Session::new(identity(), "websocket", cfg, t0);
    let mut list = up_to_list(&mut s, t0);
    let changed = r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#;
    let mut now = t0;
    for n in 1..=10 {
        s.on_text(changed, now);
        let out = s.on_text(&reply(&list["id"], json!({"tools": tools(n), "nextCursor": ""})), now);
        if s.info().phase == Phase::Ready {
            assert!(events(&out).iter().any(|e| matches!(e, Event::Warning { message } if message.contains("no two listings"))), "{out:?}");
            assert_eq!(n, 4, "max_relists (3) more listings");
            assert!(s.info().tools_warning.is_some());
            assert!(now - t0 <= Duration::from_secs(5), "{:?}", now - t0);
            return;
        }
        now = s.next_deadline().unwrap();
        list = sent(&s.on_tick(now))[0]["payload"].clone();
    }
    panic!("never ready");
}
