//! What one hub of a cluster acts on because another hub said so, sealed with the hub secret:
//! presence records, claims of devices, and device messages passed on to a device's hub; and the
//! name of the cluster's share group (I/O-free).
//!
//! The rules this module enforces (docs/cluster.md, "Who is a hub of this cluster"):
//! - **Only a hub of this cluster is heard.** A presence record (`mcpdev/hubs/<hub>`), a claim
//!   (`mcpdev/claims/<key>`) and a forwarded message (`mcpdev/fwd/<hub>/<key>`) travel as
//!   `<HMAC-SHA256 hex>\n<body>`, keyed from the shared hub secret ([`Purpose::ClusterState`]),
//!   and the MAC covers the kind and the topic's names as well as the body: a sealed claim for
//!   one device is worth nothing filed under another, a presence record of one hub nothing under
//!   another. What does not open is refused (the caller logs it, rate-limited, and counts it):
//!   a broker client with a hub's broker role but not the secret (another cluster's hub, a
//!   stolen login) cannot say a hub is alive, take a device, or speak for one.
//! - **Another cluster never shares this cluster's uplinks.** Hubs read uplinks through a shared
//!   subscription whose group is `<--mqtt-group>-<tag>`, the tag 12 hex digits of a MAC with the
//!   hub secret: hubs with the same secret and group share one group, a hub with another secret
//!   (a second cluster on the broker, or a hub given the wrong `hub-secret`) is in a group of its
//!   own and takes no message of this cluster's devices. The tag names the cluster on the broker
//!   (a per-cluster broker role grants only its own group); it reveals nothing of the secret.
//! - An empty payload is a retained message cleared (a hub's last will clears its presence): it
//!   carries no MAC, and callers treat it as such (see `mqtt::hub`).

use std::time::{Duration, Instant};

use crate::hub::secret::{HubSecret, Purpose};

/// How often a hub puts back its claim of one device after a claim that did not open replaced it
/// on the broker ([`Restores`]).
pub const RESTORE_EVERY: Duration = Duration::from_secs(10);

/// Hex digits of the cluster's tag in its share group's name.
pub const TAG_LEN: usize = 12;

/// This cluster's tag: the first [`TAG_LEN`] hex digits of a MAC with the hub secret.
pub fn cluster_tag(secret: &HubSecret) -> String {
    secret.mac(Purpose::ClusterState, b"share-group")[..TAG_LEN].to_string()
}

/// The share group the hubs of this cluster read uplinks through: `<group>-<tag>`.
pub fn share_group(secret: &HubSecret, group: &str) -> String {
    format!("{group}-{}", cluster_tag(secret))
}

/// What the MAC covers: the kind, the names the topic carries, and the body.
fn signed(kind: &str, names: &str, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(kind.len() + names.len() + body.len() + 2);
    m.extend_from_slice(kind.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(names.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(body);
    m
}

fn seal(secret: &HubSecret, kind: &str, names: &str, body: &[u8]) -> Vec<u8> {
    let mac = secret.mac(Purpose::ClusterState, &signed(kind, names, body));
    let mut out = Vec::with_capacity(mac.len() + 1 + body.len());
    out.extend_from_slice(mac.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

fn open<'a>(secret: &HubSecret, kind: &str, names: &str, payload: &'a [u8]) -> Result<&'a [u8], String> {
    let at = payload.iter().position(|b| *b == b'\n').filter(|at| *at == 64).ok_or_else(|| format!("an unsigned {kind} (no MAC)"))?;
    let mac = std::str::from_utf8(&payload[..at]).map_err(|_| format!("a {kind} whose MAC is not text"))?;
    let body = &payload[at + 1..];
    if !secret.verify_mac(Purpose::ClusterState, &signed(kind, names, body), mac) {
        return Err(format!("a {kind} whose MAC does not verify: not made by a hub with this hub secret"));
    }
    Ok(body)
}

/// The payload of this hub's claim of the device `key`.
pub fn seal_claim(secret: &HubSecret, key: &str, hub: &str) -> Vec<u8> {
    seal(secret, "claim", key, hub.as_bytes())
}

/// The hub a claim of `key` names, if a hub of this cluster made it.
pub fn open_claim(secret: &HubSecret, key: &str, payload: &[u8]) -> Result<String, String> {
    let body = open(secret, "claim", key, payload)?;
    let hub = std::str::from_utf8(body).map_err(|_| "a claim whose hub is not text".to_string())?;
    if !super::topics::valid_key(hub) || hub.len() > 64 {
        return Err(format!("a claim naming {:?}, which is no hub id", hub.escape_debug().to_string()));
    }
    Ok(hub.to_string())
}

/// The payload of `hub`'s presence record `record` (JSON text).
pub fn seal_presence(secret: &HubSecret, hub: &str, record: &str) -> Vec<u8> {
    seal(secret, "presence", hub, record.as_bytes())
}

/// The record of `hub`'s presence, if `hub` is a hub of this cluster.
pub fn open_presence<'a>(secret: &HubSecret, hub: &str, payload: &'a [u8]) -> Result<&'a [u8], String> {
    open(secret, "presence", hub, payload)
}

/// A device message (`key`'s uplink) this hub passes on to `hub`.
pub fn seal_forward(secret: &HubSecret, hub: &str, key: &str, message: &[u8]) -> Vec<u8> {
    seal(secret, "fwd", &format!("{hub}/{key}"), message)
}

/// The device message another hub of this cluster passed on to `hub` for `key`.
pub fn open_forward<'a>(secret: &HubSecret, hub: &str, key: &str, payload: &'a [u8]) -> Result<&'a [u8], String> {
    open(secret, "fwd", &format!("{hub}/{key}"), payload)
}

/// When a hub last put back its claim of each device. A claim that does not open is refused, but
/// it has replaced the owner's retained claim on the broker, so a hub that joins later would find
/// the device owned by nobody: the owner publishes its claim again, at most once per device per
/// [`RESTORE_EVERY`] (two clusters whose hubs each hold a claim of one key would otherwise put
/// theirs back in turn for ever). Bounded as [`super::cluster::Recent`] is.
#[derive(Debug)]
pub struct Restores(super::cluster::Recent);

impl Default for Restores {
    fn default() -> Self {
        Self(super::cluster::Recent::new(RESTORE_EVERY))
    }
}

impl Restores {
    /// Whether the claim of `key` may be put back at `now` (and, if so, that it was).
    pub fn allow(&mut self, key: &str, now: Instant) -> bool {
        if self.0.is_recent(key, now) {
            return false;
        }
        self.0.note(key, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "GID_mcpdev@@@aa_bb_cc_dd_ee_01";

    #[test]
    fn claims_open_only_with_the_secret_and_under_their_own_device() {
        let (s, other) = (HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[8; 32]));
        let claim = seal_claim(&s, KEY, "0123456789ab");
        assert_eq!(open_claim(&s, KEY, &claim).unwrap(), "0123456789ab");
        assert!(open_claim(&other, KEY, &claim).unwrap_err().contains("does not verify"), "another cluster's claim");
        assert!(open_claim(&s, "GID_mcpdev@@@aa_bb_cc_dd_ee_02", &claim).is_err(), "moved to another device");
        assert!(open_claim(&s, KEY, b"0123456789ab").unwrap_err().contains("unsigned"), "a bare hub id, as claims were");
        let mut forged = claim.clone();
        *forged.last_mut().unwrap() = b'c';
        assert!(open_claim(&s, KEY, &forged).is_err(), "another hub named under the same MAC");
        let bad = seal_claim(&s, KEY, "a/b");
        assert!(open_claim(&s, KEY, &bad).unwrap_err().contains("no hub id"), "sealed, but not a hub id");
        assert!(open_claim(&s, KEY, b"").is_err());
    }

    #[test]
    fn presence_and_forwarded_messages_are_bound_to_their_topic() {
        let (s, other) = (HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[8; 32]));
        let p = seal_presence(&s, "h1", r#"{"hub":"h1"}"#);
        assert_eq!(open_presence(&s, "h1", &p).unwrap(), br#"{"hub":"h1"}"#);
        assert!(open_presence(&s, "h2", &p).is_err(), "filed under another hub");
        assert!(open_presence(&other, "h1", &p).is_err(), "another cluster");
        assert!(open_presence(&s, "h1", br#"{"hub":"h1"}"#).is_err(), "unsigned, as records were");
        let message = b"{\"type\":\"mcp\",\"payload\":{\"id\":1,\"result\":{}}}\n\x00binary";
        let f = seal_forward(&s, "h1", KEY, message);
        assert_eq!(open_forward(&s, "h1", KEY, &f).unwrap(), message);
        assert!(open_forward(&s, "h2", KEY, &f).is_err(), "to another hub");
        assert!(open_forward(&s, "h1", "GID_mcpdev@@@aa_bb_cc_dd_ee_02", &f).is_err(), "for another device");
        assert!(open_forward(&other, "h1", KEY, &f).is_err());
        // Kinds do not mix: a claim's MAC is no presence record's.
        let claim = seal_claim(&s, "h1", "h1");
        assert!(open_presence(&s, "h1", &claim).is_err());
    }

    #[test]
    fn a_claim_is_put_back_once_per_period() {
        let mut r = Restores::default();
        let t = Instant::now();
        assert!(r.allow("k", t));
        assert!(!r.allow("k", t + Duration::from_secs(9)), "two clusters fighting over one key do so at most once a period");
        assert!(r.allow("other", t + Duration::from_secs(9)));
        assert!(r.allow("k", t + RESTORE_EVERY));
        // A flood of forgeries, 5,000 devices a period for 6 periods: the map holds about two
        // periods' worth at most, never all of them.
        for p in 2..8 {
            for i in 0..5000 {
                assert!(r.allow(&format!("flood{p}-{i}"), t + RESTORE_EVERY * p));
            }
        }
        assert!(r.0.len() < 3 * 5000, "bounded by the keys of recent periods: {}", r.0.len());
    }

    #[test]
    fn the_share_group_is_the_clusters_own() {
        let (s, same, other) = (HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[8; 32]));
        let g = share_group(&s, "mcpdev");
        assert_eq!(g, share_group(&same, "mcpdev"), "every hub of the cluster computes the same");
        assert_ne!(g, share_group(&other, "mcpdev"), "another secret: another group");
        assert!(g.starts_with("mcpdev-") && g.len() == "mcpdev-".len() + TAG_LEN);
        assert!(g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'), "a valid share name: {g}");
    }
}
