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
use std::fmt::Write as _;

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
    let mut s = if argument.is_empty() {
        format!("arguments: {message}")
    } else {
        format!("argument '{argument}': {message}")
    };
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
pub fn build_arguments(
    schema: &Value,
    words: &[String],
    args_json: Option<&str>,
) -> Result<Value, ArgError> {
    let empty = Value::Object(Map::new());
    let ctx = Ctx { root: if schema.is_object() { schema } else { &empty } };
    let mut out = match args_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(other) => {
                return Err(ArgError::new(
                    "",
                    format!("--args-json must be a JSON object, got {}", show(&other)),
                ));
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
                Some(node) => ctx.coerce(node, raw, 0).map_err(|p| p.into_error(key))?,
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
        let entry = cur.entry(seg.clone()).or_insert_with(|| Value::Object(Map::new()));
        let shown = show(entry);
        cur = match entry {
            Value::Object(m) => m,
            _ => {
                return Err(ArgError::new(
                    path[..=i].join("."),
                    format!("is {shown} in --args-json, not an object, so '{key}' can't be set"),
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
    fn coerce(&self, node: &'a Value, raw: &str, depth: usize) -> Result<Value, Problem> {
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
        let Some(alts) = self.alternatives(node) else {
            return Ok(untyped(raw));
        };
        let mut problems = Vec::new();
        for alt in &alts {
            let attempt = match alt {
                Alt::Type(t, n) => self.coerce_type(t, n, raw, depth),
                Alt::Member(m) => self.coerce(m, raw, depth + 1),
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

    fn coerce_type(&self, t: &str, node: &'a Value, raw: &str, depth: usize) -> Result<Value, Problem> {
        if t == "string" {
            return Ok(Value::String(raw.to_string()));
        }
        let trimmed = raw.trim();
        if trimmed.is_empty() && matches!(t, "integer" | "number" | "boolean" | "null" | "array" | "object") {
            let hint = match t {
                "array" => " (write KEY:=[] for an empty list)",
                "object" => " (write KEY:={} for an empty object)",
                "null" => " (write KEY:=null)",
                _ => "",
            };
            return Err(Problem::new(format!("no value given (expected {}){hint}", type_phrase(t))));
        }
        match t {
            "integer" => parse_integer(trimmed).map_err(Problem::new),
            "number" => parse_number(trimmed).ok_or_else(|| Problem::new(format!("must be a number, got {}", show_raw(raw)))),
            "boolean" => parse_bool(trimmed).map(Value::Bool).ok_or_else(|| {
                Problem::new(format!("must be a boolean (true/false, yes/no, on/off, 1/0), got {}", show_raw(raw)))
            }),
            "null" if trimmed == "null" => Ok(Value::Null),
            "null" => Err(Problem::new(format!("must be null, got {}", show_raw(raw)))),
            "array" => self.coerce_array(node, raw, depth),
            "object" => match serde_json::from_str::<Value>(trimmed) {
                Ok(v @ Value::Object(_)) => Ok(v),
                Ok(other) => Err(Problem::new(format!(
                    "must be a JSON object (or set one field with KEY.field=value), got {}",
                    show(&other)
                ))),
                Err(e) if trimmed.starts_with('{') => Err(Problem::new(format!("is not valid JSON: {e}"))),
                Err(_) => Err(Problem::new(format!(
                    "must be a JSON object (or set one field with KEY.field=value), got {}",
                    show_raw(raw)
                ))),
            },
            // A type name JSON Schema does not define: don't guess.
            _ => Ok(untyped(raw)),
        }
    }

    fn coerce_array(&self, node: &'a Value, raw: &str, depth: usize) -> Result<Value, Problem> {
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
                Some(i) => self.coerce(i, part, depth + 1).map_err(|mut p| {
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
    fn alternatives(&self, node: &'a Value) -> Option<Vec<Alt<'a>>> {
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
                if enum_options(r).is_some() || self.alternatives(r).is_some() {
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
        match self.alternatives(node) {
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
        let Some(alts) = self.alternatives(node) else {
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
                push(&path, simple(format!("must be at least {} long, got {got} ({})", chars(*limit), chars(n as u64))));
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
                    simple(format!(
                        "matches more than one of the allowed forms ({}), got {got}",
                        phrases.join("; ")
                    )),
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
    pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect()
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
    let expected = if node.get("const").is_some() {
        show(options[0])
    } else {
        format!("one of {}", list_values(options, ", "))
    };
    let message = if trimmed.is_empty() {
        format!("no value given (expected {expected})")
    } else {
        format!("must be {expected}, got {}", show_raw(raw))
    };
    let mut p = Problem::new(message);
    p.suggestions = suggest(raw, options.iter().filter_map(|o| o.as_str())).into_iter().map(String::from).collect();
    Err(p)
}

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
            if f >= -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18 {
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
    if f.fract() == 0.0 && f >= -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18 {
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
    let validator = jsonschema::validator_for(root).map_err(|e| {
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

// ---------------------------------------------------------------------------------------------
// suggest

/// "Did you mean": up to 3 candidates close to `name`, best first.
///
/// Compared ignoring case, by Damerau-Levenshtein distance (at most a third of the longer name,
/// at least 1 edit allowed on names of 2+ characters; Jaro-Winkler breaks ties). Dotted names
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
    let allowed = (longer / 3).max(usize::from(longer >= 2));
    (d <= allowed && d < longer).then(|| 0.95 - d as f64 / longer as f64 * 0.5)
}

/// Whether `needle` occurs in `hay` delimited by the start/end or `.`, `_`, `-`, ` `.
fn contains_word(hay: &str, needle: &str) -> bool {
    let is_sep = |c: Option<char>| c.is_none_or(|c| matches!(c, '.' | '_' | '-' | ' '));
    hay.match_indices(needle).any(|(i, m)| is_sep(hay[..i].chars().next_back()) && is_sep(hay[i + m.len()..].chars().next()))
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
}
