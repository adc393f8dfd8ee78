//! [`super::fast::accepts`] against the `jsonschema` crate: it never says yes where `jsonschema`
//! says no, and for the schemas devices declare it says yes whenever `jsonschema` does (so the
//! quick path is really taken).

use super::fast::accepts;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn full(schema: &Value, args: &Value) -> bool {
    jsonschema::validator_for(schema).is_ok_and(|v| v.is_valid(args))
}

#[test]
fn the_stock_schemas_are_accepted_quickly_and_exactly() {
    let volume = json!({"type":"object","properties":{"volume":{"type":"integer","minimum":0,"maximum":100}},"required":["volume"]});
    let theme = json!({"type":"object","properties":{"theme":{"type":"string"}},"required":["theme"]});
    let none = json!({"type":"object","properties":{}});
    for (schema, args, valid) in [
        (&volume, json!({"volume": 50}), true),
        (&volume, json!({"volume": 0}), true),
        (&volume, json!({"volume": 100}), true),
        (&volume, json!({"volume": 101}), false),
        (&volume, json!({"volume": -1}), false),
        (&volume, json!({"volume": "50"}), false),
        (&volume, json!({}), false),
        (&theme, json!({"theme": "dark"}), true),
        (&theme, json!({"theme": 1}), false),
        (&none, json!({}), true),
        (&none, json!({"extra": 1}), true),
    ] {
        assert_eq!(accepts(schema, &args), valid, "{schema} {args}");
        assert_eq!(full(schema, &args), valid, "jsonschema: {schema} {args}");
    }
}

#[test]
fn schemas_outside_the_subset_go_to_the_full_validator() {
    for schema in [
        json!({"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}}),
        json!({"type":"object","properties":{"s":{"format":"email"}}}),
        json!({"type":["object","null"]}),
        json!({"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}),
        json!({"type":"object","properties":{"n":{"type":"integer","minimum":"0"}}}),
        json!({"type":"object","required":["a","a"]}),
        json!({"type":"object","additionalProperties":{"type":"string"}}),
        json!({"type":"object","properties":{"e":{"enum":[1,2]}}}),
        json!({"type":"object","x-vendor":true}),
        // An unusable property schema is refused even when the argument is absent.
        json!({"type":"object","properties":{"n":{"type":"integer","maxLength":-1}}}),
    ] {
        assert!(!accepts(&schema, &json!({})), "{schema}");
    }
    // `jsonschema` calls 5.0 an integer; the quick path leaves floats to it.
    assert!(!accepts(&json!({"properties":{"n":{"type":"integer"}}}), &json!({"n": 5.0})));
    assert!(full(&json!({"properties":{"n":{"type":"integer"}}}), &json!({"n": 5.0})));
}

/// A property schema from the subset: a type, and the rules that go with it.
fn property() -> impl Strategy<Value = Value> {
    // Small ranges, so arguments often fall exactly on a bound.
    let bound = prop_oneof![(-4i64..4).prop_map(|n| json!(n)), (-4i64..4).prop_map(|n| json!(n as f64 + 0.5))];
    let names = proptest::collection::vec("[a-c]{1,2}", 1..4);
    prop_oneof![
        (proptest::option::of(bound.clone()), proptest::option::of(bound.clone()), proptest::option::of(bound), any::<bool>())
            .prop_map(|(min, max, xmin, integer)| {
                let mut p = Map::new();
                p.insert("type".into(), json!(if integer { "integer" } else { "number" }));
                if let Some(v) = min { p.insert("minimum".into(), v); }
                if let Some(v) = max { p.insert("maximum".into(), v); }
                if let Some(v) = xmin { p.insert("exclusiveMinimum".into(), v); }
                Value::Object(p)
            }),
        (proptest::option::of(0u64..5), proptest::option::of(0u64..5)).prop_map(|(min, max)| {
            let mut p = Map::new();
            p.insert("type".into(), json!("string"));
            if let Some(v) = min { p.insert("minLength".into(), json!(v)); }
            if let Some(v) = max { p.insert("maxLength".into(), json!(v)); }
            Value::Object(p)
        }),
        names.prop_map(|mut options| {
            options.sort();
            options.dedup();
            json!({"type": "string", "enum": options, "description": "one of"})
        }),
        Just(json!({"type": "boolean", "default": true})),
        Just(json!({"type": "null"})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    (proptest::collection::btree_map("[a-d]", property(), 0..4), proptest::collection::btree_set("[a-e]", 0..3), proptest::option::of(any::<bool>()))
        .prop_map(|(props, required, additional)| {
            let mut s = json!({"type": "object", "properties": props, "required": required});
            if let Some(a) = additional {
                s["additionalProperties"] = json!(a);
            }
            s
        })
}

/// Also numbers a float cannot hold exactly, which the quick path leaves to `jsonschema`.
fn any_argument() -> impl Strategy<Value = Value> {
    prop_oneof![argument(), Just(json!(u64::MAX)), Just(json!(i64::MIN)), Just(json!(9_007_199_254_740_993u64))]
}

fn argument() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-5i64..5).prop_map(|n| json!(n)),
        (-5i64..5).prop_map(|n| json!(n as f64 + 0.5)),
        "[a-cé]{0,6}".prop_map(|s| json!(s)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(Value::Null),
        Just(json!([1])),
        Just(json!({"k": 1})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn agrees_with_jsonschema_on_the_subset(schema in schema(), args in proptest::collection::btree_map("[a-e]", argument(), 0..5)) {
        let args = json!(args);
        prop_assert_eq!(accepts(&schema, &args), full(&schema, &args), "schema {} args {}", schema, args);
    }

    #[test]
    fn never_accepts_what_jsonschema_refuses(schema in any_schema(), args in proptest::collection::btree_map("[a-e]", any_argument(), 0..4)) {
        let args = json!(args);
        if accepts(&schema, &args) {
            prop_assert!(full(&schema, &args), "schema {} args {}", schema, args);
        }
    }
}

/// Schemas with keywords and values inside and outside the subset, well-formed or not.
fn any_schema() -> impl Strategy<Value = Value> {
    let keyword = prop_oneof![
        Just("type"), Just("minimum"), Just("maximum"), Just("exclusiveMaximum"), Just("minLength"), Just("maxLength"),
        Just("enum"), Just("required"), Just("additionalProperties"), Just("pattern"), Just("const"), Just("default"),
        Just("title"), Just("$schema"), Just("format"), Just("items"),
    ];
    let value = prop_oneof![
        any_argument(),
        Just(json!("integer")), Just(json!("string")), Just(json!(["a", "b"])), Just(json!(["a", "a"])), Just(json!([])),
        Just(json!("https://json-schema.org/draft/2020-12/schema")), Just(json!("http://json-schema.org/draft-04/schema#")),
    ];
    let node = proptest::collection::btree_map(keyword, value, 0..4).prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    (proptest::collection::btree_map("[a-e]", node.clone(), 0..3), node).prop_map(|(props, mut root)| {
        root["properties"] = json!(props);
        root
    })
}
