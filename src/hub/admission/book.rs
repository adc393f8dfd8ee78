//! What the hub keeps about approved devices: `admitted.json` in the private state directory.
//!
//! - An approval is a **binding**: the Device-Id with the Client-Id, the device key's hash (when
//!   the device proved one) and the transport of the request a person approved, plus a random
//!   `nonce` that every token of this approval is derived from. A new approval gets a new nonce,
//!   so a revocation followed by a re-approval issues new tokens and the old ones stop working.
//! - A revocation is remembered (`revoked`): a revoked Device-Id stays out on every path (shared
//!   tokens, gateway credentials, `--approve-all`) until a person approves it again.
//! - The file is bounded ([`MAX_FILE`], [`MAX_ADMITTED`] approvals, [`MAX_REVOKED`] revocations)
//!   and a malformed file stops the hub with advice, never silently forgetting approvals.
//!   Files written before bindings existed (no nonce) keep their old tokens.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::requests::Via;

/// Approved devices kept at most (the file stays small; approving more is refused).
pub const MAX_ADMITTED: usize = 10_000;
/// Revocations remembered at most (the oldest are forgotten first).
pub const MAX_REVOKED: usize = 10_000;
/// The largest `admitted.json` read at start-up.
const MAX_FILE: u64 = 8 << 20;

/// An approved device, as kept in `admitted.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Admitted {
    pub device_id: String,
    /// The Client-Id of the request that was approved, if any: only an OTA check-in with the same
    /// one (and the same device key) gets this device's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// How the approved request came: `ota` (the device learns its token from its check-in),
    /// `websocket` or `gateway`; none for an approval by Device-Id (the token was printed once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    pub approved_at_ms: u64,
    /// SHA-256 (hex) of the key the device proved with its request (`Mcpdev-Device-Key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hash: Option<String>,
    /// What this approval's tokens are derived from; empty in files from before bindings.
    #[serde(default)]
    pub nonce: String,
    /// The approved request's challenge: its `/activate` poll is answered 200.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub challenge: String,
}

impl Admitted {
    /// What people and the control API see: no nonce, no challenge (the nonce is no secret on its
    /// own, but nothing outside the hub needs it).
    pub fn public(&self) -> serde_json::Value {
        serde_json::json!({
            "device_id": self.device_id,
            "client_id": self.client_id,
            "via": self.via,
            "device_key": self.key_hash.is_some(),
            "approved_at_ms": self.approved_at_ms,
        })
    }

    /// Whether a check-in (`client_id`, the hash of the key it sent) is the approved binding's.
    pub fn matches(&self, client_id: Option<&str>, key_hash: Option<&str>) -> bool {
        let same_client = matches!((&self.client_id, client_id), (Some(kept), Some(asked)) if kept == asked);
        let same_key = match (&self.key_hash, key_hash) {
            (Some(kept), Some(given)) => super::constant_time_eq(kept.as_bytes(), given.as_bytes()),
            (Some(_), None) => false,
            (None, _) => true,
        };
        same_client && same_key
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    devices: Vec<Admitted>,
    /// Device-Ids whose approval was withdrawn, and when (unix ms).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    revoked: BTreeMap<String, u64>,
}

/// Approvals and revocations, in memory.
#[derive(Default)]
pub struct Book {
    pub admitted: BTreeMap<String, Admitted>,
    pub revoked: BTreeMap<String, u64>,
    /// Devices that run inside the hub (`serve --demo`): admitted for this run, never written.
    pub resident: BTreeSet<String>,
}

impl Book {
    /// Writes the approvals and revocations to `path` (0600, atomically).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let file = File { version: 2, devices: self.admitted.values().cloned().collect(), revoked: self.revoked.clone() };
        let text = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        crate::paths::write_private(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Remembers a revocation, forgetting the oldest beyond [`MAX_REVOKED`].
    pub fn remember_revoked(&mut self, device_id: &str, at_ms: u64) {
        self.revoked.insert(device_id.to_string(), at_ms);
        while self.revoked.len() > MAX_REVOKED {
            let Some(oldest) = self.revoked.iter().min_by_key(|(_, at)| **at).map(|(id, _)| id.clone()) else { break };
            self.revoked.remove(&oldest);
        }
    }

    /// Reads `path` (a missing file is an empty book).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let fix = || format!("fix it or remove it (every device must then be approved again): {}", path.display());
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Ok(m) if m.len() > MAX_FILE => anyhow::bail!("{} is larger than {MAX_FILE} bytes; {}", path.display(), fix()),
            _ => {}
        }
        let bytes = crate::paths::read_private(path).map_err(|e| anyhow::anyhow!("cannot read the approved devices {}: {e}", path.display()))?;
        let file: File = serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("the approved devices file is not valid ({e}); {}", fix()))?;
        let mut book = Self::default();
        for mut a in file.devices.into_iter().take(MAX_ADMITTED) {
            a.device_id = super::device_id(&a.device_id).map_err(|e| anyhow::anyhow!("{e} in {}; {}", path.display(), fix()))?;
            book.admitted.insert(a.device_id.clone(), a);
        }
        for (id, at) in file.revoked.into_iter().take(MAX_REVOKED) {
            let id = super::device_id(&id).map_err(|e| anyhow::anyhow!("{e} in {}; {}", path.display(), fix()))?;
            book.revoked.insert(id, at);
        }
        Ok(book)
    }
}
