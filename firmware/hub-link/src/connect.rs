//! One connection attempt, chosen by the provisioned hub URL's scheme:
//! - `ws://` — a WebSocket session with the hub;
//! - `mqtt://` — an MQTT session through that broker, with mcpdev's topic scheme;
//! - `http://` — an OTA check-in first, then whichever of the two the answer names (and with its
//!   settings), as stock xiaozhi devices bootstrap. A hub that has not admitted the device answers
//!   with an activation code instead: the device logs it, polls the activation endpoint until a
//!   person approves it (`mcpdev devices approve CODE`), and checks in again.
//!
//! The firmware and the host example both loop over this with [`crate::Backoff`].

use alloc::string::String;
use core::net::{IpAddr, SocketAddr};

use edge_nal::{AddrType, Dns, TcpConnect};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_time::{Timer, with_timeout};
use log::{info, warn};
use mcp_device::{DeviceLink, Transport};
use provisioning::{HubUrl, Scheme};

use crate::mqtt::{self, MqttSettings};
use crate::ota::{self, Directions};
use crate::{Board, End, Identity, Timing, ws};

/// The buffers of a connection: `rx` holds the largest incoming message, `http` the headers of an
/// HTTP response (WebSocket upgrade, OTA answer).
pub struct Buffers<'b> {
    pub rx: &'b mut [u8],
    pub http: &'b mut [u8],
}

/// Resolves, checks in at the OTA endpoint if the URL names one, connects, and runs the session
/// until it ends. `greeted` is set once the session got as far as the hub (see each transport).
#[allow(clippy::too_many_arguments)]
pub async fn attempt<T, D, S, M, const N: usize>(
    tcp: &T,
    dns: &D,
    hub_url: &str,
    id: &Identity,
    link: &mut DeviceLink<S>,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    bufs: &mut Buffers<'_>,
    greeted: &mut bool,
) -> End<T::Error>
where
    T: TcpConnect,
    D: Dns,
    M: RawMutex,
{
    let url = match HubUrl::parse(hub_url) {
        Ok(u) if !u.scheme.is_tls() => u,
        Ok(_) => return End::Unusable(alloc::format!("{}: {NO_TLS}", provisioning::loggable_url(hub_url))),
        Err(e) => return End::Unusable(alloc::format!("{hub_url}: {e}")),
    };
    let directions = match url.scheme {
        Scheme::Http => {
            let addr = match resolve(dns, url.host, url.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            loop {
                let system_info = (board.system_info)(link.server.state());
                match ota::check_in(tcp, addr, &url, id, &system_info, board.user_agent, timing, bufs.http).await {
                    Ok(Directions::Activate(a)) => {
                        if let Err(e) = activate(tcp, addr, &url, id, &a, board.user_agent, timing, bufs.http).await {
                            return e;
                        }
                    }
                    Ok(d) => break d,
                    Err(e) => return e,
                }
            }
        }
        Scheme::Mqtt => Directions::Mqtt(MqttSettings::for_broker(&url, &id.device_id, &id.token)),
        _ => Directions::WebSocket { url: String::from(hub_url), token: id.token.clone() },
    };
    match directions {
        Directions::WebSocket { url: ws_url, token } => {
            let url = match HubUrl::parse(&ws_url) {
                Ok(u) if !u.scheme.is_tls() => u,
                _ => return End::Unusable(alloc::format!("{}: {NO_TLS}", provisioning::loggable_url(&ws_url))),
            };
            info!("hub: WebSocket to {}", provisioning::loggable_url(&ws_url));
            let addr = match resolve(dns, url.host, url.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            // The OTA answer's token, if it carries one, else the provisioned one.
            let id = if token.is_empty() { id.clone() } else { Identity { token, ..id.clone() } };
            link.set_transport(Transport::WebSocket { binary_version: 1 });
            ws::session(tcp, addr, &url, &id, link, board, timing, bufs.rx, bufs.http, greeted).await
        }
        // Handled by the check-in loop above.
        Directions::Activate(_) => End::Protocol("activation outside an OTA check-in"),
        Directions::Mqtt(settings) => {
            if settings.tls {
                return End::Unusable(alloc::format!("the broker {}:{}: {NO_TLS}", settings.host, settings.port));
            }
            info!("hub: MQTT to {}:{} as '{}'", settings.host, settings.port, settings.client_id);
            let addr = match resolve(dns, &settings.host, settings.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            link.set_transport(Transport::Mqtt);
            mqtt::session(tcp, addr, &settings, link, board, timing, bufs.rx, greeted).await
        }
    }
}

/// The activation dance (reference §3.3): shows the code (in the log: no screen here), then asks
/// the activation endpoint until it says 200 or [`ota::ACTIVATION_TRIES`] polls went by; the
/// caller checks in again either way.
#[allow(clippy::too_many_arguments)]
async fn activate<T: TcpConnect>(
    tcp: &T,
    addr: SocketAddr,
    url: &HubUrl<'_>,
    id: &Identity,
    a: &ota::Activation,
    user_agent: &str,
    timing: &Timing,
    http_buf: &mut [u8],
) -> Result<(), End<T::Error>> {
    warn!("ota: activation code {} for {}: approve this device on the hub (`mcpdev devices approve {}`); {}", a.code, id.device_id, a.code, a.message);
    for _ in 0..ota::ACTIVATION_TRIES {
        let status = ota::activate(tcp, addr, url, id, user_agent, timing, http_buf).await?;
        match ota::activation_retry(status) {
            None => {
                info!("ota: activated; checking in again");
                return Ok(());
            }
            Some(wait) => Timer::after(wait).await,
        }
    }
    Ok(())
}

const NO_TLS: &str = "TLS is not in this firmware; use ws://, mqtt:// or http:// (a plain-TCP port; a TLS-terminating proxy can sit in front)";

/// The host's IPv4 address (an IP literal as is), within the connect time limit.
async fn resolve<D: Dns, E>(dns: &D, host: &str, port: u16, timing: &Timing) -> Result<SocketAddr, End<E>> {
    match with_timeout(timing.connect, dns.get_host_by_name(host, AddrType::IPv4)).await {
        Ok(Ok(ip @ IpAddr::V4(_))) => Ok(SocketAddr::new(ip, port)),
        Ok(Ok(_)) => Err(End::Resolve(String::from(host), "no IPv4 address")),
        Ok(Err(_)) => Err(End::Resolve(String::from(host), "the lookup failed")),
        Err(_) => Err(End::Resolve(String::from(host), "the lookup timed out")),
    }
}
