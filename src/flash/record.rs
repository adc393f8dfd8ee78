//! The provisioning record `flash` writes at 0xE000, from its inputs: SSID and hub URL from flags
//! (or their environment variables), the Wi-Fi password from `MCPDEV_WIFI_PASSWORD` or a hidden
//! prompt, the token from `MCPDEV_DEVICE_TOKEN`. Secrets never come from argv and are never logged
//! (`Provisioning`'s `Debug` redacts them).
//!
//! [`identify`] gives the record the board's own random Client-Id and device key, kept per MAC in
//! the state directory ([`crate::device_identity`]), so re-flashing a board keeps its identity and
//! no one can compute it from the MAC. The key is never printed.
//!
//! The hub's CA ([`HubCa`]) goes into the record when the hub serves TLS: named with `--hub-ca`,
//! or found where `serve --tls auto` keeps it ([`crate::paths::hub_ca_file`]). A record with a
//! CA must name a TLS hub URL (the default becomes `wss://`), and a TLS URL needs a CA: the
//! firmware has no other way to verify its hub, and never falls back to plain text.

use std::path::Path;

use anyhow::bail;
use provisioning::Provisioning;

use crate::device_identity::DeviceIdentity;

use crate::exit::{CodedError, Exit};

/// The Wi-Fi password's environment variable.
pub const PASSWORD_ENV: &str = "MCPDEV_WIFI_PASSWORD";
/// The device token's environment variable (the same one the hub and `sim` read).
pub const TOKEN_ENV: &str = "MCPDEV_DEVICE_TOKEN";

/// The record's inputs as given; secrets are looked up by [`gather`].
pub struct Inputs<'a> {
    pub wifi_ssid: Option<&'a str>,
    pub hub_url: Option<&'a str>,
    pub hub_ca: HubCa<'a>,
}

/// Where the hub's CA comes from.
#[derive(Debug, Clone, Copy)]
pub enum HubCa<'a> {
    /// None (`--no-hub-ca`, or no hub with TLS on this machine): a plain link.
    None,
    /// This machine's hub runs with `--tls auto`: its CA file.
    Detected(&'a Path),
    /// `--hub-ca FILE`.
    Given(&'a Path),
}

/// The CA for `--hub-ca`/auto-detection: the file unless `--no-hub-ca`, `--hub-ca` wins over
/// the file `serve --tls auto` keeps.
pub fn hub_ca_choice<'a>(given: Option<&'a Path>, no_hub_ca: bool, detected: &'a Path) -> HubCa<'a> {
    match (no_hub_ca, given) {
        (true, _) => HubCa::None,
        (false, Some(path)) => HubCa::Given(path),
        (false, None) if detected.is_file() => HubCa::Detected(detected),
        (false, None) => HubCa::None,
    }
}

/// A certificate file (PEM, its first `CERTIFICATE` block, or DER) as DER.
fn read_ca(path: &Path) -> anyhow::Result<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let usage = |m: String| CodedError::new(Exit::Usage, m);
    let bytes = std::fs::read(path).map_err(|e| usage(format!("cannot read the hub CA {}: {e}", path.display())))?;
    if bytes.first() == Some(&0x30) {
        return Ok(bytes);
    }
    match CertificateDer::from_pem_slice(&bytes) {
        Ok(der) => Ok(der.to_vec()),
        Err(e) => bail!(usage(format!("the hub CA {} is neither a PEM certificate nor DER ({e})", path.display()))),
    }
}

/// Where secrets come from: the environment, else (only at a terminal) a hidden prompt.
pub trait Secrets {
    fn env(&self, key: &str) -> Option<String>;
    /// `None` when there is no terminal to ask at.
    fn prompt_hidden(&self, question: &str) -> anyhow::Result<Option<String>>;
}

/// The process environment and the terminal on stderr/stdin.
pub struct Process;

impl Secrets for Process {
    fn env(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }

    fn prompt_hidden(&self, question: &str) -> anyhow::Result<Option<String>> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return Ok(None);
        }
        let term = console::Term::stderr();
        term.write_str(question)?;
        Ok(Some(term.read_secure_line()?))
    }
}

/// The record to write, checked by the same rules the firmware's decoder applies.
pub fn gather(inputs: &Inputs<'_>, secrets: &dyn Secrets) -> anyhow::Result<Provisioning> {
    let usage = |m: String| CodedError::new(Exit::Usage, m);
    let Some(ssid) = inputs.wifi_ssid.filter(|s| !s.is_empty()) else {
        bail!(usage("the device needs a Wi-Fi network: --wifi-ssid NAME (or MCPDEV_WIFI_SSID), or --no-provision to keep the record on the device".into()));
    };
    let hub_ca = match inputs.hub_ca {
        HubCa::None => Vec::new(),
        HubCa::Detected(path) | HubCa::Given(path) => read_ca(path)?,
    };
    let hub_url = match inputs.hub_url {
        Some(u) => u.to_string(),
        None => default_hub_url(!hub_ca.is_empty()).ok_or_else(|| usage("could not find this machine's LAN address for the hub URL: give --hub-url ws://HOST:8000/xiaozhi/v1/".into()))?,
    };
    let tls = provisioning::HubUrl::parse(&hub_url).is_ok_and(|u| u.scheme.is_tls());
    match (inputs.hub_ca, tls) {
        (HubCa::Detected(path), false) => bail!(usage(format!(
            "this machine's hub serves TLS (its CA is {}), but --hub-url {} is plain text: give its wss://, https:// or mqtts:// URL, or --no-hub-ca for a plain link",
            path.display(),
            provisioning::loggable_url(&hub_url)
        ))),
        (HubCa::Given(path), false) => bail!(usage(format!(
            "--hub-ca {} makes the device talk TLS only, but --hub-url {} is plain text: give a wss://, https:// or mqtts:// URL",
            path.display(),
            provisioning::loggable_url(&hub_url)
        ))),
        (HubCa::None, true) => bail!(usage(format!(
            "--hub-url {} needs the hub's CA to verify it: run the hub with --tls auto on this machine (its CA is then found at {}), or give --hub-ca FILE",
            provisioning::loggable_url(&hub_url),
            crate::paths::hub_ca_file().display()
        ))),
        _ => {}
    }
    let wifi_password = match secrets.env(PASSWORD_ENV) {
        Some(p) => p,
        None => match secrets.prompt_hidden(&format!("Wi-Fi password for {ssid:?} (empty for an open network): "))? {
            Some(p) => p,
            None => bail!(usage(format!("set {PASSWORD_ENV} to the Wi-Fi password (empty for an open network); it is never taken from the command line"))),
        },
    };
    let token = secrets.env(TOKEN_ENV).unwrap_or_default();
    // The device's lower bound of "now": a hub certificate that expired before the flash is refused.
    let flashed_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let flashed_at = if hub_ca.is_empty() { 0 } else { flashed_at };
    let record = Provisioning { wifi_ssid: ssid.to_string(), wifi_password, hub_url, token, hub_ca, flashed_at, ..Default::default() };
    if let Err(e) = record.validate() {
        bail!(usage(format!("cannot provision the device: {e}")));
    }
    Ok(record)
}

/// Puts the board's Client-Id and device key into `record`: the ones kept for `mac` in `boards`
/// (the state directory's `flash/`), created on the first flash of that board. Without a MAC (the
/// chip did not tell it, or a merged image for some board) a fresh pair that is not kept; returns
/// whether the pair is kept. A kept file that cannot be read or used is a usage error naming it.
pub fn identify(record: &mut Provisioning, boards: &Path, mac: Option<&str>) -> anyhow::Result<bool> {
    let (id, kept) = match mac {
        Some(mac) => (DeviceIdentity::load_or_create(boards, mac).map_err(|e| CodedError::new(Exit::Usage, e))?, true),
        None => (DeviceIdentity::random(), false),
    };
    record.client_id = Some(id.client_id_bytes());
    record.device_key = id.device_key;
    if let Err(e) = record.validate() {
        bail!(CodedError::new(Exit::Usage, format!("cannot provision the device: {e}")));
    }
    Ok(kept)
}

/// `ws://<LAN address>:8000/xiaozhi/v1/` (`wss://` with `tls`): the address this machine would
/// use to reach the network (a UDP socket's local address after `connect`; nothing is sent),
/// where `mcpdev serve` listens for devices by default. The hub's `--tls auto` leaf names its LAN
/// addresses, so the device verifies it by this address.
pub fn default_hub_url(tls: bool) -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    let scheme = if tls { "wss" } else { "ws" };
    (!ip.is_unspecified() && !ip.is_loopback()).then(|| format!("{scheme}://{ip}:8000/xiaozhi/v1/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, &'static str>, Option<&'static str>);
    impl Secrets for Fake {
        fn env(&self, key: &str) -> Option<String> {
            self.0.get(key).map(|s| s.to_string())
        }
        fn prompt_hidden(&self, _: &str) -> anyhow::Result<Option<String>> {
            Ok(self.1.map(str::to_string))
        }
    }
    const URL: Option<&str> = Some("ws://10.0.0.2:8000/xiaozhi/v1/");

    #[test]
    fn secrets_come_from_the_environment() {
        let env = Fake(HashMap::from([(PASSWORD_ENV, "hunter2hunter2"), (TOKEN_ENV, "tok")]), None);
        let r = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::None }, &env).unwrap();
        assert_eq!((r.wifi_ssid.as_str(), r.wifi_password.as_str(), r.token.as_str()), ("lab", "hunter2hunter2", "tok"));
        assert_eq!(provisioning::decode(&r.encode_sector().unwrap()).unwrap(), r);
        assert!(!format!("{r:?}").contains("hunter2"), "secrets must not reach logs");
    }

    #[test]
    fn the_password_is_asked_for_at_a_terminal_and_required_elsewhere() {
        let asked = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::None }, &Fake(HashMap::new(), Some("secretpass"))).unwrap();
        assert_eq!(asked.wifi_password, "secretpass");
        assert_eq!(asked.token, "");
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::None }, &Fake(HashMap::new(), None)).unwrap_err();
        assert!(err.to_string().contains(PASSWORD_ENV), "{err}");
        assert_eq!(crate::exit::exit_for(&err), Exit::Usage);
    }

    fn record() -> Provisioning {
        Provisioning { wifi_ssid: "lab".into(), hub_url: "http://10.0.0.2:8000/xiaozhi/ota/".into(), ..Default::default() }
    }

    #[test]
    fn a_board_keeps_its_random_identity_across_flashes() {
        let dir = tempfile::tempdir().unwrap();
        let mac = "34:85:18:7a:1b:f0";
        let mut first = record();
        assert!(identify(&mut first, dir.path(), Some(mac)).unwrap());
        let mut again = record();
        identify(&mut again, dir.path(), Some(mac)).unwrap();
        assert_eq!((again.client_id, &again.device_key), (first.client_id, &first.device_key), "re-flashing keeps the identity");
        assert!((16..=64).contains(&first.device_key.len()), "a device key is written");
        // Not the MAC-derived fallback anyone can compute.
        let mac_bytes = [0x34, 0x85, 0x18, 0x7a, 0x1b, 0xf0];
        assert_ne!(first.client_id, Some(provisioning::client_id_from_mac(mac_bytes)));
        // Another board, and a board whose MAC is unknown, get their own; the unknown one is not kept.
        let mut other = record();
        identify(&mut other, dir.path(), Some("34:85:18:7a:1b:f1")).unwrap();
        assert_ne!(other.client_id, first.client_id);
        assert_ne!(other.device_key, first.device_key);
        let mut unknown = record();
        assert!(!identify(&mut unknown, dir.path(), None).unwrap());
        assert_ne!(unknown.device_key, first.device_key);
        // What the firmware will read back, with the key hidden from logs.
        let decoded = provisioning::decode(&first.encode_sector().unwrap()).unwrap();
        assert_eq!(decoded, first);
        assert!(!format!("{decoded:?}").contains(&first.device_key));
    }

    #[test]
    fn an_unusable_kept_identity_is_a_usage_error_that_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        crate::paths::write_private(&dir.path().join("3485187a1bf0.json"), br#"{"client_id":"x","device_key":"y"}"#).unwrap();
        let err = identify(&mut record(), dir.path(), Some("34:85:18:7a:1b:f0")).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::Usage);
        assert!(err.to_string().contains("3485187a1bf0.json"), "{err}");
    }

    #[test]
    fn missing_or_invalid_inputs_are_usage_errors() {
        let env = Fake(HashMap::from([(PASSWORD_ENV, "")]), None);
        let no_ssid = gather(&Inputs { wifi_ssid: None, hub_url: URL, hub_ca: HubCa::None }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&no_ssid), Exit::Usage);
        let short = Fake(HashMap::from([(PASSWORD_ENV, "short")]), None);
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::None }, &short).unwrap_err();
        assert!(err.to_string().contains("password"), "{err}");
        let bad_url = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: Some("ftp://x/"), hub_ca: HubCa::None }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&bad_url), Exit::Usage, "{bad_url}");
    }

    /// Bytes shaped like a DER certificate, and the same as PEM.
    fn ca_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        use base64::Engine;
        let mut der = vec![0x30, 0x82, 0x01, 0x00];
        der.resize(0x104, 0x5A);
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::engine::general_purpose::STANDARD.encode(&der)
        );
        let (d, p) = (dir.join("ca.der"), dir.join("ca.pem"));
        std::fs::write(&d, &der).unwrap();
        std::fs::write(&p, pem).unwrap();
        (d, p)
    }

    #[test]
    fn the_hub_ca_goes_into_the_record_with_a_tls_url() {
        let dir = tempfile::tempdir().unwrap();
        let (der, pem) = ca_files(dir.path());
        let env = Fake(HashMap::from([(PASSWORD_ENV, "")]), None);
        let wss = Some("wss://10.0.0.2:8000/xiaozhi/v1/");
        for ca in [HubCa::Given(&der), HubCa::Given(&pem), HubCa::Detected(&pem)] {
            let r = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: wss, hub_ca: ca }, &env).unwrap();
            assert_eq!(r.hub_ca, std::fs::read(&der).unwrap(), "{ca:?}: the DER, from PEM or DER");
            assert!(r.flashed_at > 1_700_000_000, "the flash time is the device's lower bound of now");
            let sector = r.encode_sector().unwrap();
            assert_eq!(sector[4], 2, "a record with a CA is version 2");
            assert_eq!(provisioning::decode(&sector).unwrap(), r);
        }
        // Without a URL, the default is the LAN address over wss:// (when this machine has one).
        if default_hub_url(true).is_some() {
            let r = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: None, hub_ca: HubCa::Detected(&pem) }, &env).unwrap();
            assert!(r.hub_url.starts_with("wss://") && r.hub_url.ends_with(":8000/xiaozhi/v1/"), "{}", r.hub_url);
        }
    }

    #[test]
    fn a_ca_and_a_plain_url_or_tls_without_a_ca_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (_, pem) = ca_files(dir.path());
        let env = Fake(HashMap::from([(PASSWORD_ENV, "")]), None);
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::Detected(&pem) }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::Usage);
        assert!(err.to_string().contains("--no-hub-ca") && err.to_string().contains("ca.pem"), "{err}");
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL, hub_ca: HubCa::Given(&pem) }, &env).unwrap_err();
        assert!(err.to_string().contains("plain text"), "{err}");
        let wss = Some("wss://10.0.0.2:8000/xiaozhi/v1/");
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: wss, hub_ca: HubCa::None }, &env).unwrap_err();
        assert!(err.to_string().contains("--hub-ca") && err.to_string().contains("--tls auto"), "{err}");
        // A file that is no certificate, and one that does not exist.
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: wss, hub_ca: HubCa::Given(&junk) }, &env).unwrap_err();
        assert!(err.to_string().contains("junk.pem") && err.to_string().contains("neither"), "{err}");
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: wss, hub_ca: HubCa::Given(&dir.path().join("nope")) }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&err), Exit::Usage, "{err}");
    }

    #[test]
    fn the_ca_is_detected_unless_refused_or_named() {
        let dir = tempfile::tempdir().unwrap();
        let (der, pem) = ca_files(dir.path());
        let absent = dir.path().join("absent.pem");
        assert!(matches!(hub_ca_choice(None, false, &pem), HubCa::Detected(p) if p == pem));
        assert!(matches!(hub_ca_choice(None, false, &absent), HubCa::None), "no TLS hub here: plain");
        assert!(matches!(hub_ca_choice(Some(&der), false, &pem), HubCa::Given(p) if p == der));
        assert!(matches!(hub_ca_choice(None, true, &pem), HubCa::None));
    }
}
