//! Tool properties and the `inputSchema` they generate.
//!
//! Like the stock firmware, a property is a boolean, an integer (with an optional range) or a
//! string, each with an optional default; a property without a default is required. The schema
//! text has the stock key order: `type, default, minimum, maximum`.

use alloc::borrow::Cow;
use alloc::string::String;

use crate::json::{push_int, push_str_literal};

/// The type of a property, with its default and (for integers) its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyKind {
    Boolean { default: Option<bool> },
    Integer { default: Option<i64>, minimum: Option<i64>, maximum: Option<i64> },
    String { default: Option<Cow<'static, str>> },
}

/// One declared argument of a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub name: Cow<'static, str>,
    pub kind: PropertyKind,
}

impl Property {
    pub fn boolean(name: impl Into<Cow<'static, str>>) -> Self {
        Self { name: name.into(), kind: PropertyKind::Boolean { default: None } }
    }

    pub fn integer(name: impl Into<Cow<'static, str>>) -> Self {
        Self { name: name.into(), kind: PropertyKind::Integer { default: None, minimum: None, maximum: None } }
    }

    pub fn string(name: impl Into<Cow<'static, str>>) -> Self {
        Self { name: name.into(), kind: PropertyKind::String { default: None } }
    }

    /// Sets an integer's inclusive range. No effect on other kinds.
    pub fn range(mut self, min: i64, max: i64) -> Self {
        if let PropertyKind::Integer { minimum, maximum, .. } = &mut self.kind {
            *minimum = Some(min);
            *maximum = Some(max);
        }
        self
    }

    /// Gives a default (which makes the property optional). A default of another kind than the
    /// property is ignored; the registry rejects an integer default outside the range.
    pub fn default(mut self, value: impl Into<DefaultValue>) -> Self {
        match (&mut self.kind, value.into()) {
            (PropertyKind::Boolean { default }, DefaultValue::Bool(b)) => *default = Some(b),
            (PropertyKind::Integer { default, .. }, DefaultValue::Int(i)) => *default = Some(i),
            (PropertyKind::String { default }, DefaultValue::Str(s)) => *default = Some(s),
            _ => {}
        }
        self
    }

    /// Required means: no default.
    pub fn is_required(&self) -> bool {
        match &self.kind {
            PropertyKind::Boolean { default } => default.is_none(),
            PropertyKind::Integer { default, .. } => default.is_none(),
            PropertyKind::String { default } => default.is_none(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self.kind {
            PropertyKind::Boolean { .. } => "boolean",
            PropertyKind::Integer { .. } => "integer",
            PropertyKind::String { .. } => "string",
        }
    }

    /// The default, if any, as a JSON value.
    pub fn default_value(&self) -> Option<serde_json::Value> {
        match &self.kind {
            PropertyKind::Boolean { default } => default.map(serde_json::Value::Bool),
            PropertyKind::Integer { default, .. } => default.map(serde_json::Value::from),
            PropertyKind::String { default } => default.as_ref().map(|s| serde_json::Value::from(s.as_ref())),
        }
    }

    /// `Err(reason)` when the declaration contradicts itself (an out-of-range default, min > max).
    pub fn check(&self) -> Result<(), &'static str> {
        if let PropertyKind::Integer { default, minimum, maximum } = &self.kind {
            if let (Some(lo), Some(hi)) = (minimum, maximum)
                && lo > hi
            {
                return Err("minimum is greater than maximum");
            }
            if let Some(d) = default
                && (minimum.is_some_and(|lo| *d < lo) || maximum.is_some_and(|hi| *d > hi))
            {
                return Err("default is outside the range");
            }
        }
        if self.name.is_empty() {
            return Err("property name is empty");
        }
        Ok(())
    }

    fn push_schema(&self, out: &mut String) {
        out.push_str("{\"type\":\"");
        out.push_str(self.type_name());
        out.push('"');
        match &self.kind {
            PropertyKind::Boolean { default } => {
                if let Some(b) = default {
                    out.push_str(if *b { ",\"default\":true" } else { ",\"default\":false" });
                }
            }
            PropertyKind::Integer { default, minimum, maximum } => {
                for (key, v) in [("default", default), ("minimum", minimum), ("maximum", maximum)] {
                    if let Some(v) = v {
                        out.push_str(",\"");
                        out.push_str(key);
                        out.push_str("\":");
                        push_int(out, *v);
                    }
                }
            }
            PropertyKind::String { default } => {
                if let Some(s) = default {
                    out.push_str(",\"default\":");
                    push_str_literal(out, s);
                }
            }
        }
        out.push('}');
    }
}

/// A default value for [`Property::default`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultValue {
    Bool(bool),
    Int(i64),
    Str(Cow<'static, str>),
}

impl From<bool> for DefaultValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
impl From<i64> for DefaultValue {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}
impl From<i32> for DefaultValue {
    fn from(i: i32) -> Self {
        Self::Int(i.into())
    }
}
impl From<&'static str> for DefaultValue {
    fn from(s: &'static str) -> Self {
        Self::Str(Cow::Borrowed(s))
    }
}
impl From<String> for DefaultValue {
    fn from(s: String) -> Self {
        Self::Str(Cow::Owned(s))
    }
}

/// Appends `{"type":"object","properties":{…},"required":[…]}`; `required` is left out when empty.
pub fn push_input_schema(out: &mut String, properties: &[Property]) {
    out.push_str("{\"type\":\"object\",\"properties\":{");
    for (i, p) in properties.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str_literal(out, &p.name);
        out.push(':');
        p.push_schema(out);
    }
    out.push('}');
    let mut required = properties.iter().filter(|p| p.is_required()).peekable();
    if required.peek().is_some() {
        out.push_str(",\"required\":[");
        for (i, p) in required.enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_str_literal(out, &p.name);
        }
        out.push(']');
    }
    out.push('}');
}
