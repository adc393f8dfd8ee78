//! Registering tools: name rules, duplicates, contradictory properties.

mod common;

use common::{Dev, stock_device};
use mcp_device::{Call, McpServer, Property, RegistryError, Tool, ToolError, ToolOutput};

fn nop(_: &mut Dev, _: &mut Call<'_>) -> Result<ToolOutput, ToolError> {
    Ok(true.into())
}

fn empty() -> McpServer<Dev> {
    McpServer::new("b", "1", Dev::default())
}

#[test]
fn duplicate_names_are_refused() {
    let mut d = stock_device();
    let before = d.tools().len();
    assert_eq!(
        d.add_tool(Tool::new("self.reboot", "again", nop)),
        Err(RegistryError::Duplicate("self.reboot".into()))
    );
    assert_eq!(d.tools().len(), before);
    // Names are case-sensitive.
    assert_eq!(d.add_tool(Tool::new("self.Reboot", "other", nop)), Ok(()));
}

#[test]
fn names_follow_the_mcp_tool_name_rule() {
    let mut d = empty();
    for good in ["a", "Z", "0", "self.audio_speaker.set_volume", "a-b_c.d", "_", "-", ".", &"x".repeat(128)] {
        assert_eq!(d.add_tool(Tool::new(good.to_string(), "", nop)), Ok(()), "{good}");
    }
    for bad in ["", &"x".repeat(129), "has space", "quote\"", "back\\slash", "slash/x", "colon:x", "é", "tab\t", "emoji😀", "a,b"] {
        assert_eq!(d.add_tool(Tool::new(bad.to_string(), "", nop)), Err(RegistryError::BadName(bad.to_string())), "{bad:?}");
    }
    assert_eq!(d.tools().len(), 9);
}

#[test]
fn default_outside_the_range_is_refused() {
    let mut d = empty();
    for (p, reason) in [
        (Property::integer("v").default(101).range(0, 100), "default is outside the range"),
        (Property::integer("v").default(-1).range(0, 100), "default is outside the range"),
        (Property::integer("v").range(5, 4), "minimum is greater than maximum"),
        (Property::string(""), "property name is empty"),
    ] {
        let name = p.name.to_string();
        assert_eq!(
            d.add_tool(Tool::new("t", "", nop).property(p)),
            Err(RegistryError::BadProperty { tool: "t".into(), property: name, reason })
        );
    }
    assert!(d.tools().is_empty());
    // Bounds are inclusive; a range of one value is fine.
    assert_eq!(d.add_tool(Tool::new("a", "", nop).property(Property::integer("v").default(100).range(0, 100))), Ok(()));
    assert_eq!(d.add_tool(Tool::new("b", "", nop).property(Property::integer("v").default(0).range(0, 100))), Ok(()));
    assert_eq!(d.add_tool(Tool::new("c", "", nop).property(Property::integer("v").range(7, 7))), Ok(()));
}

#[test]
fn duplicate_property_names_are_refused() {
    // Two properties of one name would give `properties` a duplicate key and list it twice in
    // `required`; a client would see only one of them.
    let mut d = empty();
    assert_eq!(
        d.add_tool(Tool::new("t", "", nop).property(Property::integer("v")).property(Property::string("v").default("x"))),
        Err(RegistryError::BadProperty { tool: "t".into(), property: "v".into(), reason: "duplicate property name" })
    );
    assert!(d.tools().is_empty());
}

#[test]
fn tools_keep_registration_order() {
    let d = stock_device();
    let names: Vec<&str> = d.tools().iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "self.get_device_status",
            "self.audio_speaker.set_volume",
            "self.screen.set_theme",
            "self.otto.action",
            "self.get_system_info",
            "self.reboot"
        ]
    );
    let user_only: Vec<bool> = d.tools().iter().map(|t| t.user_only).collect();
    assert_eq!(user_only, [false, false, false, false, true, true]);
}

#[test]
fn property_helpers() {
    let p = Property::integer("v").default(3).range(1, 5);
    assert!(!p.is_required());
    assert_eq!(p.type_name(), "integer");
    assert_eq!(p.default_value(), Some(serde_json::json!(3)));
    assert!(Property::boolean("b").is_required());
    assert_eq!(Property::boolean("b").default(false).default_value(), Some(serde_json::json!(false)));
    assert_eq!(Property::string("s").default("x").default_value(), Some(serde_json::json!("x")));
    assert_eq!(Property::string("s").default(String::from("y")).default_value(), Some(serde_json::json!("y")));
    assert_eq!(Property::string("s").default_value(), None);
    assert_eq!(Property::integer("i").default(7i64).default_value(), Some(serde_json::json!(7)));
}

#[test]
fn state_is_reachable() {
    let mut d = stock_device();
    d.state_mut().volume = 12;
    assert_eq!(d.state().volume, 12);
}
