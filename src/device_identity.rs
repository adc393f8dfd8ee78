//! A device's identity beyond its MAC — a random Client-Id and a random device key — kept per MAC
//! in the state directory, as stock firmware keeps its UUID in NVS. `mcpdev sim` keeps one per
//! virtual device (`sim/<mac>.json`), `mcpdev flash` one per board it provisions
//! (`flash/<mac>.json`), so a restarted sim or a re-flashed board is the same device to a hub.
//!
//! Rules it enforces:
//! - The Client-Id is a random UUID, never derived from the MAC: anyone can compute a derived one,
//!   and a derived one lets a stranger who knows the MAC pass for the device.
//! - The device key is a random secret (32 hex digits), sent with each OTA check-in and
//!   `/activate` poll as `Mcpdev-Device-Key`; the hub binds the admission request to it, so even
//!   someone who learnt the Client-Id cannot collect the device's token. It fits both the hub's rule
//!   (16..=128 visible ASCII) and the provisioning record's (16..=64).
//! - The files are private (0600 in a 0700 directory, [`crate::paths::write_private`]); a kept file
//!   whose Client-Id is not a UUID or whose key breaks the rule is refused, not sent on.
//! - `Debug` never shows the key; nothing here logs or prints it.
//!
//! Rank 1 (tests/layers.rs): it uses only [`crate::paths`], so both `sim` and `flash` can use it.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The folder under the state directory of `mcpdev sim`'s virtual devices.
pub const SIM_DIR: &str = "sim";
/// The folder under the state directory of the boards `mcpdev flash` provisioned.
pub const BOARD_DIR: &str = "flash";

/// The shortest and longest device key kept (the provisioning record's range, inside the hub's).
const KEY_LEN: std::ops::RangeInclusive<usize> = 16..=64;

/// What a device keeps about itself.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceIdentity {
    pub client_id: String,
    pub device_key: String,
}

/// The key stays out of logs.
impl fmt::Debug for DeviceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceIdentity").field("client_id", &self.client_id).field("device_key", &"(redacted)").finish()
    }
}

impl DeviceIdentity {
    /// A fresh identity: a random UUID and a random 32-hex-digit key.
    pub fn random() -> Self {
        Self { client_id: uuid::Uuid::new_v4().to_string(), device_key: uuid::Uuid::new_v4().simple().to_string() }
    }

    /// The Client-Id as the 16 bytes of a UUID (what a provisioning record stores).
    pub fn client_id_bytes(&self) -> [u8; 16] {
        // `check` (on load) and `random` make sure it parses.
        uuid::Uuid::parse_str(&self.client_id).map(|u| *u.as_bytes()).unwrap_or_default()
    }

    fn check(&self) -> Result<(), String> {
        uuid::Uuid::parse_str(&self.client_id).map_err(|_| "its Client-Id is not a UUID".to_string())?;
        if !KEY_LEN.contains(&self.device_key.len()) || !self.device_key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("its device key is not 16 to 64 visible ASCII characters".into());
        }
        Ok(())
    }

    /// `device_id`'s identity kept in `dir` (the state directory's [`SIM_DIR`] or [`BOARD_DIR`]),
    /// created on first use. A file that cannot be read, written or used is an error that names it.
    pub fn load_or_create(dir: &Path, device_id: &str) -> Result<Self, String> {
        let path = dir.join(format!("{}.json", device_id.replace(':', "").to_ascii_lowercase()));
        match crate::paths::read_private(&path) {
            Ok(bytes) => serde_json::from_slice::<Self>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|id| id.check().map(|()| id))
                .map_err(|e| format!("{} is not a usable device identity ({e}); remove it for a new one", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = Self::random();
                let text = serde_json::to_vec(&id).map_err(|e| e.to_string())?;
                crate::paths::write_private(&path, &text).map_err(|e| format!("cannot keep the device identity in {}: {e}", path.display()))?;
                Ok(id)
            }
            Err(e) => Err(format!("cannot read the device identity {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_random_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sims = dir.path().join(SIM_DIR);
        let a = DeviceIdentity::load_or_create(&sims, "02:00:00:00:00:01").unwrap();
        assert_eq!(DeviceIdentity::load_or_create(&sims, "02:00:00:00:00:01").unwrap(), a, "kept across runs");
        assert!(sims.join("020000000001.json").is_file());
        let b = DeviceIdentity::load_or_create(&sims, "02:00:00:00:00:02").unwrap();
        assert_ne!(a.client_id, b.client_id);
        assert_ne!(a.device_key, b.device_key);
        // A board with the same MAC as a sim is another device.
        let board = DeviceIdentity::load_or_create(&dir.path().join(BOARD_DIR), "02:00:00:00:00:01").unwrap();
        assert_ne!(board, a);
        assert_ne!(DeviceIdentity::random(), DeviceIdentity::random());
        assert!(a.check().is_ok());
        assert_eq!(uuid::Uuid::from_bytes(a.client_id_bytes()).to_string(), a.client_id);
    }

    #[test]
    fn the_key_stays_out_of_debug() {
        let id = DeviceIdentity::random();
        let text = format!("{id:?}");
        assert!(!text.contains(&id.device_key) && text.contains(&id.client_id), "{text}");
    }

    /// Someone who can write the state directory must not make the device send a header that
    /// breaks the request, or a Client-Id that is not one.
    #[test]
    fn a_tampered_file_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("020000000003.json");
        let good = DeviceIdentity::random();
        for bad in [
            serde_json::json!({"client_id": "aa:bb", "device_key": good.device_key}),
            serde_json::json!({"client_id": good.client_id, "device_key": "short"}),
            serde_json::json!({"client_id": good.client_id, "device_key": "0123456789abcdef\r\nX-Injected: 1"}),
            serde_json::json!({"client_id": good.client_id, "device_key": "k".repeat(65)}),
        ] {
            crate::paths::write_private(&path, bad.to_string().as_bytes()).unwrap();
            let err = DeviceIdentity::load_or_create(dir.path(), "02:00:00:00:00:03").unwrap_err();
            assert!(err.contains("020000000003.json") && err.contains("remove it"), "{err}");
        }
        crate::paths::write_private(&path, b"not json").unwrap();
        assert!(DeviceIdentity::load_or_create(dir.path(), "02:00:00:00:00:03").is_err());
    }
}
