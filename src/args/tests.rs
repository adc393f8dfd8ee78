//! The `args` module's unit tests: building arguments from words (coercion, unions, unknown
//! arguments, nested keys, raw JSON, `--args-json`). Validation, suggestions and signatures are
//! in [`super::validate_tests`]; the stock schemas in [`super::test_schemas`].

use super::*;
use super::build::*;
use super::render::*;
use serde_json::{Value, json};
use super::test_schemas::*;

// --- ArgError display ---------------------------------------------------------------------

#[test]
fn display_names_the_argument_and_suggestions() {
    let e = ArgError::new("volume", "must be at most 100 (allowed 0..100), got 101");
    assert_eq!(e.to_string(), "argument 'volume': must be at most 100 (allowed 0..100), got 101");
    let e = ArgError::new("volme", "not declared by this tool (it takes: volume)").with_suggestions(["volume"]);
    assert_eq!(
        e.to_string(),
        "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
    );
    let e = ArgError::new("x", "m").with_suggestions(["a", "b"]);
    assert_eq!(e.to_string(), "argument 'x': m; did you mean 'a' or 'b'?");
    let e = ArgError::new("x", "m").with_suggestions(["a", "b", "c"]);
    assert_eq!(e.to_string(), "argument 'x': m; did you mean 'a', 'b' or 'c'?");
    assert_eq!(ArgError::new("", "must be an object").to_string(), "arguments: must be an object");
}

// --- strings stay strings -----------------------------------------------------------------

#[test]
fn string_properties_keep_the_raw_text() {
    let s = zip_schema();
    assert_eq!(build_ok(&s, &["zip=01234"]), json!({"zip":"01234"}));
    assert_eq!(build_ok(&s, &["zip=01234", "name=true"]), json!({"zip":"01234","name":"true"}));
    assert_eq!(build_ok(&s, &["name=null"]), json!({"name":"null"}));
    assert_eq!(build_ok(&s, &["name=[1,2]"]), json!({"name":"[1,2]"}));
    assert_eq!(build_ok(&s, &["name= padded "]), json!({"name":" padded "}));
    assert_eq!(build_ok(&s, &["name=a=b"]), json!({"name":"a=b"}));
    assert_eq!(build_ok(&theme_schema(), &["theme=dark"]), json!({"theme":"dark"}));
}

#[test]
fn empty_value_is_the_empty_string_for_strings_only() {
    assert_eq!(build_ok(&zip_schema(), &["zip="]), json!({"zip":""}));
    assert_eq!(
        build_err(&volume_schema(), &["volume="]),
        "argument 'volume': no value given (expected an integer)"
    );
    assert_eq!(
        build_err(&one_prop(json!({"type":"array","items":{"type":"string"}})), &["x="]),
        "argument 'x': no value given (expected an array) (write x:=[] for an empty list)"
    );
    assert_eq!(
        build_err(&one_prop(json!({"type":"object"})), &["x="]),
        "argument 'x': no value given (expected an object) (write x:={} for an empty object)"
    );
    assert_eq!(
        build_err(&one_prop(json!({"type":"boolean"})), &["x="]),
        "argument 'x': no value given (expected a boolean)"
    );
    assert_eq!(
        build_err(&one_prop(json!({"type":["integer","null"]})), &["x="]),
        "argument 'x': no value given (expected an integer or null)"
    );
}

// --- numbers ------------------------------------------------------------------------------

#[test]
fn integers_parse_as_integers() {
    let s = volume_schema();
    assert_eq!(build_ok(&s, &["volume=50"]), json!({"volume":50}));
    assert_eq!(build_ok(&s, &["volume=-3"]), json!({"volume":-3}));
    assert_eq!(build_ok(&s, &["volume=007"]), json!({"volume":7}));
    assert_eq!(build_ok(&s, &["volume=1e2"]), json!({"volume":100}));
    assert_eq!(build_ok(&s, &["volume=50.0"]), json!({"volume":50}));
    assert_eq!(build_ok(&s, &["volume= 42 "]), json!({"volume":42}));
    assert_eq!(build_ok(&s, &["volume=18446744073709551615"]), json!({"volume":18446744073709551615u64}));
    // Out of range is validate's business, not build's.
    assert_eq!(build_ok(&s, &["volume=101"]), json!({"volume":101}));
    assert_eq!(build_err(&s, &["volume=50.5"]), "argument 'volume': must be an integer (allowed 0..100), got 50.5");
    assert_eq!(build_err(&s, &["volume=abc"]), r#"argument 'volume': must be an integer (allowed 0..100), got "abc""#);
    assert_eq!(build_err(&s, &["volume=true"]), "argument 'volume': must be an integer (allowed 0..100), got true");
    assert_eq!(build_err(&s, &["volume=inf"]), r#"argument 'volume': must be an integer (allowed 0..100), got "inf""#);
    assert_eq!(build_err(&s, &["volume=1e30"]), "argument 'volume': is too large for a 64-bit integer (allowed 0..100), got 1e30");
}

#[test]
fn numbers_are_integers_when_integral() {
    let s = one_prop(json!({"type":"number"}));
    assert_eq!(build_ok(&s, &["x=1.5"]), json!({"x":1.5}));
    assert_eq!(build_ok(&s, &["x=2"]), json!({"x":2}));
    assert_eq!(build_ok(&s, &["x=2.0"]), json!({"x":2}));
    assert!(build_ok(&s, &["x=2.0"])["x"].is_i64());
    assert_eq!(build_ok(&s, &["x=-0.25"]), json!({"x":-0.25}));
    assert_eq!(build_ok(&s, &["x=1e-3"]), json!({"x":0.001}));
    assert_eq!(build_err(&s, &["x=abc"]), r#"argument 'x': must be a number, got "abc""#);
    assert_eq!(build_err(&s, &["x=NaN"]), r#"argument 'x': must be a number, got "NaN""#);
}

// --- booleans and null --------------------------------------------------------------------

#[test]
fn booleans_accept_the_usual_spellings() {
    let s = one_prop(json!({"type":"boolean"}));
    for (text, want) in [
        ("true", true),
        ("false", false),
        ("1", true),
        ("0", false),
        ("yes", true),
        ("no", false),
        ("on", true),
        ("off", false),
        ("TRUE", true),
        ("Yes", true),
        ("OFF", false),
    ] {
        assert_eq!(build_ok(&s, &[&format!("x={text}")]), json!({"x": want}), "{text}");
    }
    assert_eq!(
        build_err(&s, &["x=maybe"]),
        r#"argument 'x': must be a boolean (true/false, yes/no, on/off, 1/0), got "maybe""#
    );
    assert_eq!(build_err(&s, &["x=2"]), "argument 'x': must be a boolean (true/false, yes/no, on/off, 1/0), got 2");
}

#[test]
fn null_type_takes_null() {
    let s = one_prop(json!({"type":"null"}));
    assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
    assert_eq!(build_err(&s, &["x=nil"]), r#"argument 'x': must be null, got "nil""#);
    assert_eq!(build_err(&s, &["x="]), "argument 'x': no value given (expected null) (write x:=null)");
}

// --- arrays and objects -------------------------------------------------------------------

#[test]
fn arrays_from_comma_lists_or_json() {
    let tags = one_prop(json!({"type":"array","items":{"type":"string"}}));
    assert_eq!(build_ok(&tags, &["x=a,b"]), json!({"x":["a","b"]}));
    assert_eq!(build_ok(&tags, &["x=a, b ,c"]), json!({"x":["a","b","c"]}));
    assert_eq!(build_ok(&tags, &["x=01,true"]), json!({"x":["01","true"]}));
    assert_eq!(build_ok(&tags, &["x=solo"]), json!({"x":["solo"]}));
    assert_eq!(build_ok(&tags, &[r#"x=["a,b","c"]"#]), json!({"x":["a,b","c"]}));
    assert_eq!(build_ok(&tags, &["x=[a,b]"]), json!({"x":["a","b"]}));
    assert_eq!(build_ok(&tags, &["x=[]"]), json!({"x":[]}));

    let ids = one_prop(json!({"type":"array","items":{"type":"integer"}}));
    assert_eq!(build_ok(&ids, &["x=1,2,3"]), json!({"x":[1,2,3]}));
    assert_eq!(build_ok(&ids, &["x=[1, 2]"]), json!({"x":[1,2]}));
    assert_eq!(build_err(&ids, &["x=1,two"]), r#"argument 'x[1]': must be an integer, got "two""#);
    assert_eq!(build_err(&ids, &["x=1,,3"]), "argument 'x[1]': no value given (expected an integer)");

    let flags = one_prop(json!({"type":"array","items":{"type":"boolean"}}));
    assert_eq!(build_ok(&flags, &["x=on,off"]), json!({"x":[true,false]}));

    let modes = one_prop(json!({"type":"array","items":{"enum":["a","b"]}}));
    assert_eq!(build_ok(&modes, &["x=a,b,a"]), json!({"x":["a","b","a"]}));
    assert_eq!(build_err(&modes, &["x=a,c"]), r#"argument 'x[1]': must be one of "a", "b", got "c""#);

    let untyped_items = one_prop(json!({"type":"array"}));
    assert_eq!(build_ok(&untyped_items, &["x=1,a,true"]), json!({"x":[1,"a",true]}));
    assert_eq!(build_ok(&untyped_items, &[r#"x=[{"k":1}]"#]), json!({"x":[{"k":1}]}));

    let points = one_prop(json!({"type":"array","items":{"type":"object"}}));
    assert_eq!(build_ok(&points, &[r#"x=[{"a":1}]"#]), json!({"x":[{"a":1}]}));
    assert_eq!(
        build_err(&points, &["x=a"]),
        r#"argument 'x': must be a JSON array (its items are object), got "a""#
    );
    assert_eq!(
        build_err(&points, &["x=[{]"]),
        "argument 'x': is not valid JSON: key must be a string at line 1 column 3"
    );
}

#[test]
fn objects_from_json() {
    let s = one_prop(json!({"type":"object"}));
    assert_eq!(build_ok(&s, &[r#"x={"a":[1,2]}"#]), json!({"x":{"a":[1,2]}}));
    assert_eq!(
        build_err(&s, &["x=abc"]),
        r#"argument 'x': must be a JSON object (or set one field with x.field=value), got "abc""#
    );
    assert_eq!(
        build_err(&s, &["x=[1]"]),
        "argument 'x': must be a JSON object (or set one field with x.field=value), got [1]"
    );
    assert_eq!(
        build_err(&s, &["x={a}"]),
        "argument 'x': is not valid JSON: key must be a string at line 1 column 2"
    );
}

// --- unions, enums, const, $ref -----------------------------------------------------------

#[test]
fn union_types_are_tried_in_order() {
    let s = one_prop(json!({"type":["string","null"]}));
    assert_eq!(build_ok(&s, &["x=null"]), json!({"x":"null"}));
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":"5"}));

    let s = one_prop(json!({"type":["integer","null"]}));
    assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    assert_eq!(build_err(&s, &["x=five"]), r#"argument 'x': must be an integer or null, got "five""#);

    let s = one_prop(json!({"type":["integer","string"]}));
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    assert_eq!(build_ok(&s, &["x=05a"]), json!({"x":"05a"}));
}

#[test]
fn any_of_and_one_of_members_are_tried_in_order() {
    // What pydantic emits for Optional[int] and Union[int, str].
    let s = one_prop(json!({"anyOf":[{"type":"integer"},{"type":"null"}],"default":null}));
    assert_eq!(build_ok(&s, &["x=7"]), json!({"x":7}));
    assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));
    assert_eq!(build_err(&s, &["x=seven"]), r#"argument 'x': must be an integer or null, got "seven""#);

    let s = one_prop(json!({"oneOf":[{"type":"integer","minimum":0},{"type":"string"}]}));
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    assert_eq!(build_ok(&s, &["x=five"]), json!({"x":"five"}));

    let s = one_prop(json!({"anyOf":[{"type":"boolean"},{"enum":["auto"]}]}));
    assert_eq!(build_ok(&s, &["x=auto"]), json!({"x":"auto"}));
    assert_eq!(build_ok(&s, &["x=yes"]), json!({"x":true}));
    assert_eq!(build_err(&s, &["x=sometimes"]), r#"argument 'x': must be a boolean or "auto", got "sometimes""#);
}

#[test]
fn enums_and_consts() {
    let s = one_prop(json!({"type":"string","enum":["light","dark"]}));
    assert_eq!(build_ok(&s, &["x=dark"]), json!({"x":"dark"}));
    let e = build(&s, &["x=ligth"]).unwrap_err();
    assert_eq!(
        e,
        ArgError {
            argument: "x".into(),
            message: r#"must be one of "light", "dark", got "ligth""#.into(),
            suggestions: vec!["light".into()],
        }
    );
    assert_eq!(
        build_err(&s, &["x=Dark"]),
        r#"argument 'x': must be one of "light", "dark", got "Dark"; did you mean 'dark'?"#
    );
    assert_eq!(build_err(&s, &["x="]), r#"argument 'x': no value given (expected one of "light", "dark")"#);

    // An all-string enum keeps strings even when they look like numbers.
    let s = one_prop(json!({"enum":["1","2"]}));
    assert_eq!(build_ok(&s, &["x=1"]), json!({"x":"1"}));

    let s = one_prop(json!({"enum":[1,2,3]}));
    assert_eq!(build_ok(&s, &["x=2"]), json!({"x":2}));
    assert_eq!(build_ok(&s, &["x=2.0"]), json!({"x":2}));
    assert_eq!(build_err(&s, &["x=4"]), "argument 'x': must be one of 1, 2, 3, got 4");

    let s = one_prop(json!({"enum":["auto", 0, 1.5, true, null]}));
    assert_eq!(build_ok(&s, &["x=auto"]), json!({"x":"auto"}));
    assert_eq!(build_ok(&s, &["x=0"]), json!({"x":0}));
    assert_eq!(build_ok(&s, &["x=1.5"]), json!({"x":1.5}));
    assert_eq!(build_ok(&s, &["x=on"]), json!({"x":true}));
    assert_eq!(build_ok(&s, &["x=null"]), json!({"x":null}));

    let s = one_prop(json!({"const":"fixed"}));
    assert_eq!(build_ok(&s, &["x=fixed"]), json!({"x":"fixed"}));
    assert_eq!(build_err(&s, &["x=other"]), r#"argument 'x': must be "fixed", got "other""#);
    let s = one_prop(json!({"const":{"a":1}}));
    assert_eq!(build_ok(&s, &[r#"x={"a":1}"#]), json!({"x":{"a":1}}));
}

#[test]
fn refs_to_defs_and_definitions_are_followed() {
    let s = json!({
        "type":"object",
        "properties":{"level":{"$ref":"#/$defs/Level"},"mode":{"$ref":"#/definitions/Mode"},"cfg":{"$ref":"#/$defs/Cfg"}},
        "$defs":{"Level":{"type":"integer","minimum":0,"maximum":10},"Cfg":{"type":"object","properties":{"zip":{"type":"string"}}}},
        "definitions":{"Mode":{"enum":["a","b"]}}
    });
    assert_eq!(
        build_ok(&s, &["level=3", "mode=b", "cfg.zip=007"]),
        json!({"level":3,"mode":"b","cfg":{"zip":"007"}})
    );
    assert_eq!(build_err(&s, &["level=x"]), r#"argument 'level': must be an integer (allowed 0..10), got "x""#);
    // A dangling or external $ref: untyped.
    let s = one_prop(json!({"$ref":"#/$defs/Missing"}));
    assert_eq!(build_ok(&s, &["x=5", "y=a"]), json!({"x":5,"y":"a"}));
    let s = one_prop(json!({"$ref":"https://example.com/s.json"}));
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    // A self-referencing schema does not loop.
    let s = json!({"$defs":{"L":{"$ref":"#/$defs/L"}},"properties":{"x":{"$ref":"#/$defs/L"}}});
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    let s = json!({"$defs":{"A":{"allOf":[{"$ref":"#/$defs/A"}]}},"properties":{"x":{"$ref":"#/$defs/A"}}});
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    assert_eq!(signature(&s), "[x: any]");
    let s = json!({"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/A"}]}},"properties":{"x":{"$ref":"#/$defs/A"}}});
    assert_eq!(build_ok(&s, &["x=5"]), json!({"x":5}));
    assert_eq!(signature(&s), "[x: …]");
}

#[test]
fn all_of_and_implied_types() {
    let s = one_prop(json!({"allOf":[{"description":"d"},{"type":"string"}]}));
    assert_eq!(build_ok(&s, &["x=01"]), json!({"x":"01"}));
    let s = json!({"properties":{"cfg":{"properties":{"n":{"type":"string"}}}}});
    assert_eq!(build_ok(&s, &["cfg.n=1"]), json!({"cfg":{"n":"1"}}));
    assert_eq!(build_ok(&s, &[r#"cfg={"n":1}"#]), json!({"cfg":{"n":1}}));
}

// --- unknown arguments --------------------------------------------------------------------

#[test]
fn undeclared_arguments_are_an_error_when_forbidden() {
    let mut s = volume_schema();
    s["additionalProperties"] = json!(false);
    let e = build(&s, &["volme=50"]).unwrap_err();
    assert_eq!(
        e,
        ArgError {
            argument: "volme".into(),
            message: "not declared by this tool (it takes: volume)".into(),
            suggestions: vec!["volume".into()],
        }
    );
    assert_eq!(build_err(&s, &["loudness=5"]), "argument 'loudness': not declared by this tool (it takes: volume)");
    let none = json!({"type":"object","properties":{},"additionalProperties":false});
    assert_eq!(build_err(&none, &["a=1"]), "argument 'a': not declared: this tool takes no arguments");
    let unevaluated = json!({"properties":{"a":{"type":"string"}},"unevaluatedProperties":false});
    assert_eq!(build_err(&unevaluated, &["b=1"]), "argument 'b': not declared by this tool (it takes: a)");
}

#[test]
fn likely_typos_are_an_error_even_when_allowed() {
    let s = volume_schema();
    assert_eq!(
        build_err(&s, &["volme=50"]),
        "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
    );
    assert_eq!(
        build_err(&s, &["Volume=50"]),
        "argument 'Volume': not declared by this tool (it takes: volume); did you mean 'volume'?"
    );
    assert_eq!(build_err(&otto_schema(), &["step=2"]).split("; ").last().unwrap(), "did you mean 'steps'?");
    // Not a typo: passes through, JSON-parsed with a string fallback.
    assert_eq!(
        build_ok(&s, &["volume=5", "extra=01234", "n=5", "flag=true", "o={\"a\":1}"]),
        json!({"volume":5,"extra":"01234","n":5,"flag":true,"o":{"a":1}})
    );
    // Short names are not typos of each other.
    let s = one_prop(json!({"type":"integer"}));
    assert_eq!(build_ok(&s, &["y=1"]), json!({"y":1}));
    let s = json!({"properties":{"id":{"type":"string"}}});
    assert_eq!(build_ok(&s, &["ip=1"]), json!({"ip":1}));
}

#[test]
fn additional_properties_schema_types_undeclared_keys() {
    let s = json!({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}});
    assert_eq!(build_ok(&s, &["a=1", "label=5"]), json!({"a":1,"label":"5"}));
    // patternProperties: we can't match the pattern here, so it's untyped and allowed.
    let s = json!({"properties":{"a":{"type":"integer"}},"patternProperties":{"^x_":{"type":"string"}},"additionalProperties":false});
    assert_eq!(build_ok(&s, &["x_1=5"]), json!({"x_1":5}));
}

// --- schema-less tools --------------------------------------------------------------------

#[test]
fn without_properties_values_are_json_or_text() {
    for s in [json!({}), json!({"type":"object"}), Value::Null, json!("nonsense"), json!(true)] {
        assert_eq!(
            build_ok(&s, &["zip=01234", "n=5", "f=1.5", "b=true", "s=hello", "e=", "l=[1]", "z=null"]),
            json!({"zip":"01234","n":5,"f":1.5,"b":true,"s":"hello","e":"","l":[1],"z":null}),
            "{s}"
        );
        assert_eq!(build_ok(&s, &["a.b=1"]), json!({"a":{"b":1}}), "{s}");
    }
    assert_eq!(build_ok(&json!({}), &[]), json!({}));
    // A property declared as {} or true is untyped too.
    let s = json!({"properties":{"a":{},"b":true}});
    assert_eq!(build_ok(&s, &["a=5", "b=x"]), json!({"a":5,"b":"x"}));
    let s = json!({"properties":{"a":false}});
    assert_eq!(build_err(&s, &["a=5"]), "argument 'a': is not allowed by the schema");
}

// --- nested keys --------------------------------------------------------------------------

#[test]
fn dotted_keys_build_nested_objects() {
    let s = json!({"type":"object","properties":{
        "a":{"type":"object","properties":{"b":{"type":"integer"},"zip":{"type":"string"},"deep":{"type":"object","properties":{"on":{"type":"boolean"}}}}},
        "n":{"type":"integer"}
    }});
    assert_eq!(
        build_ok(&s, &["a.b=1", "a.zip=01", "a.deep.on=yes", "n=2"]),
        json!({"a":{"b":1,"zip":"01","deep":{"on":true}},"n":2})
    );
    assert_eq!(build_err(&s, &["a.b=x"]), r#"argument 'a.b': must be an integer, got "x""#);
    assert_eq!(build_err(&s, &["n.x=1"]), "argument 'n': is an integer, not an object, so 'n.x' can't be set");
    assert_eq!(
        build_err(&s, &["a.zipp=1"]),
        "argument 'a.zipp': not declared in 'a' (it takes: b, zip, deep); did you mean 'zip'?"
    );
    // Undeclared nested keys below an open object are untyped.
    assert_eq!(build_ok(&s, &["a.other.k=5"]), json!({"a":{"other":{"k":5}}}));
    assert_eq!(
        build_err(&s, &["a..b=1"]),
        "argument 'a..b': has an empty part; write nested keys as a.b=value (or quote the whole object with key:=json)"
    );
    assert_eq!(
        build_err(&s, &[".a=1"]),
        "argument '.a': has an empty part; write nested keys as a.b=value (or quote the whole object with key:=json)"
    );
}

#[test]
fn property_names_with_dots_match_literally_first() {
    let s = json!({"properties":{"self.x":{"type":"string"},"self":{"type":"object","properties":{"y":{"type":"integer"}}}}});
    assert_eq!(build_ok(&s, &["self.x=01", "self.y=2"]), json!({"self.x":"01","self":{"y":2}}));
}

// --- raw JSON -----------------------------------------------------------------------------

#[test]
fn colon_equals_is_raw_json() {
    // Undeclared keys pass through when nothing required is missing.
    let s = optional_volume_schema();
    assert_eq!(build_ok(&s, &[r#"opts:={"x":[1,2]}"#]), json!({"opts":{"x":[1,2]}}));
    // No coercion: validate reports the type.
    assert_eq!(build_ok(&s, &[r#"volume:="50""#]), json!({"volume":"50"}));
    assert_eq!(build_ok(&zip_schema(), &["zip:=1234"]), json!({"zip":1234}));
    assert_eq!(build_ok(&s, &["a.b:=[true]"]), json!({"a":{"b":[true]}}));
    assert_eq!(build_ok(&s, &["n:=null"]), json!({"n":null}));
    assert_eq!(
        build_err(&s, &["name:=hello"]),
        "argument 'name': is not valid JSON after ':=' (expected value at line 1 column 1); to pass text write name=hello"
    );
    assert_eq!(
        build_err(&s, &["volme:=5"]),
        "argument 'volme': not declared by this tool (it takes: volume); did you mean 'volume'?"
    );
}

// --- word syntax --------------------------------------------------------------------------

#[test]
fn words_without_equals_explain_the_syntax() {
    let s = volume_schema();
    let e = build(&s, &["hello"]).unwrap_err();
    assert_eq!(e.argument, "");
    assert_eq!(e.to_string(), "arguments: expected key=value, key:=json or a.b=value, got 'hello'");
    assert_eq!(
        build_err(&s, &["volume"]),
        "argument 'volume': has no value: expected key=value, key:=json or a.b=value (e.g. volume=VALUE)"
    );
    assert_eq!(
        build_err(&s, &["=5"]),
        "arguments: expected key=value, key:=json or a.b=value, got '=5' (the key is empty)"
    );
    assert_eq!(
        build_err(&s, &[":=5"]),
        "arguments: expected key=value, key:=json or a.b=value, got ':=5' (the key is empty)"
    );
}

#[test]
fn a_key_given_twice_is_an_error() {
    let s = optional_volume_schema();
    assert_eq!(build_err(&s, &["volume=1", "volume=2"]), "argument 'volume': given more than once");
    assert_eq!(build_err(&s, &["volume=1", "volume:=2"]), "argument 'volume': given more than once");
    assert_eq!(build_err(&s, &["a.b=1", "a:={}"]), "argument 'a': overlaps with 'a.b' given before");
    assert_eq!(build_err(&s, &["a=1", "a.b=1"]), "argument 'a.b': overlaps with 'a' given before");
    assert_eq!(build_ok(&s, &["a.b=1", "a.c=2"]), json!({"a":{"b":1,"c":2}}));
}

// --- --args-json --------------------------------------------------------------------------

#[test]
fn args_json_is_the_base_and_words_merge_on_top() {
    let s = json!({"type":"object","properties":{"volume":{"type":"integer"},"a":{"type":"object","properties":{"b":{"type":"integer"}}}}});
    let got =
        build_arguments(&s, &words(&["volume=5", "a.b=2"]), Some(r#"{"volume":1,"a":{"x":1,"b":0},"keep":"me"}"#))
            .unwrap();
    assert_eq!(got, json!({"volume":5,"a":{"x":1,"b":2},"keep":"me"}));
    // A plain key replaces the whole value.
    let got = build_arguments(&s, &words(&[r#"a:={"b":3}"#]), Some(r#"{"a":{"x":1}}"#)).unwrap();
    assert_eq!(got, json!({"a":{"b":3}}));
    // The base is taken as is: no coercion, no checks (validate does those).
    let got = build_arguments(&s, &[], Some(r#"{"volume":"01"}"#)).unwrap();
    assert_eq!(got, json!({"volume":"01"}));

    let err = |j: &str, ws: &[&str]| build_arguments(&s, &words(ws), Some(j)).unwrap_err().to_string();
    assert_eq!(err("[1,2]", &[]), "arguments: --args-json must be a JSON object, got [1,2]");
    assert_eq!(
        err("{", &[]),
        "arguments: --args-json is not valid JSON: EOF while parsing an object at line 1 column 1"
    );
    assert_eq!(
        err(r#"{"a":5}"#, &["a.b=1"]),
        "argument 'a': is 5 in --args-json, not an object, so 'a.b' can't be set"
    );
}
