//! The firmware's X.509 verifier against chains the provisioned CA's key signed but RFC 5280
//! forbids (issue 44): a pathLenConstraint exceeded, names outside nameConstraints, one extension
//! twice, an intermediate that may not sign certificates, a leaf that is a CA or is not for TLS
//! servers. Each chain is made by rcgen, and `openssl verify -x509_strict -purpose sslserver`
//! (the oracle the issue used, in its RFC 5280 mode) is asked too: the firmware accepts exactly
//! what openssl accepts.

use std::path::Path;
use std::process::Command;

use hub_link::tls::x509::{Cert, Refusal, verify_chain};
use rcgen::{BasicConstraints, CertificateParams, CidrSubnet, CustomExtension, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints};

/// A certificate and what it takes to sign with it.
struct Made {
    der: Vec<u8>,
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A CA's parameters: P-256, `cA` with `path_len` (None: unconstrained), keyCertSign.
fn ca_params(name: &str, path_len: Option<u8>) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(path_len.map_or(BasicConstraints::Unconstrained, BasicConstraints::Constrained));
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.use_authority_key_identifier_extension = true;
    p
}

/// A server's parameters: `names`, digitalSignature, serverAuth.
fn leaf_params(names: &[&str]) -> CertificateParams {
    let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "mcpdev hub");
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    p
}

fn self_signed(params: CertificateParams) -> Made {
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Made { der: cert.der().to_vec(), pem: cert.pem(), issuer: Issuer::new(params, key) }
}

fn signed(params: CertificateParams, by: &Made) -> Made {
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &by.issuer).unwrap();
    Made { der: cert.der().to_vec(), pem: cert.pem(), issuer: Issuer::new(params, key) }
}

/// What the firmware says of `chain` (leaf first) for `host`, against the provisioned `ca`; and
/// what `openssl verify -purpose sslserver` says of the same chain, which must agree.
fn verdict(ca: &Made, chain: &[&Made], host: &str) -> Result<(), Refusal> {
    let firmware = firmware_verdict(ca, chain, host);
    let openssl = openssl_accepts(ca, chain, host);
    assert_eq!(firmware.is_ok(), openssl.is_ok(), "the firmware says {firmware:?}, openssl says {openssl:?}");
    firmware
}

/// What the firmware alone says of `chain` for `host`.
fn firmware_verdict(ca: &Made, chain: &[&Made], host: &str) -> Result<(), Refusal> {
    let ca_cert = Cert::parse(&ca.der).expect("the CA parses");
    let ders: Vec<&[u8]> = chain.iter().map(|c| c.der.as_slice()).collect();
    verify_chain(&ca_cert, &ders, host, 0).map(|_| ())
}

/// What webpki (rustls's verifier, the one mcpdev's own clients use) says of `chain`.
fn webpki_verdict(ca: &Made, chain: &[&Made], host: &str) -> Result<(), rustls::Error> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca.der.clone())).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(std::sync::Arc::new(roots), provider).build().unwrap();
    let ders: Vec<CertificateDer<'static>> = chain.iter().map(|c| CertificateDer::from(c.der.clone())).collect();
    verifier.verify_server_cert(&ders[0], &ders[1..], &ServerName::try_from(host.to_string()).unwrap(), &[], UnixTime::now()).map(|_| ())
}

fn openssl_accepts(ca: &Made, chain: &[&Made], host: &str) -> Result<(), String> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("hub-link-x509-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let ca_file = write("ca.pem", &ca.pem);
    let leaf = write("leaf.pem", &chain[0].pem);
    let untrusted = write("untrusted.pem", &chain[1..].iter().map(|c| c.pem.as_str()).collect::<String>());
    let mut cmd = Command::new("openssl");
    cmd.arg("verify").arg("-x509_strict").arg("-CAfile").arg(&ca_file).args(["-purpose", "sslserver"]);
    if host.parse::<std::net::IpAddr>().is_ok() {
        cmd.args(["-verify_ip", host]);
    } else {
        cmd.args(["-verify_hostname", host]);
    }
    if chain.len() > 1 {
        cmd.arg("-untrusted").arg(&untrusted);
    }
    let out = cmd.arg(Path::new(&leaf)).output().expect("openssl runs (the Debian package openssl)");
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)) }
}

#[test]
fn a_chain_that_keeps_every_rule_is_accepted() {
    let ca = self_signed(ca_params("hub CA", Some(1)));
    let int = signed(ca_params("intermediate", Some(0)), &ca);
    let leaf = signed(leaf_params(&["hub.example.com", "192.0.2.7"]), &int);
    assert_eq!(verdict(&ca, &[&leaf, &int], "hub.example.com"), Ok(()));
    assert_eq!(verdict(&ca, &[&leaf, &int], "192.0.2.7"), Ok(()));
    // A leaf straight under the CA, with no extKeyUsage at all: any purpose, serverAuth included.
    let mut plain = leaf_params(&["hub.lan"]);
    plain.extended_key_usages.clear();
    let plain = signed(plain, &ca);
    assert_eq!(verdict(&ca, &[&plain], "hub.lan"), Ok(()));
}

#[test]
fn a_path_longer_than_a_path_length_constraint_is_refused() {
    // The provisioned CA allows no intermediate (as `serve --tls auto`'s does).
    let ca = self_signed(ca_params("hub CA", Some(0)));
    let int = signed(ca_params("intermediate", None), &ca);
    let leaf = signed(leaf_params(&["hub.lan"]), &int);
    assert_eq!(verdict(&ca, &[&leaf, &int], "hub.lan"), Err(Refusal::PathTooLong));
    // An intermediate that allows none below it, with one below it.
    let ca = self_signed(ca_params("hub CA", None));
    let upper = signed(ca_params("upper", Some(0)), &ca);
    let lower = signed(ca_params("lower", None), &upper);
    let leaf = signed(leaf_params(&["hub.lan"]), &lower);
    assert_eq!(verdict(&ca, &[&leaf, &lower, &upper], "hub.lan"), Err(Refusal::PathTooLong));
}

#[test]
fn another_hubs_chain_with_its_own_ca_is_from_an_unknown_issuer() {
    // Hub B sends its leaf and its own self-signed CA (pathLen 0, as `serve --tls auto` makes
    // it) to a board provisioned with hub A's CA: the chain never reaches A's CA, whatever B's CA
    // allows, so it is refused as such (and not for B's CA's path length, or as its own issuer).
    let ca_a = self_signed(ca_params("hub A CA", Some(0)));
    let ca_b = self_signed(ca_params("hub B CA", Some(0)));
    let leaf_b = signed(leaf_params(&["hub.lan"]), &ca_b);
    assert_eq!(verdict(&ca_a, &[&leaf_b, &ca_b], "hub.lan"), Err(Refusal::UnknownIssuer));
    assert_eq!(verdict(&ca_a, &[&leaf_b], "hub.lan"), Err(Refusal::UnknownIssuer));
    // The same chain against its own CA passes.
    assert_eq!(verdict(&ca_b, &[&leaf_b, &ca_b], "hub.lan"), Ok(()));
}

#[test]
fn names_outside_a_name_constraint_are_refused() {
    let mut constrained = ca_params("hub CA", None);
    constrained.name_constraints = Some(NameConstraints {
        permitted_subtrees: vec![GeneralSubtree::DnsName("example.com".into()), GeneralSubtree::IpAddress(CidrSubnet::from_v4_prefix([192, 0, 2, 0], 24))],
        excluded_subtrees: vec![GeneralSubtree::DnsName("evil.example.com".into())],
    });
    let ca = self_signed(constrained);
    let inside = signed(leaf_params(&["hub.example.com", "192.0.2.7"]), &ca);
    assert_eq!(verdict(&ca, &[&inside], "hub.example.com"), Ok(()));
    // The name dialled is permitted, but another name of the leaf is not: refused all the same.
    let outside = signed(leaf_params(&["hub.example.com", "hub.other.org"]), &ca);
    assert_eq!(verdict(&ca, &[&outside], "hub.example.com"), Err(Refusal::NameConstraints));
    let excluded = signed(leaf_params(&["evil.example.com"]), &ca);
    assert_eq!(verdict(&ca, &[&excluded], "evil.example.com"), Err(Refusal::NameConstraints));
    let address = signed(leaf_params(&["hub.example.com", "198.51.100.7"]), &ca);
    assert_eq!(verdict(&ca, &[&address], "hub.example.com"), Err(Refusal::NameConstraints));

    // On an intermediate, the same.
    let root = self_signed(ca_params("root", None));
    let mut int = ca_params("intermediate", None);
    int.name_constraints = Some(NameConstraints { permitted_subtrees: vec![GeneralSubtree::DnsName("lan".into())], excluded_subtrees: vec![] });
    let int = signed(int, &root);
    let leaf = signed(leaf_params(&["hub.example.com"]), &int);
    assert_eq!(verdict(&root, &[&leaf, &int], "hub.example.com"), Err(Refusal::NameConstraints));
    let leaf = signed(leaf_params(&["hub.lan"]), &int);
    assert_eq!(verdict(&root, &[&leaf, &int], "hub.lan"), Ok(()));
}

#[test]
fn one_extension_twice_is_refused() {
    let ca = self_signed(ca_params("hub CA", None));
    // A second subjectAltName after rcgen's own: with "last wins" it would name another host.
    let mut twice = leaf_params(&["hub.lan"]);
    let other_san = vec![0x30, 0x0E, 0x82, 0x0C, b'e', b'v', b'i', b'l', b'.', b'e', b'x', b'a', b'm', b'p', b'l', b'e'];
    twice.custom_extensions = vec![CustomExtension::from_oid_content(&[2, 5, 29, 17], other_san)];
    let leaf = signed(twice, &ca);
    assert_eq!(verdict(&ca, &[&leaf], "hub.lan"), Err(Refusal::DuplicateExtension));
    assert_eq!(Cert::parse(&leaf.der).err(), Some(Refusal::DuplicateExtension));
}

#[test]
fn an_intermediate_that_may_not_sign_certificates_is_refused() {
    let ca = self_signed(ca_params("hub CA", None));
    let mut int = ca_params("intermediate", None);
    int.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let int = signed(int, &ca);
    let leaf = signed(leaf_params(&["hub.lan"]), &int);
    assert_eq!(verdict(&ca, &[&leaf, &int], "hub.lan"), Err(Refusal::NotForSigning));
    // An intermediate whose purposes leave out TLS servers.
    let mut int = ca_params("intermediate", None);
    int.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let int = signed(int, &ca);
    let leaf = signed(leaf_params(&["hub.lan"]), &int);
    assert_eq!(verdict(&ca, &[&leaf, &int], "hub.lan"), Err(Refusal::NotForServerAuth));
}

#[test]
fn a_leaf_that_is_a_ca_or_not_for_servers_is_refused() {
    let ca = self_signed(ca_params("hub CA", None));
    let mut as_ca = leaf_params(&["hub.lan"]);
    as_ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    as_ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let leaf = signed(as_ca, &ca);
    // openssl takes a CA's certificate for a server's; webpki (and RFC 5280's profile of an end
    // entity) does not, and neither does the firmware.
    assert_eq!(firmware_verdict(&ca, &[&leaf], "hub.lan"), Err(Refusal::LeafIsCa));
    let webpki = webpki_verdict(&ca, &[&leaf], "hub.lan");
    assert!(matches!(webpki, Err(rustls::Error::InvalidCertificate(_))), "webpki refuses it too: {webpki:?}");
    let mut client = leaf_params(&["hub.lan"]);
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let leaf = signed(client, &ca);
    assert_eq!(verdict(&ca, &[&leaf], "hub.lan"), Err(Refusal::NotForServerAuth));
}
