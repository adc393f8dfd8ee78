//! [`accepts`]: a quick yes for the schemas devices really declare, so accepting a valid call
//! does not compile a JSON Schema first.
//!
//! Compiling a schema with the `jsonschema` crate checks it against its meta-schema, which costs
//! about 5 ms: more than everything else a one-shot `mcpdev call` does. The tools xiaozhi devices
//! declare use a handful of keywords (an object of scalar properties with `required`, ranges,
//! lengths and string enums), and for those a direct check is exact.
//!
//! It only ever answers `true` when `jsonschema` would accept the arguments too: a schema with
//! any keyword or value outside that subset, and any argument it finds wrong, gets `false`, and
//! the caller runs the full validator, which also explains what is wrong. Cross-checked against
//! `jsonschema` by a property test and by the `args` fuzz target.

use serde_json::{Map, Number, Value};

/// How deep nested object properties are followed before handing over to the full validator.
const MAX_DEPTH: usize = 8;

/// Integers beyond this magnitude are not compared with floats here (an `f64` loses them).
const EXACT_IN_F64: u64 = 1 << 53;

/// Whether `args` certainly fits `schema`: `true` only if the schema stays within the subset
/// this module knows and every rule holds. `false` means "ask the full validator".
pub fn accepts(schema: &Value, args: &Value) -> bool {
    let Some(root) = schema.as_object() else { return false };
    // The draft decides details (what an integer is, boolean `exclusiveMinimum`): only the
    // default one, 2020-12, is handled here.
    match root.get("$schema") {
        None => {}
        Some(Value::String(s)) if s == "https://json-schema.org/draft/2020-12/schema" => {}
        Some(_) => return false,
    }
    node(root, args, 0)
}

fn node(schema: &Map<String, Value>, value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    schema.iter().all(|(keyword, rule)| match keyword.as_str() {
        "$schema" => depth == 0,
        "type" => matches_type(rule, value),
        "properties" => properties(rule, value, depth),
        "required" => required(rule, value),
        "additionalProperties" => additional(rule, schema.get("properties"), value),
        "minimum" => bound(rule, value, |o| o.is_ge()),
        "maximum" => bound(rule, value, |o| o.is_le()),
        "exclusiveMinimum" => bound(rule, value, |o| o.is_gt()),
        "exclusiveMaximum" => bound(rule, value, |o| o.is_lt()),
        "minLength" => length(rule, value, |len, n| len >= n),
        "maxLength" => length(rule, value, |len, n| len <= n),
        "enum" => string_enum(rule, value),
        // Annotations: no effect on validity, but the meta-schema checks their type.
        "description" | "title" | "$comment" => rule.is_string(),
        "deprecated" | "readOnly" | "writeOnly" => rule.is_boolean(),
        "examples" => rule.is_array(),
        "default" => true,
        _ => false,
    })
}

fn matches_type(rule: &Value, value: &Value) -> bool {
    match rule.as_str() {
        Some("object") => value.is_object(),
        Some("string") => value.is_string(),
        Some("integer") => value.as_number().is_some_and(|n| n.is_i64() || n.is_u64()),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("null") => value.is_null(),
        Some("array") => value.is_array(),
        _ => false,
    }
}

fn properties(rule: &Value, value: &Value, depth: usize) -> bool {
    let Some(props) = rule.as_object() else { return false };
    // Every property's schema must be in the subset, present in the arguments or not (the full
    // validator rejects an unusable schema whatever the arguments).
    props.values().all(|p| p.is_object()) && {
        let given = value.as_object();
        props.iter().all(|(name, p)| {
            let p = p.as_object().expect("checked above");
            match given.and_then(|g| g.get(name)) {
                Some(v) => node(p, v, depth + 1),
                None => in_subset(p, depth + 1),
            }
        })
    }
}

/// Whether a schema uses only what this module knows, whatever value it is checked against
/// (for properties the arguments leave out).
fn in_subset(schema: &Map<String, Value>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    schema.iter().all(|(keyword, rule)| match keyword.as_str() {
        "type" => matches!(rule.as_str(), Some("object" | "string" | "integer" | "number" | "boolean" | "null" | "array")),
        "properties" => rule.as_object().is_some_and(|ps| ps.values().all(|p| p.as_object().is_some_and(|p| in_subset(p, depth + 1)))),
        "required" => required_names(rule).is_some(),
        "additionalProperties" => rule.is_boolean(),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => rule.is_number(),
        "minLength" | "maxLength" => rule.is_u64(),
        "enum" => enum_strings(rule).is_some(),
        "description" | "title" | "$comment" => rule.is_string(),
        "deprecated" | "readOnly" | "writeOnly" => rule.is_boolean(),
        "examples" => rule.is_array(),
        "default" => true,
        _ => false,
    })
}

fn required(rule: &Value, value: &Value) -> bool {
    let Some(names) = required_names(rule) else { return false };
    match value.as_object() {
        Some(given) => names.iter().all(|n| given.contains_key(*n)),
        None => true,
    }
}

/// `required`'s names; `None` unless it is an array of distinct strings (the meta-schema's rule).
fn required_names(rule: &Value) -> Option<Vec<&str>> {
    let names: Vec<&str> = rule.as_array()?.iter().map(Value::as_str).collect::<Option<_>>()?;
    distinct(&names).then_some(names)
}

fn additional(rule: &Value, props: Option<&Value>, value: &Value) -> bool {
    match (rule, value.as_object()) {
        (Value::Bool(true), _) => true,
        (Value::Bool(false), Some(given)) => {
            let declared = props.and_then(Value::as_object);
            given.keys().all(|k| declared.is_some_and(|d| d.contains_key(k)))
        }
        (Value::Bool(false), None) => true,
        _ => false,
    }
}

fn bound(rule: &Value, value: &Value, holds: impl Fn(std::cmp::Ordering) -> bool) -> bool {
    let Value::Number(limit) = rule else { return false };
    match value {
        Value::Number(n) => compare(n, limit).is_some_and(holds),
        _ => true,
    }
}

/// Exact order of two JSON numbers, or `None` where a float cannot say it exactly.
fn compare(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
    let int = |n: &Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => {
            let small = |n: &Number| int(n).is_none_or(|i| i.unsigned_abs() <= u128::from(EXACT_IN_F64));
            if !small(a) || !small(b) {
                return None;
            }
            a.as_f64()?.partial_cmp(&b.as_f64()?)
        }
    }
}

fn length(rule: &Value, value: &Value, holds: impl Fn(u64, u64) -> bool) -> bool {
    let Some(n) = rule.as_u64() else { return false };
    match value {
        Value::String(s) => holds(s.chars().count() as u64, n),
        _ => true,
    }
}

fn string_enum(rule: &Value, value: &Value) -> bool {
    let Some(options) = enum_strings(rule) else { return false };
    value.as_str().is_some_and(|v| options.contains(&v))
}

/// An `enum` of distinct strings (what devices declare); `None` for anything else.
fn enum_strings(rule: &Value) -> Option<Vec<&str>> {
    let options: Vec<&str> = rule.as_array()?.iter().map(Value::as_str).collect::<Option<_>>()?;
    (!options.is_empty() && distinct(&options)).then_some(options)
}

fn distinct(names: &[&str]) -> bool {
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}
