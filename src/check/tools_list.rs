//! `tools/list`: paging, uniqueness, stable order, `withUserTools`, invalid cursors, page size,
//! and each tool's declaration (MCP spec: Tools, Pagination; reference §4.3, §4.4).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::conn::Conn;
use super::Results;

const REF_PAGING: &str = "MCP spec: Pagination; xiaozhi-protocol.md §4.3";
const REF_TOOLS: &str = "MCP spec: Tools (Tool definition)";
const REF_PAGE_SIZE: &str = "xiaozhi-protocol.md §4.3 (max_payload_size 8000)";
const PAGE_LIMIT: usize = 8000;
const MAX_PAGES: usize = 1000;

/// The tools as listed without and with `withUserTools`.
#[derive(Debug, Clone)]
pub struct Listing {
    pub plain: Vec<Value>,
    pub user: Vec<Value>,
}

struct Walk {
    tools: Vec<Value>,
    /// Problems with cursor progress (a fail each).
    problems: Vec<String>,
    empty_cursor_end: bool,
    largest_page: usize,
}

async fn walk(conn: &mut Conn, with_user: bool) -> Result<Walk, String> {
    let mut w = Walk { tools: Vec::new(), problems: Vec::new(), empty_cursor_end: false, largest_page: 0 };
    let mut cursor = String::new();
    let mut seen = HashSet::new();
    for _ in 0..MAX_PAGES {
        let reply = conn.request("tools/list", json!({"cursor": cursor, "withUserTools": with_user})).await.map_err(|e| format!("tools/list: {e}"))?;
        let Some(result) = reply.payload.get("result") else {
            return Err(format!("tools/list (cursor {cursor:?}) failed: {}", reply.payload["error"]));
        };
        w.largest_page = w.largest_page.max(result.to_string().len());
        let Some(page) = result["tools"].as_array() else {
            return Err(format!("tools/list result has no tools array: {result:.200}"));
        };
        w.tools.extend(page.iter().cloned());
        match &result["nextCursor"] {
            Value::Null => return Ok(w),
            Value::String(c) if c.is_empty() => {
                w.empty_cursor_end = true;
                return Ok(w);
            }
            Value::String(c) => {
                if !seen.insert(c.clone()) {
                    w.problems.push(format!("nextCursor {c:?} came twice: the listing would never end"));
                    return Ok(w);
                }
                if page.is_empty() {
                    w.problems.push(format!("an empty page with nextCursor {c:?}"));
                }
                cursor = c.clone();
            }
            other => {
                w.problems.push(format!("nextCursor is {other}, not a string"));
                return Ok(w);
            }
        }
    }
    w.problems.push(format!("more than {MAX_PAGES} pages"));
    Ok(w)
}

fn names(tools: &[Value]) -> Vec<String> {
    tools.iter().map(|t| t["name"].as_str().unwrap_or("<no name>").to_string()).collect()
}

fn is_user_only(t: &Value) -> bool {
    t["annotations"]["audience"].as_array().is_some_and(|a| a.iter().any(|v| v == "user") && !a.iter().any(|v| v == "assistant"))
}

pub async fn check(conn: &mut Conn, r: &mut Results) -> Option<Listing> {
    let first = match walk(conn, false).await {
        Ok(w) => w,
        Err(why) => {
            r.fail("tools_list.paging", why, REF_PAGING);
            for id in ["unique", "stable_order", "user_tools", "invalid_cursor", "page_size", "names", "descriptions", "input_schema"] {
                r.skip(format!("tools_list.{id}"), "skipped: tools/list failed", REF_TOOLS);
            }
            return None;
        }
    };
    if !first.problems.is_empty() {
        r.fail("tools_list.paging", first.problems.join("; "), REF_PAGING);
    } else if first.empty_cursor_end {
        r.warn("tools_list.paging", "the last page says nextCursor:\"\" instead of leaving it out (backends must treat \"\" as the end)", REF_PAGING);
    } else {
        r.pass("tools_list.paging", format!("{} tool(s); the last page has no nextCursor", first.tools.len()), REF_PAGING);
    }
    let list = names(&first.tools);
    let mut seen = HashSet::new();
    let dups: Vec<&String> = list.iter().filter(|n| !seen.insert(*n)).collect();
    if dups.is_empty() {
        r.pass("tools_list.unique", "every tool is listed exactly once", REF_PAGING);
    } else {
        r.fail("tools_list.unique", format!("listed more than once: {}", join(dups)), REF_PAGING);
    }
    let second = walk(conn, false).await;
    match &second {
        Ok(w) if names(&w.tools) == list => r.pass("tools_list.stable_order", "a second listing gives the same tools in the same order", REF_PAGING),
        Ok(w) => r.fail("tools_list.stable_order", format!("a second listing differs: {:?} vs {:?}", trim(&names(&w.tools)), trim(&list)), REF_PAGING),
        Err(why) => r.fail("tools_list.stable_order", format!("a second listing failed: {why}"), REF_PAGING),
    }
    let with_user = walk(conn, true).await;
    let user = match with_user {
        Ok(w) => {
            let all = names(&w.tools);
            let leaked_names: Vec<String> = first.tools.iter().filter(|t| is_user_only(t)).map(|t| t["name"].as_str().unwrap_or("?").to_string()).collect();
            let missing: Vec<&String> = list.iter().filter(|n| !all.contains(n)).collect();
            let added: Vec<&Value> = w.tools.iter().filter(|t| !list.iter().any(|n| t["name"] == n.as_str())).collect();
            let unmarked: Vec<&str> = added.iter().filter(|t| !is_user_only(t)).filter_map(|t| t["name"].as_str()).collect();
            if !leaked_names.is_empty() {
                r.fail("tools_list.user_tools", format!("user-only tools are listed without withUserTools: {}", leaked_names.join(", ")), REF_PAGING);
            } else if !missing.is_empty() {
                r.fail("tools_list.user_tools", format!("withUserTools:true drops tools: {}", join(missing)), REF_PAGING);
            } else if !unmarked.is_empty() {
                r.warn("tools_list.user_tools", format!("withUserTools:true adds tools not marked audience [\"user\"]: {}", unmarked.join(", ")), REF_PAGING);
            } else {
                r.pass("tools_list.user_tools", format!("withUserTools adds {} user-only tool(s)", added.len()), REF_PAGING);
            }
            w.tools
        }
        Err(why) => {
            r.fail("tools_list.user_tools", format!("withUserTools:true: {why}"), REF_PAGING);
            first.tools.clone()
        }
    };
    match conn.request("tools/list", json!({"cursor": "mcpdev-check.no-such-cursor"})).await {
        Ok(reply) if reply.payload.get("error").is_some() => r.pass("tools_list.invalid_cursor", "an unknown cursor gets an error", REF_PAGING),
        Ok(reply) => r.warn("tools_list.invalid_cursor", format!("an unknown cursor got a result, not an error: {:.120}", reply.payload["result"].to_string()), REF_PAGING),
        Err(why) => r.fail("tools_list.invalid_cursor", format!("an unknown cursor: {why}"), REF_PAGING),
    }
    let largest = first.largest_page.max(second.as_ref().map_or(0, |w| w.largest_page));
    if largest <= PAGE_LIMIT {
        r.pass("tools_list.page_size", format!("largest page {largest} B (limit {PAGE_LIMIT} B)"), REF_PAGE_SIZE);
    } else {
        r.fail("tools_list.page_size", format!("a page of {largest} B is over the stock limit of {PAGE_LIMIT} B (MQTT links drop it)"), REF_PAGE_SIZE);
    }
    declarations(&user, r);
    Some(Listing { plain: first.tools, user })
}

/// Per tool: a valid name, a description, an object inputSchema with `required` ⊆ `properties`.
fn declarations(tools: &[Value], r: &mut Results) {
    let bad_names: Vec<String> = tools.iter().filter(|t| !t["name"].as_str().is_some_and(valid_name)).map(|t| t["name"].to_string()).collect();
    if bad_names.is_empty() {
        r.pass("tools_list.names", "every name is 1-128 of [A-Za-z0-9_.-]", REF_TOOLS);
    } else {
        r.fail("tools_list.names", format!("invalid tool names: {}", bad_names.join(", ")), REF_TOOLS);
    }
    let undescribed: Vec<String> = tools.iter().filter(|t| t["description"].as_str().is_none_or(|d| d.trim().is_empty())).map(|t| t["name"].to_string()).collect();
    if undescribed.is_empty() {
        r.pass("tools_list.descriptions", "every tool has a description", REF_TOOLS);
    } else {
        r.warn("tools_list.descriptions", format!("no description (the model cannot tell when to use them): {}", undescribed.join(", ")), REF_TOOLS);
    }
    let problems: Vec<String> = tools.iter().filter_map(|t| schema_problem(&t["inputSchema"]).map(|p| format!("{}: {p}", t["name"]))).collect();
    if problems.is_empty() {
        r.pass("tools_list.input_schema", "every inputSchema is a JSON Schema of type object, required ⊆ properties", REF_TOOLS);
    } else {
        r.fail("tools_list.input_schema", problems.join("; "), REF_TOOLS);
    }
}

pub fn valid_name(n: &str) -> bool {
    (1..=128).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn schema_problem(s: &Value) -> Option<String> {
    if !s.is_object() {
        return Some("no inputSchema object".into());
    }
    if s["type"] != "object" {
        return Some(format!("type is {}, not \"object\"", s["type"]));
    }
    if let Err(e) = jsonschema::meta::validate(s) {
        return Some(format!("not a valid JSON Schema: {e}"));
    }
    let props = s.get("properties").and_then(Value::as_object);
    if s.get("properties").is_some() && props.is_none() {
        return Some("properties is not an object".into());
    }
    let required = s.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let missing: Vec<String> = required.iter().filter(|n| !n.as_str().is_some_and(|n| props.is_some_and(|p| p.contains_key(n)))).map(Value::to_string).collect();
    (!missing.is_empty()).then(|| format!("required names undeclared properties {}", missing.join(", ")))
}

fn join(v: Vec<&String>) -> String {
    v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

fn trim(v: &[String]) -> Vec<&str> {
    v.iter().take(8).map(String::as_str).collect()
}
