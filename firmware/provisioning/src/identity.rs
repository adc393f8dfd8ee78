//! Device identity: the `Device-Id` text of a MAC and the fallback `Client-Id` derived from it.
//!
//! The derived Client-Id is predictable (anyone who knows the MAC computes it): it is only for
//! records written by hosts older than the random Client-Id and device key `mcpdev flash` writes.

use alloc::string::String;
use core::fmt::Write;

/// The OID namespace UUID (RFC 9562, appendix A): `6ba7b812-9dad-11d1-80b4-00c04fd430c8`.
const NAMESPACE_OID: [u8; 16] = [
    0x6b, 0xa7, 0xb8, 0x12, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
];

/// `aa:bb:cc:dd:ee:ff`, lower case: the xiaozhi `Device-Id`.
pub fn format_mac(mac: [u8; 6]) -> String {
    let mut s = String::with_capacity(17);
    for (i, b) in mac.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A UUID in its 36-character hyphenated lower-case form.
pub fn format_uuid(uuid: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The `Client-Id` a device uses when its provisioning record carries none: the UUID version 5
/// (SHA-1, RFC 9562) of [`format_mac`]`(mac)` in the OID namespace. A fallback for records from
/// older hosts only: it is **predictable**, so it proves nothing about who sends it.
pub fn client_id_from_mac(mac: [u8; 6]) -> [u8; 16] {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(&NAMESPACE_OID);
    sha.update(format_mac(mac).as_bytes());
    let digest = sha.digest().bytes();
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&digest[..16]);
    uuid[6] = (uuid[6] & 0x0F) | 0x50; // version 5
    uuid[8] = (uuid[8] & 0x3F) | 0x80; // RFC 4122 variant
    uuid
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn mac_text_is_lower_case_with_colons() {
        assert_eq!(format_mac([0xAA, 0xBB, 0x0C, 0x00, 0xEE, 0x01]), "aa:bb:0c:00:ee:01");
    }

    #[test]
    fn client_id_matches_the_uuid_crate() {
        for mac in [[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x02], [0, 0, 0, 0, 0, 0], [0x34, 0x85, 0x18, 0x7a, 0x1b, 0xf0]] {
            let text = format_mac(mac);
            // The same as Uuid::new_v5(&Uuid::NAMESPACE_OID, device_id.as_bytes()).
            let expected = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, text.as_bytes());
            assert_eq!(client_id_from_mac(mac), *expected.as_bytes());
            assert_eq!(format_uuid(&client_id_from_mac(mac)), expected.to_string());
        }
    }
}
