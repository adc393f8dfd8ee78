//! Typing one `k=v` value by its declared schema type (never by how the text looks).

use serde_json::{Number, Value};

use super::build::*;
use super::error::*;
use super::render::*;
use super::schema::*;
use super::suggest::*;

/// A coercion failure, relative to the argument it happened in.
pub(super) struct Problem {
    /// Appended to the argument: `[1]` for the second array item.
    pub(super) suffix: String,
    pub(super) message: String,
    pub(super) suggestions: Vec<String>,
}

impl Problem {
    pub(super) fn new(message: impl Into<String>) -> Self {
        Self { suffix: String::new(), message: message.into(), suggestions: Vec::new() }
    }

    pub(super) fn into_error(self, key: &str) -> ArgError {
        ArgError { argument: format!("{key}{}", self.suffix), message: self.message, suggestions: self.suggestions }
    }
}

impl<'a> Ctx<'a> {
    /// Types `raw` by `node`.
    pub(super) fn coerce(&self, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
        let node = self.resolve(node);
        if depth > MAX_DEPTH {
            return Ok(untyped(raw));
        }
        match node {
            Value::Bool(false) => return Err(Problem::new("is not allowed by the schema")),
            Value::Object(_) => {}
            _ => return Ok(untyped(raw)),
        }
        if let Some(options) = enum_options(node) {
            return coerce_enum(node, &options, raw);
        }
        let Some(alts) = self.alternatives(node, depth) else {
            return Ok(untyped(raw));
        };
        let mut problems = Vec::new();
        for alt in &alts {
            let attempt = match alt {
                Alt::Type(t, n) => self.coerce_type(t, n, raw, key, depth),
                Alt::Member(m) => self.coerce(m, raw, key, depth + 1),
            };
            match attempt {
                Ok(v) => return Ok(v),
                Err(p) => problems.push(p),
            }
        }
        if problems.len() == 1 {
            return Err(problems.remove(0));
        }
        let phrases: Vec<String> = alts
            .iter()
            .map(|a| match a {
                Alt::Type(t, _) => type_phrase(t).to_string(),
                Alt::Member(m) => self.phrase(m, depth + 1),
            })
            .collect();
        if raw.trim().is_empty() {
            return Err(Problem::new(format!("no value given (expected {})", join_or(&phrases))));
        }
        Err(Problem::new(format!("must be {}, got {}", join_or(&phrases), show_raw(raw))))
    }

    pub(super) fn coerce_type(&self, t: &str, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
        if t == "string" {
            return Ok(Value::String(raw.to_string()));
        }
        let trimmed = raw.trim();
        if trimmed.is_empty() && matches!(t, "integer" | "number" | "boolean" | "null" | "array" | "object") {
            let hint = match t {
                "array" => format!(" (write {key}:=[] for an empty list)"),
                "object" => format!(" (write {key}:={{}} for an empty object)"),
                "null" => format!(" (write {key}:=null)"),
                _ => String::new(),
            };
            return Err(Problem::new(format!("no value given (expected {}){hint}", type_phrase(t))));
        }
        match t {
            "integer" => parse_integer(trimmed).map_err(|m| Problem::new(super::render::with_allowed(m, node))),
            "number" => parse_number(trimmed)
                .ok_or_else(|| Problem::new(super::render::with_allowed(format!("must be a number, got {}", show_raw(raw)), node))),
            "boolean" => parse_bool(trimmed).map(Value::Bool).ok_or_else(|| {
                Problem::new(format!("must be a boolean (true/false, yes/no, on/off, 1/0), got {}", show_raw(raw)))
            }),
            "null" if trimmed == "null" => Ok(Value::Null),
            "null" => Err(Problem::new(format!("must be null, got {}", show_raw(raw)))),
            "array" => self.coerce_array(node, raw, key, depth),
            "object" => match serde_json::from_str::<Value>(trimmed) {
                Ok(v @ Value::Object(_)) => Ok(v),
                Ok(other) => Err(Problem::new(format!(
                    "must be a JSON object (or set one field with {key}.field=value), got {}",
                    show(&other)
                ))),
                Err(e) if trimmed.starts_with('{') => Err(Problem::new(format!("is not valid JSON: {e}"))),
                Err(_) => Err(Problem::new(format!(
                    "must be a JSON object (or set one field with {key}.field=value), got {}",
                    show_raw(raw)
                ))),
            },
            // A type name JSON Schema does not define: don't guess.
            _ => Ok(untyped(raw)),
        }
    }

    pub(super) fn coerce_array(&self, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
        let items = node.get("items").filter(|i| i.is_object() || i.is_boolean());
        let scalar_items = items.is_none_or(|i| self.is_scalar(i, depth + 1));
        let trimmed = raw.trim();
        let list = if trimmed.starts_with('[') {
            match serde_json::from_str::<Value>(trimmed) {
                Ok(v) => return Ok(v),
                Err(e) => match trimmed.strip_suffix(']') {
                    // `[a,b]` when the items are scalars: the brackets are decoration.
                    Some(inner) if scalar_items => &inner[1..],
                    _ => return Err(Problem::new(format!("is not valid JSON: {e}"))),
                },
            }
        } else if scalar_items {
            trimmed
        } else {
            return Err(Problem::new(format!(
                "must be a JSON array (its items are {}), got {}",
                items.map_or_else(|| "values".to_string(), |i| self.summary(i, true, depth + 1)),
                show_raw(raw)
            )));
        };
        let mut out = Vec::new();
        for (idx, part) in list.split(',').enumerate() {
            let part = part.trim();
            let v = match items {
                Some(i) => self.coerce(i, part, key, depth + 1).map_err(|mut p| {
                    p.suffix = format!("[{idx}]{}", p.suffix);
                    p
                })?,
                None => untyped(part),
            };
            out.push(v);
        }
        Ok(Value::Array(out))
    }

}

pub(super) fn coerce_enum(node: &Value, options: &[&Value], raw: &str) -> Result<Value, Problem> {
    if options.iter().any(|o| o.as_str() == Some(raw)) {
        return Ok(Value::String(raw.to_string()));
    }
    let trimmed = raw.trim();
    for o in options {
        let hit = match o {
            Value::String(_) => false,
            Value::Bool(b) => parse_bool(trimmed) == Some(*b),
            Value::Null => trimmed == "null",
            Value::Number(n) => parse_number(trimmed).and_then(|v| v.as_f64()) == n.as_f64(),
            Value::Array(_) | Value::Object(_) => serde_json::from_str::<Value>(trimmed).ok().as_ref() == Some(*o),
        };
        if hit {
            return Ok((*o).clone());
        }
    }
    let expected =
        if node.get("const").is_some() { show(options[0]) } else { format!("one of {}", list_values(options, ", ")) };
    let message = if trimmed.is_empty() {
        format!("no value given (expected {expected})")
    } else {
        format!("must be {expected}, got {}", show_raw(raw))
    };
    let mut p = Problem::new(message);
    p.suggestions = suggest(raw, options.iter().filter_map(|o| o.as_str())).into_iter().map(String::from).collect();
    Err(p)
}

/// The floats that convert to `i64` exactly when integral: -2^63 ..< 2^63.
pub(super) const I64_SPAN: std::ops::Range<f64> = -(i64::MAX as f64)..(i64::MAX as f64);

pub(super) fn parse_integer(t: &str) -> Result<Value, String> {
    if let Ok(i) = t.parse::<i64>() {
        return Ok(i.into());
    }
    if let Ok(u) = t.parse::<u64>() {
        return Ok(u.into());
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() && f.fract() == 0.0 => {
            // `1e3`, `50.0`: integral. Beyond 64 bits: too large to send as an integer.
            if I64_SPAN.contains(&f) {
                Ok((f as i64).into())
            } else {
                Err(format!("is too large for a 64-bit integer, got {t}"))
            }
        }
        Ok(f) if f.is_finite() => Err(format!("must be an integer, got {t}")),
        _ => Err(format!("must be an integer, got {}", show_raw(t))),
    }
}

/// A JSON number from text: an integer when integral, else a float. `None` when not a number.
pub(super) fn parse_number(t: &str) -> Option<Value> {
    if let Ok(i) = t.parse::<i64>() {
        return Some(i.into());
    }
    if let Ok(u) = t.parse::<u64>() {
        return Some(u.into());
    }
    let f = t.parse::<f64>().ok().filter(|f| f.is_finite())?;
    if f.fract() == 0.0 && I64_SPAN.contains(&f) {
        return Some((f as i64).into());
    }
    Number::from_f64(f).map(Value::Number)
}

pub(super) fn parse_bool(t: &str) -> Option<bool> {
    match t.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}
