//! The topic scheme every MQTT party of mcpdev shares (hub, `sim`, CLI, embedded broker).
//!
//! A device is known on the broker by its **key**, which is its MQTT client id
//! `GID_mcpdev@@@aa_bb_cc_dd_ee_ff` (the reference gateway's `GID_…@@@<mac>` shape, without the
//! uuid so that anyone can address a device by its MAC alone). Then:
//!
//! | topic | who publishes | what |
//! |---|---|---|
//! | `mcpdev/up/<key>` | the device (its OTA `publish_topic`) | every device message |
//! | `mcpdev/down/<key>` | the hub that owns the device | every message to the device |
//! | `mcpdev/hubs/<hub>` | each hub, retained; its will clears it | hub presence |
//! | `mcpdev/claims/<key>` | a hub taking a device, retained | which hub serves the device |
//! | `mcpdev/fwd/<hub>/<key>` | a hub that got another hub's device message | the message, passed on |
//! | `mcpdev/index/<hub>` | each hub, retained | the devices it serves ([`super::presence`]) |
//! | `mcpdev/rpc/<hub>/q`, `…/a` | hubs | control requests for a hub, answers to it ([`super::cluster_rpc`]) |
//! | `mcpdev/admission/<device id>` | the hub that approved or revoked, retained | the cluster's admission decisions |
//!
//! Hubs read uplinks through the share group `<--mqtt-group>-<tag of the hub secret>`
//! ([`super::cluster_seal::share_group`]); presence, claims and forwarded messages are sealed
//! there too.
//!
//! Stock firmware never subscribes, so the broker must subscribe it to `mcpdev/down/${clientid}`
//! (EMQX `auto_subscribe`; the embedded broker does it by itself).

use crate::wire::identity::{format_mac, parse_mac};

pub const UP: &str = "mcpdev/up/";
pub const DOWN: &str = "mcpdev/down/";
pub const HUBS: &str = "mcpdev/hubs/";
pub const CLAIMS: &str = "mcpdev/claims/";
pub const FWD: &str = "mcpdev/fwd/";
pub const INDEX: &str = "mcpdev/index/";
pub const RPC: &str = "mcpdev/rpc/";
pub const ADMISSION: &str = "mcpdev/admission/";
/// The auto-subscription a broker must give every client (EMQX placeholder syntax).
pub const AUTO_SUBSCRIBE: &str = "mcpdev/down/${clientid}";

/// The key (and MQTT client id) of a device: `GID_mcpdev@@@aa_bb_cc_dd_ee_ff`.
pub fn key_for(device_id: &str) -> Result<String, String> {
    let mac = parse_mac(device_id)?;
    Ok(format!("GID_mcpdev@@@{}", format_mac(&mac).replace(':', "_")))
}

/// The Device-Id (`aa:bb:cc:dd:ee:ff`) a key stands for: the first `@@@`-separated part that
/// is a MAC (so `GID_x@@@aa_bb_…@@@uuid` and a bare `aa_bb_…` work too).
pub fn device_id_of(key: &str) -> Option<String> {
    key.split("@@@").find_map(|part| parse_mac(part).ok()).map(|m| format_mac(&m))
}

pub fn uplink(key: &str) -> String {
    format!("{UP}{key}")
}

pub fn downlink(key: &str) -> String {
    format!("{DOWN}{key}")
}

/// Every hub of a cluster subscribes to all uplinks through one shared subscription group, so
/// each device message reaches exactly one hub.
pub fn shared_uplinks(group: &str) -> String {
    format!("$share/{group}/{UP}+")
}

pub fn forward(hub: &str, key: &str) -> String {
    format!("{FWD}{hub}/{key}")
}

/// A key is one topic level: no `/`, no wildcards, not empty.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty() && !key.contains(['/', '+', '#', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_device_ids() {
        let key = key_for("AA-BB-CC-DD-EE-01").unwrap();
        assert_eq!(key, "GID_mcpdev@@@aa_bb_cc_dd_ee_01");
        assert_eq!(device_id_of(&key).as_deref(), Some("aa:bb:cc:dd:ee:01"));
        assert_eq!(device_id_of("GID_test@@@aa_bb_cc_dd_ee_ff@@@1234").as_deref(), Some("aa:bb:cc:dd:ee:ff"));
        assert_eq!(device_id_of("aa_bb_cc_dd_ee_ff").as_deref(), Some("aa:bb:cc:dd:ee:ff"));
        assert_eq!(device_id_of("nothing"), None);
        assert!(key_for("nope").is_err());
        assert_eq!(uplink(&key), "mcpdev/up/GID_mcpdev@@@aa_bb_cc_dd_ee_01");
        assert_eq!(shared_uplinks("g"), "$share/g/mcpdev/up/+");
        assert!(valid_key(&key) && !valid_key("a/b") && !valid_key("") && !valid_key("+"));
    }
}
