//! Arguments built from a tool's `inputSchema`, for the calls `--call` and `--fuzz` make:
//! every property at its default (or a plausible value of its type), then each integer at its
//! minimum and at its maximum.
//!
//! Rules it enforces: every declared property gets a value (its default as given, else a
//! plausible value of its type, `null` for none), and nothing outside the schema's properties
//! is sent.

use serde_json::{Map, Value, json};

/// Argument sets: every property at its default (or a plausible value), then each integer at
/// its minimum and at its maximum.
pub fn argument_sets(schema: &Value) -> Vec<(String, Value)> {
    let props = schema["properties"].as_object().cloned().unwrap_or_default();
    let base: Map<String, Value> = props.iter().map(|(k, p)| (k.clone(), plausible(p))).collect();
    let mut sets = vec![("defaults".to_string(), Value::Object(base.clone()))];
    for (k, p) in &props {
        for bound in ["minimum", "maximum"] {
            if let Some(v) = p.get(bound).filter(|v| v.is_number()) {
                let mut args = base.clone();
                args.insert(k.clone(), v.clone());
                sets.push((format!("{k}={v} ({bound})"), Value::Object(args)));
            }
        }
    }
    sets
}

pub(crate) fn plausible(p: &Value) -> Value {
    if let Some(d) = p.get("default") {
        return d.clone();
    }
    match p["type"].as_str() {
        Some("integer" | "number") => p.get("minimum").cloned().unwrap_or(json!(0)),
        Some("boolean") => json!(false),
        Some("string") => p["enum"].get(0).cloned().unwrap_or(json!("mcpdev-check")),
        _ => Value::Null,
    }
}
