//! A device's identity beyond its MAC — a random Client-Id and a random device key — kept per MAC
//! in the state directory, as stock firmware keeps its UUID in NVS. `mcpdev flash` keeps one file
//! per board it provisions (`flash/<mac>.json`); `mcpdev sim` keeps one random seed for all its
//! virtual devices (`sim/seed`, [`SimIdentities`]) and derives each device's identity from it and
//! the MAC, so a restarted sim or a re-flashed board is the same device to a hub, and a fleet of
//! 10,000 virtual devices costs one file, not 10,000 written and synced one by one (which was most
//! of a simulator's CPU in the fleet bench). A `sim/<mac>.json` kept by an earlier version still
//! wins, so those devices stay what a hub approved.
//!
//! Rules it enforces:
//! - The Client-Id is random, never derived from the MAC alone: anyone can compute such a one,
//!   and it lets a stranger who knows the MAC pass for the device. A sim's is keyed by its seed
//!   (HMAC-SHA256), which is as secret as the files it replaces.
//! - The device key is a random secret (32 hex digits), sent with each OTA check-in and
//!   `/activate` poll as `Mcpdev-Device-Key`; the hub binds the admission request to it, so even
//!   someone who learnt the Client-Id cannot collect the device's token. It fits both the hub's rule
//!   (16..=128 visible ASCII) and the provisioning record's (16..=64).
//! - The files are private (0600 in a 0700 directory, [`crate::paths::write_private`]); a kept file
//!   whose Client-Id is not a UUID or whose key breaks the rule is refused, not sent on.
//! - `Debug` never shows the key; nothing here logs or prints it.
//! - No two `sim` runs on one machine that name no Device-Id get the same ids
//!   ([`SimIdentities::claim_slot`]).
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
        let path = Self::kept_path(dir, device_id);
        if let Some(id) = Self::read_kept(&path)? {
            return Ok(id);
        }
        let id = Self::random();
        let text = serde_json::to_vec(&id).map_err(|e| e.to_string())?;
        crate::paths::write_private(&path, &text).map_err(|e| format!("cannot keep the device identity in {}: {e}", path.display()))?;
        Ok(id)
    }

    /// Where `device_id`'s identity is kept in `dir`.
    fn kept_path(dir: &Path, device_id: &str) -> std::path::PathBuf {
        dir.join(format!("{}.json", device_id.replace(':', "").to_ascii_lowercase()))
    }

    /// The identity kept at `path`, `None` if there is none; a file that cannot be read or used
    /// is an error that names it.
    fn read_kept(path: &Path) -> Result<Option<Self>, String> {
        match crate::paths::read_private(path) {
            Ok(bytes) => serde_json::from_slice::<Self>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|id| id.check().map(|()| Some(id)))
                .map_err(|e| format!("{} is not a usable device identity ({e}); remove it for a new one", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read the device identity {}: {e}", path.display())),
        }
    }
}

/// The virtual devices' identities of one state directory: a kept `<mac>.json` if there is one,
/// otherwise derived from the directory's seed (32 random bytes, hex, created on first use) and
/// the MAC.
pub struct SimIdentities {
    dir: std::path::PathBuf,
    seed: ring::hmac::Key,
}

/// Bytes of a sim seed.
const SEED_LEN: usize = 32;
/// How many ids apart the default first ids of two `sim` runs are: the most one run may have.
pub const DEFAULT_STRIDE: u64 = 100_000;
/// How many `sim` runs on one machine may use default ids at once.
const DEFAULT_SLOTS: u64 = 64;

impl SimIdentities {
    /// The seed kept in `dir` (the state directory's [`SIM_DIR`]), created on first use. A seed
    /// that cannot be read, written or used is an error that names its file.
    pub fn load_or_create(dir: &Path) -> Result<Self, String> {
        use crate::paths::KeyFileError;
        let path = dir.join("seed");
        let raw = crate::paths::load_or_create_key(&path, SEED_LEN).map_err(|e| match e {
            KeyFileError::Read(e) => format!("cannot read the sim seed {}: {e}", path.display()),
            KeyFileError::Write(e) => format!("cannot keep the sim seed in {}: {e}", path.display()),
            KeyFileError::NotHex => format!("{} is not a usable sim seed (not {} hex digits); remove it for new virtual devices", path.display(), SEED_LEN * 2),
        })?;
        Ok(Self { dir: dir.to_path_buf(), seed: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &raw) })
    }

    /// `device_id`'s identity: the kept file of an earlier version if there is one, otherwise the
    /// seed's. Writes nothing.
    pub fn get(&self, device_id: &str) -> Result<DeviceIdentity, String> {
        match DeviceIdentity::read_kept(&DeviceIdentity::kept_path(&self.dir, device_id))? {
            Some(kept) => Ok(kept),
            None => Ok(self.derive(&device_id.replace(':', "").to_ascii_lowercase())),
        }
    }

    /// A slot for a `sim` run that names no Device-Id, and the lock that holds it while the run
    /// lasts: the first that no other `sim` on this machine holds (`default-<n>.lock`). Slot `n`
    /// starts its ids [`DEFAULT_STRIDE`] × `n` after the default first id, so two runs here never
    /// share one.
    pub fn claim_slot(&self) -> Result<(u64, std::fs::File), String> {
        for slot in 0..DEFAULT_SLOTS {
            let path = self.dir.join(format!("default-{slot}.lock"));
            let file = std::os::unix::fs::OpenOptionsExt::mode(std::fs::OpenOptions::new().create(true).truncate(false).write(true), 0o600)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            if file.try_lock().is_ok() {
                return Ok((slot, file));
            }
        }
        Err(format!("{DEFAULT_SLOTS} `mcpdev sim` runs on this machine hold a default Device-Id already: name one with --device-id"))
    }

    fn derive(&self, mac: &str) -> DeviceIdentity {
        let tag = |what: &str| ring::hmac::sign(&self.seed, format!("mcpdev sim {what}\0{mac}").as_bytes());
        let client = tag("client-id");
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&client.as_ref()[..16]);
        let client_id = uuid::Builder::from_random_bytes(bytes).into_uuid().to_string();
        let device_key = crate::paths::hex(&tag("device-key").as_ref()[..16]);
        DeviceIdentity { client_id, device_key }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The user's case: the same virtual device across runs, another one for another MAC or on
    /// another machine, and one file for the whole fleet.
    #[test]
    fn a_sim_identity_is_kept_by_one_seed() {
        let dir = tempfile::tempdir().unwrap();
        let sims = dir.path().join(SIM_DIR);
        let first = SimIdentities::load_or_create(&sims).unwrap();
        let a = first.get("02:00:00:00:00:01").unwrap();
        let again = SimIdentities::load_or_create(&sims).unwrap();
        assert_eq!(again.get("02:00:00:00:00:01").unwrap(), a, "kept across runs");
        assert_eq!(again.get("02:00:00:00:00:01".to_ascii_uppercase().as_str()).unwrap(), a, "whatever the MAC's case");
        let b = again.get("02:00:00:00:00:02").unwrap();
        assert_ne!(a.client_id, b.client_id);
        assert_ne!(a.device_key, b.device_key);
        assert!(a.check().is_ok() && b.check().is_ok());
        assert_eq!(uuid::Uuid::parse_str(&a.client_id).unwrap().get_version_num(), 4, "a Client-Id is a random (v4) UUID");
        for i in 0..100 {
            first.get(&format!("02:00:00:00:01:{i:02x}")).unwrap();
        }
        let files: Vec<_> = std::fs::read_dir(&sims).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(files, vec![std::ffi::OsString::from("seed")], "one file for the whole fleet");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(sims.join("seed")).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // Another machine (another seed): other devices with the same MACs.
        let elsewhere = tempfile::tempdir().unwrap();
        let other = SimIdentities::load_or_create(elsewhere.path()).unwrap().get("02:00:00:00:00:01").unwrap();
        assert_ne!(other.client_id, a.client_id);
        assert_ne!(other.device_key, a.device_key);
    }

    /// A device an earlier version kept in its own file stays that device.
    #[test]
    fn a_kept_sim_file_still_wins() {
        let dir = tempfile::tempdir().unwrap();
        let kept = DeviceIdentity::load_or_create(dir.path(), "02:00:00:00:00:05").unwrap();
        let sims = SimIdentities::load_or_create(dir.path()).unwrap();
        assert_eq!(sims.get("02:00:00:00:00:05").unwrap(), kept);
        assert_ne!(sims.get("02:00:00:00:00:06").unwrap().client_id, kept.client_id);
    }

    /// The attacker's case: whoever can write the state directory plants a short, non-hex or
    /// world-readable seed. It is refused with its name, never used.
    #[test]
    fn a_bad_seed_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed");
        for bad in ["", "abcd", &"zz".repeat(32), &"00".repeat(31), &"00".repeat(33)] {
            crate::paths::write_private(&path, bad.as_bytes()).unwrap();
            let err = SimIdentities::load_or_create(dir.path()).err().expect("refused");
            assert!(err.contains("seed") && err.contains("remove it"), "{err}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            crate::paths::write_private(&path, "00".repeat(32).as_bytes()).unwrap();
            assert!(SimIdentities::load_or_create(dir.path()).is_ok());
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = SimIdentities::load_or_create(dir.path()).err().expect("refused");
            assert!(err.contains("chmod 600"), "{err}");
        }
    }

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
