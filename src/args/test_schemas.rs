//! The stock xiaozhi schemas and the helpers the `args` unit tests share ([`super::tests`],
//! [`super::validate_tests`]).

use super::*;
use super::validate::*;
use serde_json::{Value, json};

// --- stock xiaozhi schemas, byte for byte as the devices send them -----------------------

pub(super) fn volume_schema() -> Value {
    json!({"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]})
}

pub(super) fn optional_volume_schema() -> Value {
    json!({"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}}})
}

pub(super) fn theme_schema() -> Value {
    json!({"type":"object","properties":{"theme":{"type":"string"}},"required":["theme"]})
}

pub(super) fn otto_schema() -> Value {
    serde_json::from_str(r#"{"type":"object","properties":{"action":{"type":"string","default":"sit"},"steps":{"type":"integer","default":3,"minimum":1,"maximum":100},"speed":{"type":"integer","default":700,"minimum":100,"maximum":3000},"direction":{"type":"integer","default":1,"minimum":-1,"maximum":1},"amount":{"type":"integer","default":0,"minimum":0,"maximum":170},"arm_swing":{"type":"integer","default":50,"minimum":0,"maximum":170}}}"#).unwrap()
}

pub(super) fn zip_schema() -> Value {
    json!({"type":"object","properties":{"zip":{"type":"string"},"name":{"type":"string"}},"required":["zip"]})
}

pub(super) fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

pub(super) fn build(schema: &Value, ws: &[&str]) -> Result<Value, ArgError> {
    build_arguments(schema, &words(ws), None)
}

pub(super) fn build_ok(schema: &Value, ws: &[&str]) -> Value {
    build(schema, ws).unwrap_or_else(|e| panic!("{ws:?}: {e}"))
}

/// The error as displayed.
pub(super) fn build_err(schema: &Value, ws: &[&str]) -> String {
    match build(schema, ws) {
        Ok(v) => panic!("{ws:?} built {v}"),
        Err(e) => e.to_string(),
    }
}

/// The errors as displayed.
pub(super) fn invalid(schema: &Value, args: Value) -> Vec<String> {
    match validate(schema, &args) {
        Ok(()) => panic!("{args} passed"),
        Err(es) => es.iter().map(ToString::to_string).collect(),
    }
}

pub(super) fn one_prop(prop: Value) -> Value {
    json!({"type":"object","properties":{"x": prop}})
}
