//! Tool names on the aggregate endpoint: each device's tools under a prefix, within MCP's name
//! rules (1 to 128 characters of `A-Z a-z 0-9 _ . -`).

use std::collections::HashMap;

/// How tools are named on `/mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Naming {
    /// `<alias>.<tool>`: stable names, however many devices connect.
    Prefixed,
    /// The device's own names; a name already taken by another device gets the prefix.
    Plain,
}

/// A device's prefix: its alias from `mcpdev.toml`, else `dev-` and the MAC's hex digits.
pub fn prefix_for(device_id: &str, aliases: &HashMap<String, String>) -> String {
    let mut named: Vec<&String> = aliases.iter().filter(|(a, id)| id.eq_ignore_ascii_case(device_id) && is_valid(a)).map(|(a, _)| a).collect();
    named.sort();
    match named.first() {
        Some(alias) if !alias.contains('.') => (*alias).clone(),
        _ => default_prefix(device_id),
    }
}

/// A device's prefix without an alias: `dev-` and its Device-Id's hex digits.
pub fn default_prefix(device_id: &str) -> String {
    format!("dev-{}", device_id.replace([':', '-'], ""))
}

/// The Device-Id a prefix names: an alias's device, or the MAC spelled by `dev-<12 hex digits>`
/// (whether or not that device is connected).
pub fn device_for_prefix(prefix: &str, aliases: &HashMap<String, String>) -> Option<String> {
    if let Some(id) = aliases.get(prefix) {
        return Some(id.to_ascii_lowercase());
    }
    Some(mac_in_prefix(prefix)?.as_str().to_string())
}

/// The MAC a `dev-<12 hex digits>` prefix spells, as a lower-case Device-Id (`aa:bb:…`), written
/// on the stack: a call by name looks its device up without allocating.
pub fn mac_in_prefix(prefix: &str) -> Option<MacText> {
    let hex = prefix.strip_prefix("dev-")?.as_bytes();
    if hex.len() != 12 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut text = [b':'; 17];
    for (i, pair) in hex.chunks(2).enumerate() {
        text[3 * i] = pair[0].to_ascii_lowercase();
        text[3 * i + 1] = pair[1].to_ascii_lowercase();
    }
    Some(MacText(text))
}

/// A Device-Id spelled by a prefix (see [`mac_in_prefix`]).
pub struct MacText([u8; 17]);

impl MacText {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits and colons")
    }
}

/// Whether `prefix` is [`default_prefix`] of `device_id`, compared in place.
pub fn is_default_prefix(prefix: &str, device_id: &str) -> bool {
    prefix.strip_prefix("dev-").is_some_and(|hex| hex.bytes().eq(device_id.bytes().filter(|b| !matches!(b, b':' | b'-'))))
}

pub fn qualify(prefix: &str, tool: &str) -> Option<String> {
    let name = format!("{prefix}.{tool}");
    is_valid(&name).then_some(name)
}

pub fn is_valid(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_names() {
        let aliases = HashMap::from([("kitchen".to_string(), "aa:bb:cc:dd:ee:ff".to_string())]);
        assert_eq!(prefix_for("aa:bb:cc:dd:ee:ff", &aliases), "kitchen");
        assert_eq!(prefix_for("02:00:00:00:00:01", &aliases), "dev-020000000001");
        assert_eq!(qualify("kitchen", "self.reboot").as_deref(), Some("kitchen.self.reboot"));
        assert_eq!(qualify("kitchen", &"x".repeat(130)), None);
        assert!(!is_valid("has space"));
        assert_eq!(device_for_prefix("dev-020000000001", &aliases).as_deref(), Some("02:00:00:00:00:01"));
        assert_eq!(device_for_prefix("kitchen", &aliases).as_deref(), Some("aa:bb:cc:dd:ee:ff"));
        assert_eq!(device_for_prefix("dev-12", &aliases), None);
        assert_eq!(device_for_prefix("lamp", &aliases), None);
        assert_eq!(device_for_prefix("dev-0200000000AB", &aliases).as_deref(), Some("02:00:00:00:00:ab"));
        assert_eq!(device_for_prefix("dev-02000000000g", &aliases), None);
        assert_eq!(device_for_prefix("dev-0200000000001", &aliases), None);
        assert!(is_default_prefix(&default_prefix("02:00:00:00:00:01"), "02:00:00:00:00:01"));
        assert!(is_default_prefix(&default_prefix("02-00-00-00-00-ab"), "02-00-00-00-00-ab"));
        assert!(!is_default_prefix("dev-0200000000AB", "02:00:00:00:00:ab"), "the id's own spelling only");
        assert!(!is_default_prefix("dev-02000000000", "02:00:00:00:00:01"));
        assert!(!is_default_prefix("kitchen", "02:00:00:00:00:01"));
    }
}
