//! Property: for any registry and any page limit, following `nextCursor` from `""` lists every
//! visible tool exactly once, in registration order, on pages within the limit, and ends.

mod common;

use common::{Dev, list_request, parse, result_text, tool_json};
use mcp_device::{Call, McpServer, Property, RegistryError, Tool, ToolError, ToolOutput};
use proptest::prelude::*;

fn nop(_: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(true.into())
}

#[derive(Debug, Clone)]
struct ToolSpec {
    name: String,
    description: String,
    properties: Vec<Property>,
    user_only: bool,
}

fn description() -> impl Strategy<Value = String> {
    // Mostly plain text, with characters that need escaping (quotes, backslashes, controls, which
    // grow 2x to 6x when escaped) and multi-byte UTF-8, from empty to about 3000 bytes. Built from
    // a length and a seed: generating it piece by piece from regexes made the test ten times slower.
    (prop_oneof![1 => Just(0usize), 6 => 0usize..400, 3 => 400usize..3000], any::<u64>(), 0u32..=16).prop_map(
        |(len, mut seed, special_per_128)| {
            const PLAIN: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,";
            const SPECIAL: [&str; 9] = ["\"", "\\", "\n", "\t", "\u{1}", "\u{1f}", "é", "调节音量", "`"];
            let mut s = String::with_capacity(len + 16);
            while s.len() < len {
                // xorshift64*
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let r = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
                if (r % 128) < u64::from(special_per_128) {
                    s.push_str(SPECIAL[(r >> 8) as usize % SPECIAL.len()]);
                } else {
                    s.push(PLAIN[(r >> 8) as usize % PLAIN.len()] as char);
                }
            }
            s
        },
    )
}

fn property() -> impl Strategy<Value = Property> {
    let name = "[a-z_]{1,12}";
    prop_oneof![
        (name, prop::option::of(any::<bool>())).prop_map(|(n, d)| match d {
            Some(d) => Property::boolean(n).default(d),
            None => Property::boolean(n),
        }),
        (name, prop::option::of(-1000i64..1000), prop::option::of((-1000i64..0, 0i64..1000))).prop_map(|(n, d, r)| {
            let mut p = Property::integer(n);
            if let Some((lo, hi)) = r {
                p = p.range(lo, hi);
            }
            if let Some(d) = d {
                // Keep the default inside the range, or the registry refuses the tool.
                let d = r.map_or(d, |(lo, hi)| d.clamp(lo, hi));
                p = p.default(d);
            }
            p
        }),
        (name, prop::option::of("[ -~]{0,20}")).prop_map(|(n, d)| match d {
            Some(d) => Property::string(n).default(d),
            None => Property::string(n),
        }),
    ]
}

fn tool_spec() -> impl Strategy<Value = ToolSpec> {
    (
        "[A-Za-z0-9_.-]{1,40}",
        description(),
        prop::collection::vec(property(), 0..5),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(name, description, mut properties, user_only)| {
            // Property names are unique within a tool.
            let mut seen = std::collections::BTreeSet::new();
            properties.retain(|p| seen.insert(p.name.clone()));
            ToolSpec { name, description, properties, user_only }
        })
}

fn build(specs: &[ToolSpec], limit: usize) -> (McpServer<Dev>, Vec<(String, bool)>) {
    let mut server = McpServer::new("b", "1", Dev::default()).with_page_limit(limit);
    let mut registered = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        // Unique names: an index prefix, then the random part.
        let name = format!("t{i}.{}", spec.name);
        let mut tool = Tool::new(name.clone(), spec.description.clone(), nop);
        tool.properties = spec.properties.clone();
        tool.user_only = spec.user_only;
        let json_len = tool_json(&tool).len();
        match server.add_tool(tool) {
            Ok(()) => registered.push((name, spec.user_only)),
            Err(RegistryError::TooLarge { tool, bytes, limit: l }) => {
                assert_eq!(tool, name);
                assert_eq!(l, limit);
                assert!(bytes > limit);
                assert!(bytes > json_len);
            }
            Err(e) => panic!("unexpected registry error {e:?}"),
        }
    }
    (server, registered)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn following_next_cursor_lists_every_visible_tool_once_in_order(
        specs in prop::collection::vec(tool_spec(), 0..40),
        limit in prop_oneof![300usize..1500, 1500usize..9000, Just(8000usize)],
        with_user_tools in any::<bool>(),
    ) {
        let (mut server, registered) = build(&specs, limit);
        let visible: Vec<String> =
            registered.iter().filter(|(_, user_only)| with_user_tools || !user_only).map(|(n, _)| n.clone()).collect();
        let jsons: std::collections::HashMap<String, String> =
            server.tools().iter().map(|t| (t.name.to_string(), tool_json(t))).collect();

        let mut listed: Vec<String> = Vec::new();
        let mut cursor = String::new();
        let mut pages = 0;
        loop {
            pages += 1;
            // Each page but an empty registry's holds at least one tool, so this many pages is the most.
            prop_assert!(pages <= visible.len().max(1), "more pages than tools");
            let reply = server.handle(&list_request(pages as u32, &cursor, with_user_tools)).unwrap();
            let result = result_text(&reply, &pages.to_string());
            prop_assert!(result.len() <= limit, "page of {} bytes over the limit {}", result.len(), limit);
            let page = parse(result);
            let names: Vec<String> =
                page["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
            // Every tool on the page is shown exactly as push_json writes it.
            let expected_tools: Vec<&str> = names.iter().map(|n| jsons[n].as_str()).collect();
            let tools_text = format!(r#"{{"tools":[{}]"#, expected_tools.join(","));
            prop_assert!(result.starts_with(&tools_text));
            prop_assert!(!names.is_empty() || visible.is_empty(), "an empty page in the middle");
            listed.extend(names.iter().cloned());
            match page.get("nextCursor") {
                Some(c) => {
                    let c = c.as_str().unwrap().to_string();
                    prop_assert_eq!(result, format!(r#"{tools_text},"nextCursor":{}}}"#, serde_json::Value::from(c.as_str())));
                    // Greedy: the next tool (with the room its own cursor would need) did not fit.
                    let pos = visible.iter().position(|n| *n == c).expect("the cursor names a visible tool");
                    let cursor_room = visible.get(pos + 1).map_or(0, |n| r#","nextCursor":"#.len() + n.len() + 2);
                    // `{"tools":[…` + `,` + the tool + `]}` + its cursor room.
                    let needed = tools_text.len() + 1 + jsons[&c].len() + 2 + cursor_room;
                    prop_assert!(needed > limit, "page was not full: {} more bytes would fit", limit - needed);
                    cursor = c;
                }
                None => {
                    prop_assert_eq!(result, format!("{tools_text}}}"));
                    break;
                }
            }
        }
        prop_assert_eq!(listed, visible);
    }
}
