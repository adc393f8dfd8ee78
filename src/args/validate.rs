//! [`validate`]: the JSON Schema rules through the `jsonschema` crate (compiled validators
//! cached), each failure explained at its argument, in the schema's property order.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock, Mutex};

use super::build::*;
use super::error::*;
use super::render::*;
use super::schema::*;
use super::suggest::*;

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
    // The schemas devices declare are checked directly; only a schema outside that subset, or
    // arguments that fail, need the compiled validator (which also explains the failure).
    if super::fast::accepts(root, args) {
        return Ok(());
    }
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

/// [`validate`] for a schema held as an object (a tool's `inputSchema`): arguments the direct
/// check accepts cost no copy of the schema.
pub fn validate_object(schema: &Map<String, Value>, args: &Value) -> Result<(), Vec<ArgError>> {
    if super::fast::accepts_object(schema, args) {
        return Ok(());
    }
    validate(&Value::Object(schema.clone()), args)
}

/// The compiled validator of a schema, from a process-wide cache keyed by the schema's text: the
/// hub validates every call made through its MCP endpoint, and compiling a schema (with its
/// meta-schema check) costs far more than validating against it. Bounded: cleared past 1,024
/// distinct schemas.
pub(super) fn compiled(root: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static CACHE: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = LazyLock::new(Default::default);
    const LIMIT: usize = 1024;
    let key = root.to_string();
    if let Some(v) = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key) {
        return Ok(v.clone());
    }
    let validator = Arc::new(jsonschema::validator_for(root).map_err(|e| e.to_string())?);
    let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cache.len() >= LIMIT {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

impl<'a> Ctx<'a> {
    /// The schema object holding the keyword at `schema_path` (a JSON pointer ending in the
    /// keyword), following `$ref` segments.
    pub(super) fn keyword_parent(&self, schema_path: &str) -> Option<&'a Value> {
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
    pub(super) fn order_key(&self, path: &[Seg]) -> Vec<usize> {
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
    pub(super) fn explain(&self, e: &jsonschema::ValidationError<'_>, args: &Value, out: &mut Vec<(Vec<usize>, ArgError)>) {
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
                let message = format!("must be {}, got {got}", join_or(&phrases));
                push(&path, simple(match node {
                    Some(n) => super::render::with_allowed(message, n),
                    None => message,
                }));
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
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// `a.b`, `tags[1]`, `` for the root.
pub(super) fn render_path(path: &[Seg]) -> String {
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
pub(super) fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|p| p.replace("~1", "/").replace("~0", "~")).collect()
}

/// An instance pointer as path parts, using the instance to tell indices from keys.
pub(super) fn instance_segments(pointer: &str, instance: &Value) -> Vec<Seg> {
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
