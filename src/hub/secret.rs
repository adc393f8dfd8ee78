//! The hub secret: 32 random bytes kept in the private state directory (`hub-secret`, 0600).
//! Every per-device credential is derived from it and the Device-Id, so the hub stores no token,
//! one device's token opens nothing else, and tokens survive a restart of the hub.
//!
//! `token = hex(HMAC-SHA256(secret, purpose ":" device_id))[..32]`, with `purpose` one of
//! [`Purpose`]. Rotating the secret (deleting the file) revokes every device at once.

use std::path::{Path, PathBuf};

use ring::hmac;

/// What a derived token is for; tokens for one purpose are useless for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The device's own token: WebSocket `Authorization: Bearer`, the MQTT password.
    Device,
    /// The token a device's camera tool sends to the hub's vision endpoint.
    Vision,
    /// The MAC of an admission record one hub of a cluster hands the others
    /// ([`super::admission::record`]).
    ClusterRecord,
    /// The MAC of a shard of a hub's device index ([`crate::mqtt`] `presence`): only hubs
    /// holding the hub secret can list devices in the cluster.
    ClusterIndex,
    /// The MAC of a request one hub of a cluster sends another, and of its answers
    /// ([`crate::mqtt`] `cluster_rpc`): only hubs can ask a hub to reach a device, or answer it.
    ClusterRpc,
    /// The MAC of a hub's link advertisement, and the proof a hub sends first on a link
    /// ([`crate::mqtt`] `hub_link`): only hubs can offer a link, or use one.
    ClusterLink,
    /// The MAC of what a hub acts on without asking: its presence record, its claims of devices,
    /// the device messages it passes on to another hub, and the name of the cluster's share group
    /// ([`crate::mqtt`] `cluster_seal`): only hubs of this cluster can say a hub is alive, take a
    /// device, or speak for one.
    ClusterState,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Purpose::Device => "device",
            Purpose::Vision => "vision",
            Purpose::ClusterRecord => "cluster-record",
            Purpose::ClusterIndex => "cluster-index",
            Purpose::ClusterRpc => "cluster-rpc",
            Purpose::ClusterLink => "cluster-link",
            Purpose::ClusterState => "cluster-state",
        }
    }
}

pub struct HubSecret {
    key: hmac::Key,
    path: PathBuf,
}

impl std::fmt::Debug for HubSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSecret").field("path", &self.path).finish_non_exhaustive()
    }
}

impl HubSecret {
    /// The default place: `hub-secret` in [`crate::paths::state_dir`].
    pub fn default_path() -> PathBuf {
        crate::paths::state_dir().join("hub-secret")
    }

    /// Reads the secret at `path`, or creates it (random, 0600) when there is none. Refuses a file
    /// other users can read, or one that is not 64 hex digits.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        use crate::paths::KeyFileError;
        let raw = crate::paths::load_or_create_key(path, 32).map_err(|e| match e {
            KeyFileError::Read(e) => anyhow::anyhow!("cannot read the hub secret {}: {e}", path.display()),
            KeyFileError::Write(e) => anyhow::anyhow!("cannot write the hub secret {}: {e}", path.display()),
            KeyFileError::NotHex => anyhow::anyhow!("the hub secret {} is not 64 hex digits; remove it and a new one is made (every device must then be approved again)", path.display()),
        })?;
        Ok(Self { key: hmac::Key::new(hmac::HMAC_SHA256, &raw), path: path.to_path_buf() })
    }

    /// A secret from known bytes (tests, and in-process hubs that keep nothing on disk).
    pub fn from_bytes(raw: &[u8]) -> Self {
        Self { key: hmac::Key::new(hmac::HMAC_SHA256, raw), path: PathBuf::new() }
    }

    /// A random secret that lives only in this process.
    pub fn ephemeral() -> Self {
        let mut raw = [0u8; 32];
        fill_random(&mut raw).expect("the system random source works");
        Self::from_bytes(&raw)
    }

    /// Where the secret is kept (empty for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The token for `device_id` (a lower-case MAC) and `purpose`: 32 hex digits.
    pub fn token(&self, purpose: Purpose, device_id: &str) -> String {
        let message = format!("{}:{}", purpose.label(), device_id.to_ascii_lowercase());
        let tag = hmac::sign(&self.key, message.as_bytes());
        hex(&tag.as_ref()[..16])
    }

    /// The full MAC (64 hex digits) of `message` for `purpose`: records that every hub holding
    /// this secret can check, and no one else can make.
    pub fn mac(&self, purpose: Purpose, message: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(purpose.label().as_bytes());
        ctx.update(b":");
        ctx.update(message);
        hex(ctx.sign().as_ref())
    }

    /// Whether `mac` is [`Self::mac`] of `message` (compared in constant time).
    pub fn verify_mac(&self, purpose: Purpose, message: &[u8], mac: &str) -> bool {
        constant_time_eq(self.mac(purpose, message).as_bytes(), mac.trim().as_bytes())
    }

    /// Whether `token` is `device_id`'s token for `purpose` (compared in constant time).
    pub fn verify(&self, purpose: Purpose, device_id: &str, token: &str) -> bool {
        let expected = self.token(purpose, device_id);
        constant_time_eq(expected.as_bytes(), token.trim().as_bytes())
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn fill_random(buf: &mut [u8]) -> anyhow::Result<()> {
    use ring::rand::SecureRandom;
    ring::rand::SystemRandom::new().fill(buf).map_err(|_| anyhow::anyhow!("the system random source failed"))
}

pub(crate) use crate::paths::hex;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_per_device_and_per_purpose() {
        let s = HubSecret::from_bytes(b"0123456789abcdef0123456789abcdef");
        let a = s.token(Purpose::Device, "aa:bb:cc:dd:ee:01");
        assert_eq!(a.len(), 32);
        assert_eq!(a, s.token(Purpose::Device, "AA:BB:CC:DD:EE:01"), "the id is case-insensitive");
        assert_ne!(a, s.token(Purpose::Device, "aa:bb:cc:dd:ee:02"));
        assert_ne!(a, s.token(Purpose::Vision, "aa:bb:cc:dd:ee:01"));
        assert!(s.verify(Purpose::Device, "aa:bb:cc:dd:ee:01", &a));
        assert!(!s.verify(Purpose::Device, "aa:bb:cc:dd:ee:02", &a));
        assert!(!s.verify(Purpose::Device, "aa:bb:cc:dd:ee:01", &a[..31]));
        let other = HubSecret::from_bytes(b"another secret, another hub.....");
        assert!(!other.verify(Purpose::Device, "aa:bb:cc:dd:ee:01", &a));
    }

    #[test]
    fn the_secret_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/hub-secret");
        let first = HubSecret::load_or_create(&path).unwrap().token(Purpose::Device, "aa:bb:cc:dd:ee:01");
        let again = HubSecret::load_or_create(&path).unwrap().token(Purpose::Device, "aa:bb:cc:dd:ee:01");
        assert_eq!(first, again);
        std::fs::write(&path, "not hex").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let err = HubSecret::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("not 64 hex digits"), "{err}");
    }
}
