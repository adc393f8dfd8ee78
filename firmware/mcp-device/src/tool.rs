//! Tools: what a board or simulator registers, the arguments a call receives, what it returns.

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::json::{push_str_literal, push_value};
use crate::outbox::Outbox;
use crate::schema::{Property, push_input_schema};

/// A tool handler: a plain function over the device's own state, so a registry costs no
/// allocation per handler and needs no `Arc` (the ESP32-C3 has no atomic compare-and-swap).
pub type Handler<S> = fn(&mut S, &mut Call<'_>) -> Result<ToolOutput, ToolError>;

/// One tool as registered.
pub struct Tool<S> {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    pub properties: Vec<Property>,
    /// Listed only when the client asks for user tools (`withUserTools`); still callable.
    pub user_only: bool,
    pub handler: Handler<S>,
}

impl<S> Tool<S> {
    pub fn new(name: impl Into<Cow<'static, str>>, description: impl Into<Cow<'static, str>>, handler: Handler<S>) -> Self {
        Self { name: name.into(), description: description.into(), properties: Vec::new(), user_only: false, handler }
    }

    pub fn property(mut self, p: Property) -> Self {
        self.properties.push(p);
        self
    }

    pub fn user_only(mut self) -> Self {
        self.user_only = true;
        self
    }

    /// Appends the tool's JSON as `tools/list` shows it.
    pub fn push_json(&self, out: &mut String) {
        out.push_str("{\"name\":");
        push_str_literal(out, &self.name);
        out.push_str(",\"description\":");
        push_str_literal(out, &self.description);
        out.push_str(",\"inputSchema\":");
        push_input_schema(out, &self.properties);
        if self.user_only {
            out.push_str(",\"annotations\":{\"audience\":[\"user\"]}");
        }
        out.push('}');
    }
}

/// A validated argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// The arguments of one call, after validation: every declared property has a value (given or default).
#[derive(Debug, Default)]
pub struct Arguments {
    values: Vec<(String, ArgValue)>,
}

impl Arguments {
    pub(crate) fn push(&mut self, name: &str, v: ArgValue) {
        self.values.push((name.to_string(), v));
    }

    pub fn get(&self, name: &str) -> Option<&ArgValue> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn int(&self, name: &str) -> Result<i64, ToolError> {
        match self.get(name) {
            Some(ArgValue::Int(i)) => Ok(*i),
            _ => Err(ToolError::property_not_found(name)),
        }
    }

    pub fn bool(&self, name: &str) -> Result<bool, ToolError> {
        match self.get(name) {
            Some(ArgValue::Bool(b)) => Ok(*b),
            _ => Err(ToolError::property_not_found(name)),
        }
    }

    pub fn str(&self, name: &str) -> Result<&str, ToolError> {
        match self.get(name) {
            Some(ArgValue::Str(s)) => Ok(s),
            _ => Err(ToolError::property_not_found(name)),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ArgValue)> {
        self.values.iter().map(|(n, v)| (n.as_str(), v))
    }
}

/// What a handler sees of the call: the tool's name, its arguments and the notification outbox.
pub struct Call<'a> {
    pub name: &'a str,
    pub args: Arguments,
    pub outbox: &'a mut Outbox,
}

/// One content block of a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// Base64 data with its MIME type (standard MCP shape, unlike the stock firmware's).
    Image { data: String, mime_type: String },
    Audio { data: String, mime_type: String },
    /// An embedded text resource.
    Resource { uri: String, mime_type: String, text: String },
}

impl Content {
    fn push_json(&self, out: &mut String) {
        let (kind, fields): (&str, [(&str, &str); 3]) = match self {
            Content::Text(t) => ("text", [("text", t), ("", ""), ("", "")]),
            Content::Image { data, mime_type } => ("image", [("data", data), ("mimeType", mime_type), ("", "")]),
            Content::Audio { data, mime_type } => ("audio", [("data", data), ("mimeType", mime_type), ("", "")]),
            Content::Resource { uri, mime_type, text } => {
                out.push_str("{\"type\":\"resource\",\"resource\":{\"uri\":");
                push_str_literal(out, uri);
                out.push_str(",\"mimeType\":");
                push_str_literal(out, mime_type);
                out.push_str(",\"text\":");
                push_str_literal(out, text);
                out.push_str("}}");
                return;
            }
        };
        out.push_str("{\"type\":\"");
        out.push_str(kind);
        out.push('"');
        for (key, value) in fields.iter().filter(|(k, _)| !k.is_empty()) {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":");
            push_str_literal(out, value);
        }
        out.push('}');
    }
}

/// A tool's result: `{"content":[…],"isError":…}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(t: impl Into<String>) -> Self {
        Self { content: alloc::vec![Content::Text(t.into())], is_error: false }
    }

    /// A JSON value returned as its serialized text, as the stock firmware does for `cJSON*`.
    pub fn json(v: &serde_json::Value) -> Self {
        let mut s = String::new();
        push_value(&mut s, v);
        Self::text(s)
    }

    /// A failure reported as a result with `isError: true` (the MCP way for tool errors).
    pub fn error(t: impl Into<String>) -> Self {
        Self { content: alloc::vec![Content::Text(t.into())], is_error: true }
    }

    pub fn with(mut self, c: Content) -> Self {
        self.content.push(c);
        self
    }

    pub(crate) fn push_json(&self, out: &mut String) {
        out.push_str("{\"content\":[");
        for (i, c) in self.content.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            c.push_json(out);
        }
        out.push_str(if self.is_error { "],\"isError\":true}" } else { "],\"isError\":false}" });
    }
}

impl From<bool> for ToolOutput {
    fn from(b: bool) -> Self {
        Self::text(if b { "true" } else { "false" })
    }
}
impl From<i64> for ToolOutput {
    fn from(i: i64) -> Self {
        Self::text(i.to_string())
    }
}
impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        Self::text(s)
    }
}
impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

/// A failure the handler reports as a JSON-RPC error (-32603), as the stock firmware does for a
/// thrown exception.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }

    fn property_not_found(name: &str) -> Self {
        Self(alloc::format!("Property not found: {name}"))
    }
}
