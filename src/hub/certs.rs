//! The hub's certificates: its own CA and leaf (`serve --tls auto`), or a pair of files the person
//! brings (`--tls-cert FILE --tls-key FILE`, from their own CA or ACME).
//!
//! Rules it enforces:
//! - `--tls auto` keeps everything in [`crate::paths::hub_tls_dir`]: `ca.pem` and `ca.key` (the
//!   hub CA, ECDSA P-256, ten years), `hub.pem` (the leaf, then the CA: the chain served) and
//!   `hub.key`. The directory is 0700 and every file 0600 (written whole, then renamed); a key
//!   file others can read is refused, as every secret of the hub is.
//! - The leaf carries every name and address the hub is reached by (`localhost`, this machine's
//!   name, `--public-host`, every `--allowed-host`, its LAN addresses, loopback). It is issued again at start when it no
//!   longer covers them, and, while the hub runs, [`RENEW_BEFORE`] before it expires
//!   ([`LEAF_LIFETIME`] each); the resolver picks the new one up at the next handshake, so no
//!   connected device is dropped.
//! - `mcpdev flash` writes `ca.pem` into a board's provisioning record (our firmware verifies the
//!   hub against it); `serve` prints its SHA-256 fingerprint and path for the CLI's
//!   `MCPDEV_CA_FINGERPRINT` / `MCPDEV_CA_FILE`.
//! - Files of the person's own are served as they are and re-read when they change (certbot's
//!   renewal); a pair that does not match, or cannot be read, is an error at start that names the
//!   file, and later only a warning (the previous pair stays).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
use rustls::ServerConfig;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::CertificateDer;

use crate::tls::server::{FileResolver, HTTP1};

/// How long a leaf the hub issues itself is valid.
pub const LEAF_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);
/// A leaf is issued again when it would expire within this.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long the hub's own CA is valid.
const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How often the files are checked for a change (a renewal by certbot or by the hub).
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// How often the hub checks whether its own leaf needs renewing.
const RENEW_CHECK_EVERY: Duration = Duration::from_secs(12 * 3600);

/// Where the hub's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// The hub's own CA and leaf, made and renewed in `dir` (the state directory's `tls/`).
    Auto { dir: PathBuf },
    /// A chain and key the person keeps (renewed by them).
    Files { cert: PathBuf, key: PathBuf },
}

/// The hub's TLS, ready for its listeners.
pub struct HubTls {
    pub resolver: Arc<FileResolver>,
    /// For the device and host listeners (ALPN http/1.1).
    pub http: Arc<ServerConfig>,
    /// For the embedded broker (no ALPN).
    pub mqtt: Arc<ServerConfig>,
    /// The hub's own CA (`--tls auto`): its file and SHA-256 fingerprint.
    pub ca: Option<(PathBuf, String)>,
}

impl std::fmt::Debug for HubTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubTls").field("cert", &self.resolver.cert_file()).field("ca", &self.ca).finish_non_exhaustive()
    }
}

impl HubTls {
    /// The fingerprint of what clients should trust: the hub's CA, else the certificate served.
    pub fn fingerprint(&self) -> String {
        match &self.ca {
            Some((_, fp)) => fp.clone(),
            None => self.resolver.chain().first().map(|c| crate::tls::fingerprint(c)).unwrap_or_default(),
        }
    }
}

/// Makes (or loads) the certificate and starts watching its files. `names`: what the leaf must
/// carry with `--tls auto` (host names and IP literals).
pub fn prepare(source: &TlsSource, names: &[String]) -> anyhow::Result<Arc<HubTls>> {
    crate::tls::install_crypto_provider();
    let (resolver, ca) = match source {
        TlsSource::Files { cert, key } => {
            check_key_mode(key)?;
            let resolver = FileResolver::load(cert, key).map_err(|e| usage(format!("--tls-cert/--tls-key: {e}")))?;
            (resolver, None)
        }
        TlsSource::Auto { dir } => {
            make_private(dir)?;
            let ca = HubCa::load_or_create(dir)?;
            ca.ensure_leaf(names, std::time::SystemTime::now())?;
            let resolver = FileResolver::load(&dir.join(LEAF_FILE), &dir.join(LEAF_KEY_FILE)).map_err(|e| anyhow::anyhow!("{e}"))?;
            let fp = crate::tls::fingerprint(&ca.cert_der);
            spawn_renewal(ca, names.to_vec());
            (resolver, Some((dir.join(CA_FILE), fp)))
        }
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        resolver.watch(RELOAD_EVERY);
    }
    let http = crate::tls::server::config(resolver.clone(), HTTP1);
    let mqtt = crate::tls::server::config(resolver.clone(), &[]);
    Ok(Arc::new(HubTls { resolver, http, mqtt, ca }))
}

/// `--tls-key` must not be readable by every user: refused (exit 2) with the fix; a key its
/// group may read (the `ssl-cert` group convention) is taken, with a warning.
fn check_key_mode(key: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(key) else { return Ok(()) };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o007 != 0 {
            return Err(usage(format!(
                "--tls-key {} can be read by every user of this machine (mode {mode:o}): anyone here could impersonate the hub; `chmod 600 {}` (or 640 for a group such as ssl-cert)",
                key.display(),
                key.display()
            )));
        }
        if mode & 0o070 != 0 {
            tracing::warn!(key = %key.display(), "--tls-key can be read by its group (mode {mode:o}); `chmod 600` unless that group is meant to (ssl-cert)");
        }
    }
    Ok(())
}

/// The `--tls auto` directory is this user's alone: one that others may enter is made 0700 (and
/// that is logged); one that is not this user's is refused.
fn make_private(dir: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(dir) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            if crate::hub::owner::my_uid().is_some_and(|me| me != meta.uid()) {
                return Err(usage(format!("{} belongs to another user (uid {}) and others may enter it: the hub keeps its keys in a directory of its own user's only", dir.display(), meta.uid())));
            }
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| anyhow::anyhow!("cannot make {} private (chmod 700): {e}", dir.display()))?;
            tracing::warn!(dir = %dir.display(), "the TLS directory could be entered by others (mode {mode:o}); it is 0700 now");
        }
    }
    Ok(())
}

fn usage(message: String) -> anyhow::Error {
    crate::exit::CodedError::new(crate::exit::Exit::Usage, message).into()
}

/// File names inside the TLS directory (the contract with `mcpdev flash`).
pub const CA_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";
pub const LEAF_FILE: &str = "hub.pem";
pub const LEAF_KEY_FILE: &str = "hub.key";

/// The hub's own CA, loaded with its key.
pub struct HubCa {
    dir: PathBuf,
    key: KeyPair,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
}

impl HubCa {
    /// Loads the CA in `dir`, or makes one when there is none.
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Self> {
        let (cert_path, key_path) = (dir.join(CA_FILE), dir.join(CA_KEY_FILE));
        let write = |path: &Path, text: &str| crate::paths::write_private(path, text.as_bytes()).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()));
        match crate::paths::read_private(&key_path) {
            Ok(key_pem) => {
                let key = KeyPair::from_pem(&String::from_utf8_lossy(&key_pem)).map_err(|e| anyhow::anyhow!("{} is not a private key ({e}); remove the tls directory to make a new CA", key_path.display()))?;
                let cert_pem = std::fs::read_to_string(&cert_path).map_err(|e| anyhow::anyhow!("cannot read the hub CA {}: {e}", cert_path.display()))?;
                let cert_der = crate::tls::client::read_certs(&cert_path).map_err(|e| anyhow::anyhow!("{e}"))?.remove(0);
                Ok(Self { dir: dir.to_path_buf(), key, cert_der, cert_pem })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = KeyPair::generate().map_err(|e| anyhow::anyhow!("cannot make the hub CA's key: {e}"))?;
                let now = time::OffsetDateTime::now_utc();
                let mut params = ca_params(&key);
                params.not_before = now - time::Duration::hours(1);
                params.not_after = now + time::Duration::try_from(CA_LIFETIME).unwrap_or(time::Duration::days(3650));
                let cert = params.self_signed(&key).map_err(|e| anyhow::anyhow!("cannot make the hub CA: {e}"))?;
                write(&key_path, &key.serialize_pem())?;
                write(&cert_path, &cert.pem())?;
                tracing::info!(path = %cert_path.display(), "made the hub's own CA");
                Ok(Self { dir: dir.to_path_buf(), key, cert_der: cert.der().clone(), cert_pem: cert.pem() })
            }
            Err(e) => Err(anyhow::anyhow!("cannot read the hub CA's key {}: {e}", key_path.display())),
        }
    }

    /// Issues a new leaf unless the one on disk is signed by this CA, carries every name, and is
    /// valid until `at` + [`RENEW_BEFORE`]. `Ok(true)`: a new one was written.
    pub fn ensure_leaf(&self, names: &[String], at: std::time::SystemTime) -> anyhow::Result<bool> {
        if self.leaf_is_good(names, at + RENEW_BEFORE) {
            return Ok(false);
        }
        self.issue_leaf(names, at)?;
        Ok(true)
    }

    fn leaf_is_good(&self, names: &[String], until: std::time::SystemTime) -> bool {
        let Ok(chain) = crate::tls::client::read_certs(&self.dir.join(LEAF_FILE)) else { return false };
        if crate::tls::server::load_pair(&self.dir.join(LEAF_FILE), &self.dir.join(LEAF_KEY_FILE)).is_err() {
            return false;
        }
        let mut roots = rustls::RootCertStore::empty();
        if roots.add(self.cert_der.clone()).is_err() {
            return false;
        }
        let Ok(verifier) = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crate::tls::provider()).build() else { return false };
        let when = rustls::pki_types::UnixTime::since_unix_epoch(until.duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
        names.iter().all(|n| {
            crate::tls::client::server_name(n).is_ok_and(|name| verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], when).is_ok())
        })
    }

    /// Issues a leaf for `names`, valid from `at` for [`LEAF_LIFETIME`], and writes it (key first).
    pub fn issue_leaf(&self, names: &[String], at: std::time::SystemTime) -> anyhow::Result<()> {
        let leaf_key = KeyPair::generate().map_err(|e| anyhow::anyhow!("cannot make the hub's key: {e}"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, names.first().map_or("mcpdev hub", String::as_str));
        params.subject_alt_names = names.iter().filter_map(|n| san(n)).collect();
        let start = time::OffsetDateTime::from(at);
        params.not_before = start - time::Duration::hours(1);
        params.not_after = start + time::Duration::try_from(LEAF_LIFETIME).unwrap_or(time::Duration::days(90));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let issuer = Issuer::new(ca_params(&self.key), &self.key);
        let leaf = params.signed_by(&leaf_key, &issuer).map_err(|e| anyhow::anyhow!("cannot issue the hub's certificate: {e}"))?;
        let write = |name: &str, text: &str| {
            let path = self.dir.join(name);
            crate::paths::write_private(&path, text.as_bytes()).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
        };
        write(LEAF_KEY_FILE, &leaf_key.serialize_pem())?;
        write(LEAF_FILE, &format!("{}{}", leaf.pem(), self.cert_pem))?;
        tracing::info!(names = %names.join(", "), "issued the hub's TLS certificate (from its own CA)");
        Ok(())
    }

    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }
}

/// The CA's parameters, the same every time for one key: its name is derived from the key, so
/// a leaf issued after a restart names the issuer the CA certificate on disk does.
fn ca_params(key: &KeyPair) -> CertificateParams {
    let id = ring::digest::digest(&ring::digest::SHA256, rcgen::PublicKeyData::der_bytes(key));
    let short: String = id.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::OrganizationName, "mcpdev");
    params.distinguished_name.push(DnType::CommonName, format!("mcpdev hub CA {short}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn san(name: &str) -> Option<SanType> {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(SanType::IpAddress(ip));
    }
    bare.to_string().try_into().ok().map(SanType::DnsName)
}

/// Renews the leaf while the hub runs, [`RENEW_BEFORE`] its expiry.
fn spawn_renewal(ca: HubCa, names: Vec<String>) {
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RENEW_CHECK_EVERY).await;
            match ca.ensure_leaf(&names, std::time::SystemTime::now()) {
                Ok(true) => tracing::info!("renewed the hub's TLS certificate; new connections get it"),
                Ok(false) => {}
                Err(e) => tracing::warn!("cannot renew the hub's TLS certificate (retried in 12 h): {e}"),
            }
        }
    });
}

/// The names a hub's own leaf carries: `public` (the `--public-host`), `allowed` (the
/// `--allowed-host` names), `localhost`, this machine's name, the given addresses, and loopback,
/// each once.
pub fn leaf_names(public: Option<&str>, allowed: &[String], addresses: &[IpAddr]) -> Vec<String> {
    let mut names = Vec::new();
    let mut add = |n: String| {
        if !n.is_empty() && !names.contains(&n) {
            names.push(n);
        }
    };
    if let Some(p) = public {
        add(p.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    for a in allowed {
        add(a.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    add("localhost".into());
    if let Some(h) = hostname() {
        add(h);
    }
    for ip in addresses {
        add(ip.to_canonical().to_string());
    }
    add("127.0.0.1".into());
    add("::1".into());
    names
}

fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok())?;
    let name = name.trim().to_ascii_lowercase();
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn auto_makes_a_private_ca_and_a_leaf_that_verifies_and_is_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let names = leaf_names(Some("hub.lan"), &["127.0.0.2".to_string(), "hub.example".to_string()], &["192.0.2.7".parse().unwrap()]);
        let ca = HubCa::load_or_create(&tls).unwrap();
        let now = std::time::SystemTime::now();
        assert!(ca.ensure_leaf(&names, now).unwrap(), "a first leaf is issued");
        assert!(ca.leaf_is_good(&["127.0.0.2".to_string(), "hub.example".to_string()], now), "it carries the --allowed-host names: {names:?}");
        for f in [CA_FILE, CA_KEY_FILE, LEAF_FILE, LEAF_KEY_FILE] {
            assert_eq!(mode(&tls.join(f)), 0o600, "{f}");
        }
        assert_eq!(mode(&tls), 0o700);
        let leaf = std::fs::read(tls.join(LEAF_FILE)).unwrap();
        // A restart: the same CA, and the leaf kept while it covers the names.
        let again = HubCa::load_or_create(&tls).unwrap();
        assert_eq!(again.cert_der(), ca.cert_der());
        assert!(!again.ensure_leaf(&names, now).unwrap());
        assert_eq!(std::fs::read(tls.join(LEAF_FILE)).unwrap(), leaf);
        // A new address, or a leaf near its end: issued again, by the reloaded CA, and it verifies.
        let more = leaf_names(Some("hub.lan"), &[], &["192.0.2.8".parse().unwrap()]);
        assert!(again.ensure_leaf(&more, now).unwrap());
        assert!(again.leaf_is_good(&more, now));
        let late = now + LEAF_LIFETIME - RENEW_BEFORE + Duration::from_secs(3600);
        assert!(again.ensure_leaf(&more, late).unwrap(), "renewed within RENEW_BEFORE of its end");
        assert!(!again.leaf_is_good(&["other.example".to_string()], now), "a name it does not carry");
    }

    #[test]
    fn a_key_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        HubCa::load_or_create(dir.path()).unwrap();
        std::fs::set_permissions(dir.path().join(CA_KEY_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = HubCa::load_or_create(dir.path()).err().unwrap().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    /// Issue 44, item 9: a key every user can read is refused with the fix; a TLS directory
    /// others may enter is made private.
    #[test]
    fn a_world_readable_key_is_refused_and_an_open_tls_directory_is_closed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let ca = HubCa::load_or_create(&tls).unwrap();
        ca.ensure_leaf(&["127.0.0.1".to_string()], std::time::SystemTime::now()).unwrap();
        let (cert, key) = (tls.join(LEAF_FILE), tls.join(LEAF_KEY_FILE));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = prepare(&TlsSource::Files { cert: cert.clone(), key: key.clone() }, &[]).err().unwrap().to_string();
        assert!(e.contains("every user") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(prepare(&TlsSource::Files { cert, key: key.clone() }, &[]).is_ok(), "a group's key is taken (with a warning)");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&tls, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare(&TlsSource::Auto { dir: tls.clone() }, &["127.0.0.1".to_string()]).unwrap();
        assert_eq!(mode(&tls), 0o700, "made private again");
    }
}
