//! The `args` module's unit tests of validation messages, suggestions, signatures and property
//! lists, and that building never panics (moved out of `tests.rs` to keep each file under 800
//! lines; the stock schemas are in [`super::test_schemas`]).

use super::*;
use super::build::*;
use super::render::*;
use super::validate::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::Arc;
use super::test_schemas::*;

// --- validate -----------------------------------------------------------------------------

#[test]
fn a_schema_is_compiled_once() {
    let schema = json!({"type": "object", "properties": {"cached_volume": {"type": "integer", "maximum": 100}}});
    let first = compiled(&schema).unwrap();
    assert!(Arc::ptr_eq(&first, &compiled(&schema.clone()).unwrap()), "the same schema text reuses the validator");
    let other = json!({"type": "object", "properties": {"cached_volume": {"type": "integer", "maximum": 99}}});
    assert!(!Arc::ptr_eq(&first, &compiled(&other).unwrap()));
    // Cached or not, the answers are the same.
    assert!(validate(&schema, &json!({"cached_volume": 101})).is_err());
    assert!(validate(&schema, &json!({"cached_volume": 100})).is_ok());
    assert!(compiled(&json!({"type": 12})).is_err(), "an unusable schema is an error, not cached as valid");
}

#[test]
fn validate_passes_good_arguments() {
    assert_eq!(validate(&volume_schema(), &json!({"volume":50})), Ok(()));
    assert_eq!(validate(&otto_schema(), &json!({})), Ok(()));
    assert_eq!(validate(&otto_schema(), &json!({"action":"walk","steps":2,"direction":-1})), Ok(()));
    assert_eq!(validate(&zip_schema(), &json!({"zip":"01234"})), Ok(()));
    assert_eq!(validate(&Value::Null, &json!({"anything":[1]})), Ok(()));
    assert_eq!(validate(&json!("nonsense"), &json!({})), Ok(()));
    assert_eq!(validate(&json!({}), &json!({"a":1})), Ok(()));
}

#[test]
fn validate_required_names_the_type() {
    assert_eq!(invalid(&volume_schema(), json!({})), ["argument 'volume': is required (integer 0..100)"]);
    assert_eq!(invalid(&theme_schema(), json!({})), ["argument 'theme': is required (string)"]);
    let s = json!({"properties":{"m":{"enum":["a","b"]}},"required":["m","n"]});
    assert_eq!(invalid(&s, json!({})), [r#"argument 'm': is required ("a"|"b")"#, "argument 'n': is required"]);
}

#[test]
fn validate_ranges_quote_the_allowed_range() {
    let s = volume_schema();
    assert_eq!(
        invalid(&s, json!({"volume":101})),
        ["argument 'volume': must be at most 100 (allowed 0..100), got 101"]
    );
    assert_eq!(
        invalid(&s, json!({"volume":-1})),
        ["argument 'volume': must be at least 0 (allowed 0..100), got -1"]
    );
    assert_eq!(
        invalid(&otto_schema(), json!({"steps":0})),
        ["argument 'steps': must be at least 1 (allowed 1..100), got 0"]
    );
    let s = one_prop(json!({"type":"number","minimum":0}));
    assert_eq!(invalid(&s, json!({"x":-0.5})), ["argument 'x': must be at least 0, got -0.5"]);
    let s = one_prop(json!({"type":"number","exclusiveMinimum":0,"maximum":1}));
    assert_eq!(invalid(&s, json!({"x":0})), ["argument 'x': must be greater than 0 (allowed >0 <=1), got 0"]);
    let s = one_prop(json!({"type":"number","exclusiveMaximum":10}));
    assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be less than 10, got 10"]);
    // Draft 4's boolean exclusiveMaximum.
    let s = json!({"$schema":"http://json-schema.org/draft-04/schema#","properties":{"x":{"type":"integer","minimum":0,"maximum":10,"exclusiveMaximum":true}}});
    assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be less than 10 (allowed >=0 <10), got 10"]);
}

#[test]
fn validate_types_enums_and_consts() {
    assert_eq!(
        invalid(&volume_schema(), json!({"volume":"abc"})),
        [r#"argument 'volume': must be an integer (allowed 0..100), got "abc""#]
    );
    assert_eq!(
        invalid(&volume_schema(), json!({"volume":50.5})),
        ["argument 'volume': must be an integer (allowed 0..100), got 50.5"]
    );
    assert_eq!(invalid(&zip_schema(), json!({"zip":1234})), ["argument 'zip': must be a string, got 1234"]);
    let s = one_prop(json!({"type":["string","null"]}));
    assert_eq!(invalid(&s, json!({"x":5})), ["argument 'x': must be a string or null, got 5"]);
    let s = one_prop(json!({"type":"boolean"}));
    assert_eq!(invalid(&s, json!({"x":"yes"})), [r#"argument 'x': must be a boolean, got "yes""#]);

    let s = json!({"type":"object","properties":{"theme":{"type":"string","enum":["light","dark"]}}});
    let errs = validate(&s, &json!({"theme":"ligth"})).unwrap_err();
    assert_eq!(
        errs,
        [ArgError {
            argument: "theme".into(),
            message: r#"must be one of "light", "dark", got "ligth""#.into(),
            suggestions: vec!["light".into()],
        }]
    );
    let s = one_prop(json!({"const":"on"}));
    assert_eq!(invalid(&s, json!({"x":"off"})), [r#"argument 'x': must be "on", got "off""#]);
}

#[test]
fn validate_unknown_arguments_suggest_names() {
    let mut s = volume_schema();
    s["additionalProperties"] = json!(false);
    let errs = validate(&s, &json!({"volme":5})).unwrap_err();
    assert_eq!(
        errs,
        [
            ArgError::new("volume", "is required (integer 0..100)"),
            ArgError::new("volme", "not declared by this tool (it takes: volume)").with_suggestions(["volume"]),
        ]
    );
    let s = json!({"properties":{"cfg":{"type":"object","properties":{"color":{"type":"string"}},"additionalProperties":false}}});
    assert_eq!(
        invalid(&s, json!({"cfg":{"colr":"red"}})),
        ["argument 'cfg.colr': not declared in 'cfg' (it takes: color); did you mean 'color'?"]
    );
}

#[test]
fn validate_strings_and_arrays_say_the_rule_and_limit() {
    let s = one_prop(json!({"type":"string","minLength":3,"maxLength":5,"pattern":"^[0-9]+$"}));
    assert_eq!(
        invalid(&s, json!({"x":"ab"})),
        [
            r#"argument 'x': must be at least 3 characters long, got "ab" (2 characters)"#,
            r#"argument 'x': must match the pattern ^[0-9]+$, got "ab""#,
        ]
    );
    assert_eq!(
        invalid(&s, json!({"x":"123456"})),
        [r#"argument 'x': must be at most 5 characters long, got "123456" (6 characters)"#]
    );
    let s = one_prop(json!({"type":"string","minLength":1}));
    assert_eq!(
        invalid(&s, json!({"x":""})),
        [r#"argument 'x': must be at least 1 character long, got "" (0 characters)"#]
    );
    let s =
        one_prop(json!({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2,"uniqueItems":true}));
    assert_eq!(invalid(&s, json!({"x":[]})), ["argument 'x': must have at least 1 item, got 0"]);
    assert_eq!(invalid(&s, json!({"x":[1,2,3]})), ["argument 'x': must have at most 2 items, got 3"]);
    assert_eq!(invalid(&s, json!({"x":[1,1]})), ["argument 'x': must not contain duplicate items, got [1,1]"]);
    assert_eq!(invalid(&s, json!({"x":[1,"b"]})), [r#"argument 'x[1]': must be an integer, got "b""#]);
    let s = one_prop(json!({"type":"integer","multipleOf":5}));
    assert_eq!(invalid(&s, json!({"x":7})), ["argument 'x': must be a multiple of 5, got 7"]);
    let s = one_prop(json!({"type":"object","minProperties":1}));
    assert_eq!(invalid(&s, json!({"x":{}})), ["argument 'x': must have at least 1 field, got 0"]);
}

#[test]
fn validate_nested_and_ref_paths() {
    let s = json!({
        "properties":{"cfg":{"type":"object","properties":{"level":{"$ref":"#/$defs/Level"}},"required":["name"]}},
        "$defs":{"Level":{"type":"integer","minimum":0,"maximum":10}}
    });
    assert_eq!(
        invalid(&s, json!({"cfg":{"level":11}})),
        ["argument 'cfg.level': must be at most 10 (allowed 0..10), got 11", "argument 'cfg.name': is required",]
    );
    let s = json!({"properties":{"lvl":{"$ref":"#/$defs/Level"}},"required":["lvl"],"$defs":{"Level":{"type":"integer","minimum":0,"maximum":10}}});
    assert_eq!(invalid(&s, json!({})), ["argument 'lvl': is required (integer 0..10)"]);
}

#[test]
fn validate_any_of_picks_the_branch_that_fits() {
    let s = one_prop(json!({"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]}));
    assert_eq!(invalid(&s, json!({"x":-1})), ["argument 'x': must be at least 0, got -1"]);
    assert_eq!(invalid(&s, json!({"x":"a"})), [r#"argument 'x': must be an integer >=0 or null, got "a""#]);
    let s = one_prop(json!({"oneOf":[{"enum":["auto"]},{"type":"integer","minimum":1,"maximum":9}]}));
    assert_eq!(
        invalid(&s, json!({"x":"manual"})),
        [r#"argument 'x': must be "auto" or an integer 1..9, got "manual""#]
    );
    assert_eq!(invalid(&s, json!({"x":10})), ["argument 'x': must be at most 9 (allowed 1..9), got 10"]);
    let s = one_prop(json!({"oneOf":[{"type":"integer"},{"type":"number"}]}));
    assert_eq!(
        invalid(&s, json!({"x":1})),
        ["argument 'x': matches more than one of the allowed forms (an integer; a number), got 1"]
    );
}

#[test]
fn validate_orders_errors_by_the_schema_and_reports_all() {
    // Names in the same order alphabetically and as declared, so the test holds with or
    // without serde_json's preserve_order.
    let s = json!({"type":"object","properties":{
        "a_volume":{"type":"integer","minimum":0,"maximum":100},
        "b_theme":{"type":"string","enum":["light","dark"]},
        "c_count":{"type":"integer"}
    },"required":["c_count","a_volume"],"additionalProperties":false});
    assert_eq!(
        invalid(&s, json!({"zzz":1,"b_theme":"x","a_volume":101})),
        [
            "argument 'a_volume': must be at most 100 (allowed 0..100), got 101",
            r#"argument 'b_theme': must be one of "light", "dark", got "x""#,
            "argument 'c_count': is required (integer)",
            "argument 'zzz': not declared by this tool (it takes: a_volume, b_theme, c_count)",
        ]
    );
    // The whole object first.
    assert_eq!(invalid(&s, json!([1])), ["arguments: must be an object, got [1]"]);
}

#[test]
fn validate_reports_an_unusable_schema() {
    let errs = validate(&json!({"type":5}), &json!({})).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].argument, "");
    assert!(
        errs[0]
            .message
            .starts_with("the tool's inputSchema is not a usable JSON Schema, so the arguments can't be checked: "),
        "{}",
        errs[0].message
    );
    let errs =
        validate(&json!({"properties":{"a":{"$ref":"https://example.com/x.json"}}}), &json!({"a":1})).unwrap_err();
    assert!(
        errs[0].message.starts_with("the tool's inputSchema is not a usable JSON Schema"),
        "{}",
        errs[0].message
    );
}

#[test]
fn build_then_validate_round_trip() {
    let s = otto_schema();
    let args = build_ok(&s, &["action=walk", "steps=2", "speed=1000", "direction=-1"]);
    assert_eq!(args, json!({"action":"walk","steps":2,"speed":1000,"direction":-1}));
    assert_eq!(validate(&s, &args), Ok(()));
    let args = build_ok(&s, &["speed=5000"]);
    assert_eq!(invalid(&s, args), ["argument 'speed': must be at most 3000 (allowed 100..3000), got 5000"]);
}

// --- suggest ------------------------------------------------------------------------------

const TOOLS: [&str; 7] = [
    "self.get_device_status",
    "self.audio_speaker.set_volume",
    "self.screen.set_brightness",
    "self.screen.set_theme",
    "self.otto.action",
    "self.get_system_info",
    "self.reboot",
];

#[test]
fn suggest_finds_close_names() {
    assert_eq!(suggest("volme", ["volume", "voice", "mode"]), ["volume"]);
    assert_eq!(suggest("VOLUME", ["volume"]), ["volume"]);
    assert_eq!(suggest("ligth", ["light", "dark"]), ["light"]);
    assert_eq!(suggest("lite", ["light", "dark"]), Vec::<&str>::new());
    assert_eq!(suggest("brigthness", ["brightness", "contrast"]), ["brightness"]);
    // Equal edits: Jaro-Winkler (shared prefix) decides.
    assert_eq!(suggest("teh", ["the", "tea"]), ["tea", "the"]);
    assert_eq!(suggest("x", ["y", "z"]), Vec::<&str>::new());
    assert_eq!(suggest("id", ["ip", "url"]), ["ip"]);
    assert_eq!(suggest("", ["a"]), Vec::<&str>::new());
    assert_eq!(suggest("anything", []), Vec::<&str>::new());
    assert_eq!(suggest("completely_different", ["volume"]), Vec::<&str>::new());
}

#[test]
fn suggest_ranks_best_first_and_keeps_three() {
    assert_eq!(suggest("steps", ["stops", "steps", "step", "stepz", "sleeps"]), ["steps", "step", "stepz"]);
    assert_eq!(suggest("stpe", ["steps", "step", "stop", "stem"]), ["step", "steps", "stem"]);
    assert_eq!(suggest("step", ["sleep", "steps"]), ["steps"]);
    assert_eq!(suggest("a", ["a", "a"]), ["a"]);
}

#[test]
fn suggest_understands_dotted_tool_names() {
    assert_eq!(suggest("set_volume", TOOLS), ["self.audio_speaker.set_volume"]);
    assert_eq!(suggest("self.audio_speaker.set_volme", TOOLS), ["self.audio_speaker.set_volume"]);
    assert_eq!(suggest("volume", TOOLS), ["self.audio_speaker.set_volume"]);
    assert_eq!(suggest("self.volume", TOOLS), ["self.audio_speaker.set_volume"]);
    assert_eq!(suggest("reboot", TOOLS), ["self.reboot"]);
    assert_eq!(suggest("set_them", TOOLS), ["self.screen.set_theme"]);
    assert_eq!(suggest("self.otto.actoin", TOOLS), ["self.otto.action"]);
    assert_eq!(suggest("self.foo", TOOLS), Vec::<&str>::new());
}

// --- signature ----------------------------------------------------------------------------

#[test]
fn signature_of_stock_tools() {
    assert_eq!(signature(&volume_schema()), "volume: int 0..100");
    assert_eq!(signature(&theme_schema()), "theme: string");
    assert_eq!(signature(&zip_schema()), "zip: string, [name: string]");
    // Map order: declaration order with serde_json's preserve_order, alphabetical without.
    let s = otto_schema();
    let want: Vec<&str> = s["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| match k.as_str() {
            "action" => r#"[action: string = "sit"]"#,
            "steps" => "[steps: int 1..100 = 3]",
            "speed" => "[speed: int 100..3000 = 700]",
            "direction" => "[direction: int -1..1 = 1]",
            "amount" => "[amount: int 0..170 = 0]",
            "arm_swing" => "[arm_swing: int 0..170 = 50]",
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(signature(&s), want.join(", "));
}

#[test]
fn signature_shapes() {
    let one = |name: &str, prop: Value, required: bool| {
        let s = json!({"type":"object","properties":{name: prop},"required": if required { vec![name] } else { vec![] }});
        signature(&s)
    };
    assert_eq!(
        one("quality", json!({"type":"integer","minimum":1,"maximum":100,"default":80}), false),
        "[quality: int 1..100 = 80]"
    );
    assert_eq!(one("enabled", json!({"type":"boolean"}), true), "enabled: bool");
    assert_eq!(one("mode", json!({"type":"string","enum":["a","b"]}), true), r#"mode: "a"|"b""#);
    assert_eq!(one("tags", json!({"type":"array","items":{"type":"string"}}), true), "tags: string[]");
    assert_eq!(
        one("ids", json!({"type":"array","items":{"type":"integer","minimum":0}}), true),
        "ids: (int >=0)[]"
    );
    assert_eq!(one("modes", json!({"type":"array","items":{"enum":["a","b"]}}), true), r#"modes: ("a"|"b")[]"#);
    assert_eq!(
        one("grid", json!({"type":"array","items":{"type":"array","items":{"type":"number"}}}), true),
        "grid: number[][]"
    );
    assert_eq!(one("list", json!({"type":"array"}), true), "list: array");
    assert_eq!(one("cfg", json!({"type":"object","properties":{"a":{"type":"string"}}}), true), "cfg: object");
    assert_eq!(one("note", json!({"type":["string","null"]}), false), "[note: string|null]");
    assert_eq!(
        one("n", json!({"anyOf":[{"type":"integer"},{"type":"null"}],"default":null}), false),
        "[n: int|null = null]"
    );
    assert_eq!(
        one("ratio", json!({"type":"number","exclusiveMinimum":0,"maximum":1}), true),
        "ratio: number >0 <=1"
    );
    assert_eq!(one("big", json!({"type":"integer","minimum":10}), true), "big: int >=10");
    assert_eq!(one("fixed", json!({"const":"v1"}), true), r#"fixed: "v1""#);
    assert_eq!(one("any", json!({}), true), "any: any");
    assert_eq!(
        one("tags", json!({"type":"array","items":{"type":"string"},"default":["a"]}), false),
        r#"[tags: string[] = ["a"]]"#
    );
    let s = json!({"properties":{"lvl":{"$ref":"#/$defs/L"}},"$defs":{"L":{"type":"integer","minimum":0,"maximum":9,"default":5}}});
    assert_eq!(signature(&s), "[lvl: int 0..9 = 5]");
}

#[test]
fn signature_of_nothing_is_empty() {
    assert_eq!(signature(&json!({})), "");
    assert_eq!(signature(&json!({"type":"object","properties":{}})), "");
    assert_eq!(signature(&Value::Null), "");
    assert_eq!(signature(&json!([1])), "");
}

// --- properties ---------------------------------------------------------------------------

proptest! {
    #[test]
    fn string_values_round_trip_unchanged(text in any::<String>()) {
        prop_assert_eq!(build_arguments(&zip_schema(), &[format!("zip={text}")], None).unwrap(), json!({"zip": text.clone()}));
        let nullable = one_prop(json!({"type":["string","null"]}));
        prop_assert_eq!(build_arguments(&nullable, &[format!("x={text}")], None).unwrap(), json!({"x": text.clone()}));
        let nested = json!({"properties":{"a":{"type":"object","properties":{"s":{"type":"string"}}}}});
        prop_assert_eq!(build_arguments(&nested, &[format!("a.s={text}")], None).unwrap(), json!({"a":{"s": text}}));
    }

    #[test]
    fn integers_round_trip(n in any::<i64>()) {
        prop_assert_eq!(build_arguments(&volume_schema(), &[format!("volume={n}")], None).unwrap(), json!({"volume": n}));
    }

    #[test]
    fn building_never_panics(ws in proptest::collection::vec("[a-z.:=\\[\\],{}\"0-9 ]{0,12}", 0..4)) {
        let _ = build_arguments(&otto_schema(), &ws, None);
        let _ = build_arguments(&json!({}), &ws, None);
    }
}

/// `vol=50`, `v=50`: a name the tool does not have is the mistake, named with the closest
/// declared one (an abbreviation, or the required argument that is missing), never "volume is
/// required" alone.
#[test]
fn an_undeclared_name_is_named_with_the_closest_declared_one() {
    let s = volume_schema();
    for word in ["vol=50", "v=50", "level=50"] {
        let name = word.split('=').next().unwrap();
        assert_eq!(build_err(&s, &[word]), format!("argument '{name}': not declared by this tool (it takes: volume); did you mean 'volume'?"), "{word}");
    }
    // Nothing required is missing: an undeclared name still passes through, unless it abbreviates one.
    let o = optional_volume_schema();
    assert_eq!(build_ok(&o, &["level=5"]), json!({"level": 5}));
    assert!(build_err(&o, &["vol=5"]).contains("did you mean 'volume'?"));
    assert_eq!(super::suggest::suggest("vol", ["volume", "brightness"]).first(), Some(&"volume"));
}
