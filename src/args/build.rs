//! [`build_arguments`]: `k=v` words (and `--args-json`) into the arguments object, each value
//! typed by the schema of the property it names; unknown and misspelled names.

use serde_json::{Map, Value};
use std::fmt::Write as _;

use super::error::*;
use super::render::*;
use super::schema::*;
use super::suggest::*;

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
    if let Some(e) = undeclared_for_required(ctx.resolve(ctx.root), &out, &seen) {
        return Err(e);
    }
    Ok(Value::Object(out))
}

/// Puts `value` at `path`, creating objects on the way.
pub(super) fn insert_at(map: &mut Map<String, Value>, path: &[String], value: Value, key: &str) -> Result<(), ArgError> {
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
pub(super) fn untyped(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

pub(super) const SYNTAX: &str = "expected key=value, key:=json or a.b=value";

impl<'a> Ctx<'a> {
    /// `key`, the raw value, and whether it was `:=` (raw JSON).
    pub(super) fn split_word<'w>(&self, word: &'w str) -> Result<(&'w str, &'w str, bool), ArgError> {
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


    /// Walks the key parts through the schema: the object path to set, and the schema typing
    /// the value (`None`: untyped).
    pub(super) fn locate(&self, segs: &[&str], key: &str) -> Result<(Vec<String>, Option<&'a Value>), ArgError> {
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

}

pub(super) fn unknown_message(parent: &str, declared: &[&str]) -> String {
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
pub(super) fn is_likely_typo(name: &str, declared: &str) -> bool {
    let (a, b) = (name.to_lowercase(), declared.to_lowercase());
    if a == b {
        return true;
    }
    // An abbreviation: `vol` for `volume`.
    if a.chars().count() >= 2 && b.starts_with(&a) {
        return true;
    }
    let d = strsim::damerau_levenshtein(&a, &b);
    let longer = a.chars().count().max(b.chars().count());
    d <= 2 && 2 * d < longer
}

/// An undeclared top-level name given while a required argument is missing: the name is the
/// mistake (`v=50` for a tool that requires `volume`), named with the missing ones closest first.
fn undeclared_for_required(root: &Value, given: &Map<String, Value>, words: &[(Vec<String>, &str)]) -> Option<ArgError> {
    let props = root.get("properties").and_then(Value::as_object)?;
    let missing: Vec<&str> =
        root.get("required").and_then(Value::as_array)?.iter().filter_map(Value::as_str).filter(|r| props.contains_key(*r) && !given.contains_key(*r)).collect();
    if missing.is_empty() {
        return None;
    }
    let (path, _) = words.iter().find(|(path, _)| path.first().is_some_and(|first| !props.contains_key(first)))?;
    let name = &path[0];
    let mut closest = suggest(name, missing.iter().copied());
    if closest.is_empty() {
        closest = missing;
    }
    let declared: Vec<&str> = props.keys().map(String::as_str).collect();
    Some(ArgError::new(name.clone(), unknown_message("", &declared)).with_suggestions(closest))
}

pub(super) fn is_false(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(false)))
}
