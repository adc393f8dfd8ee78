//! What a certificate the hub serves covers, checked at start so that a person hears of an expired
//! certificate, or one without a name the hub is reached by, before a device does.
//!
//! Rules it enforces:
//! - Dates: the chain is verified as a client would verify it, at the given time, with its last
//!   certificate as the anchor (the issuer the clients trust is not known here). webpki checks a
//!   certificate's dates before it looks for its issuer, so an expired or not-yet-valid leaf is
//!   found even when its CA is not in the file.
//! - Names: each name the hub is reached by (`--public-host`, `--allowed-host`, and with
//!   `--tls auto` the names it issues its leaf for) is matched against the leaf's own names by
//!   webpki, as a client matches them, whoever issued it.
//! - Each finding is one sentence naming the file, what is wrong and what to do; what cannot be
//!   judged here (trust, purpose, form) gives no finding rather than a false one.
//! - Names are shown as people write them (`hub.lan`, `192.0.2.7`), never as debug text.

use std::path::Path;
use std::sync::Arc;

use rustls::CertificateError as C;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, UnixTime};

/// What is wrong with the chain `chain` (read from `file`) for a hub reached by `names`, at `at`.
pub fn findings(file: &Path, chain: &[CertificateDer<'static>], names: &[String], at: std::time::SystemTime) -> Vec<String> {
    let Some((leaf, rest)) = chain.split_first() else { return vec![format!("{} holds no certificate", file.display())] };
    if let Some(dates) = dates(file, leaf, rest, at) {
        return vec![dates];
    }
    let Ok(end_entity) = webpki::EndEntityCert::try_from(leaf) else { return Vec::new() };
    let mut uncovered = Vec::new();
    let mut presented = Vec::new();
    for name in names {
        let Ok(server_name) = super::client::server_name(name) else { continue };
        match end_entity.verify_is_valid_for_subject_name(&server_name) {
            Ok(()) => {}
            Err(webpki::Error::CertNotValidForName(context)) => {
                uncovered.push(name.clone());
                presented = context.presented;
            }
            Err(_) => uncovered.push(name.clone()),
        }
    }
    if uncovered.is_empty() {
        return Vec::new();
    }
    let carries = if presented.is_empty() { String::new() } else { format!(" (it is for {})", presented.iter().map(|p| super::client::plain_name(p)).collect::<Vec<_>>().join(", ")) };
    let (them, it) = if uncovered.len() == 1 { ("that name", "it") } else { ("those names", "them") };
    vec![format!(
        "the certificate in {} is not for {}{carries}: devices and clients that reach the hub by {them} will refuse it; use a certificate that carries {it}",
        file.display(),
        uncovered.join(", "),
    )]
}

/// The finding about the leaf's dates at `at`, if any.
fn dates(file: &Path, leaf: &CertificateDer<'static>, rest: &[CertificateDer<'static>], at: std::time::SystemTime) -> Option<String> {
    let anchor = rest.last().unwrap_or(leaf);
    let intermediates = if rest.is_empty() { &[][..] } else { &rest[..rest.len() - 1] };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(anchor.clone()).ok()?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), super::provider()).build().ok()?;
    let when = UnixTime::since_unix_epoch(at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
    // The name does not matter here: webpki checks the dates before the names.
    let name = rustls::pki_types::ServerName::try_from("localhost").ok()?;
    match verifier.verify_server_cert(leaf, intermediates, &name, &[], when) {
        Err(rustls::Error::InvalidCertificate(e @ (C::Expired | C::ExpiredContext { .. }))) => {
            let since = match e {
                C::ExpiredContext { not_after, .. } => format!(" on {}", humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(not_after.as_secs()))),
                _ => String::new(),
            };
            Some(format!(
                "the certificate in {} expired{since}: every device and client will refuse it; renew it (the hub reloads the file when it changes), or check this machine's clock",
                file.display()
            ))
        }
        Err(rustls::Error::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. })) => {
            Some(format!("the certificate in {} is not valid yet: devices and clients will refuse it until it is; check this machine's clock", file.display()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA and a leaf for `names`, valid from `from` to `to` days from now: the chain, leaf first.
    fn chain(names: &[&str], from: i64, to: i64, with_ca: bool) -> Vec<CertificateDer<'static>> {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::default();
        ca.distinguished_name.push(rcgen::DnType::CommonName, "test CA");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now + time::Duration::days(from);
        p.not_after = now + time::Duration::days(to);
        let leaf = p.signed_by(&key, &rcgen::Issuer::new(ca, &ca_key)).unwrap();
        let mut out = vec![leaf.der().clone()];
        if with_ca {
            out.push(ca_cert.der().clone());
        }
        out
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_good_certificate_has_no_findings() {
        let c = chain(&["hub.lan", "192.0.2.7"], -1, 30, true);
        assert_eq!(findings(Path::new("hub.pem"), &c, &names(&["hub.lan", "192.0.2.7"]), std::time::SystemTime::now()), Vec::<String>::new());
    }

    #[test]
    fn a_name_the_hub_is_reached_by_but_the_certificate_lacks_is_named() {
        let c = chain(&["localhost", "::1"], -1, 30, true);
        let found = findings(Path::new("/etc/hub.pem"), &c, &names(&["localhost", "127.0.0.2", "hub.lan"]), std::time::SystemTime::now());
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert!(f.contains("/etc/hub.pem is not for 127.0.0.2, hub.lan"), "{f}");
        assert!(f.contains("(it is for localhost, ::1)"), "names as people write them: {f}");
        assert!(!f.contains("DnsName") && !f.contains("IpAddress"), "{f}");
    }

    #[test]
    fn an_expired_or_future_certificate_is_named_with_its_date() {
        let c = chain(&["hub.lan"], -30, -2, true);
        let found = findings(Path::new("hub.pem"), &c, &names(&["hub.lan"]), std::time::SystemTime::now());
        assert!(found.len() == 1 && found[0].contains("hub.pem expired on 20") && found[0].contains("renew"), "{found:?}");
        let c = chain(&["hub.lan"], 2, 30, true);
        let found = findings(Path::new("hub.pem"), &c, &names(&["hub.lan"]), std::time::SystemTime::now());
        assert!(found.len() == 1 && found[0].contains("not valid yet"), "{found:?}");
        // The same chain checked at a time inside its validity: nothing.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5 * 24 * 3600);
        assert!(findings(Path::new("hub.pem"), &c, &names(&["hub.lan"]), later).is_empty());
    }

    #[test]
    fn a_leaf_without_its_issuer_is_checked_all_the_same() {
        let c = chain(&["hub.lan"], -1, 30, false);
        assert!(findings(Path::new("hub.pem"), &c, &names(&["hub.lan"]), std::time::SystemTime::now()).is_empty());
        let found = findings(Path::new("hub.pem"), &c, &names(&["other.lan"]), std::time::SystemTime::now());
        assert!(found.len() == 1 && found[0].contains("not for other.lan (it is for hub.lan)"), "{found:?}");
        let c = chain(&["hub.lan"], -30, -2, false);
        let found = findings(Path::new("hub.pem"), &c, &names(&["hub.lan"]), std::time::SystemTime::now());
        assert!(found.len() == 1 && found[0].contains("expired"), "{found:?}");
        assert_eq!(findings(Path::new("e.pem"), &[], &names(&["hub.lan"]), std::time::SystemTime::now()), vec!["e.pem holds no certificate".to_string()]);
    }
}
