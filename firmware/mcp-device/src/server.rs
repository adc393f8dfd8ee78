//! The device's MCP server: one JSON-RPC message in, at most one reply out.
//!
//! Behaviour follows the stock xiaozhi firmware (`main/mcp_server.cc`) where backends depend on
//! it, and is stricter or more standard where that is safe:
//! - replies carry JSON-RPC error codes (the stock firmware sends none) and are escaped properly;
//! - string ids are answered (the stock firmware drops them), `ping` is answered;
//! - malformed input gets -32700 / -32600 instead of silence, and never a panic;
//! - an argument of the wrong type is an error instead of a silent fall back to its default,
//!   and a fractional number for an integer is an error instead of being truncated (a whole
//!   number written as `50.0` is 50; one beyond the i64 range is a range error);
//! - a tool with two properties of one name is refused at registration.

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::json::{push_str_literal, str_literal_len};
use crate::outbox::Outbox;
use crate::rpc::{self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError};
use crate::schema::PropertyKind;
use crate::tool::{ArgValue, Arguments, Call, Tool};

/// The protocol version the device answers, whatever the client asks (as the stock firmware).
pub const PROTOCOL_VERSION: &str = "2024-11-05";
/// The stock firmware's `max_payload_size` for one `tools/list` result.
pub const DEFAULT_PAGE_LIMIT: usize = 8000;

/// Where the device uploads camera photos, as given in `initialize`'s `capabilities.vision`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vision {
    pub url: String,
    pub token: String,
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryError {
    /// Names are 1 to 128 characters of `A-Z a-z 0-9 _ . -` (MCP's tool name rule).
    BadName(String),
    Duplicate(String),
    BadProperty { tool: String, property: String, reason: &'static str },
    /// The tool's JSON alone is larger than a `tools/list` page could carry.
    TooLarge { tool: String, bytes: usize, limit: usize },
}

/// The MCP server of one device, owning the device state `S` its tools act on.
pub struct McpServer<S> {
    name: Cow<'static, str>,
    version: Cow<'static, str>,
    tools: Vec<Tool<S>>,
    /// The length of each tool's JSON in `tools/list`, measured at registration (same index as `tools`).
    json_lens: Vec<usize>,
    page_limit: usize,
    vision: Option<Vision>,
    outbox: Outbox,
    state: S,
}

impl<S> McpServer<S> {
    /// A server named `name`/`version` (its `serverInfo`) with no tools.
    pub fn new(name: impl Into<Cow<'static, str>>, version: impl Into<Cow<'static, str>>, state: S) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            tools: Vec::new(),
            json_lens: Vec::new(),
            page_limit: DEFAULT_PAGE_LIMIT,
            vision: None,
            outbox: Outbox::default(),
            state,
        }
    }

    /// Sets the largest `tools/list` result, in bytes of JSON text. Set it before adding tools.
    pub fn with_page_limit(mut self, bytes: usize) -> Self {
        self.page_limit = bytes;
        self
    }

    /// Registers a tool. Names are unique; a tool too large for any page is refused here rather
    /// than making every later tool unlistable (the stock firmware's failure).
    pub fn add_tool(&mut self, tool: Tool<S>) -> Result<(), RegistryError> {
        if !is_valid_tool_name(&tool.name) {
            return Err(RegistryError::BadName(tool.name.into_owned()));
        }
        if self.tools.iter().any(|t| t.name == tool.name) {
            return Err(RegistryError::Duplicate(tool.name.into_owned()));
        }
        for (i, p) in tool.properties.iter().enumerate() {
            // Two properties of one name would give `properties` a duplicate key (a client keeps
            // only one of them) and list the name twice in `required`.
            let duplicate = tool.properties[..i].iter().any(|q| q.name == p.name);
            p.check().and(if duplicate { Err("duplicate property name") } else { Ok(()) }).map_err(|reason| {
                RegistryError::BadProperty {
                    tool: tool.name.clone().into_owned(),
                    property: p.name.clone().into_owned(),
                    reason,
                }
            })?;
        }
        let mut json = String::new();
        tool.push_json(&mut json);
        // Alone on a page, with room for a `nextCursor` naming the longest possible next tool.
        let alone = PAGE_OPEN.len() + json.len() + PAGE_CLOSE.len() + NEXT_CURSOR_KEY.len() + MAX_NAME_LEN + 2;
        if alone > self.page_limit {
            return Err(RegistryError::TooLarge { tool: tool.name.into_owned(), bytes: alone, limit: self.page_limit });
        }
        self.tools.push(tool);
        self.json_lens.push(json.len());
        Ok(())
    }

    pub fn tools(&self) -> &[Tool<S>] {
        &self.tools
    }

    pub fn vision(&self) -> Option<&Vision> {
        self.vision.as_ref()
    }

    pub fn state(&self) -> &S {
        &self.state
    }

    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// Notifications the device wants to send (tools queue them; so can the board).
    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    /// Handles one JSON-RPC message; returns the reply text, or `None` when none is due
    /// (notifications, responses).
    pub fn handle(&mut self, message: &str) -> Option<String> {
        let mut out = String::new();
        self.handle_into(message, &mut out).then_some(out)
    }

    /// Like [`handle`](Self::handle), appending the reply to `out`; `true` if anything was written.
    pub fn handle_into(&mut self, message: &str, out: &mut String) -> bool {
        let page = match serde_json::from_str::<Value>(message) {
            Ok(v) => match self.answer(&v, out) {
                Answer::Written(replied) => return replied,
                Answer::Page(page) => page,
            },
            Err(e) => {
                let err = RpcError::new(PARSE_ERROR, format!("Parse error: {e}"));
                rpc::push_error(out, &Value::Null, &err);
                return true;
            }
        };
        // The parsed request is dropped by now: it is not live next to the page.
        self.write_page(&page, out);
        true
    }

    /// Handles an already parsed message (e.g. the `payload` of an envelope). A `tools/list`
    /// page is not written yet but returned, so the caller can drop the parsed message first
    /// and then [`write_page`](Self::write_page).
    pub(crate) fn answer(&mut self, msg: &Value, out: &mut String) -> Answer {
        let Some(obj) = msg.as_object() else {
            let what = if msg.is_array() { "Batches are not supported" } else { "Invalid Request: not an object" };
            rpc::push_error(out, &Value::Null, &RpcError::new(INVALID_REQUEST, what));
            return Answer::Written(true);
        };
        let id = obj.get("id");
        let method = obj.get("method");
        // A response (result/error, no method) or a notification never gets a reply.
        if method.is_none() && (obj.contains_key("result") || obj.contains_key("error")) {
            return Answer::Written(false);
        }
        let is_notification = id.is_none();
        let reply_id = match id {
            Some(v @ (Value::Number(_) | Value::String(_))) => v.clone(),
            _ => Value::Null,
        };
        let invalid = |out: &mut String, msg: &str| {
            rpc::push_error(out, &reply_id, &RpcError::new(INVALID_REQUEST, msg));
            Answer::Written(true)
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return if is_notification { Answer::Written(false) } else { invalid(out, "Invalid Request: jsonrpc must be \"2.0\"") };
        }
        let Some(method) = method.and_then(Value::as_str) else {
            return if is_notification { Answer::Written(false) } else { invalid(out, "Invalid Request: method must be a string") };
        };
        if is_notification || method.starts_with("notifications/") {
            return Answer::Written(false);
        }
        if reply_id.is_null() {
            return invalid(out, "Invalid Request: id must be a number or a string");
        }
        let empty = Map::new();
        let params = match obj.get("params") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => {
                rpc::push_error(out, &reply_id, &RpcError::new(INVALID_PARAMS, "Invalid params: must be an object"));
                return Answer::Written(true);
            }
        };
        if method == "tools/list" {
            return match self.plan_page(params) {
                Ok((first, with_user)) => Answer::Page(Page { id: reply_id, first, with_user }),
                Err(e) => {
                    rpc::push_error(out, &reply_id, &e);
                    Answer::Written(true)
                }
            };
        }
        let start = out.len();
        rpc::push_reply_head(out, &reply_id);
        let result = match method {
            "initialize" => {
                self.initialize(params, out);
                Ok(())
            }
            "tools/call" => self.call_tool(obj.get("params"), out),
            "ping" => {
                out.push_str("\"result\":{}}");
                Ok(())
            }
            _ => Err(RpcError::new(METHOD_NOT_FOUND, format!("Method not implemented: {method}"))),
        };
        if let Err(e) = result {
            out.truncate(start);
            rpc::push_error(out, &reply_id, &e);
        }
        Answer::Written(true)
    }

    fn initialize(&mut self, params: &Map<String, Value>, out: &mut String) {
        let vision = params.get("capabilities").and_then(|c| c.get("vision"));
        if let Some(url) = vision.and_then(|v| v.get("url")).and_then(Value::as_str) {
            let token = vision.and_then(|v| v.get("token")).and_then(Value::as_str).unwrap_or_default();
            self.vision = Some(Vision { url: url.into(), token: token.into() });
        }
        out.push_str("\"result\":{\"protocolVersion\":\"");
        out.push_str(PROTOCOL_VERSION);
        out.push_str("\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":");
        push_str_literal(out, &self.name);
        out.push_str(",\"version\":");
        push_str_literal(out, &self.version);
        out.push_str("}}}");
    }

    /// Reads a `tools/list` request: the index of the first tool of the page (the one named by
    /// `cursor`, inclusive) and whether user-only tools are listed.
    fn plan_page(&self, params: &Map<String, Value>) -> Result<(usize, bool), RpcError> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => "",
            Some(Value::String(c)) => c.as_str(),
            Some(_) => return Err(RpcError::new(INVALID_PARAMS, "Invalid cursor: must be a string")),
        };
        // `withSystemTools` is the name before 2025-09-11; `withUserTools` wins when both are given.
        let with_user = ["withUserTools", "withSystemTools"]
            .iter()
            .find_map(|k| params.get(*k).map(|v| (k, v)))
            .map(|(k, v)| v.as_bool().ok_or_else(|| RpcError::new(INVALID_PARAMS, format!("{k} must be a boolean"))))
            .transpose()?
            .unwrap_or(false);
        let first = if cursor.is_empty() {
            0
        } else {
            self.tools
                .iter()
                .position(|t| t.name == cursor)
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, format!("Invalid cursor: {cursor}")))?
        };
        Ok((first, with_user))
    }

    /// Writes the whole reply to a `tools/list` request: one page of tools.
    ///
    /// A page holds as many visible tools as fit in `page_limit` bytes of result text, including
    /// the `nextCursor` it may need. `nextCursor` names the first tool of the next page and is left
    /// out on the last page.
    ///
    /// Which tools fit is worked out from their JSON lengths, measured at registration; the page
    /// is then written once, straight into a reply buffer reserved for its size. Its heap is the
    /// page, whatever the number of tools, with no scratch copy of a tool.
    pub(crate) fn write_page(&self, page: &Page, out: &mut String) {
        let visible = |i: &usize| page.with_user || !self.tools[*i].user_only;
        let mut candidates = (page.first..self.tools.len()).filter(visible).peekable();
        let mut used = PAGE_OPEN.len();
        let mut end = page.first;
        let mut next = None;
        while let Some(i) = candidates.next() {
            let separator = usize::from(end > page.first);
            let cursor_room = candidates.peek().map_or(0, |&n| NEXT_CURSOR_KEY.len() + str_literal_len(&self.tools[n].name));
            if used + separator + self.json_lens[i] + PAGE_CLOSE.len() + cursor_room > self.page_limit {
                if end == page.first {
                    let why = format!("Failed to add tool {} because of payload size limit", self.tools[i].name);
                    rpc::push_error(out, &page.id, &RpcError::new(INTERNAL_ERROR, why));
                    return;
                }
                next = Some(&self.tools[i].name);
                break;
            }
            used += separator + self.json_lens[i];
            end = i + 1;
        }
        let cursor_len = next.map_or(0, |n| NEXT_CURSOR_KEY.len() + str_literal_len(n));

        rpc::push_reply_head(out, &page.id);
        out.push_str("\"result\":");
        // The slack is for what a caller closes the reply with (an envelope's `}`).
        out.reserve(used + PAGE_CLOSE.len() + cursor_len + 1 + 16);
        let page_start = out.len();
        out.push_str(PAGE_OPEN);
        for (n, i) in (page.first..end).filter(visible).enumerate() {
            if n > 0 {
                out.push(',');
            }
            self.tools[i].push_json(out);
        }
        debug_assert_eq!(out.len() - page_start, used, "a tool's JSON changed after registration");
        out.push(']');
        if let Some(name) = next {
            out.push_str(NEXT_CURSOR_KEY);
            push_str_literal(out, name);
        }
        out.push_str("}}");
    }

    fn call_tool(&mut self, params: Option<&Value>, out: &mut String) -> Result<(), RpcError> {
        let invalid = |m: String| RpcError::new(INVALID_PARAMS, m);
        let Some(params) = params.and_then(Value::as_object) else {
            return Err(invalid("Missing params".into()));
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(invalid("Missing name".into()));
        };
        let given = match params.get("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(a)) => Some(a),
            Some(_) => return Err(invalid("Invalid arguments".into())),
        };
        let Some(tool) = self.tools.iter().find(|t| t.name == name) else {
            return Err(invalid(format!("Unknown tool: {name}")));
        };
        let args = validate(tool, given)?;
        let handler = tool.handler;
        let mut call = Call { name, args, outbox: &mut self.outbox };
        match handler(&mut self.state, &mut call) {
            Ok(output) => {
                out.push_str("\"result\":");
                output.push_json(out);
                out.push('}');
                Ok(())
            }
            Err(e) => Err(RpcError::new(INTERNAL_ERROR, e.0)),
        }
    }
}

/// What [`McpServer::answer`] did with a message.
pub(crate) enum Answer {
    /// The reply was written (`true`), or none is due (`false`).
    Written(bool),
    /// A `tools/list` request, whose reply is still to be written by [`McpServer::write_page`].
    Page(Page),
}

/// A `tools/list` request, read out of its parsed message.
pub(crate) struct Page {
    id: Value,
    first: usize,
    with_user: bool,
}

const MAX_NAME_LEN: usize = 128;

fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

const PAGE_OPEN: &str = "{\"tools\":[";
const PAGE_CLOSE: &str = "]}";
const NEXT_CURSOR_KEY: &str = ",\"nextCursor\":";

/// Checks the given arguments against the tool's declared properties, in declaration order, and
/// fills in defaults. Undeclared arguments are ignored, as in the stock firmware.
fn validate<S>(tool: &Tool<S>, given: Option<&Map<String, Value>>) -> Result<Arguments, RpcError> {
    let mut args = Arguments::default();
    for p in &tool.properties {
        let value = given.and_then(|g| g.get(p.name.as_ref())).filter(|v| !v.is_null());
        let error = |message: String| {
            // Inserted, not collected: `Map::from_iter` sorts, and that sort costs the firmware ~6 KB.
            let mut argument = Map::new();
            argument.insert(String::from("argument"), Value::from(p.name.as_ref()));
            RpcError::new(INVALID_PARAMS, message).with_data(Value::Object(argument))
        };
        let Some(value) = value else {
            match p.default_value() {
                Some(d) => {
                    args.push(&p.name, to_arg(&d));
                    continue;
                }
                None => return Err(error(format!("Missing valid argument: {}", p.name))),
            }
        };
        let wrong_type = || error(format!("Invalid type for argument: {} (expected {})", p.name, p.type_name()));
        let arg = match (&p.kind, value) {
            (PropertyKind::Boolean { .. }, Value::Bool(b)) => ArgValue::Bool(*b),
            (PropertyKind::String { .. }, Value::String(s)) => ArgValue::Str(s.clone()),
            (PropertyKind::Integer { minimum, maximum, .. }, Value::Number(n)) => {
                let below = |lo: i64| error(format!("Value is below minimum allowed: {lo}"));
                let above = |hi: i64| error(format!("Value exceeds maximum allowed: {hi}"));
                let i = match integer_value(n) {
                    Integer::Fits(i) => i,
                    // A whole number beyond i64 is out of range, not of the wrong type.
                    Integer::TooSmall => return Err(below(minimum.unwrap_or(i64::MIN))),
                    Integer::TooLarge => return Err(above(maximum.unwrap_or(i64::MAX))),
                    Integer::Fraction => return Err(wrong_type()),
                };
                if let Some(lo) = minimum.filter(|lo| i < *lo) {
                    return Err(below(lo));
                }
                if let Some(hi) = maximum.filter(|hi| i > *hi) {
                    return Err(above(hi));
                }
                ArgValue::Int(i)
            }
            _ => return Err(wrong_type()),
        };
        args.push(&p.name, arg);
    }
    Ok(args)
}

enum Integer {
    Fits(i64),
    TooSmall,
    TooLarge,
    Fraction,
}

/// A JSON number as an integer argument: `50` and `50.0` are 50, `50.9` is not an integer.
fn integer_value(n: &serde_json::Number) -> Integer {
    if let Some(i) = n.as_i64() {
        return Integer::Fits(i);
    }
    if n.as_u64().is_some() {
        return Integer::TooLarge;
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    // 2^63: floats this large are all whole, and every f64 in [-2^63, 2^63) that is whole
    // converts to i64 exactly.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f >= LIMIT {
        Integer::TooLarge
    } else if f < -LIMIT {
        Integer::TooSmall
    } else if (f as i64) as f64 == f {
        Integer::Fits(f as i64)
    } else {
        Integer::Fraction
    }
}

fn to_arg(v: &Value) -> ArgValue {
    match v {
        Value::Bool(b) => ArgValue::Bool(*b),
        Value::Number(n) => ArgValue::Int(n.as_i64().unwrap_or_default()),
        Value::String(s) => ArgValue::Str(s.clone()),
        _ => ArgValue::Str(String::new()),
    }
}
