//! One page of a listing (`tools/list`, `resources/list`, …) read from the answer's text: its
//! items one at a time, and its `nextCursor`.
//!
//! Rules:
//! - No tree of the whole page is built and then copied: each item is read from the text on its
//!   own, and kept with no spare room (maps and arrays exactly as large as what they hold), so a
//!   page of many small items costs a small multiple of its text, not the 80 times a JSON tree
//!   of `[{"a":0},…]` costs.
//! - A page that is not an object, or whose items are not an array, has no items; an item that
//!   is not an object with the string field the spec requires of it ([`required_field`]: a
//!   tool's `name`, a resource's `uri`) is skipped (counted, logged), not kept.
//! - An item made of more than [`DENSE_FLOOR`] JSON values must average at least
//!   [`BYTES_PER_VALUE`] bytes of text a value, or it is skipped and named in the log: its values
//!   are counted on the text before any is built. A value costs 80 bytes and more in memory, so
//!   `"enum":[0,0,0,…]` would cost 40 times its text; real declarations average 10 and more.

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Appends the items under `key` of the page `result` to `items`; returns its `nextCursor`.
pub fn read(result: Option<&RawValue>, key: &str, items: &mut Vec<Value>) -> Option<String> {
    let result = result?;
    let fields: std::collections::BTreeMap<String, &RawValue> = serde_json::from_str(result.get()).ok()?;
    if let Some(list) = fields.get(key) {
        let mut skipped = 0usize;
        let mut de = serde_json::Deserializer::from_str(list.get());
        let required = required_field(key);
        let _ = Items { to: items, skipped: &mut skipped, required }.deserialize(&mut de);
        if skipped > 0 {
            tracing::warn!("{skipped} item(s) of the server's `{key}` were not objects with a string `{}`; skipped", required.unwrap_or("?"));
        }
    }
    fields.get("nextCursor").and_then(|c| serde_json::from_str::<String>(c.get()).ok())
}

/// The string field every item of a listing has (MCP 2025-11-25): `None` for a key not known.
pub fn required_field(key: &str) -> Option<&'static str> {
    match key {
        "tools" | "prompts" => Some("name"),
        "resources" => Some("uri"),
        "resourceTemplates" => Some("uriTemplate"),
        "tasks" => Some("taskId"),
        _ => None,
    }
}

/// Items with at most this many values are kept whatever their density.
pub const DENSE_FLOOR: usize = 256;
/// The fewest bytes of text a value, on average, of an item with more values than [`DENSE_FLOOR`].
pub const BYTES_PER_VALUE: usize = 4;

/// How many JSON values the text holds (itself and everything inside it), read without building any.
pub fn values_in(text: &RawValue) -> usize {
    let mut count = 0;
    let _ = Count(&mut count).deserialize(&mut serde_json::Deserializer::from_str(text.get()));
    count
}

struct Count<'c>(&'c mut usize);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        *self.0 += 1;
        while seq.next_element_seed(Count(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        *self.0 += 1;
        // A key costs its string: counted as a value.
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            *self.0 += 1;
            map.next_value_seed(Count(&mut *self.0))?;
        }
        Ok(())
    }
}

/// Whether an item's text is dense enough in values to be kept (see the module's rules).
fn sparse_enough(item: &RawValue) -> bool {
    let values = values_in(item);
    values <= DENSE_FLOOR || values * BYTES_PER_VALUE <= item.get().len()
}

/// Takes the items of a JSON array one by one.
struct Items<'v> {
    to: &'v mut Vec<Value>,
    skipped: &'v mut usize,
    required: Option<&'static str>,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of items")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if !sparse_enough(item) {
                let name = head_name(item, self.required);
                tracing::warn!("an item{} of the server's listing holds {} JSON values in {} bytes; mcpdev keeps no item that dense (fewer than {BYTES_PER_VALUE} bytes a value); skipped", name.map(|n| format!(" ({n:?})")).unwrap_or_default(), values_in(item), item.get().len());
                continue;
            }
            match serde_json::from_str::<Value>(item.get()) {
                Ok(v @ Value::Object(_)) if self.required.is_none_or(|f| v[f].is_string()) => self.to.push(compact(v)),
                _ => *self.skipped += 1,
            }
        }
        Ok(())
    }
}

/// The item's required string field (its name), read alone from the text, at most 100 characters.
fn head_name(item: &RawValue, required: Option<&str>) -> Option<String> {
    let fields: std::collections::BTreeMap<String, &RawValue> = serde_json::from_str(item.get()).ok()?;
    let name: String = serde_json::from_str(fields.get(required?)?.get()).ok()?;
    Some(name.chars().take(100).collect())
}

/// The same value with every map and array exactly as large as what it holds.
pub fn compact(v: Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.into_iter().map(compact).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, compact(v))).collect::<Map<String, Value>>()),
        other => other,
    }
}

/// Reads `nextCursor` and the items of a page given as text (for tests and callers that hold one).
pub fn read_text(text: &str, key: &str) -> (Vec<Value>, Option<String>) {
    let raw: Option<&RawValue> = Deserialize::deserialize(&mut serde_json::Deserializer::from_str(text)).ok();
    let mut items = Vec::new();
    let next = read(raw, key, &mut items);
    (items, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_from_the_text_and_what_is_no_object_is_skipped() {
        let (items, next) = read_text(r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}},7,"x",{"a":0},{"name":5},{"name":"b"}],"nextCursor":"c2","extra":[1,2]}"#, "tools");
        assert_eq!(items, [serde_json::json!({"name":"a","inputSchema":{"type":"object"}}), serde_json::json!({"name":"b"})]);
        assert_eq!(next.as_deref(), Some("c2"));
        // Key order is kept, and an escaped key or cursor is read as JSON reads it.
        let (items, next) = read_text(r#"{"nextCursor":"a\"b","tools":[{"z":1,"name":"n","k\u0041":3}]}"#, "tools");
        assert_eq!(items[0].as_object().unwrap().keys().collect::<Vec<_>>(), ["z", "name", "kA"]);
        let (items, _) = read_text(r#"{"resources":[{"uri":"u"},{"name":"no uri"}],"other":[{}]}"#, "resources");
        assert_eq!(items.len(), 1);
        assert_eq!(read_text(r#"{"other":[{},7]}"#, "other").0.len(), 1);
        assert_eq!(next.as_deref(), Some("a\"b"));
        for odd in ["null", "[]", r#"{"tools":{}}"#, r#"{"tools":"x","nextCursor":5}"#, r#"{"other":[{}]}"#] {
            assert_eq!(read_text(odd, "tools"), (vec![], None), "{odd}");
        }
    }

    #[test]
    fn values_are_counted_on_the_text_and_too_dense_an_item_is_skipped() {
        let raw = |t: &str| serde_json::from_str::<Box<RawValue>>(t).unwrap();
        assert_eq!(values_in(&raw(r#"{"a":[1,"x",null,true,{"b":2.5}]}"#)), 10);
        assert_eq!(values_in(&raw("7")), 1);
        let zeros = vec!["0"; 2 * DENSE_FLOOR].join(",");
        let dense = format!(r#"{{"tools":[{{"name":"n","inputSchema":{{"enum":[{zeros}]}}}},{{"name":"ok","inputSchema":{{"enum":[0,1,2]}}}}]}}"#);
        let (items, _) = read_text(&dense, "tools");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["name"], "ok");
        // The same count of values, each with text enough, is kept.
        let words = vec![r#""word""#; 2 * DENSE_FLOOR].join(",");
        let (items, _) = read_text(&format!(r#"{{"tools":[{{"name":"n","inputSchema":{{"enum":[{words}]}}}}]}}"#), "tools");
        assert_eq!(items.len(), 1);
    }

    #[test]
    fn a_compact_value_is_equal_and_has_no_spare_room() {
        let v: Value = serde_json::from_str(r#"{"a":[1,2,3,4,5],"b":{"c":{"d":[{"e":null}]}}}"#).unwrap();
        let c = compact(v.clone());
        assert_eq!(c, v);
        let a = c["a"].as_array().unwrap();
        assert_eq!(a.capacity(), a.len());
    }
}
