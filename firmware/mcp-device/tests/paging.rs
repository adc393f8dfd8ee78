//! `tools/list` paging at its edges: exact fits, one byte short, tools too big for any page.

mod common;

use common::{Dev, all_pages, error_reply, list_request, parse, result_text, tool_json};
use mcp_device::{Call, DEFAULT_PAGE_LIMIT, McpServer, Property, RegistryError, Tool, ToolError, ToolOutput};

fn nop(_: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(true.into())
}

/// A tool named `name` whose JSON is exactly `json_len` bytes (a description of plain letters).
fn tool_of_len(name: &str, json_len: usize) -> Tool<Dev> {
    let empty = tool_json(&Tool::<Dev>::new(name.to_string(), "", nop));
    let t = Tool::new(name.to_string(), "d".repeat(json_len - empty.len()), nop);
    assert_eq!(tool_json(&t).len(), json_len);
    t
}

fn server(limit: usize, tools: Vec<Tool<Dev>>) -> McpServer<Dev> {
    let mut s = McpServer::new("b", "1", Dev::default()).with_page_limit(limit);
    for t in tools {
        s.add_tool(t).unwrap();
    }
    s
}

fn names(page: &str) -> Vec<String> {
    parse(page)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn next_cursor(page: &str) -> Option<String> {
    parse(page).get("nextCursor").map(|c| c.as_str().unwrap().to_string())
}

fn five_tools() -> Vec<Tool<Dev>> {
    (1..=5).map(|i| tool_of_len(&format!("t.{i}"), 300 + i * 10)).collect()
}

/// The page text of `tools` on one page: `{"tools":[…]}`.
fn whole_page(tools: &[Tool<Dev>]) -> String {
    let jsons: Vec<String> = tools.iter().map(tool_json).collect();
    format!(r#"{{"tools":[{}]}}"#, jsons.join(","))
}

#[test]
fn a_page_exactly_at_the_limit_is_one_page_without_next_cursor() {
    let want = whole_page(&five_tools());
    let mut s = server(want.len(), five_tools());
    let pages = all_pages(&mut s, false);
    assert_eq!(pages, vec![want.clone()]);
    assert!(!pages[0].contains("nextCursor"));
    // Byte for byte the whole reply.
    let r = s.handle(&list_request(1, "", false)).unwrap();
    assert_eq!(r, format!(r#"{{"jsonrpc":"2.0","id":1,"result":{want}}}"#));
}

#[test]
fn one_byte_less_splits_into_two_pages() {
    let tools = five_tools();
    let limit = whole_page(&tools).len() - 1;
    let mut s = server(limit, five_tools());
    let pages = all_pages(&mut s, false);
    // Greedy: the first four tools and a cursor naming the fifth, then the fifth alone.
    let first = format!(r#"{},"nextCursor":"t.5"}}"#, &whole_page(&tools[..4])[..whole_page(&tools[..4]).len() - 1]);
    assert_eq!(pages, vec![first, whole_page(&tools[4..])]);
    for p in &pages {
        assert!(p.len() <= limit, "{} > {limit}", p.len());
    }
}

#[test]
fn a_page_with_next_cursor_may_fill_the_limit_exactly() {
    // a, b, then a c that cannot join them: page 1 is exactly `{"tools":[a,b],"nextCursor":"t.c"}`.
    let tools = || vec![tool_of_len("t.a", 300), tool_of_len("t.b", 300), tool_of_len("t.c", 400)];
    let t = tools();
    let page1 = format!(r#"{{"tools":[{},{}],"nextCursor":"t.c"}}"#, tool_json(&t[0]), tool_json(&t[1]));
    let limit = page1.len();
    assert!(whole_page(&t).len() > limit, "precondition: all three do not fit");

    let mut s = server(limit, tools());
    assert_eq!(all_pages(&mut s, false), vec![page1, whole_page(&t[2..])]);

    // One byte less: b no longer fits together with the cursor naming c.
    let mut s = server(limit - 1, tools());
    let a_page = format!(r#"{{"tools":[{}],"nextCursor":"t.b"}}"#, tool_json(&t[0]));
    assert_eq!(all_pages(&mut s, false), vec![a_page, whole_page(&t[1..2]).replace("]}", r#"],"nextCursor":"t.c"}"#), whole_page(&t[2..])]);
}

#[test]
fn next_cursor_is_absent_on_the_last_page_and_names_the_next_tool() {
    let mut s = server(1000, (0..12).map(|i| tool_of_len(&format!("tool-{i:02}"), 200)).collect());
    let pages = all_pages(&mut s, false);
    assert!(pages.len() > 2);
    let mut seen = Vec::new();
    for (i, p) in pages.iter().enumerate() {
        assert!(p.len() <= 1000);
        let n = names(p);
        assert!(!n.is_empty());
        if i + 1 < pages.len() {
            let c = next_cursor(p).expect("nextCursor on every page but the last");
            assert_eq!(names(&pages[i + 1])[0], c, "the cursor names the first tool of the next page");
        } else {
            assert_eq!(next_cursor(p), None);
            assert!(!p.contains("nextCursor"));
        }
        seen.extend(n);
    }
    let all: Vec<String> = (0..12).map(|i| format!("tool-{i:02}")).collect();
    assert_eq!(seen, all);
}

#[test]
fn user_only_tools_are_skipped_across_pages() {
    let mut tools: Vec<Tool<Dev>> = (0..10).map(|i| tool_of_len(&format!("t{i}"), 250)).collect();
    for (i, t) in tools.iter_mut().enumerate() {
        t.user_only = i % 3 == 0;
    }
    let mut s = server(800, tools);
    let visible: Vec<String> = pages_names(&all_pages(&mut s, false));
    assert_eq!(visible, ["t1", "t2", "t4", "t5", "t7", "t8"]);
    let everything: Vec<String> = pages_names(&all_pages(&mut s, true));
    assert_eq!(everything, (0..10).map(|i| format!("t{i}")).collect::<Vec<_>>());
}

fn pages_names(pages: &[String]) -> Vec<String> {
    pages.iter().flat_map(|p| names(p)).collect()
}

#[test]
fn a_tool_too_big_for_any_page_is_refused_at_registration() {
    // Alone on a page it needs: `{"tools":[` + json + `]}` + room for a cursor naming a tool of
    // the longest allowed name (128) as a literal (130) after `,"nextCursor":`.
    let room = r#"{"tools":["#.len() + "]}".len() + r#","nextCursor":"#.len() + 130;
    let limit = 1000;
    let mut s = server(limit, vec![tool_of_len("small", 100)]);

    let fits = tool_of_len("just.fits", limit - room);
    assert_eq!(s.add_tool(fits), Ok(()));

    let big = tool_of_len("too.big", limit - room + 1);
    assert_eq!(s.add_tool(big), Err(RegistryError::TooLarge { tool: "too.big".into(), bytes: limit + 1, limit }));

    let huge = Tool::new("huge", "x".repeat(20_000), nop);
    assert!(matches!(s.add_tool(huge), Err(RegistryError::TooLarge { ref tool, bytes, limit: 1000 }) if tool == "huge" && bytes > 20_000));

    // The refusal leaves the registry as it was; later tools are still listed.
    s.add_tool(tool_of_len("after", 100)).unwrap();
    let names: Vec<String> = pages_names(&all_pages(&mut s, false));
    assert_eq!(names, ["small", "just.fits", "after"]);

    // The default limit is the stock firmware's 8000 bytes.
    let mut d = McpServer::new("b", "1", Dev::default());
    assert_eq!(DEFAULT_PAGE_LIMIT, 8000);
    assert!(matches!(d.add_tool(tool_of_len("big", 8000 - room + 1)), Err(RegistryError::TooLarge { limit: 8000, .. })));
    assert_eq!(d.add_tool(tool_of_len("big", 8000 - room)), Ok(()));
}

#[test]
fn lowering_the_limit_after_registration_reports_the_tool_that_no_longer_fits() {
    // with_page_limit is meant to be set first; if it is not, the page fails loudly (-32603) with
    // the stock firmware's message rather than silently skipping the tool.
    let s = server(2000, vec![tool_of_len("a", 100), tool_of_len("b", 900)]);
    let mut s = s.with_page_limit(500);
    assert_eq!(
        s.handle(&list_request(1, "b", false)).unwrap(),
        error_reply(-32603, "Failed to add tool b because of payload size limit")
    );
    // The first page still lists `a` and points at `b`.
    let r = s.handle(&list_request(1, "", false)).unwrap();
    assert_eq!(next_cursor(result_text(&r, "1")).as_deref(), Some("b"));
}

#[test]
fn sixty_realistic_tools_fill_pages_of_at_most_8000_bytes() {
    let mut s = McpServer::new("b", "1", Dev::default());
    for n in 1..=60 {
        s.add_tool(
            Tool::new(
                format!("sim.extra.tool_{n:04}"),
                format!("Extra tool number {n} of the simulator. It echoes its arguments back as JSON, so paging, argument typing and validation can be tried against a device with many tools."),
                nop,
            )
            .property(Property::string("text").default("hello"))
            .property(Property::integer("count").default(1).range(1, 10))
            .property(Property::boolean("loud").default(false)),
        )
        .unwrap();
    }
    let pages = all_pages(&mut s, false);
    assert!(pages.len() >= 2);
    for p in &pages[..pages.len() - 1] {
        assert!(p.len() <= 8000);
        // Full: the next tool (about 430 bytes) would not have fitted.
        assert!(p.len() > 8000 - 500, "a full page is nearly full: {}", p.len());
    }
    assert_eq!(pages_names(&pages).len(), 60);
}

/// A page is written once into a buffer reserved for it: the reply's capacity is its length plus
/// the small slack kept for an envelope's closing brace, not a doubling after an overflow.
#[test]
fn a_full_page_is_written_into_a_buffer_of_its_size() {
    let tools: Vec<Tool<Dev>> = (0..40).map(|i| tool_of_len(&format!("t.{i:02}"), 430)).collect();
    let mut s = server(DEFAULT_PAGE_LIMIT, tools);
    let r = s.handle(&list_request(1, "", false)).unwrap();
    assert!(next_cursor(result_text(&r, "1")).is_some(), "the first page is full");
    assert!(r.capacity() - r.len() <= 16, "capacity {} for a {}-byte reply", r.capacity(), r.len());

    let mut link = mcp_device::DeviceLink::new(s, mcp_device::Transport::WebSocket { binary_version: 1 });
    let mut out = String::new();
    let envelope = format!(r#"{{"type":"mcp","payload":{}}}"#, list_request(1, "", false));
    link.on_text(&envelope, &mut out);
    assert!(out.ends_with("}}"), "{out}");
    assert!(out.capacity() - out.len() <= 16, "capacity {} for a {}-byte envelope", out.capacity(), out.len());
}
