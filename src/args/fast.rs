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
    schema.as_object().is_some_and(|root| accepts_object(root, args))
}

/// [`accepts`] for a schema held as an object (a tool's `inputSchema`).
pub fn accepts_object(root: &Map<String, Value>, args: &Value) -> bool {
    // The draft decides details (what an integer is, boolean `exclusiveMinimum`): only the
    // default one, 2020-12, is handled here.
    match root.get("$schema") {
        None => {}
        Some(Value::String(s)) if s == "https://json-schema.org/draft/2020-12/schema" => {}
        Some(_) => return false,
    }
    node(root, Some(args), 0)
}

/// Whether every keyword of `schema` is one this module knows, with a well-formed rule, and, for
/// a `value` (`None`: a property the arguments leave out, whose schema must still be usable),
/// holds for it.
fn node(schema: &Map<String, Value>, value: Option<&Value>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let holds = |check: &dyn Fn(&Value) -> bool| value.is_none_or(check);
    schema.iter().all(|(keyword, rule)| match keyword.as_str() {
        "$schema" => depth == 0,
        "type" => TYPES.contains(&rule.as_str().unwrap_or_default()) && holds(&|v| matches_type(rule, v)),
        "properties" => properties(rule, value, depth),
        "required" => required_names(rule).is_some_and(|names| holds(&|v| v.as_object().is_none_or(|given| names.iter().all(|n| given.contains_key(*n))))),
        "additionalProperties" => rule.is_boolean() && holds(&|v| additional(rule, schema.get("properties"), v)),
        "minimum" => bound(rule, value, std::cmp::Ordering::is_ge),
        "maximum" => bound(rule, value, std::cmp::Ordering::is_le),
        "exclusiveMinimum" => bound(rule, value, std::cmp::Ordering::is_gt),
        "exclusiveMaximum" => bound(rule, value, std::cmp::Ordering::is_lt),
        "minLength" => length(rule, value, |len, n| len >= n),
        "maxLength" => length(rule, value, |len, n| len <= n),
        "enum" => enum_strings(rule).is_some_and(|options| holds(&|v| v.as_str().is_some_and(|s| options.contains(&s)))),
        // Annotations: no effect on validity, but the meta-schema checks their type.
        "description" | "title" | "$comment" => rule.is_string(),
        "deprecated" | "readOnly" | "writeOnly" => rule.is_boolean(),
        "examples" => rule.is_array(),
        "default" => true,
        _ => false,
    })
}

const TYPES: [&str; 7] = ["object", "string", "integer", "number", "boolean", "null", "array"];

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

/// Each property's schema against its argument; every one must be usable, given or not (the
/// full validator refuses an unusable schema whatever the arguments).
fn properties(rule: &Value, value: Option<&Value>, depth: usize) -> bool {
    let Some(props) = rule.as_object() else { return false };
    let given = value.and_then(Value::as_object);
    props.iter().all(|(name, p)| p.as_object().is_some_and(|p| node(p, given.and_then(|g| g.get(name)), depth + 1)))
}

/// `required`'s names; `None` unless it is an array of distinct strings (the meta-schema's rule).
fn required_names(rule: &Value) -> Option<Vec<&str>> {
    let names: Vec<&str> = rule.as_array()?.iter().map(Value::as_str).collect::<Option<_>>()?;
    distinct(&names).then_some(names)
}

fn additional(rule: &Value, props: Option<&Value>, value: &Value) -> bool {
    match (rule, value.as_object()) {
        (Value::Bool(false), Some(given)) => {
            let declared = props.and_then(Value::as_object);
            given.keys().all(|k| declared.is_some_and(|d| d.contains_key(k)))
        }
        _ => true,
    }
}

fn bound(rule: &Value, value: Option<&Value>, holds: impl Fn(std::cmp::Ordering) -> bool) -> bool {
    let Value::Number(limit) = rule else { return false };
    match value {
        Some(Value::Number(n)) => compare(n, limit).is_some_and(holds),
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

fn length(rule: &Value, value: Option<&Value>, holds: impl Fn(u64, u64) -> bool) -> bool {
    let Some(n) = rule.as_u64() else { return false };
    match value {
        Some(Value::String(s)) => holds(s.chars().count() as u64, n),
        _ => true,
    }
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
