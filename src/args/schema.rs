//! Reading a tool's `inputSchema`: [`Ctx`] follows `$ref`s, finds an object's properties and a
//! node's alternatives (types, `anyOf`/`oneOf` members, enums).

use serde_json::{Map, Value};


/// How deep `$ref`/`anyOf`/`items` chains are followed before giving up (cycles).
pub(super) const MAX_DEPTH: usize = 32;

/// One way a value may be typed: a `type` name read against a schema node, or a union member.
pub(super) enum Alt<'a> {
    Type(&'a str, &'a Value),
    Member(&'a Value),
}

/// The schema being read; `root` is what `#/...` references resolve against.
pub(super) struct Ctx<'a> {
    pub(super) root: &'a Value,
}

impl<'a> Ctx<'a> {
    /// Follows `$ref`s that point inside the schema (`#`, `#/$defs/x`, `#/definitions/x`).
    pub(super) fn resolve(&self, mut node: &'a Value) -> &'a Value {
        for _ in 0..MAX_DEPTH {
            let Some(target) = node.get("$ref").and_then(Value::as_str).and_then(|r| self.lookup(r)) else {
                return node;
            };
            node = target;
        }
        node
    }

    pub(super) fn lookup(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(&percent_decode(fragment))
    }

    pub(super) fn props(&self, node: &'a Value) -> Option<&'a Map<String, Value>> {
        self.resolve(node).get("properties").and_then(Value::as_object)
    }


    /// The ways `node` may be typed, in declared order; `None` when it says nothing.
    pub(super) fn alternatives(&self, node: &'a Value, depth: usize) -> Option<Vec<Alt<'a>>> {
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
    pub(super) fn is_scalar(&self, node: &'a Value, depth: usize) -> bool {
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

}

/// `enum` members, or the `const` as the only member.
pub(super) fn enum_options(node: &Value) -> Option<Vec<&Value>> {
    if let Some(c) = node.get("const") {
        return Some(vec![c]);
    }
    node.get("enum").and_then(Value::as_array).map(|a| a.iter().collect())
}

/// The `type` names, when declared.
pub(super) fn declared_types(node: &Value) -> Option<Vec<&str>> {
    match node.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

pub(super) fn percent_decode(s: &str) -> String {
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
