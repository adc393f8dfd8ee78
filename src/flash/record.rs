//! The provisioning record `flash` writes at 0xE000, from its inputs: SSID and hub URL from flags
//! (or their environment variables), the Wi-Fi password from `MCPDEV_WIFI_PASSWORD` or a hidden
//! prompt, the token from `MCPDEV_DEVICE_TOKEN`. Secrets never come from argv and are never logged
//! (`Provisioning`'s `Debug` redacts them).

use anyhow::bail;
use provisioning::Provisioning;

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
