//! Tool arguments: `mcpdev call TOOL k=v ...` → a JSON arguments object, typed by the tool's
//! `inputSchema`, plus validation with friendly messages. Pure, no I/O.
//!
//! The point of this module: a value's JSON type comes from the **declared schema type**, never
//! from what the text happens to look like. `zip=01234` stays the string `"01234"` when `zip` is
//! a string, `name=true` stays `"true"`, and `volume=50` becomes the integer `50` when `volume`
//! is an integer. Other MCP CLIs JSON-parse first and consult the schema second (or never).
//!
//! # Words
//! - `k=v`: coerced by the schema of property `k` (see [`build_arguments`] for the rules).
//! - `k:=<json>`: raw JSON, no coercion (`opts:={"x":[1,2]}`, `name:=null`).
//! - `a.b=v`: nested object `{"a":{"b":v}}`, typed by `properties.a.properties.b`. A property
//!   whose own name contains dots (`"self.x"`) is matched literally first (longest match wins).
//! - `k=` (nothing after `=`): the empty string for string-typed properties, an error otherwise.
//!
//! # Two separate steps
//! [`build_arguments`] reports syntax and coercion problems (bad word, `50.5` for an integer,
//! unknown argument). [`validate`] runs the JSON Schema rules (`required`, ranges, lengths,
//! patterns, …) through the `jsonschema` crate and explains every failure, in the schema's
//! property order. The caller runs both.
//!
//! Property order is the order of the `serde_json::Map` the schema was parsed into: declaration
//! order only when serde_json's `preserve_order` feature is on, alphabetical otherwise.

use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock, Mutex};

/// One problem with one argument.
///
/// Displays as `argument 'volume': must be at most 100 (allowed 0..100), got 101`, with
/// `; did you mean 'volume'?` appended when there are suggestions, and `arguments: …` in place of
/// `argument '…': …` for problems with the whole object (`argument` empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_error(.argument, .message, .suggestions))]
pub struct ArgError {
    /// Where: `volume`, `a.b` for nested fields, `tags[1]` for array items, `""` for the whole
    /// arguments object.
    pub argument: String,
    /// What is wrong, naming the rule and the allowed values: `must be at most 100 (allowed
    /// 0..100), got 101`.
    pub message: String,
    /// Close names (for unknown arguments) or close enum values, best first, at most 3.
    pub suggestions: Vec<String>,
}

impl ArgError {
    /// An error without suggestions.
    pub fn new(argument: impl Into<String>, message: impl Into<String>) -> Self {
        Self { argument: argument.into(), message: message.into(), suggestions: Vec::new() }
    }

    /// The same error with these suggestions.
    #[must_use]
    pub fn with_suggestions<S: Into<String>>(mut self, suggestions: impl IntoIterator<Item = S>) -> Self {
        self.suggestions = suggestions.into_iter().map(Into::into).collect();
        self
    }
}

fn render_error(argument: &str, message: &str, suggestions: &[String]) -> String {
    let mut s =
        if argument.is_empty() { format!("arguments: {message}") } else { format!("argument '{argument}': {message}") };
    if !suggestions.is_empty() {
        let quoted: Vec<String> = suggestions.iter().map(|x| format!("'{x}'")).collect();
        let _ = write!(s, "; did you mean {}?", join_or(&quoted));
    }
    s
}

/// `a`, `a or b`, `a, b or c`.
fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------------
// build_arguments

/// Builds the arguments object from `k=v` words, optional raw JSON (`--args-json`), and the
/// tool's `inputSchema`.
///
/// `args_json`, when given, must be a JSON object; it is the base, and the words are merged on
/// top of it (a dotted word `a.b=1` merges into an existing object `a`; `a=…` replaces `a`).
///
/// Coercion of `k=v` by the schema of `k` (after following `$ref`s to `#/...` in the schema):
/// - `enum`/`const`: the value must be one of them. Text equal to a string member stays that
///   string; otherwise it may denote a non-string member (`1` → `1`, `on` → `true`, `null`).
/// - `string` → the raw text, byte for byte; `integer` → an integer (`50`, `1e3`; not `50.5`);
///   `number` → an integer when integral, else a float; `boolean` → `true/false`, `1/0`,
///   `yes/no`, `on/off`, any case; `null` → `null` from the text `null`.
/// - `array`: JSON when the text starts with `[`; otherwise, when the items are scalars (or
///   untyped), a comma-separated list (`tags=a,b`) with each item trimmed and typed by `items`.
/// - `object`: JSON.
/// - Unions (`"type":["string","null"]`, `anyOf`, `oneOf`): the members are tried **in
///   declared order** and the first that accepts the text wins; so a string member accepts
///   anything that no earlier member took.
/// - No type information (`{}`, `true`, a property without `type`, a tool without
///   `properties`): JSON if the text parses as JSON, else the raw string.
///
/// Undeclared keys: an error (with "did you mean") when the object schema forbids them
/// (`additionalProperties: false` or `unevaluatedProperties: false`). Otherwise they pass through
/// (JSON-parse, else the raw string; an `additionalProperties` schema types them), **except**
/// when the key looks like a typo of a declared property (same name ignoring case, or a
/// Damerau-Levenshtein distance of at most 2 that is less than half the longer name: `volme`
/// for `volume`, but not `x` for `y`). Devices silently ignore arguments they did not declare,
/// so a typo would otherwise drop the value without a word.
///
/// Errors: a word without `=`, an empty key or key part, invalid JSON after `:=` or in
/// `args_json`, the same key (or a key and one of its parts) given twice, a value the declared
/// type cannot take. Schema rules (ranges, `required`, lengths, …) are [`validate`]'s job.
pub fn build_arguments(schema: &Value, words: &[String], args_json: Option<&str>) -> Result<Value, ArgError> {
    let empty = Value::Object(Map::new());
    let ctx = Ctx { root: if schema.is_object() { schema } else { &empty } };
    let mut out = match args_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(other) => {
                return Err(ArgError::new("", format!("--args-json must be a JSON object, got {}", show(&other))));
            }
            Err(e) => return Err(ArgError::new("", format!("--args-json is not valid JSON: {e}"))),
        },
    };
    let mut seen: Vec<(Vec<String>, &str)> = Vec::new();
    for word in words {
        let (key, raw, is_json) = ctx.split_word(word)?;
        let segs: Vec<&str> = key.split('.').collect();
        if segs.iter().any(|s| s.is_empty()) {
            return Err(ArgError::new(
                key,
                "has an empty part; write nested keys as a.b=value (or quote the whole object with key:=json)",
            ));
        }
        let (path, leaf) = ctx.locate(&segs, key)?;
        for (earlier, earlier_key) in &seen {
            let n = earlier.len().min(path.len());
            if earlier[..n] == path[..n] {
                let message = if *earlier_key == key {
                    "given more than once".to_string()
                } else {
                    format!("overlaps with '{earlier_key}' given before")
                };
                return Err(ArgError::new(key, message));
            }
        }
        let value = if is_json {
            serde_json::from_str::<Value>(raw).map_err(|e| {
                ArgError::new(key, format!("is not valid JSON after ':=' ({e}); to pass text write {key}={raw}"))
            })?
        } else {
            match leaf {
                Some(node) => ctx.coerce(node, raw, key, 0).map_err(|p| p.into_error(key))?,
                None => untyped(raw),
            }
        };
        insert_at(&mut out, &path, value, key)?;
        seen.push((path, key));
    }
    Ok(Value::Object(out))
}

/// Puts `value` at `path`, creating objects on the way.
fn insert_at(map: &mut Map<String, Value>, path: &[String], value: Value, key: &str) -> Result<(), ArgError> {
    let Some((last, parents)) = path.split_last() else {
        return Ok(());
    };
    let mut cur = map;
    for (i, seg) in parents.iter().enumerate() {
        cur = match cur.entry(seg.clone()).or_insert_with(|| Value::Object(Map::new())) {
            Value::Object(m) => m,
            other => {
                return Err(ArgError::new(
                    path[..=i].join("."),
                    format!("is {} in --args-json, not an object, so '{key}' can't be set", show(other)),
                ));
            }
        };
    }
    cur.insert(last.clone(), value);
    Ok(())
}

/// Schema-less fallback: JSON if it parses, else the text.
fn untyped(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// A coercion failure, relative to the argument it happened in.
struct Problem {
    /// Appended to the argument: `[1]` for the second array item.
    suffix: String,
    message: String,
    suggestions: Vec<String>,
}

impl Problem {
    fn new(message: impl Into<String>) -> Self {
        Self { suffix: String::new(), message: message.into(), suggestions: Vec::new() }
    }

    fn into_error(self, key: &str) -> ArgError {
        ArgError { argument: format!("{key}{}", self.suffix), message: self.message, suggestions: self.suggestions }
    }
}

const SYNTAX: &str = "expected key=value, key:=json or a.b=value";

/// How deep `$ref`/`anyOf`/`items` chains are followed before giving up (cycles).
const MAX_DEPTH: usize = 32;

/// One way a value may be typed: a `type` name read against a schema node, or a union member.
enum Alt<'a> {
    Type(&'a str, &'a Value),
    Member(&'a Value),
}

/// The schema being read; `root` is what `#/...` references resolve against.
struct Ctx<'a> {
    root: &'a Value,
}

impl<'a> Ctx<'a> {
    /// `key`, the raw value, and whether it was `:=` (raw JSON).
    fn split_word<'w>(&self, word: &'w str) -> Result<(&'w str, &'w str, bool), ArgError> {
        let Some(eq) = word.find('=') else {
            if self.props(self.root).is_some_and(|p| p.contains_key(word)) {
                return Err(ArgError::new(word, format!("has no value: {SYNTAX} (e.g. {word}=VALUE)")));
            }
            return Err(ArgError::new("", format!("{SYNTAX}, got '{word}'")));
        };
        let (key, is_json) = match word[..eq].strip_suffix(':') {
            Some(k) => (k, true),
            None => (&word[..eq], false),
        };
        if key.is_empty() {
            return Err(ArgError::new("", format!("{SYNTAX}, got '{word}' (the key is empty)")));
        }
        Ok((key, &word[eq + 1..], is_json))
    }

    /// Follows `$ref`s that point inside the schema (`#`, `#/$defs/x`, `#/definitions/x`).
    fn resolve(&self, mut node: &'a Value) -> &'a Value {
        for _ in 0..MAX_DEPTH {
            let Some(target) = node.get("$ref").and_then(Value::as_str).and_then(|r| self.lookup(r)) else {
                return node;
            };
            node = target;
        }
        node
    }

    fn lookup(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(&percent_decode(fragment))
    }

    fn props(&self, node: &'a Value) -> Option<&'a Map<String, Value>> {
        self.resolve(node).get("properties").and_then(Value::as_object)
    }

    /// Walks the key parts through the schema: the object path to set, and the schema typing
    /// the value (`None`: untyped).
    fn locate(&self, segs: &[&str], key: &str) -> Result<(Vec<String>, Option<&'a Value>), ArgError> {
        let mut node = Some(self.root);
        let mut path: Vec<String> = Vec::new();
        let mut i = 0;
        while i < segs.len() {
            let Some(here) = node.map(|n| self.resolve(n)) else {
                path.push(segs[i].to_string());
                i += 1;
                continue;
            };
            if i > 0 {
                // `here` must be able to hold fields.
                if let Some(types) = declared_types(here)
                    && !types.contains(&"object")
                {
                    let name = path.join(".");
                    return Err(ArgError::new(
                        name,
                        format!(
                            "is {}, not an object, so '{key}' can't be set",
                            join_or(&types.iter().map(|t| type_phrase(t).to_string()).collect::<Vec<_>>())
                        ),
                    ));
                }
            }
            let props = here.get("properties").and_then(Value::as_object);
            // Longest run of parts that names a declared property (names may contain dots).
            let matched = props.and_then(|p| {
                (i + 1..=segs.len()).rev().find_map(|j| {
                    let name = segs[i..j].join(".");
                    p.get_key_value(&name).map(|(k, v)| (j, k, v))
                })
            });
            if let Some((j, name, sub)) = matched {
                path.push(name.clone());
                node = Some(sub);
                i = j;
                continue;
            }
            let name = segs[i];
            let declared: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
            let parent = path.join(".");
            let argument = if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") };
            let forbidden = is_false(here.get("additionalProperties")) || is_false(here.get("unevaluatedProperties"));
            let pattern_props = here.get("patternProperties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
            let typo = declared.iter().any(|d| is_likely_typo(name, d));
            if (forbidden && !pattern_props) || typo {
                let suggestions = suggest(name, declared.iter().copied());
                return Err(ArgError::new(argument, unknown_message(&parent, &declared)).with_suggestions(suggestions));
            }
            node = match here.get("additionalProperties") {
                Some(ap) if ap.is_object() && !pattern_props => Some(ap),
                _ => None,
            };
            path.push(name.to_string());
            i += 1;
        }
        Ok((path, node))
    }

    /// Types `raw` by `node`.
    fn coerce(&self, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
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

    fn coerce_type(&self, t: &str, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
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
            "integer" => parse_integer(trimmed).map_err(Problem::new),
            "number" => {
                parse_number(trimmed).ok_or_else(|| Problem::new(format!("must be a number, got {}", show_raw(raw))))
            }
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

    fn coerce_array(&self, node: &'a Value, raw: &str, key: &str, depth: usize) -> Result<Value, Problem> {
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

    /// The ways `node` may be typed, in declared order; `None` when it says nothing.
    fn alternatives(&self, node: &'a Value, depth: usize) -> Option<Vec<Alt<'a>>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match node.get("type") {
            Some(Value::String(t)) => return Some(vec![Alt::Type(t, node)]),
            Some(Value::Array(ts)) => {
                let alts: Vec<Alt<'a>> = ts.iter().filter_map(Value::as_str).map(|t| Alt::Type(t, node)).collect();
                if !alts.is_empty() {
                    return Some(alts);
                }
            }
            _ => {}
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(members) = node.get(kw).and_then(Value::as_array).filter(|m| !m.is_empty()) {
                return Some(members.iter().map(Alt::Member).collect());
            }
        }
        if let Some(all) = node.get("allOf").and_then(Value::as_array) {
            for m in all {
                let r = self.resolve(m);
                if enum_options(r).is_some() || self.alternatives(r, depth + 1).is_some() {
                    return Some(vec![Alt::Member(m)]);
                }
            }
        }
        if node.get("properties").is_some() || node.get("additionalProperties").is_some() {
            return Some(vec![Alt::Type("object", node)]);
        }
        if node.get("items").is_some() || node.get("prefixItems").is_some() {
            return Some(vec![Alt::Type("array", node)]);
        }
        None
    }

    /// Whether every value `node` allows is a scalar (so a comma list can express an array).
    fn is_scalar(&self, node: &'a Value, depth: usize) -> bool {
        let node = self.resolve(node);
        if depth > MAX_DEPTH {
            return false;
        }
        if let Some(options) = enum_options(node) {
            return options.iter().all(|o| !o.is_array() && !o.is_object());
        }
        match self.alternatives(node, depth) {
            None => true,
            Some(alts) => alts.iter().all(|a| match a {
                Alt::Type(t, _) => matches!(*t, "string" | "integer" | "number" | "boolean" | "null"),
                Alt::Member(m) => self.is_scalar(m, depth + 1),
            }),
        }
    }

    /// A compact description of what `node` allows: `int 0..100`, `"a"|"b"`, `string[]`.
    /// `long` spells `integer`/`boolean` out (for messages).
    fn summary(&self, node: &'a Value, long: bool, depth: usize) -> String {
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

    fn type_summary(&self, t: &str, node: &'a Value, long: bool, depth: usize) -> String {
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
    fn phrase(&self, node: &'a Value, depth: usize) -> String {
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

    /// The schema object holding the keyword at `schema_path` (a JSON pointer ending in the
    /// keyword), following `$ref` segments.
    fn keyword_parent(&self, schema_path: &str) -> Option<&'a Value> {
        let segs: Vec<String> = pointer_segments(schema_path);
        let (_, parents) = segs.split_last()?;
        let mut cur = self.root;
        for seg in parents {
            cur = if seg == "$ref" && cur.get("$ref").is_some_and(Value::is_string) {
                let r = self.resolve(cur);
                if std::ptr::eq(r, cur) {
                    return None;
                }
                r
            } else {
                match cur {
                    Value::Object(m) => m.get(seg)?,
                    Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
                    _ => return None,
                }
            };
        }
        Some(cur)
    }

    /// Sort key: each path part's position among its object's declared properties.
    fn order_key(&self, path: &[Seg]) -> Vec<usize> {
        let mut key = Vec::with_capacity(path.len());
        let mut node = Some(self.root);
        for seg in path {
            match seg {
                Seg::Key(k) => {
                    let here = node.map(|n| self.resolve(n));
                    let props = here.and_then(|n| n.get("properties")).and_then(Value::as_object);
                    match props.and_then(|p| p.keys().position(|x| x == k)) {
                        Some(pos) => {
                            key.push(pos);
                            node = props.and_then(|p| p.get(k));
                        }
                        None => {
                            key.push(usize::MAX);
                            node = None;
                        }
                    }
                }
                Seg::Index(i) => {
                    key.push(*i);
                    node = node.map(|n| self.resolve(n)).and_then(|n| n.get("items"));
                }
            }
        }
        key
    }

    /// Turns one jsonschema error into friendly errors.
    fn explain(&self, e: &jsonschema::ValidationError<'_>, args: &Value, out: &mut Vec<(Vec<usize>, ArgError)>) {
        use jsonschema::error::ValidationErrorKind as K;
        let path = instance_segments(e.instance_path().as_str(), args);
        let argument = render_path(&path);
        let node = self.keyword_parent(e.schema_path().as_str());
        let inst: &Value = e.instance();
        let got = show(inst);
        let mut push = |path: &[Seg], err: ArgError| out.push((self.order_key(path), err));
        let simple = |message: String| ArgError::new(argument.clone(), message);
        match e.kind() {
            K::Required { property } => {
                let name = property.as_str().map_or_else(|| property.to_string(), str::to_string);
                let mut p = path.clone();
                p.push(Seg::Key(name.clone()));
                let what = node
                    .and_then(|n| self.props(n))
                    .and_then(|props| props.get(&name))
                    .map(|s| self.summary(s, true, 0))
                    .filter(|s| s != "any");
                let message = match what {
                    Some(w) => format!("is required ({w})"),
                    None => "is required".to_string(),
                };
                push(&p, ArgError::new(render_path(&p), message));
            }
            K::Minimum { limit } => push(&path, simple(bound_message("at least", limit, node, &got))),
            K::Maximum { limit } => push(&path, simple(bound_message("at most", limit, node, &got))),
            K::ExclusiveMinimum { limit } => push(&path, simple(bound_message("greater than", limit, node, &got))),
            K::ExclusiveMaximum { limit } => push(&path, simple(bound_message("less than", limit, node, &got))),
            K::Type { kind } => {
                let from_schema: Option<Vec<String>> = node.and_then(|n| match n.get("type") {
                    Some(Value::String(t)) => Some(vec![type_phrase(t).to_string()]),
                    Some(Value::Array(ts)) => {
                        Some(ts.iter().filter_map(Value::as_str).map(|t| type_phrase(t).to_string()).collect())
                    }
                    _ => None,
                });
                let phrases = from_schema.unwrap_or_else(|| match kind {
                    jsonschema::error::TypeKind::Single(t) => vec![type_phrase(t.as_str()).to_string()],
                    jsonschema::error::TypeKind::Multiple(ts) => {
                        ts.iter().map(|t| type_phrase(t.as_str()).to_string()).collect()
                    }
                });
                push(&path, simple(format!("must be {}, got {got}", join_or(&phrases))));
            }
            K::Enum { options } => {
                let opts: Vec<&Value> = options.as_array().map(|a| a.iter().collect()).unwrap_or_default();
                let mut err = simple(format!("must be one of {}, got {got}", list_values(&opts, ", ")));
                if let Some(s) = inst.as_str() {
                    err = err.with_suggestions(suggest(s, opts.iter().filter_map(|o| o.as_str())));
                }
                push(&path, err);
            }
            K::Constant { expected_value } => {
                push(&path, simple(format!("must be {}, got {got}", show(expected_value))));
            }
            K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
                let declared: Vec<&str> = node
                    .and_then(|n| self.props(n))
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                for name in unexpected {
                    let mut p = path.clone();
                    p.push(Seg::Key(name.clone()));
                    let err = ArgError::new(render_path(&p), unknown_message(&argument, &declared))
                        .with_suggestions(suggest(name, declared.iter().copied()));
                    push(&p, err);
                }
            }
            K::MinLength { limit } => {
                let n = inst.as_str().map_or(0, |s| s.chars().count());
                push(
                    &path,
                    simple(format!("must be at least {} long, got {got} ({})", chars(*limit), chars(n as u64))),
                );
            }
            K::MaxLength { limit } => {
                let n = inst.as_str().map_or(0, |s| s.chars().count());
                push(&path, simple(format!("must be at most {} long, got {got} ({})", chars(*limit), chars(n as u64))));
            }
            K::Pattern { pattern } => push(&path, simple(format!("must match the pattern {pattern}, got {got}"))),
            K::MinItems { limit } => {
                let n = inst.as_array().map_or(0, Vec::len);
                push(&path, simple(format!("must have at least {}, got {n}", plural(*limit, "item"))));
            }
            K::MaxItems { limit } => {
                let n = inst.as_array().map_or(0, Vec::len);
                push(&path, simple(format!("must have at most {}, got {n}", plural(*limit, "item"))));
            }
            K::MinProperties { limit } => {
                let n = inst.as_object().map_or(0, Map::len);
                push(&path, simple(format!("must have at least {}, got {n}", plural(*limit, "field"))));
            }
            K::MaxProperties { limit } => {
                let n = inst.as_object().map_or(0, Map::len);
                push(&path, simple(format!("must have at most {}, got {n}", plural(*limit, "field"))));
            }
            K::UniqueItems => push(&path, simple(format!("must not contain duplicate items, got {got}"))),
            K::MultipleOf { .. } => {
                let m = node.and_then(|n| n.get("multipleOf")).map_or_else(|| "?".into(), show);
                push(&path, simple(format!("must be a multiple of {m}, got {got}")));
            }
            K::Format { format } => push(&path, simple(format!("must be a valid {format}, got {got}"))),
            K::FalseSchema => push(&path, simple("is not allowed by the schema".into())),
            K::Contains => {
                let what = node.and_then(|n| n.get("contains")).map(|c| self.summary(c, true, 0));
                let message = match what {
                    Some(w) => format!("must contain at least one item matching {w}, got {got}"),
                    None => format!("must contain a matching item, got {got}"),
                };
                push(&path, simple(message));
            }
            K::AnyOf { context } | K::OneOfNotValid { context } => {
                // One branch whose type fits: its specific errors say more than "must be X or Y".
                let fitting: Vec<&Vec<jsonschema::ValidationError<'static>>> = context
                    .iter()
                    .filter(|branch| {
                        !branch.iter().any(|be| {
                            be.instance_path() == e.instance_path()
                                && matches!(
                                    be.kind(),
                                    K::Type { .. }
                                        | K::Enum { .. }
                                        | K::Constant { .. }
                                        | K::AnyOf { .. }
                                        | K::OneOfNotValid { .. }
                                        | K::FalseSchema
                                )
                        })
                    })
                    .collect();
                if let [branch] = fitting.as_slice()
                    && !branch.is_empty()
                {
                    for be in branch.iter() {
                        self.explain(be, args, out);
                    }
                    return;
                }
                let keyword = if matches!(e.kind(), K::AnyOf { .. }) { "anyOf" } else { "oneOf" };
                let phrases: Vec<String> = node
                    .and_then(|n| n.get(keyword))
                    .and_then(Value::as_array)
                    .map(|ms| ms.iter().map(|m| self.phrase(m, 0)).collect())
                    .unwrap_or_default();
                let message = if phrases.is_empty() {
                    format!("matches none of the allowed forms, got {got}")
                } else {
                    format!("must be {}, got {got}", join_or(&phrases))
                };
                push(&path, simple(message));
            }
            K::OneOfMultipleValid { .. } => {
                let phrases: Vec<String> = node
                    .and_then(|n| n.get("oneOf"))
                    .and_then(Value::as_array)
                    .map(|ms| ms.iter().map(|m| self.phrase(m, 0)).collect())
                    .unwrap_or_default();
                push(
                    &path,
                    simple(format!("matches more than one of the allowed forms ({}), got {got}", phrases.join("; "))),
                );
            }
            K::Not { schema } => push(&path, simple(format!("must not match {}, got {got}", show(schema)))),
            _ => push(&path, simple(e.to_string())),
        }
    }
}

/// One part of an argument path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// `a.b`, `tags[1]`, `` for the root.
fn render_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

/// Splits a JSON pointer into unescaped parts.
fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|p| p.replace("~1", "/").replace("~0", "~")).collect()
}

/// An instance pointer as path parts, using the instance to tell indices from keys.
fn instance_segments(pointer: &str, instance: &Value) -> Vec<Seg> {
    let mut cur = Some(instance);
    pointer_segments(pointer)
        .into_iter()
        .map(|p| match cur {
            Some(Value::Array(a)) => match p.parse::<usize>() {
                Ok(i) => {
                    cur = a.get(i);
                    Seg::Index(i)
                }
                Err(_) => {
                    cur = None;
                    Seg::Key(p)
                }
            },
            Some(Value::Object(m)) => {
                cur = m.get(&p);
                Seg::Key(p)
            }
            _ => {
                cur = None;
                Seg::Key(p)
            }
        })
        .collect()
}

fn unknown_message(parent: &str, declared: &[&str]) -> String {
    const MAX_LISTED: usize = 12;
    let mut list = declared.iter().take(MAX_LISTED).copied().collect::<Vec<_>>().join(", ");
    if declared.len() > MAX_LISTED {
        let _ = write!(list, ", … ({} in all)", declared.len());
    }
    match (parent.is_empty(), declared.is_empty()) {
        (true, true) => "not declared: this tool takes no arguments".into(),
        (true, false) => format!("not declared by this tool (it takes: {list})"),
        (false, true) => format!("not declared: '{parent}' takes no fields"),
        (false, false) => format!("not declared in '{parent}' (it takes: {list})"),
    }
}

/// Whether an undeclared `name` is probably a misspelling of the declared `declared`.
fn is_likely_typo(name: &str, declared: &str) -> bool {
    let (a, b) = (name.to_lowercase(), declared.to_lowercase());
    if a == b {
        return true;
    }
    let d = strsim::damerau_levenshtein(&a, &b);
    let longer = a.chars().count().max(b.chars().count());
    d <= 2 && 2 * d < longer
}

fn is_false(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(false)))
}

/// `enum` members, or the `const` as the only member.
fn enum_options(node: &Value) -> Option<Vec<&Value>> {
    if let Some(c) = node.get("const") {
        return Some(vec![c]);
    }
    node.get("enum").and_then(Value::as_array).map(|a| a.iter().collect())
}

/// The `type` names, when declared.
fn declared_types(node: &Value) -> Option<Vec<&str>> {
    match node.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn coerce_enum(node: &Value, options: &[&Value], raw: &str) -> Result<Value, Problem> {
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
const I64_SPAN: std::ops::Range<f64> = -(i64::MAX as f64)..(i64::MAX as f64);

fn parse_integer(t: &str) -> Result<Value, String> {
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
fn parse_number(t: &str) -> Option<Value> {
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

fn parse_bool(t: &str) -> Option<bool> {
    match t.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The range a numeric schema allows: `0..100`, `>=0`, `<100`, `>0 <=100`.
fn range_text(node: &Value) -> Option<String> {
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

fn bound_message(rule: &str, limit: &Value, node: Option<&Value>, got: &str) -> String {
    let node = node.filter(|n| {
        let has = |k: &str| n.get(k).is_some_and(Value::is_number) || n.get(k).is_some_and(|v| v == &Value::Bool(true));
        (has("minimum") || has("exclusiveMinimum")) && (has("maximum") || has("exclusiveMaximum"))
    });
    match node.and_then(range_text) {
        Some(range) => format!("must be {rule} {limit} (allowed {range}), got {got}"),
        None => format!("must be {rule} {limit}, got {got}"),
    }
}

fn type_phrase(t: &str) -> &str {
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

fn plural(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

fn chars(n: u64) -> String {
    plural(n, "character")
}

/// A value for a message: compact JSON, cut at 60 characters.
fn show(v: &Value) -> String {
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
fn show_raw(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => show(&v),
        _ => show(&Value::String(raw.to_string())),
    }
}

/// `"a", "b"` (or joined by `|`), at most 12 shown.
fn list_values(options: &[&Value], sep: &str) -> String {
    const MAX_LISTED: usize = 12;
    let mut s = options.iter().take(MAX_LISTED).map(|o| show(o)).collect::<Vec<_>>().join(sep);
    if options.len() > MAX_LISTED {
        let _ = write!(s, "{sep}… ({} in all)", options.len());
    }
    s
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

// ---------------------------------------------------------------------------------------------
// validate

/// Validates a whole arguments object against the tool's `inputSchema` and reports every
/// problem, in the schema's property order (whole-object problems first, undeclared arguments
/// last).
///
/// The JSON Schema draft comes from `$schema`, 2020-12 when absent. A schema that is `null` or
/// not an object is treated as `{}` (anything goes). A schema the `jsonschema` crate cannot
/// compile (bad keyword values, a `$ref` outside the document) yields one error for `""` saying
/// so; the caller decides whether to send anyway.
pub fn validate(schema: &Value, args: &Value) -> Result<(), Vec<ArgError>> {
    let empty = Value::Object(Map::new());
    let root = if schema.is_object() { schema } else { &empty };
    let validator = compiled(root).map_err(|e| {
        vec![ArgError::new(
            "",
            format!("the tool's inputSchema is not a usable JSON Schema, so the arguments can't be checked: {e}"),
        )]
    })?;
    let ctx = Ctx { root };
    let mut found = Vec::new();
    for e in validator.iter_errors(args) {
        ctx.explain(&e, args, &mut found);
    }
    if found.is_empty() {
        return Ok(());
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<ArgError> = Vec::with_capacity(found.len());
    for (_, err) in found {
        if !out.contains(&err) {
            out.push(err);
        }
    }
    Err(out)
}

/// The compiled validator of a schema, from a process-wide cache keyed by the schema's text: the
/// hub validates every call made through its MCP endpoint, and compiling a schema (with its
/// meta-schema check) costs far more than validating against it. Bounded: cleared past 1,024
/// distinct schemas.
fn compiled(root: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static CACHE: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = LazyLock::new(Default::default);
    const LIMIT: usize = 1024;
    let key = root.to_string();
    if let Some(v) = CACHE.lock().expect("validator cache").get(&key) {
        return Ok(v.clone());
    }
    let validator = Arc::new(jsonschema::validator_for(root).map_err(|e| e.to_string())?);
    let mut cache = CACHE.lock().expect("validator cache");
    if cache.len() >= LIMIT {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

// ---------------------------------------------------------------------------------------------
// suggest

/// "Did you mean": up to 3 candidates close to `name`, best first.
///
/// Compared ignoring case, by Damerau-Levenshtein distance: at most a quarter of the longer
/// name (at least 1 edit on names of 2+ characters), or up to 2 edits when the Jaro-Winkler
/// similarity is at least 0.85; fewer edits rank first, Jaro-Winkler breaks ties. Dotted names
/// (MCP tool names such as `self.audio_speaker.set_volume`) also match on their last part
/// (`set_volume`), and on `name` appearing as a whole word inside them (`volume`).
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let needle = name.to_lowercase();
    if needle.is_empty() {
        return Vec::new();
    }
    let needle_last = needle.rsplit('.').next().unwrap_or(&needle).to_string();
    let mut scored: Vec<(f64, f64, &'a str)> = Vec::new();
    for cand in candidates {
        if scored.iter().any(|(_, _, c)| *c == cand) {
            continue;
        }
        let lc = cand.to_lowercase();
        let last = lc.rsplit('.').next().unwrap_or(&lc);
        let mut best = similarity(&needle, &lc);
        if last != lc {
            best = max_score(best, similarity(&needle, last).map(|s| s - 0.01));
        }
        if needle_last != needle && last != lc {
            best = max_score(best, similarity(&needle_last, last).map(|s| s - 0.02));
        }
        for n in [needle.as_str(), needle_last.as_str()] {
            if n.chars().count() >= 3 && contains_word(&lc, n) {
                best = max_score(best, Some(0.9));
            }
        }
        if let Some(score) = best {
            scored.push((score, strsim::jaro_winkler(&needle, &lc), cand));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(b.2)));
    scored.into_iter().take(3).map(|(_, _, c)| c).collect()
}

fn max_score(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// 1.0 for equal, less for close, `None` for not close.
fn similarity(a: &str, b: &str) -> Option<f64> {
    if a == b {
        return Some(1.0);
    }
    let d = strsim::damerau_levenshtein(a, b);
    let longer = a.chars().count().max(b.chars().count());
    let allowed = (longer / 4).max(usize::from(longer >= 2));
    // Jaro-Winkler admits 2-edit near misses that share most letters in order (`stpes` → `step`).
    let close = d <= allowed || (d <= 2 && strsim::jaro_winkler(a, b) >= 0.85);
    (close && d < longer).then(|| 0.95 - d as f64 / longer as f64 * 0.5)
}

/// Whether `needle` occurs in `hay` delimited by the start/end or `.`, `_`, `-`, ` `.
fn contains_word(hay: &str, needle: &str) -> bool {
    let is_sep = |c: Option<char>| c.is_none_or(|c| matches!(c, '.' | '_' | '-' | ' '));
    hay.match_indices(needle)
        .any(|(i, m)| is_sep(hay[..i].chars().next_back()) && is_sep(hay[i + m.len()..].chars().next()))
}

// ---------------------------------------------------------------------------------------------
// signature

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    // --- stock xiaozhi schemas, byte for byte as the devices send them -----------------------

    fn volume_schema() -> Value {
        json!({"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]})
    }

    fn theme_schema() -> Value {
        json!({"type":"object","properties":{"theme":{"type":"string"}},"required":["theme"]})
    }

    fn otto_schema() -> Value {
        serde_json::from_str(r#"{"type":"object","properties":{"action":{"type":"string","default":"sit"},"steps":{"type":"integer","default":3,"minimum":1,"maximum":100},"speed":{"type":"integer","default":700,"minimum":100,"maximum":3000},"direction":{"type":"integer","default":1,"minimum":-1,"maximum":1},"amount":{"type":"integer","default":0,"minimum":0,"maximum":170},"arm_swing":{"type":"integer","default":50,"minimum":0,"maximum":170}}}"#).unwrap()
    }

    fn zip_schema() -> Value {
        json!({"type":"object","properties":{"zip":{"type":"string"},"name":{"type":"string"}},"required":["zip"]})
    }

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| w.to_string()).collect()
    }

    fn build(schema: &Value, ws: &[&str]) -> Result<Value, ArgError> {
        build_arguments(schema, &words(ws), None)
    }

    fn build_ok(schema: &Value, ws: &[&str]) -> Value {
        build(schema, ws).unwrap_or_else(|e| panic!("{ws:?}: {e}"))
    }

    /// The error as displayed.
    fn build_err(schema: &Value, ws: &[&str]) -> String {
        match build(schema, ws) {
            Ok(v) => panic!("{ws:?} built {v}"),
            Err(e) => e.to_string(),
        }
    }

    /// The errors as displayed.
    fn invalid(schema: &Value, args: Value) -> Vec<String> {
        match validate(schema, &args) {
            Ok(()) => panic!("{args} passed"),
            Err(es) => es.iter().map(ToString::to_string).collect(),
        }
    }

    fn one_prop(prop: Value) -> Value {
        json!({"type":"object","properties":{"x": prop}})
    }

    // --- ArgError display ---------------------------------------------------------------------

    #[test]
    fn display_names_the_argument_and_suggestions() {
        let e = ArgError::new("volume", "must be at most 100 (allowed 0..100), got 101");
        assert_eq!(e.to_string(), "argument 'volume': must be at most 100 (allowed 0..100), got 101");
        let e = ArgError::new("volme", "not declared by this tool (it takes: volume)").with_suggestions(["volume"]);
        assert_eq!(
            e.to_string(),
            "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
        );
        let e = ArgError::new("x", "m").with_suggestions(["a", "b"]);
        assert_eq!(e.to_string(), "argument 'x': m; did you mean 'a' or 'b'?");
        let e = ArgError::new("x", "m").with_suggestions(["a", "b", "c"]);
        assert_eq!(e.to_string(), "argument 'x': m; did you mean 'a', 'b' or 'c'?");
        assert_eq!(ArgError::new("", "must be an object").to_string(), "arguments: must be an object");
    }

    // --- strings stay strings -----------------------------------------------------------------

    #[test]
    fn string_properties_keep_the_raw_text() {
        let s = zip_schema();
        assert_eq!(build_ok(&s, &["zip=01234"]), json!({"zip":"01234"}));
        assert_eq!(build_ok(&s, &["zip=01234", "name=true"]), json!({"zip":"01234","name":"true"}));
        assert_eq!(build_ok(&s, &["name=null"]), json!({"name":"null"}));
        assert_eq!(build_ok(&s, &["name=[1,2]"]), json!({"name":"[1,2]"}));
        assert_eq!(build_ok(&s, &["name= padded "]), json!({"name":" padded "}));
        assert_eq!(build_ok(&s, &["name=a=b"]), json!({"name":"a=b"}));
        assert_eq!(build_ok(&theme_schema(), &["theme=dark"]), json!({"theme":"dark"}));
    }

    #[test]
    fn empty_value_is_the_empty_string_for_strings_only() {
        assert_eq!(build_ok(&zip_schema(), &["zip="]), json!({"zip":""}));
        assert_eq!(
            build_err(&volume_schema(), &["volume="]),
            "argument 'volume': no value given (expected an integer)"
        );
        assert_eq!(
            build_err(&one_prop(json!({"type":"array","items":{"type":"string"}})), &["x="]),
            "argument 'x': no value given (expected an array) (write x:=[] for an empty list)"
        );
        assert_eq!(
            build_err(&one_prop(json!({"type":"object"})), &["x="]),
            "argument 'x': no value given (expected an object) (write x:={} for an empty object)"
        );
        assert_eq!(
            build_err(&one_prop(json!({"type":"boolean"})), &["x="]),
            "argument 'x': no value given (expected a boolean)"
        );
        assert_eq!(
            build_err(&one_prop(json!({"type":["integer","null"]})), &["x="]),
            "argument 'x': no value given (expected an integer or null)"
        );
    }

    // --- numbers ------------------------------------------------------------------------------

    #[test]
    fn integers_parse_as_integers() {
        let s = volume_schema();
        assert_eq!(build_ok(&s, &["volume=50"]), json!({"volume":50}));
        assert_eq!(build_ok(&s, &["volume=-3"]), json!({"volume":-3}));
        assert_eq!(build_ok(&s, &["volume=007"]), json!({"volume":7}));
        assert_eq!(build_ok(&s, &["volume=1e2"]), json!({"volume":100}));
        assert_eq!(build_ok(&s, &["volume=50.0"]), json!({"volume":50}));
        assert_eq!(build_ok(&s, &["volume= 42 "]), json!({"volume":42}));
        assert_eq!(build_ok(&s, &["volume=18446744073709551615"]), json!({"volume":18446744073709551615u64}));
        // Out of range is validate's business, not build's.
        assert_eq!(build_ok(&s, &["volume=101"]), json!({"volume":101}));
        assert_eq!(build_err(&s, &["volume=50.5"]), "argument 'volume': must be an integer, got 50.5");
        assert_eq!(build_err(&s, &["volume=abc"]), r#"argument 'volume': must be an integer, got "abc""#);
        assert_eq!(build_err(&s, &["volume=true"]), "argument 'volume': must be an integer, got true");
        assert_eq!(build_err(&s, &["volume=inf"]), r#"argument 'volume': must be an integer, got "inf""#);
        assert_eq!(build_err(&s, &["volume=1e30"]), "argument 'volume': is too large for a 64-bit integer, got 1e30");
    }

    #[test]
    fn numbers_are_integers_when_integral() {
        let s = one_prop(json!({"type":"number"}));
        assert_eq!(build_ok(&s, &["x=1.5"]), json!({"x":1.5}));
        assert_eq!(build_ok(&s, &["x=2"]), json!({"x":2}));
        assert_eq!(build_ok(&s, &["x=2.0"]), json!({"x":2}));
        assert!(build_ok(&s, &["x=2.0"])["x"].is_i64());
        assert_eq!(build_ok(&s, &["x=-0.25"]), json!({"x":-0.25}));
        assert_eq!(build_ok(&s, &["x=1e-3"]), json!({"x":0.001}));
        assert_eq!(build_err(&s, &["x=abc"]), r#"argument 'x': must be a number, got "abc""#);
        assert_eq!(build_err(&s, &["x=NaN"]), r#"argument 'x': must be a number, got "NaN""#);
    }

    // --- booleans and null --------------------------------------------------------------------

    #[test]
    fn booleans_accept_the_usual_spellings() {
        let s = one_prop(json!({"type":"boolean"}));
        for (text, want) in [
            ("true", true),
            ("false", false),
            ("1", true),
            ("0", false),
            ("yes", true),
            ("no", false),
            ("on", true),
            ("off", false),
            ("TRUE", true),
            ("Yes", true),
            ("OFF", false),
        ] {
            assert_eq!(build_ok(&s, &[&format!("x={text}")]), json!({"x": want}), "{text}");
        }
        assert_eq!(
            build_err(&s, &["x=maybe"]),
            r#"argument 'x': must be a boolean (true/false, yes/no, on/off, 1/0), got "maybe""#
        );
        assert_eq!(build_err(&s, &["x=2"]), "argument 'x': must be a boolean (true/false, yes/no, on/off, 1/0), got 2");
    }

    #[test]
    fn null_type_takes_null() {
        let s = one_prop(json!({"type":"null"}));
        assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
        assert_eq!(build_err(&s, &["x=nil"]), r#"argument 'x': must be null, got "nil""#);
        assert_eq!(build_err(&s, &["x="]), "argument 'x': no value given (expected null) (write x:=null)");
    }

    // --- arrays and objects -------------------------------------------------------------------

    #[test]
    fn arrays_from_comma_lists_or_json() {
        let tags = one_prop(json!({"type":"array","items":{"type":"string"}}));
        assert_eq!(build_ok(&tags, &["x=a,b"]), json!({"x":["a","b"]}));
        assert_eq!(build_ok(&tags, &["x=a, b ,c"]), json!({"x":["a","b","c"]}));
        assert_eq!(build_ok(&tags, &["x=01,true"]), json!({"x":["01","true"]}));
        assert_eq!(build_ok(&tags, &["x=solo"]), json!({"x":["solo"]}));
        assert_eq!(build_ok(&tags, &[r#"x=["a,b","c"]"#]), json!({"x":["a,b","c"]}));
        assert_eq!(build_ok(&tags, &["x=[a,b]"]), json!({"x":["a","b"]}));
        assert_eq!(build_ok(&tags, &["x=[]"]), json!({"x":[]}));

        let ids = one_prop(json!({"type":"array","items":{"type":"integer"}}));
        assert_eq!(build_ok(&ids, &["x=1,2,3"]), json!({"x":[1,2,3]}));
        assert_eq!(build_ok(&ids, &["x=[1, 2]"]), json!({"x":[1,2]}));
        assert_eq!(build_err(&ids, &["x=1,two"]), r#"argument 'x[1]': must be an integer, got "two""#);
        assert_eq!(build_err(&ids, &["x=1,,3"]), "argument 'x[1]': no value given (expected an integer)");

        let flags = one_prop(json!({"type":"array","items":{"type":"boolean"}}));
        assert_eq!(build_ok(&flags, &["x=on,off"]), json!({"x":[true,false]}));

        let modes = one_prop(json!({"type":"array","items":{"enum":["a","b"]}}));
        assert_eq!(build_ok(&modes, &["x=a,b,a"]), json!({"x":["a","b","a"]}));
        assert_eq!(build_err(&modes, &["x=a,c"]), r#"argument 'x[1]': must be one of "a", "b", got "c""#);

        let untyped_items = one_prop(json!({"type":"array"}));
        assert_eq!(build_ok(&untyped_items, &["x=1,a,true"]), json!({"x":[1,"a",true]}));
        assert_eq!(build_ok(&untyped_items, &[r#"x=[{"k":1}]"#]), json!({"x":[{"k":1}]}));

        let points = one_prop(json!({"type":"array","items":{"type":"object"}}));
        assert_eq!(build_ok(&points, &[r#"x=[{"a":1}]"#]), json!({"x":[{"a":1}]}));
        assert_eq!(
            build_err(&points, &["x=a"]),
            r#"argument 'x': must be a JSON array (its items are object), got "a""#
        );
        assert_eq!(
            build_err(&points, &["x=[{]"]),
            "argument 'x': is not valid JSON: key must be a string at line 1 column 3"
        );
    }

    #[test]
    fn objects_from_json() {
        let s = one_prop(json!({"type":"object"}));
        assert_eq!(build_ok(&s, &[r#"x={"a":[1,2]}"#]), json!({"x":{"a":[1,2]}}));
        assert_eq!(
            build_err(&s, &["x=abc"]),
            r#"argument 'x': must be a JSON object (or set one field with x.field=value), got "abc""#
        );
        assert_eq!(
            build_err(&s, &["x=[1]"]),
            "argument 'x': must be a JSON object (or set one field with x.field=value), got [1]"
        );
        assert_eq!(
            build_err(&s, &["x={a}"]),
            "argument 'x': is not valid JSON: key must be a string at line 1 column 2"
        );
    }

    // --- unions, enums, const, $ref -----------------------------------------------------------

    #[test]
    fn union_types_are_tried_in_order() {
        let s = one_prop(json!({"type":["string","null"]}));
        assert_eq!(build_ok(&s, &["x=null"]), json!({"x":"null"}));
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":"5"}));

        let s = one_prop(json!({"type":["integer","null"]}));
        assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        assert_eq!(build_err(&s, &["x=five"]), r#"argument 'x': must be an integer or null, got "five""#);

        let s = one_prop(json!({"type":["integer","string"]}));
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        assert_eq!(build_ok(&s, &["x=05a"]), json!({"x":"05a"}));
    }

    #[test]
    fn any_of_and_one_of_members_are_tried_in_order() {
        // What pydantic emits for Optional[int] and Union[int, str].
        let s = one_prop(json!({"anyOf":[{"type":"integer"},{"type":"null"}],"default":null}));
        assert_eq!(build_ok(&s, &["x=7"]), json!({"x":7}));
        assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
        assert_eq!(build_err(&s, &["x=seven"]), r#"argument 'x': must be an integer or null, got "seven""#);

        let s = one_prop(json!({"oneOf":[{"type":"integer","minimum":0},{"type":"string"}]}));
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        assert_eq!(build_ok(&s, &["x=five"]), json!({"x":"five"}));

        let s = one_prop(json!({"anyOf":[{"type":"boolean"},{"enum":["auto"]}]}));
        assert_eq!(build_ok(&s, &["x=auto"]), json!({"x":"auto"}));
        assert_eq!(build_ok(&s, &["x=yes"]), json!({"x":true}));
        assert_eq!(build_err(&s, &["x=sometimes"]), r#"argument 'x': must be a boolean or "auto", got "sometimes""#);
    }

    #[test]
    fn enums_and_consts() {
        let s = one_prop(json!({"type":"string","enum":["light","dark"]}));
        assert_eq!(build_ok(&s, &["x=dark"]), json!({"x":"dark"}));
        let e = build(&s, &["x=ligth"]).unwrap_err();
        assert_eq!(
            e,
            ArgError {
                argument: "x".into(),
                message: r#"must be one of "light", "dark", got "ligth""#.into(),
                suggestions: vec!["light".into()],
            }
        );
        assert_eq!(
            build_err(&s, &["x=Dark"]),
            r#"argument 'x': must be one of "light", "dark", got "Dark"; did you mean 'dark'?"#
        );
        assert_eq!(build_err(&s, &["x="]), r#"argument 'x': no value given (expected one of "light", "dark")"#);

        // An all-string enum keeps strings even when they look like numbers.
        let s = one_prop(json!({"enum":["1","2"]}));
        assert_eq!(build_ok(&s, &["x=1"]), json!({"x":"1"}));

        let s = one_prop(json!({"enum":[1,2,3]}));
        assert_eq!(build_ok(&s, &["x=2"]), json!({"x":2}));
        assert_eq!(build_ok(&s, &["x=2.0"]), json!({"x":2}));
        assert_eq!(build_err(&s, &["x=4"]), "argument 'x': must be one of 1, 2, 3, got 4");

        let s = one_prop(json!({"enum":["auto", 0, 1.5, true, null]}));
        assert_eq!(build_ok(&s, &["x=auto"]), json!({"x":"auto"}));
        assert_eq!(build_ok(&s, &["x=0"]), json!({"x":0}));
        assert_eq!(build_ok(&s, &["x=1.5"]), json!({"x":1.5}));
        assert_eq!(build_ok(&s, &["x=on"]), json!({"x":true}));
        assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));

        let s = one_prop(json!({"const":"fixed"}));
        assert_eq!(build_ok(&s, &["x=fixed"]), json!({"x":"fixed"}));
        assert_eq!(build_err(&s, &["x=other"]), r#"argument 'x': must be "fixed", got "other""#);
        let s = one_prop(json!({"const":{"a":1}}));
        assert_eq!(build_ok(&s, &[r#"x={"a":1}"#]), json!({"x":{"a":1}}));
    }

    #[test]
    fn refs_to_defs_and_definitions_are_followed() {
        let s = json!({
            "type":"object",
            "properties":{"level":{"$ref":"#/$defs/Level"},"mode":{"$ref":"#/definitions/Mode"},"cfg":{"$ref":"#/$defs/Cfg"}},
            "$defs":{"Level":{"type":"integer","minimum":0,"maximum":10},"Cfg":{"type":"object","properties":{"zip":{"type":"string"}}}},
            "definitions":{"Mode":{"enum":["a","b"]}}
        });
        assert_eq!(
            build_ok(&s, &["level=3", "mode=b", "cfg.zip=007"]),
            json!({"level":3,"mode":"b","cfg":{"zip":"007"}})
        );
        assert_eq!(build_err(&s, &["level=x"]), r#"argument 'level': must be an integer, got "x""#);
        // A dangling or external $ref: untyped.
        let s = one_prop(json!({"$ref":"#/$defs/Missing"}));
        assert_eq!(build_ok(&s, &["x=5", "y=a"]), json!({"x":5,"y":"a"}));
        let s = one_prop(json!({"$ref":"https://example.com/s.json"}));
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        // A self-referencing schema does not loop.
        let s = json!({"$defs":{"L":{"$ref":"#/$defs/L"}},"properties":{"x":{"$ref":"#/$defs/L"}}});
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        let s = json!({"$defs":{"A":{"allOf":[{"$ref":"#/$defs/A"}]}},"properties":{"x":{"$ref":"#/$defs/A"}}});
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        assert_eq!(signature(&s), "[x: any]");
        let s = json!({"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/A"}]}},"properties":{"x":{"$ref":"#/$defs/A"}}});
        assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
        assert_eq!(signature(&s), "[x: …]");
    }

    #[test]
    fn all_of_and_implied_types() {
        let s = one_prop(json!({"allOf":[{"description":"d"},{"type":"string"}]}));
        assert_eq!(build_ok(&s, &["x=01"]), json!({"x":"01"}));
        let s = json!({"properties":{"cfg":{"properties":{"n":{"type":"string"}}}}});
        assert_eq!(build_ok(&s, &["cfg.n=1"]), json!({"cfg":{"n":"1"}}));
        assert_eq!(build_ok(&s, &[r#"cfg={"n":1}"#]), json!({"cfg":{"n":1}}));
    }

    // --- unknown arguments --------------------------------------------------------------------

    #[test]
    fn undeclared_arguments_are_an_error_when_forbidden() {
        let mut s = volume_schema();
        s["additionalProperties"] = json!(false);
        let e = build(&s, &["volme=50"]).unwrap_err();
        assert_eq!(
            e,
            ArgError {
                argument: "volme".into(),
                message: "not declared by this tool (it takes: volume)".into(),
                suggestions: vec!["volume".into()],
            }
        );
        assert_eq!(build_err(&s, &["loudness=5"]), "argument 'loudness': not declared by this tool (it takes: volume)");
        let none = json!({"type":"object","properties":{},"additionalProperties":false});
        assert_eq!(build_err(&none, &["a=1"]), "argument 'a': not declared: this tool takes no arguments");
        let unevaluated = json!({"properties":{"a":{"type":"string"}},"unevaluatedProperties":false});
        assert_eq!(build_err(&unevaluated, &["b=1"]), "argument 'b': not declared by this tool (it takes: a)");
    }

    #[test]
    fn likely_typos_are_an_error_even_when_allowed() {
        let s = volume_schema();
        assert_eq!(
            build_err(&s, &["volme=50"]),
            "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
        );
        assert_eq!(
            build_err(&s, &["Volume=50"]),
            "argument 'Volume': not declared by this tool (it takes: volume); did you mean 'volume'?"
        );
        assert_eq!(build_err(&otto_schema(), &["step=2"]).split("; ").last().unwrap(), "did you mean 'steps'?");
        // Not a typo: passes through, JSON-parsed with a string fallback.
        assert_eq!(
            build_ok(&s, &["volume=5", "extra=01234", "n=5", "flag=true", "o={\"a\":1}"]),
            json!({"volume":5,"extra":"01234","n":5,"flag":true,"o":{"a":1}})
        );
        // Short names are not typos of each other.
        let s = one_prop(json!({"type":"integer"}));
        assert_eq!(build_ok(&s, &["y=1"]), json!({"y":1}));
        let s = json!({"properties":{"id":{"type":"string"}}});
        assert_eq!(build_ok(&s, &["ip=1"]), json!({"ip":1}));
    }

    #[test]
    fn additional_properties_schema_types_undeclared_keys() {
        let s = json!({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}});
        assert_eq!(build_ok(&s, &["a=1", "label=5"]), json!({"a":1,"label":"5"}));
        // patternProperties: we can't match the pattern here, so it's untyped and allowed.
        let s = json!({"properties":{"a":{"type":"integer"}},"patternProperties":{"^x_":{"type":"string"}},"additionalProperties":false});
        assert_eq!(build_ok(&s, &["x_1=5"]), json!({"x_1":5}));
    }

    // --- schema-less tools --------------------------------------------------------------------

    #[test]
    fn without_properties_values_are_json_or_text() {
        for s in [json!({}), json!({"type":"object"}), Value::Null, json!("nonsense"), json!(true)] {
            assert_eq!(
                build_ok(&s, &["zip=01234", "n=5", "f=1.5", "b=true", "s=hello", "e=", "l=[1]", "z=null"]),
                json!({"zip":"01234","n":5,"f":1.5,"b":true,"s":"hello","e":"","l":[1],"z":null}),
                "{s}"
            );
            assert_eq!(build_ok(&s, &["a.b=1"]), json!({"a":{"b":1}}), "{s}");
        }
        assert_eq!(build_ok(&json!({}), &[]), json!({}));
        // A property declared as {} or true is untyped too.
        let s = json!({"properties":{"a":{},"b":true}});
        assert_eq!(build_ok(&s, &["a=5", "b=x"]), json!({"a":5,"b":"x"}));
        let s = json!({"properties":{"a":false}});
        assert_eq!(build_err(&s, &["a=5"]), "argument 'a': is not allowed by the schema");
    }

    // --- nested keys --------------------------------------------------------------------------

    #[test]
    fn dotted_keys_build_nested_objects() {
        let s = json!({"type":"object","properties":{
            "a":{"type":"object","properties":{"b":{"type":"integer"},"zip":{"type":"string"},"deep":{"type":"object","properties":{"on":{"type":"boolean"}}}}},
            "n":{"type":"integer"}
        }});
        assert_eq!(
            build_ok(&s, &["a.b=1", "a.zip=01", "a.deep.on=yes", "n=2"]),
            json!({"a":{"b":1,"zip":"01","deep":{"on":true}},"n":2})
        );
        assert_eq!(build_err(&s, &["a.b=x"]), r#"argument 'a.b': must be an integer, got "x""#);
        assert_eq!(build_err(&s, &["n.x=1"]), "argument 'n': is an integer, not an object, so 'n.x' can't be set");
        assert_eq!(
            build_err(&s, &["a.zipp=1"]),
            "argument 'a.zipp': not declared in 'a' (it takes: b, zip, deep); did you mean 'zip'?"
        );
        // Undeclared nested keys below an open object are untyped.
        assert_eq!(build_ok(&s, &["a.other.k=5"]), json!({"a":{"other":{"k":5}}}));
        assert_eq!(
            build_err(&s, &["a..b=1"]),
            "argument 'a..b': has an empty part; write nested keys as a.b=value (or quote the whole object with key:=json)"
        );
        assert_eq!(
            build_err(&s, &[".a=1"]),
            "argument '.a': has an empty part; write nested keys as a.b=value (or quote the whole object with key:=json)"
        );
    }

    #[test]
    fn property_names_with_dots_match_literally_first() {
        let s = json!({"properties":{"self.x":{"type":"string"},"self":{"type":"object","properties":{"y":{"type":"integer"}}}}});
        assert_eq!(build_ok(&s, &["self.x=01", "self.y=2"]), json!({"self.x":"01","self":{"y":2}}));
    }

    // --- raw JSON -----------------------------------------------------------------------------

    #[test]
    fn colon_equals_is_raw_json() {
        let s = volume_schema();
        assert_eq!(build_ok(&s, &[r#"opts:={"x":[1,2]}"#]), json!({"opts":{"x":[1,2]}}));
        // No coercion: validate reports the type.
        assert_eq!(build_ok(&s, &[r#"volume:="50""#]), json!({"volume":"50"}));
        assert_eq!(build_ok(&zip_schema(), &["zip:=1234"]), json!({"zip":1234}));
        assert_eq!(build_ok(&s, &["a.b:=[true]"]), json!({"a":{"b":[true]}}));
        assert_eq!(build_ok(&s, &["n:=null"]), json!({"n":null}));
        assert_eq!(
            build_err(&s, &["name:=hello"]),
            "argument 'name': is not valid JSON after ':=' (expected value at line 1 column 1); to pass text write name=hello"
        );
        assert_eq!(
            build_err(&s, &["volme:=5"]),
            "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
        );
    }

    // --- word syntax --------------------------------------------------------------------------

    #[test]
    fn words_without_equals_explain_the_syntax() {
        let s = volume_schema();
        let e = build(&s, &["hello"]).unwrap_err();
        assert_eq!(e.argument, "");
        assert_eq!(e.to_string(), "arguments: expected key=value, key:=json or a.b=value, got 'hello'");
        assert_eq!(
            build_err(&s, &["volume"]),
            "argument 'volume': has no value: expected key=value, key:=json or a.b=value (e.g. volume=VALUE)"
        );
        assert_eq!(
            build_err(&s, &["=5"]),
            "arguments: expected key=value, key:=json or a.b=value, got '=5' (the key is empty)"
        );
        assert_eq!(
            build_err(&s, &[":=5"]),
            "arguments: expected key=value, key:=json or a.b=value, got ':=5' (the key is empty)"
        );
    }

    #[test]
    fn a_key_given_twice_is_an_error() {
        let s = volume_schema();
        assert_eq!(build_err(&s, &["volume=1", "volume=2"]), "argument 'volume': given more than once");
        assert_eq!(build_err(&s, &["volume=1", "volume:=2"]), "argument 'volume': given more than once");
        assert_eq!(build_err(&s, &["a.b=1", "a:={}"]), "argument 'a': overlaps with 'a.b' given before");
        assert_eq!(build_err(&s, &["a=1", "a.b=1"]), "argument 'a.b': overlaps with 'a' given before");
        assert_eq!(build_ok(&s, &["a.b=1", "a.c=2"]), json!({"a":{"b":1,"c":2}}));
    }

    // --- --args-json --------------------------------------------------------------------------

    #[test]
    fn args_json_is_the_base_and_words_merge_on_top() {
        let s = json!({"type":"object","properties":{"volume":{"type":"integer"},"a":{"type":"object","properties":{"b":{"type":"integer"}}}}});
        let got =
            build_arguments(&s, &words(&["volume=5", "a.b=2"]), Some(r#"{"volume":1,"a":{"x":1,"b":0},"keep":"me"}"#))
                .unwrap();
        assert_eq!(got, json!({"volume":5,"a":{"x":1,"b":2},"keep":"me"}));
        // A plain key replaces the whole value.
        let got = build_arguments(&s, &words(&[r#"a:={"b":3}"#]), Some(r#"{"a":{"x":1}}"#)).unwrap();
        assert_eq!(got, json!({"a":{"b":3}}));
        // The base is taken as is: no coercion, no checks (validate does those).
        let got = build_arguments(&s, &[], Some(r#"{"volume":"01"}"#)).unwrap();
        assert_eq!(got, json!({"volume":"01"}));

        let err = |j: &str, ws: &[&str]| build_arguments(&s, &words(ws), Some(j)).unwrap_err().to_string();
        assert_eq!(err("[1,2]", &[]), "arguments: --args-json must be a JSON object, got [1,2]");
        assert_eq!(
            err("{", &[]),
            "arguments: --args-json is not valid JSON: EOF while parsing an object at line 1 column 1"
        );
        assert_eq!(
            err(r#"{"a":5}"#, &["a.b=1"]),
            "argument 'a': is 5 in --args-json, not an object, so 'a.b' can't be set"
        );
    }

    // --- validate -----------------------------------------------------------------------------

    #[test]
    fn a_schema_is_compiled_once() {
        let schema = json!({"type": "object", "properties": {"cached_volume": {"type": "integer", "maximum": 100}}});
        let first = compiled(&schema).unwrap();
        assert!(Arc::ptr_eq(&first, &compiled(&schema.clone()).unwrap()), "the same schema text reuses the validator");
        let other = json!({"type": "object", "properties": {"cached_volume": {"type": "integer", "maximum": 99}}});
        assert!(!Arc::ptr_eq(&first, &compiled(&other).unwrap()));
        // Cached or not, the answers are the same.
        assert!(validate(&schema, &json!({"cached_volume": 101})).is_err());
        assert!(validate(&schema, &json!({"cached_volume": 100})).is_ok());
        assert!(compiled(&json!({"type": 12})).is_err(), "an unusable schema is an error, not cached as valid");
    }

    #[test]
    fn validate_passes_good_arguments() {
        assert_eq!(validate(&volume_schema(), &json!({"volume":50})), Ok(()));
        assert_eq!(validate(&otto_schema(), &json!({})), Ok(()));
        assert_eq!(validate(&otto_schema(), &json!({"action":"walk","steps":2,"direction":-1})), Ok(()));
        assert_eq!(validate(&zip_schema(), &json!({"zip":"01234"})), Ok(()));
        assert_eq!(validate(&Value::Null, &json!({"anything":[1]})), Ok(()));
        assert_eq!(validate(&json!("nonsense"), &json!({})), Ok(()));
        assert_eq!(validate(&json!({}), &json!({"a":1})), Ok(()));
    }

    #[test]
    fn validate_required_names_the_type() {
        assert_eq!(invalid(&volume_schema(), json!({})), ["argument 'volume': is required (integer 0..100)"]);
        assert_eq!(invalid(&theme_schema(), json!({})), ["argument 'theme': is required (string)"]);
        let s = json!({"properties":{"m":{"enum":["a","b"]}},"required":["m","n"]});
        assert_eq!(invalid(&s, json!({})), [r#"argument 'm': is required ("a"|"b")"#, "argument 'n': is required"]);
    }

    #[test]
    fn validate_ranges_quote_the_allowed_range() {
        let s = volume_schema();
        assert_eq!(
            invalid(&s, json!({"volume":101})),
            ["argument 'volume': must be at most 100 (allowed 0..100), got 101"]
        );
        assert_eq!(
            invalid(&s, json!({"volume":-1})),
            ["argument 'volume': must be at least 0 (allowed 0..100), got -1"]
        );
        assert_eq!(
            invalid(&otto_schema(), json!({"steps":0})),
            ["argument 'steps': must be at least 1 (allowed 1..100), got 0"]
        );
        let s = one_prop(json!({"type":"number","minimum":0}));
        assert_eq!(invalid(&s, json!({"x":-0.5})), ["argument 'x': must be at least 0, got -0.5"]);
        let s = one_prop(json!({"type":"number","exclusiveMinimum":0,"maximum":1}));
        assert_eq!(invalid(&s, json!({"x":0})), ["argument 'x': must be greater than 0 (allowed >0 <=1), got 0"]);
        let s = one_prop(json!({"type":"number","exclusiveMaximum":10}));
        assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be less than 10, got 10"]);
        // Draft 4's boolean exclusiveMaximum.
        let s = json!({"$schema":"http://json-schema.org/draft-04/schema#","properties":{"x":{"type":"integer","minimum":0,"maximum":10,"exclusiveMaximum":true}}});
        assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be less than 10 (allowed >=0 <10), got 10"]);
    }

    #[test]
    fn validate_types_enums_and_consts() {
        assert_eq!(
            invalid(&volume_schema(), json!({"volume":"abc"})),
            [r#"argument 'volume': must be an integer, got "abc""#]
        );
        assert_eq!(
            invalid(&volume_schema(), json!({"volume":50.5})),
            ["argument 'volume': must be an integer, got 50.5"]
        );
        assert_eq!(invalid(&zip_schema(), json!({"zip":1234})), ["argument 'zip': must be a string, got 1234"]);
        let s = one_prop(json!({"type":["string","null"]}));
        assert_eq!(invalid(&s, json!({"x":5})), ["argument 'x': must be a string or null, got 5"]);
        let s = one_prop(json!({"type":"boolean"}));
        assert_eq!(invalid(&s, json!({"x":"yes"})), [r#"argument 'x': must be a boolean, got "yes""#]);

        let s = json!({"type":"object","properties":{"theme":{"type":"string","enum":["light","dark"]}}});
        let errs = validate(&s, &json!({"theme":"ligth"})).unwrap_err();
        assert_eq!(
            errs,
            [ArgError {
                argument: "theme".into(),
                message: r#"must be one of "light", "dark", got "ligth""#.into(),
                suggestions: vec!["light".into()],
            }]
        );
        let s = one_prop(json!({"const":"on"}));
        assert_eq!(invalid(&s, json!({"x":"off"})), [r#"argument 'x': must be "on", got "off""#]);
    }

    #[test]
    fn validate_unknown_arguments_suggest_names() {
        let mut s = volume_schema();
        s["additionalProperties"] = json!(false);
        let errs = validate(&s, &json!({"volme":5})).unwrap_err();
        assert_eq!(
            errs,
            [
                ArgError::new("volume", "is required (integer 0..100)"),
                ArgError::new("volme", "not declared by this tool (it takes: volume)").with_suggestions(["volume"]),
            ]
        );
        let s = json!({"properties":{"cfg":{"type":"object","properties":{"color":{"type":"string"}},"additionalProperties":false}}});
        assert_eq!(
            invalid(&s, json!({"cfg":{"colr":"red"}})),
            ["argument 'cfg.colr': not declared in 'cfg' (it takes: color); did you mean 'color'?"]
        );
    }

    #[test]
    fn validate_strings_and_arrays_say_the_rule_and_limit() {
        let s = one_prop(json!({"type":"string","minLength":3,"maxLength":5,"pattern":"^[0-9]+$"}));
        assert_eq!(
            invalid(&s, json!({"x":"ab"})),
            [
                r#"argument 'x': must be at least 3 characters long, got "ab" (2 characters)"#,
                r#"argument 'x': must match the pattern ^[0-9]+$, got "ab""#,
            ]
        );
        assert_eq!(
            invalid(&s, json!({"x":"123456"})),
            [r#"argument 'x': must be at most 5 characters long, got "123456" (6 characters)"#]
        );
        let s = one_prop(json!({"type":"string","minLength":1}));
        assert_eq!(
            invalid(&s, json!({"x":""})),
            [r#"argument 'x': must be at least 1 character long, got "" (0 characters)"#]
        );
        let s =
            one_prop(json!({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2,"uniqueItems":true}));
        assert_eq!(invalid(&s, json!({"x":[]})), ["argument 'x': must have at least 1 item, got 0"]);
        assert_eq!(invalid(&s, json!({"x":[1,2,3]})), ["argument 'x': must have at most 2 items, got 3"]);
        assert_eq!(invalid(&s, json!({"x":[1,1]})), ["argument 'x': must not contain duplicate items, got [1,1]"]);
        assert_eq!(invalid(&s, json!({"x":[1,"b"]})), [r#"argument 'x[1]': must be an integer, got "b""#]);
        let s = one_prop(json!({"type":"integer","multipleOf":5}));
        assert_eq!(invalid(&s, json!({"x":7})), ["argument 'x': must be a multiple of 5, got 7"]);
        let s = one_prop(json!({"type":"object","minProperties":1}));
        assert_eq!(invalid(&s, json!({"x":{}})), ["argument 'x': must have at least 1 field, got 0"]);
    }

    #[test]
    fn validate_nested_and_ref_paths() {
        let s = json!({
            "properties":{"cfg":{"type":"object","properties":{"level":{"$ref":"#/$defs/Level"}},"required":["name"]}},
            "$defs":{"Level":{"type":"integer","minimum":0,"maximum":10}}
        });
        assert_eq!(
            invalid(&s, json!({"cfg":{"level":11}})),
            ["argument 'cfg.level': must be at most 10 (allowed 0..10), got 11", "argument 'cfg.name': is required",]
        );
        let s = json!({"properties":{"lvl":{"$ref":"#/$defs/Level"}},"required":["lvl"],"$defs":{"Level":{"type":"integer","minimum":0,"maximum":10}}});
        assert_eq!(invalid(&s, json!({})), ["argument 'lvl': is required (integer 0..10)"]);
    }

    #[test]
    fn validate_any_of_picks_the_branch_that_fits() {
        let s = one_prop(json!({"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]}));
        assert_eq!(invalid(&s, json!({"x":-1})), ["argument 'x': must be at least 0, got -1"]);
        assert_eq!(invalid(&s, json!({"x":"a"})), [r#"argument 'x': must be an integer >=0 or null, got "a""#]);
        let s = one_prop(json!({"oneOf":[{"enum":["auto"]},{"type":"integer","minimum":1,"maximum":9}]}));
        assert_eq!(
            invalid(&s, json!({"x":"manual"})),
            [r#"argument 'x': must be "auto" or an integer 1..9, got "manual""#]
        );
        assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be at most 9 (allowed 1..9), got 10"]);
        let s = one_prop(json!({"oneOf":[{"type":"integer"},{"type":"number"}]}));
        assert_eq!(
            invalid(&s, json!({"x":1})),
            ["argument 'x': matches more than one of the allowed forms (an integer; a number), got 1"]
        );
    }

    #[test]
    fn validate_orders_errors_by_the_schema_and_reports_all() {
        // Names in the same order alphabetically and as declared, so the test holds with or
        // without serde_json's preserve_order.
        let s = json!({"type":"object","properties":{
            "a_volume":{"type":"integer","minimum":0,"maximum":100},
            "b_theme":{"type":"string","enum":["light","dark"]},
            "c_count":{"type":"integer"}
        },"required":["c_count","a_volume"],"additionalProperties":false});
        assert_eq!(
            invalid(&s, json!({"zzz":1,"b_theme":"x","a_volume":101})),
            [
                "argument 'a_volume': must be at most 100 (allowed 0..100), got 101",
                r#"argument 'b_theme': must be one of "light", "dark", got "x""#,
                "argument 'c_count': is required (integer)",
                "argument 'zzz': not declared by this tool (it takes: a_volume, b_theme, c_count)",
            ]
        );
        // The whole object first.
        assert_eq!(invalid(&s, json!([1])), ["arguments: must be an object, got [1]"]);
    }

    #[test]
    fn validate_reports_an_unusable_schema() {
        let errs = validate(&json!({"type":5}), &json!({})).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].argument, "");
        assert!(
            errs[0]
                .message
                .starts_with("the tool's inputSchema is not a usable JSON Schema, so the arguments can't be checked: "),
            "{}",
            errs[0].message
        );
        let errs =
            validate(&json!({"properties":{"a":{"$ref":"https://example.com/x.json"}}}), &json!({"a":1})).unwrap_err();
        assert!(
            errs[0].message.starts_with("the tool's inputSchema is not a usable JSON Schema"),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn build_then_validate_round_trip() {
        let s = otto_schema();
        let args = build_ok(&s, &["action=walk", "steps=2", "speed=1000", "direction=-1"]);
        assert_eq!(args, json!({"action":"walk","steps":2,"speed":1000,"direction":-1}));
        assert_eq!(validate(&s, &args), Ok(()));
        let args = build_ok(&s, &["speed=5000"]);
        assert_eq!(invalid(&s, args), ["argument 'speed': must be at most 3000 (allowed 100..3000), got 5000"]);
    }

    // --- suggest ------------------------------------------------------------------------------

    const TOOLS: [&str; 7] = [
        "self.get_device_status",
        "self.audio_speaker.set_volume",
        "self.screen.set_brightness",
        "self.screen.set_theme",
        "self.otto.action",
        "self.get_system_info",
        "self.reboot",
    ];

    #[test]
    fn suggest_finds_close_names() {
        assert_eq!(suggest("volme", ["volume", "voice", "mode"]), ["volume"]);
        assert_eq!(suggest("VOLUME", ["volume"]), ["volume"]);
        assert_eq!(suggest("ligth", ["light", "dark"]), ["light"]);
        assert_eq!(suggest("lite", ["light", "dark"]), Vec::<&str>::new());
        assert_eq!(suggest("brigthness", ["brightness", "contrast"]), ["brightness"]);
        // Equal edits: Jaro-Winkler (shared prefix) decides.
        assert_eq!(suggest("teh", ["the", "tea"]), ["tea", "the"]);
        assert_eq!(suggest("x", ["y", "z"]), Vec::<&str>::new());
        assert_eq!(suggest("id", ["ip", "url"]), ["ip"]);
        assert_eq!(suggest("", ["a"]), Vec::<&str>::new());
        assert_eq!(suggest("anything", []), Vec::<&str>::new());
        assert_eq!(suggest("completely_different", ["volume"]), Vec::<&str>::new());
    }

    #[test]
    fn suggest_ranks_best_first_and_keeps_three() {
        assert_eq!(suggest("steps", ["stops", "steps", "step", "stepz", "sleeps"]), ["steps", "step", "stepz"]);
        assert_eq!(suggest("stpe", ["steps", "step", "stop", "stem"]), ["step", "steps", "stem"]);
        assert_eq!(suggest("step", ["sleep", "steps"]), ["steps"]);
        assert_eq!(suggest("a", ["a", "a"]), ["a"]);
    }

    #[test]
    fn suggest_understands_dotted_tool_names() {
        assert_eq!(suggest("set_volume", TOOLS), ["self.audio_speaker.set_volume"]);
        assert_eq!(suggest("self.audio_speaker.set_volme", TOOLS), ["self.audio_speaker.set_volume"]);
        assert_eq!(suggest("volume", TOOLS), ["self.audio_speaker.set_volume"]);
        assert_eq!(suggest("self.volume", TOOLS), ["self.audio_speaker.set_volume"]);
        assert_eq!(suggest("reboot", TOOLS), ["self.reboot"]);
        assert_eq!(suggest("set_them", TOOLS), ["self.screen.set_theme"]);
        assert_eq!(suggest("self.otto.actoin", TOOLS), ["self.otto.action"]);
        assert_eq!(suggest("self.foo", TOOLS), Vec::<&str>::new());
    }

    // --- signature ----------------------------------------------------------------------------

    #[test]
    fn signature_of_stock_tools() {
        assert_eq!(signature(&volume_schema()), "volume: int 0..100");
        assert_eq!(signature(&theme_schema()), "theme: string");
        assert_eq!(signature(&zip_schema()), "zip: string, [name: string]");
        // Map order: declaration order with serde_json's preserve_order, alphabetical without.
        let s = otto_schema();
        let want: Vec<&str> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| match k.as_str() {
                "action" => r#"[action: string = "sit"]"#,
                "steps" => "[steps: int 1..100 = 3]",
                "speed" => "[speed: int 100..3000 = 700]",
                "direction" => "[direction: int -1..1 = 1]",
                "amount" => "[amount: int 0..170 = 0]",
                "arm_swing" => "[arm_swing: int 0..170 = 50]",
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(signature(&s), want.join(", "));
    }

    #[test]
    fn signature_shapes() {
        let one = |name: &str, prop: Value, required: bool| {
            let s = json!({"type":"object","properties":{name: prop},"required": if required { vec![name] } else { vec![] }});
            signature(&s)
        };
        assert_eq!(
            one("quality", json!({"type":"integer","minimum":1,"maximum":100,"default":80}), false),
            "[quality: int 1..100 = 80]"
        );
        assert_eq!(one("enabled", json!({"type":"boolean"}), true), "enabled: bool");
        assert_eq!(one("mode", json!({"type":"string","enum":["a","b"]}), true), r#"mode: "a"|"b""#);
        assert_eq!(one("tags", json!({"type":"array","items":{"type":"string"}}), true), "tags: string[]");
        assert_eq!(
            one("ids", json!({"type":"array","items":{"type":"integer","minimum":0}}), true),
            "ids: (int >=0)[]"
        );
        assert_eq!(one("modes", json!({"type":"array","items":{"enum":["a","b"]}}), true), r#"modes: ("a"|"b")[]"#);
        assert_eq!(
            one("grid", json!({"type":"array","items":{"type":"array","items":{"type":"number"}}}), true),
            "grid: number[][]"
        );
        assert_eq!(one("list", json!({"type":"array"}), true), "list: array");
        assert_eq!(one("cfg", json!({"type":"object","properties":{"a":{"type":"string"}}}), true), "cfg: object");
        assert_eq!(one("note", json!({"type":["string","null"]}), false), "[note: string|null]");
        assert_eq!(
            one("n", json!({"anyOf":[{"type":"integer"},{"type":"null"}],"default":null}), false),
            "[n: int|null = null]"
        );
        assert_eq!(
            one("ratio", json!({"type":"number","exclusiveMinimum":0,"maximum":1}), true),
            "ratio: number >0 <=1"
        );
        assert_eq!(one("big", json!({"type":"integer","minimum":10}), true), "big: int >=10");
        assert_eq!(one("fixed", json!({"const":"v1"}), true), r#"fixed: "v1""#);
        assert_eq!(one("any", json!({}), true), "any: any");
        assert_eq!(
            one("tags", json!({"type":"array","items":{"type":"string"},"default":["a"]}), false),
            r#"[tags: string[] = ["a"]]"#
        );
        let s = json!({"properties":{"lvl":{"$ref":"#/$defs/L"}},"$defs":{"L":{"type":"integer","minimum":0,"maximum":9,"default":5}}});
        assert_eq!(signature(&s), "[lvl: int 0..9 = 5]");
    }

    #[test]
    fn signature_of_nothing_is_empty() {
        assert_eq!(signature(&json!({})), "");
        assert_eq!(signature(&json!({"type":"object","properties":{}})), "");
        assert_eq!(signature(&Value::Null), "");
        assert_eq!(signature(&json!([1])), "");
    }

    // --- properties ---------------------------------------------------------------------------

    proptest! {
        #[test]
        fn string_values_round_trip_unchanged(text in any::<String>()) {
            prop_assert_eq!(build_arguments(&zip_schema(), &[format!("zip={text}")], None).unwrap(), json!({"zip": text.clone()}));
            let nullable = one_prop(json!({"type":["string","null"]}));
            prop_assert_eq!(build_arguments(&nullable, &[format!("x={text}")], None).unwrap(), json!({"x": text.clone()}));
            let nested = json!({"properties":{"a":{"type":"object","properties":{"s":{"type":"string"}}}}});
            prop_assert_eq!(build_arguments(&nested, &[format!("a.s={text}")], None).unwrap(), json!({"a":{"s": text}}));
        }

        #[test]
        fn integers_round_trip(n in any::<i64>()) {
            prop_assert_eq!(build_arguments(&volume_schema(), &[format!("volume={n}")], None).unwrap(), json!({"volume": n}));
        }

        #[test]
        fn building_never_panics(ws in proptest::collection::vec("[a-z.:=\\[\\],{}\"0-9 ]{0,12}", 0..4)) {
            let _ = build_arguments(&otto_schema(), &ws, None);
            let _ = build_arguments(&json!({}), &ws, None);
        }
    }
}
