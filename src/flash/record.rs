//! The provisioning record `flash` writes at 0xE000, from its inputs: SSID and hub URL from flags
//! (or their environment variables), the Wi-Fi password from `MCPDEV_WIFI_PASSWORD` or a hidden
//! prompt, the token from `MCPDEV_DEVICE_TOKEN`. Secrets never come from argv and are never logged
//! (`Provisioning`'s `Debug` redacts them).
//!
//! [`identify`] gives the record the board's own random Client-Id and device key, kept per MAC in
//! the state directory ([`crate::device_identity`]), so re-flashing a board keeps its identity and
//! no one can compute it from the MAC. The key is never printed.

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
    let hub_url = match inputs.hub_url {
        Some(u) => u.to_string(),
        None => default_hub_url().ok_or_else(|| usage("could not find this machine's LAN address for the hub URL: give --hub-url ws://HOST:8000/xiaozhi/v1/".into()))?,
    };
    let wifi_password = match secrets.env(PASSWORD_ENV) {
        Some(p) => p,
        None => match secrets.prompt_hidden(&format!("Wi-Fi password for {ssid:?} (empty for an open network): "))? {
            Some(p) => p,
            None => bail!(usage(format!("set {PASSWORD_ENV} to the Wi-Fi password (empty for an open network); it is never taken from the command line"))),
        },
    };
    let token = secrets.env(TOKEN_ENV).unwrap_or_default();
    let record = Provisioning { wifi_ssid: ssid.to_string(), wifi_password, hub_url, token, ..Default::default() };
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

/// `ws://<LAN address>:8000/xiaozhi/v1/`: the address this machine would use to reach the
/// network (a UDP socket's local address after `connect`; nothing is sent), where `mcpdev serve`
/// listens for devices by default.
pub fn default_hub_url() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then(|| format!("ws://{ip}:8000/xiaozhi/v1/"))
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
        let r = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL }, &env).unwrap();
        assert_eq!((r.wifi_ssid.as_str(), r.wifi_password.as_str(), r.token.as_str()), ("lab", "hunter2hunter2", "tok"));
        assert_eq!(provisioning::decode(&r.encode_sector().unwrap()).unwrap(), r);
        assert!(!format!("{r:?}").contains("hunter2"), "secrets must not reach logs");
    }

    #[test]
    fn the_password_is_asked_for_at_a_terminal_and_required_elsewhere() {
        let asked = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL }, &Fake(HashMap::new(), Some("secretpass"))).unwrap();
        assert_eq!(asked.wifi_password, "secretpass");
        assert_eq!(asked.token, "");
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL }, &Fake(HashMap::new(), None)).unwrap_err();
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
        let no_ssid = gather(&Inputs { wifi_ssid: None, hub_url: URL }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&no_ssid), Exit::Usage);
        let short = Fake(HashMap::from([(PASSWORD_ENV, "short")]), None);
        let err = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: URL }, &short).unwrap_err();
        assert!(err.to_string().contains("password"), "{err}");
        let bad_url = gather(&Inputs { wifi_ssid: Some("lab"), hub_url: Some("ftp://x/") }, &env).unwrap_err();
        assert_eq!(crate::exit::exit_for(&bad_url), Exit::Usage, "{bad_url}");
    }
}
