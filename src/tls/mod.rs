//! TLS for mcpdev, both ends, with rustls and its *ring* provider: pure Rust plus a little
//! assembly, so building mcpdev needs no C toolchain or CMake for `aws-lc-sys` (the provider
//! reqwest would otherwise pull in). reqwest is built without a provider of its own and takes the
//! process default, which [`install_crypto_provider`] sets.
//!
//! Rules it enforces, for every listener and client of the crate:
//! - TLS 1.2 and 1.3 only, and forward-secret cipher suites only (ECDHE key exchange; rustls has
//!   no static-RSA suites, and [`provider`] keeps only ECDHE ones for TLS 1.2, checked by a test).
//! - [`server`]: the hub's side. A certificate is served through a resolver that re-reads its
//!   files when they change (a renewed certificate is picked up by the next handshake; connected
//!   devices keep theirs), and a handshake must finish within a deadline ([`server::accept`]).
//! - [`client`]: mcpdev's clients (the CLI, `sim`, `call --url`, the hub's own MQTT link) verify
//!   the server against one trust for the whole process: the system's roots plus CA files
//!   (`MCPDEV_CA_FILE`), or a pinned SHA-256 fingerprint. A certificate that does not verify ends
//!   the connection with a message that says what was wrong ([`client::explain`]).
//! - [`coverage`]: the hub checks the certificate it serves at start, as a client would, and
//!   warns about an expired one or one without a name the hub is reached by.

pub mod client;
pub mod coverage;
pub mod server;
pub mod stream;

use std::sync::Arc;

/// Makes ring the process-wide rustls provider, once. Call it before building any HTTP client;
/// calling it again is free.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The ring provider restricted to forward-secret suites: every TLS 1.3 suite (always ECDHE) and
/// the ECDHE suites of TLS 1.2.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.retain(forward_secret);
    Arc::new(p)
}

/// TLS 1.2 and 1.3; nothing older.
pub const VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

fn forward_secret(suite: &rustls::SupportedCipherSuite) -> bool {
    match suite {
        rustls::SupportedCipherSuite::Tls13(_) => true,
        rustls::SupportedCipherSuite::Tls12(s) => format!("{:?}", s.common.suite).contains("ECDHE"),
    }
}

/// The SHA-256 fingerprint of a certificate (DER) as `AB:CD:…`, the way `openssl x509
/// -fingerprint -sha256` prints it.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// A fingerprint as a person may paste it (`AB:CD:…`, `abcd…`, `sha256:…`, `SHA256 Fingerprint=…`)
/// as 32 bytes; `None` when it is not one.
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let t = text.trim();
    let t = t.rsplit_once('=').map_or(t, |(_, v)| v);
    let t = t.strip_prefix("sha256:").or_else(|| t.strip_prefix("SHA256:")).unwrap_or(t);
    let hex: String = t.chars().filter(|c| !matches!(c, ':' | ' ' | '-')).collect();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_forward_secret_suites_and_no_old_versions() {
        let p = provider();
        assert!(!p.cipher_suites.is_empty());
        for s in &p.cipher_suites {
            let name = format!("{:?}", s.suite());
            assert!(name.starts_with("TLS13_") || name.contains("_ECDHE_"), "{name}");
        }
        assert_eq!(VERSIONS.len(), 2);
    }

    #[test]
    fn fingerprints_round_trip_however_pasted() {
        let fp = fingerprint(b"not a certificate, but bytes");
        assert_eq!(fp.len(), 32 * 3 - 1);
        let raw = parse_fingerprint(&fp).unwrap();
        for spelling in [fp.to_lowercase(), fp.replace(':', ""), format!("sha256:{}", fp.replace(':', "")), format!("SHA256 Fingerprint={fp}")] {
            assert_eq!(parse_fingerprint(&spelling), Some(raw), "{spelling}");
        }
        assert_eq!(parse_fingerprint("AB:CD"), None);
        assert_eq!(parse_fingerprint(&"zz".repeat(32)), None);
    }
}
