//! What mcpdev's clients trust, once per process: the CLI reaching a hub (`--hub https://…`),
//! `call --url https://…`, `sim --url wss://…`, and the hub's own link to a broker (`mqtts://`).
//!
//! Rules:
//! - One [`Trust`] for the process, set at start ([`set_trust`]) from `MCPDEV_CA_FILE` /
//!   `--ca-file` and `MCPDEV_CA_FINGERPRINT` / `--ca-fingerprint`. A CA file named explicitly is
//!   the only root (as `curl --cacert`); a pinned fingerprint is the only thing trusted; without
//!   either, the system's roots, plus the local hub's own CA when it has one (`serve --tls auto`).
//! - A pin names the server's certificate or a CA in the chain it sends. A pinned CA is no
//!   shortcut: the server's certificate must still be signed by it, be valid now and carry the
//!   name connected to (a stranger can send the hub's public CA certificate too, never its key).
//! - A certificate that does not verify ends the connection, and [`explain`] says what was wrong
//!   (expired, another name, an unknown issuer, not the pinned one) and what to do.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The environment variable naming a CA file (PEM) the clients trust.
pub const CA_FILE_ENV: &str = "MCPDEV_CA_FILE";
/// The environment variable holding a pinned SHA-256 fingerprint.
pub const FINGERPRINT_ENV: &str = "MCPDEV_CA_FINGERPRINT";

/// What the process's clients trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
    /// CA files (PEM) named by the person: the only roots when set.
    pub ca_files: Vec<PathBuf>,
    /// A pinned SHA-256 fingerprint (the server's certificate or a CA of its chain): the only
    /// thing trusted when set.
    pub pin: Option<[u8; 32]>,
    /// CA files trusted beside the system's roots without being asked for (the local hub's own
    /// CA); one that cannot be read is skipped.
    pub implicit_ca_files: Vec<PathBuf>,
}

static TRUST: OnceLock<Trust> = OnceLock::new();

/// Sets the process's trust; the first call wins (the CLI calls it once, before any client).
pub fn set_trust(trust: Trust) {
    let _ = TRUST.set(trust);
}

/// The process's trust (the system's roots when nothing was set).
pub fn trust() -> &'static Trust {
    TRUST.get_or_init(Trust::default)
}

/// Why the trust cannot be set up: a CA file that is missing or holds no certificate.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct TrustError(pub String);

/// The client configuration for HTTP/1.1 (WebSocket, the control API, MCP over HTTP), built
/// once: loading the system's roots reads some 150 files.
pub fn http_config() -> Result<Arc<ClientConfig>, TrustError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, TrustError>> = OnceLock::new();
    CONFIG.get_or_init(|| build(trust(), &[b"http/1.1"])).clone()
}

/// The client configuration for HTTP/1.1 that trusts only the certificate (or CA) `pin` names:
/// for a connection that carries a remote token, which goes only to the hub it names.
pub fn pinned_http_config(pin: [u8; 32]) -> Result<Arc<ClientConfig>, TrustError> {
    build(&Trust { pin: Some(pin), ..Default::default() }, &[b"http/1.1"])
}

/// The client configuration without ALPN (MQTT over TLS).
pub fn plain_config() -> Result<Arc<ClientConfig>, TrustError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, TrustError>> = OnceLock::new();
    CONFIG.get_or_init(|| build(trust(), &[])).clone()
}

/// A client configuration for `trust`, offering `alpn`.
pub fn build(trust: &Trust, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TrustError> {
    let provider = super::provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(super::VERSIONS)
        .map_err(|e| TrustError(format!("TLS set-up: {e}")))?;
    let mut config = if let Some(pin) = trust.pin {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(Pinned { pin, provider })).with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        if trust.ca_files.is_empty() {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
            for file in &trust.implicit_ca_files {
                if let Ok(certs) = read_certs(file) {
                    roots.add_parsable_certificates(certs);
                }
            }
        } else {
            for file in &trust.ca_files {
                let certs = read_certs(file)?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(TrustError(format!("{} ({CA_FILE_ENV}) holds no CA certificate this client can use", file.display())));
                }
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// An HTTP client builder whose `https://` servers are verified with the process's trust (when it
/// cannot be set up, the builder keeps reqwest's own roots, and the problem is logged).
pub fn reqwest_builder() -> reqwest::ClientBuilder {
    super::install_crypto_provider();
    match http_config() {
        Ok(config) => reqwest::Client::builder().tls_backend_preconfigured((*config).clone()),
        Err(e) => {
            tracing::warn!("{e}");
            reqwest::Client::builder()
        }
    }
}

/// The certificates of a PEM file.
pub fn read_certs(file: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let bytes = std::fs::read(file).map_err(|e| TrustError(format!("cannot read the CA file {} ({CA_FILE_ENV}): {e}", file.display())))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes).filter_map(Result::ok).collect();
    if certs.is_empty() {
        return Err(TrustError(format!("{} ({CA_FILE_ENV}) holds no PEM certificate (-----BEGIN CERTIFICATE-----)", file.display())));
    }
    Ok(certs)
}

/// A TLS connection over `tcp` to `host` (a name or an IP literal, brackets allowed), verified
/// with `config`, else [`http_config`]. A certificate that does not verify is an error that
/// [`explain`] reads.
pub async fn connect(
    tcp: tokio::net::TcpStream,
    host: &str,
    config: Option<Arc<ClientConfig>>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let config = match config {
        Some(c) => c,
        None => http_config().map_err(std::io::Error::other)?,
    };
    let name = server_name(host)?;
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await
}

/// `host` as a TLS server name.
pub fn server_name(host: &str) -> std::io::Result<ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{host:?} is not a host name TLS can verify")))
}

/// Trusts exactly one certificate: the server's own, or a CA of the chain it sends (then the
/// server's certificate is verified against that CA as usual).
#[derive(Debug)]
struct Pinned {
    pin: [u8; 32],
    provider: Arc<rustls::crypto::CryptoProvider>,
}

/// The server's chain holds no certificate with the pinned fingerprint.
#[derive(Debug)]
pub struct NotPinned {
    /// The server's certificate's fingerprint.
    pub presented: String,
    pub pinned: String,
}

impl std::fmt::Display for NotPinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server's certificate (SHA-256 {}) is neither the pinned one ({}) nor signed by it", self.presented, self.pinned)
    }
}

impl std::error::Error for NotPinned {}

fn sha256(der: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, der).as_ref());
    out
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if sha256(end_entity) == self.pin {
            return Ok(ServerCertVerified::assertion());
        }
        if let Some(ca) = intermediates.iter().find(|c| sha256(c) == self.pin) {
            let mut roots = RootCertStore::empty();
            roots.add(ca.clone().into_owned())?;
            let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?;
            let others: Vec<_> = intermediates.iter().filter(|c| sha256(c) != self.pin).cloned().collect();
            return verifier.verify_server_cert(end_entity, &others, server_name, ocsp, now);
        }
        let pinned = self.pin.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":");
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(NotPinned { presented: super::fingerprint(end_entity), pinned })))))
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// What went wrong with TLS somewhere in `e`'s chain of causes, in words a person can act on;
/// `None` when TLS is not the cause.
pub fn explain(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(describe(tls));
        }
        // io::Error's source() skips the error it wraps; look at that one too.
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(describe(tls));
            }
            if let Some(found) = explain(inner) {
                return Some(found);
            }
        }
        cause = err.source();
    }
    None
}

const ADD_TRUST: &str = "give the hub's CA file (MCPDEV_CA_FILE; `mcpdev serve` prints where it is) or pin its fingerprint (MCPDEV_CA_FINGERPRINT)";

/// One TLS error in words.
pub fn describe(e: &rustls::Error) -> String {
    use CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => {
                let when = match c {
                    C::ExpiredContext { not_after, .. } => format!(" on {}", humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(not_after.as_secs()))),
                    _ => String::new(),
                };
                format!("the server's certificate expired{when}: renew it (a hub with --tls auto renews its own; restart it), or check this machine's clock")
            }
            C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet: check the clocks of this machine and the server".into(),
            C::NotValidForName => "the server's certificate is not for the name connected to: connect by a name it carries".into(),
            C::NotValidForNameContext { expected, presented } => format!(
                "the server's certificate is for {}, not for {}: connect by one of those names, or give the hub that name (`serve --public-host` or `--allowed-host`, or a certificate that carries it)",
                presented.iter().map(|p| plain_name(p)).collect::<Vec<_>>().join(", "),
                expected.to_str()
            ),
            C::UnknownIssuer => format!(
                "the server's certificate is signed by a CA this client does not trust: {ADD_TRUST}. If the hub's certificate should not have changed, someone may be in the middle"
            ),
            C::BadSignature => "the server's certificate is not signed by the CA it names: someone may be in the middle".into(),
            C::Revoked => "the server's certificate was revoked".into(),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => "the server's certificate is not one for a TLS server (extended key usage)".into(),
            C::Other(other) => format!("{other}: if the hub's CA should not have changed, someone may be in the middle; else pin the new fingerprint"),
            other => format!("the server's certificate was refused: {other:?}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the server did not answer in TLS (is it a plain http:// or ws:// listener? then use that scheme)".into()
        }
        rustls::Error::AlertReceived(alert) => format!("the server ended the TLS handshake ({alert:?}): it may not support TLS 1.2 or 1.3 with forward-secret suites"),
        rustls::Error::PeerIncompatible(why) => format!("the server offers nothing this client accepts ({why:?}): TLS 1.2 or 1.3 with forward-secret suites only"),
        other => format!("TLS failed: {other}"),
    }
}

/// A name a certificate presents, as people write it: webpki gives its debug text
/// (`DnsName("localhost")`, `IpAddress(0::1)`, `UniformResourceIdentifier("…")`).
/// The server chose those bytes: control characters come out escaped, never raw.
pub fn plain_name(presented: &str) -> String {
    plain_name_raw(presented).chars().flat_map(|c| -> Box<dyn Iterator<Item = char>> { if c.is_control() { Box::new(c.escape_default()) } else { Box::new(std::iter::once(c)) } }).collect()
}

fn plain_name_raw(presented: &str) -> String {
    let inner = |prefix: &str| presented.strip_prefix(prefix).and_then(|s| s.strip_suffix(')'));
    if let Some(name) = inner("DnsName(") {
        return name.trim_matches('"').to_string();
    }
    if let Some(ip) = inner("IpAddress(") {
        // Its IPv6 text is not always a valid address (every run of zero groups becomes `::`):
        // canonical when it parses, else as it came.
        return ip.parse::<std::net::IpAddr>().map_or_else(|_| ip.to_string(), |a| a.to_string());
    }
    if let Some(uri) = inner("UniformResourceIdentifier(") {
        return uri.trim_matches('"').to_string();
    }
    presented.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Trust { ca_files: vec![dir.path().join("nope.pem")], ..Trust::default() };
        let e = build(&missing, &[]).unwrap_err().to_string();
        assert!(e.contains("cannot read the CA file") && e.contains("nope.pem"), "{e}");
        std::fs::write(dir.path().join("empty.pem"), "hello").unwrap();
        let empty = Trust { ca_files: vec![dir.path().join("empty.pem")], ..Trust::default() };
        let e = build(&empty, &[]).unwrap_err().to_string();
        assert!(e.contains("no PEM certificate"), "{e}");
    }

    #[test]
    fn explain_finds_the_tls_error_under_io_and_other_wrappers() {
        let tls = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let wrapped = anyhow::Error::new(io).context("connecting");
        let said = explain(wrapped.as_ref()).unwrap();
        assert!(said.contains("does not trust") && said.contains("MCPDEV_CA_FILE"), "{said}");
        assert_eq!(explain(&std::io::Error::other("refused")), None);
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("hub.example").unwrap(),
            presented: vec!["DnsName(\"other.example\")".into(), "IpAddress(0::1)".into(), "IpAddress(192.0.2.1)".into(), "DirectoryName".into()],
        });
        let said = describe(&name);
        assert!(said.contains("is for other.example, ::1, 192.0.2.1, DirectoryName, not for hub.example"), "{said}");
        assert!(!said.contains("DnsName") && !said.contains("IpAddress") && !said.contains('"'), "names as people write them: {said}");
        assert_eq!(plain_name("DnsName(\"evil\u{1b}[2J.example\")"), "evil\\u{1b}[2J.example", "a hostile name cannot drive the terminal");
    }
}
