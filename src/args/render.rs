//! Text for people: a schema node's short summary and phrase, ranges, values, and the one-line
//! [`signature`] of a tool.

use serde_json::Value;
use std::fmt::Write as _;

use super::schema::*;

impl<'a> Ctx<'a> {
    /// A compact description of what `node` allows: `int 0..100`, `"a"|"b"`, `string[]`.
    /// `long` spells `integer`/`boolean` out (for messages).
    pub(super) fn summary(&self, node: &'a Value, long: bool, depth: usize) -> String {
        let node = self.resolve(node);
        if depth > MAX_DEPTH {
            return "…".into();
        }
        match node {
            Value::Bool(false) => return "nothing".into(),
            Value::Object(_) => {}
            _ => return "any".into(),
        }
        if let Some(options) = enum_options(node) {
            return list_values(&options, "|");
        }
        let Some(alts) = self.alternatives(node, depth) else {
            return "any".into();
        };
        let parts: Vec<String> = alts
            .iter()
            .map(|a| match a {
                Alt::Type(t, n) => self.type_summary(t, n, long, depth),
                Alt::Member(m) => self.summary(m, long, depth + 1),
            })
            .collect();
        parts.join("|")
    }

    pub(super) fn type_summary(&self, t: &str, node: &'a Value, long: bool, depth: usize) -> String {
        let range = range_text(node).map(|r| format!(" {r}")).unwrap_or_default();
        match t {
            "integer" if long => format!("integer{range}"),
            "integer" => format!("int{range}"),
            "number" => format!("number{range}"),
            "boolean" if long => "boolean".into(),
            "boolean" => "bool".into(),
            "array" => match node.get("items").filter(|i| i.is_object()) {
                Some(items) => {
                    let s = self.summary(items, long, depth + 1);
                    if s.contains(['|', ' ']) { format!("({s})[]") } else { format!("{s}[]") }
                }
                None => "array".into(),
            },
            other => other.to_string(),
        }
    }

    /// `an integer`, `an integer 0..10`, `one of "a", "b"`: a union member in a sentence.
    pub(super) fn phrase(&self, node: &'a Value, depth: usize) -> String {
        let node = self.resolve(node);
        if let Some(options) = enum_options(node) {
            return match options.as_slice() {
                [one] => show(one),
                _ => format!("one of {}", list_values(&options, ", ")),
            };
        }
        if let Some(t) = node.get("type").and_then(Value::as_str) {
            let range = match t {
                "integer" | "number" => range_text(node).map(|r| format!(" {r}")).unwrap_or_default(),
                _ => String::new(),
            };
            return format!("{}{range}", type_phrase(t));
        }
        self.summary(node, true, depth)
    }

    // -----------------------------------------------------------------------------------------
    // validate helpers

}

/// The range a numeric schema allows: `0..100`, `>=0`, `<100`, `>0 <=100`.
pub(super) fn range_text(node: &Value) -> Option<String> {
    let num = |k: &str| node.get(k).filter(|v| v.is_number());
    // Draft 4: `exclusiveMinimum: true` makes `minimum` exclusive.
    let (lo, lo_excl) = match (num("minimum"), node.get("exclusiveMinimum")) {
        (_, Some(x)) if x.is_number() => (Some(x), true),
        (Some(m), Some(Value::Bool(true))) => (Some(m), true),
        (m, _) => (m, false),
    };
    let (hi, hi_excl) = match (num("maximum"), node.get("exclusiveMaximum")) {
        (_, Some(x)) if x.is_number() => (Some(x), true),
        (Some(m), Some(Value::Bool(true))) => (Some(m), true),
        (m, _) => (m, false),
    };
    match (lo, hi) {
        (None, None) => None,
        (Some(l), Some(h)) if !lo_excl && !hi_excl => Some(format!("{l}..{h}")),
        _ => {
            let mut parts = Vec::new();
            if let Some(l) = lo {
                parts.push(format!("{}{l}", if lo_excl { ">" } else { ">=" }));
            }
            if let Some(h) = hi {
                parts.push(format!("{}{h}", if hi_excl { "<" } else { "<=" }));
            }
            Some(parts.join(" "))
        }
    }
}

/// `message` ("must be an integer, got \"abc\"") with the range `node` allows, when it has one:
/// "must be an integer (allowed 0..100), got \"abc\"", as an out-of-range value is told.
pub(super) fn with_allowed(message: String, node: &Value) -> String {
    match (range_text(node), message.rfind(", got ")) {
        (Some(range), Some(at)) => format!("{} (allowed {range}){}", &message[..at], &message[at..]),
        _ => message,
    }
}

pub(super) fn bound_message(rule: &str, limit: &Value, node: Option<&Value>, got: &str) -> String {
    let node = node.filter(|n| {
        let has = |k: &str| n.get(k).is_some_and(Value::is_number) || n.get(k).is_some_and(|v| v == &Value::Bool(true));
        (has("minimum") || has("exclusiveMinimum")) && (has("maximum") || has("exclusiveMaximum"))
    });
    match node.and_then(range_text) {
        Some(range) => format!("must be {rule} {limit} (allowed {range}), got {got}"),
        None => format!("must be {rule} {limit}, got {got}"),
    }
}

pub(super) fn type_phrase(t: &str) -> &str {
    match t {
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "a boolean",
        "array" => "an array",
        "object" => "an object",
        "null" => "null",
        other => other,
    }
}

pub(super) fn plural(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

pub(super) fn chars(n: u64) -> String {
    plural(n, "character")
}

/// A value for a message: compact JSON, cut at 60 characters.
pub(super) fn show(v: &Value) -> String {
    const MAX: usize = 60;
    let s = v.to_string();
    if s.chars().count() <= MAX {
        s
    } else {
        let cut: String = s.chars().take(MAX - 1).collect();
        format!("{cut}…")
    }
}

/// A word's text for a message: as itself when it reads as a JSON scalar (`50.5`, `true`),
/// quoted otherwise (`"abc"`).
pub(super) fn show_raw(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => show(&v),
        _ => show(&Value::String(raw.to_string())),
    }
}

/// `"a", "b"` (or joined by `|`), at most 12 shown.
pub(super) fn list_values(options: &[&Value], sep: &str) -> String {
    const MAX_LISTED: usize = 12;
    let mut s = options.iter().take(MAX_LISTED).map(|o| show(o)).collect::<Vec<_>>().join(sep);
    if options.len() > MAX_LISTED {
        let _ = write!(s, "{sep}… ({} in all)", options.len());
    }
    s
}


/// A one-line parameter list for tables: `volume: int 0..100`, `[quality: int 1..100 = 80]` for
/// an optional one with a default, `enabled: bool`, `mode: "a"|"b"`, `tags: string[]`,
/// `cfg: object`; parameters joined by `, `. Empty when the tool takes no parameters (or its
/// schema declares none).
pub fn signature(schema: &Value) -> String {
    let ctx = Ctx { root: schema };
    if !schema.is_object() {
        return String::new();
    }
    let Some(props) = ctx.props(schema) else {
        return String::new();
    };
    let required: Vec<&str> = ctx
        .resolve(schema)
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(name, prop)| {
            let mut s = format!("{name}: {}", ctx.summary(prop, false, 0));
            let default = prop.get("default").or_else(|| ctx.resolve(prop).get("default"));
            if let Some(d) = default {
                let _ = write!(s, " = {}", show(d));
            }
            if required.contains(&name.as_str()) { s } else { format!("[{s}]") }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
