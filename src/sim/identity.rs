//! A virtual device's identity beyond its MAC, kept as stock firmware keeps its UUID in NVS.
//!
//! - The Client-Id is a random UUID, not derived from the MAC: anyone can compute a derived one,
//!   and a derived one lets a stranger who knows the MAC pass for the device.
//! - The device key is a random secret sent with each OTA check-in and `/activate` poll
//!   ([`DEVICE_KEY_HEADER`]): the hub binds the request to it, so even someone who learnt the
//!   Client-Id cannot collect the device's token.
//! - `mcpdev sim` keeps both in the state directory (`sim/<mac>.json`, 0600), so a restarted sim is
//!   the same board; in-process sims (`serve --demo`, benches) get fresh ones for the run.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::hub::admission::DEVICE_KEY_HEADER;

/// What a virtual device keeps about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SimIdentity {
    pub client_id: String,
    pub device_key: String,
}

impl SimIdentity {
    /// A fresh identity: a random UUID and a random 32-hex-digit key.
    pub fn random() -> Self {
        Self { client_id: uuid::Uuid::new_v4().to_string(), device_key: uuid::Uuid::new_v4().simple().to_string() }
    }

    /// `device_id`'s identity kept under `dir`, created on first use. A file that cannot be read
    /// or written is an error (the caller may fall back to [`SimIdentity::random`]).
    pub fn load_or_create(dir: &Path, device_id: &str) -> Result<Self, String> {
        let path = dir.join("sim").join(format!("{}.json", device_id.replace(':', "").to_ascii_lowercase()));
        match crate::paths::read_private(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{} is not a sim identity ({e}); remove it for a new one", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = Self::random();
                let text = serde_json::to_vec(&id).map_err(|e| e.to_string())?;
                crate::paths::write_private(&path, &text).map_err(|e| format!("cannot keep the sim identity in {}: {e}", path.display()))?;
                Ok(id)
            }
            Err(e) => Err(format!("cannot read the sim identity {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_random_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = SimIdentity::load_or_create(dir.path(), "02:00:00:00:00:01").unwrap();
        assert_eq!(SimIdentity::load_or_create(dir.path(), "02:00:00:00:00:01").unwrap(), a, "kept across runs");
        let b = SimIdentity::load_or_create(dir.path(), "02:00:00:00:00:02").unwrap();
        assert_ne!(a.client_id, b.client_id);
        assert_ne!(SimIdentity::random(), SimIdentity::random());
        assert!(crate::hub::admission::key_hash(&a.device_key).is_ok(), "the hub takes the key");
    }
}
