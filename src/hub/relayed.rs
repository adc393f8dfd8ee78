//! A device the hub relays to its upstream voice backend (`serve --upstream`): the upstream is
//! dialled once the device is admitted and upgraded, and the device then runs on a relay link
//! ([`crate::links::relay`]) registered like any other device (so the CLI, `/mcp`, the fleet
//! tools and the cluster reach it alike).
//!
//! Rules it enforces:
//! - An upstream that cannot be reached, refuses the device, or does not complete its handshake
//!   within [`Upstreams::connect_timeout`] gets the device a WebSocket close (1011), which the
//!   stock firmware acts on (it ends the voice session and shows the error); why is logged, at
//!   most once per device per log window, and counted (`mcpdev_refusals_total{reason="upstream"}`).
//! - The per-device choice (`[upstreams]` in `mcpdev.toml`) wins over the hub-wide `--upstream`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::Hub;
use crate::links::relay::{self, upstream::{DeviceHeaders, UpstreamUrl}};
use crate::links::upgrade::DeviceSocket;
use crate::wire::identity::Identity;

/// The default deadline on reaching the upstream (TCP, TLS and the WebSocket upgrade together).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where relayed devices' upstreams are.
#[derive(Debug, Clone)]
pub struct Upstreams {
    /// `--upstream`: every device's, unless it has its own.
    pub default: Option<UpstreamUrl>,
    /// `[upstreams]` in `mcpdev.toml`: by Device-Id (lower-case MAC).
    pub per_device: HashMap<String, UpstreamUrl>,
    /// `--upstream-ota`: the OTA endpoint check-ins are passed to ([`super::ota_upstream`]).
    pub ota: Option<reqwest::Url>,
    pub connect_timeout: Duration,
}

impl Upstreams {
    /// Reads the settings; `plain_ok` (`--upstream-plain`) allows `ws://` and `http://`. The
    /// error names the setting that is wrong.
    pub fn new(default: Option<&str>, per_device: &HashMap<String, String>, ota: Option<&str>, plain_ok: bool) -> Result<Self, String> {
        let default = default.filter(|u| !u.trim().is_empty()).map(|u| UpstreamUrl::parse(u, plain_ok).map_err(|e| format!("--upstream: {e}"))).transpose()?;
        let mut devices = HashMap::new();
        for (id, url) in per_device {
            let mac = super::admission::device_id(id).map_err(|e| format!("[upstreams] in mcpdev.toml: {id:?} is not a Device-Id: {e}"))?;
            devices.insert(mac, UpstreamUrl::parse(url, plain_ok).map_err(|e| format!("[upstreams] {id}: {e}"))?);
        }
        let ota = ota.filter(|u| !u.trim().is_empty()).map(|u| ota_url(u, plain_ok)).transpose()?;
        Ok(Self { default, per_device: devices, ota, connect_timeout: CONNECT_TIMEOUT })
    }

    /// The upstream `device_id` is relayed to, if any.
    pub fn for_device(&self, device_id: &str) -> Option<&UpstreamUrl> {
        self.per_device.get(device_id).or(self.default.as_ref())
    }
}

/// `--upstream-ota`: `https://…/` (or `http://` when allowed), ending in `/` so `activate` is
/// found beside it.
fn ota_url(url: &str, plain_ok: bool) -> Result<reqwest::Url, String> {
    let mut parsed = reqwest::Url::parse(url.trim()).map_err(|e| format!("--upstream-ota {url:?} is not a URL: {e}"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if plain_ok => {}
        "http" => return Err(format!("--upstream-ota {url} is plain http://: the device's check-in would cross the network in clear text; use https://, or add --upstream-plain")),
        _ => return Err(format!("--upstream-ota {url:?} must start with https://")),
    }
    if !parsed.path().ends_with('/') {
        let path = format!("{}/", parsed.path());
        parsed.set_path(&path);
    }
    Ok(parsed)
}

/// Dials the device's upstream and runs the relay; on failure the device gets a close.
#[allow(clippy::too_many_arguments, reason = "what a device connection brings, passed on once")]
pub async fn attach(hub: Arc<Hub>, ws: DeviceSocket, identity: Identity, headers: DeviceHeaders, url: UpstreamUrl, local: Option<IpAddr>, remote: Option<String>, until_hello: Option<Box<dyn crate::links::handle::UntilHello>>) {
    let timeout = hub.config.upstream.as_ref().map_or(CONNECT_TIMEOUT, |u| u.connect_timeout);
    let upstream = match relay::upstream::connect(&url, &headers, timeout).await {
        Ok(up) => up,
        Err(why) => {
            crate::metrics::refused(crate::metrics::Refused::Upstream);
            if crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Disconnect, &identity.device_id) {
                warn!(device = %identity.device_id, "closing the device's WebSocket: {why}");
            }
            let socket = crate::links::ws_socket::Socket::new(ws);
            socket.finish(false, Some(relay::UPSTREAM_FAILED)).await;
            return;
        }
    };
    drop(headers);
    let setup = super::device_link::setup(&hub, identity, local, remote, until_hello);
    let (device_id, generation) = (setup.identity.device_id.clone(), setup.generation);
    let (owner, id) = (hub.clone(), device_id.clone());
    let handle = relay::spawn(ws, upstream, setup, url.authority(), move || owner.registry.remove(&id, generation));
    super::device_link::register(&hub, handle, &device_id, generation);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_own_upstream_wins_and_a_wrong_setting_is_named() {
        let per_device = HashMap::from([("AA:BB:CC:DD:EE:01".to_string(), "wss://own.example/xiaozhi/v1/".to_string())]);
        let u = Upstreams::new(Some("wss://api.tenclass.net/xiaozhi/v1/"), &per_device, Some("https://api.tenclass.net/xiaozhi/ota"), false).unwrap();
        assert_eq!(u.for_device("aa:bb:cc:dd:ee:01").map(UpstreamUrl::authority).as_deref(), Some("own.example"));
        assert_eq!(u.for_device("aa:bb:cc:dd:ee:02").map(UpstreamUrl::authority).as_deref(), Some("api.tenclass.net"));
        assert_eq!(u.ota.as_ref().map(reqwest::Url::as_str), Some("https://api.tenclass.net/xiaozhi/ota/"), "ends in / so activate is beside it");
        let none = Upstreams::new(None, &HashMap::new(), None, false).unwrap();
        assert!(none.for_device("aa:bb:cc:dd:ee:01").is_none());
        let bad_mac = HashMap::from([("kitchen".to_string(), "wss://x/".to_string())]);
        assert!(Upstreams::new(None, &bad_mac, None, false).unwrap_err().contains("[upstreams]"));
        assert!(Upstreams::new(Some("ws://lan:8000/xiaozhi/v1/"), &HashMap::new(), None, false).unwrap_err().contains("--upstream-plain"));
        assert!(Upstreams::new(None, &HashMap::new(), Some("http://lan:8002/xiaozhi/ota/"), false).unwrap_err().contains("--upstream-plain"));
        assert!(Upstreams::new(None, &HashMap::new(), Some("http://lan:8002/xiaozhi/ota/"), true).is_ok());
    }
}
