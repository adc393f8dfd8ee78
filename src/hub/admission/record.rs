//! Admission records: what one hub of a cluster hands the others so that an approval or a
//! revocation made through any hub holds on every hub (docs/cluster.md).
//!
//! The rules this module enforces:
//! - **A record is the decision itself, not a request to decide again**: an approval carries its
//!   whole binding (Device-Id, Client-Id, device key hash, transport, challenge, and the nonce
//!   every token of it is derived from), so every hub with the same hub secret verifies the same
//!   tokens; a revocation carries the Device-Id and its time.
//! - **Authenticated**: a record is `{"body": "<JSON text>", "mac": "<HMAC-SHA256 of the body>"}`
//!   with a key derived from the hub secret ([`Purpose::ClusterRecord`]). A record with a wrong
//!   or missing MAC, a body that is not a record, a Device-Id that is not the one it is filed
//!   under, or a field out of bounds is refused, and nothing of it is applied.
//! - **Ordered**: each record has a time (`at_ms`, unix ms) that is later than every decision the
//!   hub that made it knew of for that device (a Lamport clock on top of the wall clock), and a
//!   hub applies a record only if it is later than what it holds. At the same time a revocation
//!   beats an approval, and of two approvals the larger nonce wins, so every hub ends on the same
//!   decision whatever order records arrive in; an older approval never undoes a newer revocation.

use serde::{Deserialize, Serialize};

use super::book::Admitted;
use crate::hub::secret::{HubSecret, Purpose};

/// The longest record text taken.
pub const MAX_RECORD_BYTES: usize = 8 << 10;

/// One decision about one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub device_id: String,
    /// When it was decided (unix ms; see the module's ordering rule).
    pub at_ms: u64,
    /// The hub it was decided on (for logs).
    pub by: String,
    /// The approval's binding; `None`: the device was revoked.
    #[serde(default)]
    pub approved: Option<Admitted>,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    body: String,
    mac: String,
}

impl Record {
    /// The record as it travels: its body and the body's MAC.
    pub fn seal(&self, secret: &HubSecret) -> String {
        let body = serde_json::to_string(self).unwrap_or_default();
        let mac = secret.mac(Purpose::ClusterRecord, body.as_bytes());
        serde_json::to_string(&Sealed { body, mac }).unwrap_or_default()
    }

    /// A sealed record filed under `device_id`, checked: its MAC first, then every field.
    pub fn open(secret: &HubSecret, device_id: &str, payload: &[u8]) -> Result<Self, String> {
        if payload.len() > MAX_RECORD_BYTES {
            return Err(format!("a record of {} bytes, over {MAX_RECORD_BYTES}", payload.len()));
        }
        let sealed: Sealed = serde_json::from_slice(payload).map_err(|e| format!("not a sealed record ({e})"))?;
        if !secret.verify_mac(Purpose::ClusterRecord, sealed.body.as_bytes(), &sealed.mac) {
            return Err("its MAC does not match: it was not made by a hub with this hub secret".into());
        }
        let record: Record = serde_json::from_str(&sealed.body).map_err(|e| format!("an authenticated body that is not a record ({e})"))?;
        record.check(device_id)?;
        Ok(record)
    }

    fn check(&self, filed_under: &str) -> Result<(), String> {
        let id = super::device_id(&self.device_id)?;
        if id != self.device_id || super::device_id(filed_under).ok().as_deref() != Some(id.as_str()) {
            return Err(format!("a record for {:?} filed under {filed_under:?}", self.device_id));
        }
        if self.by.len() > 64 {
            return Err("a hub name over 64 bytes".into());
        }
        if let Some(a) = &self.approved {
            let hex = |s: &str, max: usize| s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit());
            let ok = a.device_id == self.device_id
                && a.approved_at_ms == self.at_ms
                && !a.nonce.is_empty()
                && hex(&a.nonce, 64)
                && a.key_hash.as_deref().is_none_or(|k| k.len() == 64 && hex(k, 64))
                && a.client_id.as_deref().is_none_or(|c| c.len() <= 256)
                && a.challenge.len() <= 256;
            if !ok {
                return Err("an approval whose binding is malformed".into());
            }
        }
        Ok(())
    }

    /// Whether this record is to replace `held` (the record of what a hub holds now).
    pub fn supersedes(&self, held: Option<&Record>) -> bool {
        let Some(held) = held else { return true };
        if self.at_ms != held.at_ms {
            return self.at_ms > held.at_ms;
        }
        match (&self.approved, &held.approved) {
            (None, None) => false,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a.nonce > b.nonce,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aa:bb:cc:dd:ee:01";

    fn approval(at: u64, nonce: &str) -> Record {
        let a = Admitted { device_id: A.into(), client_id: Some("c".into()), via: None, approved_at_ms: at, key_hash: None, nonce: nonce.into(), challenge: String::new() };
        Record { device_id: A.into(), at_ms: at, by: "h1".into(), approved: Some(a) }
    }

    fn revocation(at: u64) -> Record {
        Record { device_id: A.into(), at_ms: at, by: "h2".into(), approved: None }
    }

    #[test]
    fn a_record_opens_only_with_the_same_secret_and_under_its_own_device() {
        let (secret, other) = (HubSecret::from_bytes(&[7; 32]), HubSecret::from_bytes(&[8; 32]));
        let sealed = approval(5, "ab").seal(&secret);
        assert_eq!(Record::open(&secret, A, sealed.as_bytes()).unwrap(), approval(5, "ab"));
        assert!(Record::open(&secret, "AA:BB:CC:DD:EE:01", sealed.as_bytes()).is_ok(), "the Device-Id in any case");
        assert!(Record::open(&other, A, sealed.as_bytes()).unwrap_err().contains("MAC"), "another secret");
        assert!(Record::open(&secret, "aa:bb:cc:dd:ee:02", sealed.as_bytes()).unwrap_err().contains("filed under"));
        // A forger who changes the body (here: the nonce) without the secret.
        let forged = sealed.replace("\\\"ab\\\"", "\\\"cd\\\"");
        assert_ne!(forged, sealed);
        assert!(Record::open(&secret, A, forged.as_bytes()).unwrap_err().contains("MAC"));
        // A body that is authenticated but malformed is refused all the same.
        let mut bad = approval(5, "not hex!");
        bad.approved.as_mut().unwrap().nonce = "not hex!".into();
        assert!(Record::open(&secret, A, bad.seal(&secret).as_bytes()).unwrap_err().contains("malformed"));
        assert!(Record::open(&secret, A, b"{}").is_err());
        assert!(Record::open(&secret, A, &vec![b' '; MAX_RECORD_BYTES + 1]).unwrap_err().contains("over"));
    }

    #[test]
    fn the_later_record_wins_and_a_revocation_wins_a_tie() {
        assert!(approval(5, "a").supersedes(None));
        assert!(revocation(6).supersedes(Some(&approval(5, "a"))));
        assert!(!approval(5, "a").supersedes(Some(&revocation(6))), "an older approval never undoes a newer revocation");
        assert!(revocation(5).supersedes(Some(&approval(5, "a"))));
        assert!(!approval(5, "a").supersedes(Some(&revocation(5))));
        assert!(approval(5, "b").supersedes(Some(&approval(5, "a"))) && !approval(5, "a").supersedes(Some(&approval(5, "b"))));
        assert!(!approval(5, "a").supersedes(Some(&approval(5, "a"))), "the same record again changes nothing");
    }
}
