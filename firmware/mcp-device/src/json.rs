//! Writing JSON text straight into a `String`.
//!
//! The device builds its replies as text, not as `serde_json::Value` trees: key order stays the
//! one the stock firmware uses, and a tools page needs one buffer instead of a tree plus a copy.

use alloc::string::String;
use core::fmt::Write;
use serde_json::Value;

/// Appends `s` as a JSON string literal (quotes included), escaping what JSON requires.
pub fn push_str_literal(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The length `push_str_literal` would add, without writing anything.
pub fn str_literal_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// Appends a decimal integer.
pub fn push_int(out: &mut String, n: i64) {
    let _ = write!(out, "{n}");
}

/// Appends any `serde_json::Value` (request ids, notification values, tool-supplied JSON) as
/// compact JSON, the text `serde_json::to_string` gives. Written here rather than through
/// serde_json's serializer, which the firmware then does not link (about 3 KB on the ESP32-C3).
pub fn push_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // Number's Display is serde_json's own number text.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => push_str_literal(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_str_literal(out, key);
                out.push(':');
                push_value(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        let mut s = String::new();
        push_str_literal(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
        assert_eq!(str_literal_len("a\"b\\c\nd\u{1}é"), s.len());
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let values = serde_json::json!([
            null, true, false, 0, -7, u64::MAX, i64::MIN, 1.5, -0.25, 1e300, 5e-324, 100.0,
            "", "é\u{7f}\u{1f}\u{0}\"\\/\t", [], {}, [[1, [2]], {"a": {"b": [null]}}],
            {"z": 1, "a": 2, "m\n": "x"}
        ]);
        for v in values.as_array().unwrap().iter().chain([&values]) {
            let mut s = String::new();
            push_value(&mut s, v);
            assert_eq!(s, serde_json::to_string(v).unwrap());
        }
    }
}
