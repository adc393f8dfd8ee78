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
        _ => format!("dev-{}", device_id.replace([':', '-'], "")),
    }
}

/// The Device-Id a prefix names: an alias's device, or the MAC spelled by `dev-<12 hex digits>`
/// (whether or not that device is connected).
pub fn device_for_prefix(prefix: &str, aliases: &HashMap<String, String>) -> Option<String> {
    if let Some(id) = aliases.get(prefix) {
        return Some(id.to_ascii_lowercase());
    }
    let hex = prefix.strip_prefix("dev-")?;
    if hex.len() != 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let pairs: Vec<&str> = (0..6).map(|i| &hex[2 * i..2 * i + 2]).collect();
    Some(pairs.join(":").to_ascii_lowercase())
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
    }
}
