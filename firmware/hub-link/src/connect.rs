//! One connection attempt, chosen by the provisioned hub URL's scheme:
//! - `ws://` — a WebSocket session with the hub;
//! - `mqtt://` — an MQTT session through that broker, with mcpdev's topic scheme;
//! - `http://` — an OTA check-in first, then whichever of the two the answer names (and with its
//!   settings), as stock xiaozhi devices bootstrap. A hub that has not admitted the device answers
//!   with an activation code instead: the device logs it, polls the activation endpoint until a
//!   person approves it (`mcpdev devices approve CODE`), and checks in again.
//!
//! Each has its TLS twin (`wss://`, `mqtts://`, `https://`), verified against the hub CA from the
//! provisioning record ([`crate::tls`]). A device with a CA uses nothing else: a plain URL, in the
//! record or in an OTA answer, ends the attempt with [`End::Downgrade`] before any byte is sent.
//!
//! The firmware and the host example both loop over this with [`crate::Backoff`].

use alloc::string::String;
use core::cell::Cell;
use core::net::{IpAddr, SocketAddr};

use edge_nal::{AddrType, Dns, TcpConnect};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_time::{Timer, with_timeout};
use log::{info, warn};
use mcp_device::{DeviceLink, Transport};
use provisioning::{HubUrl, Scheme};

use crate::mqtt::{self, MqttSettings};
use crate::ota::{self, Directions};
use crate::tls::{self, LinkError, RecordPos, Stream, TlsBuffers, Trust};
use crate::{Board, End, Identity, Timing, ws};

/// The buffers of a connection: `rx` holds the largest incoming message, `http` the headers of an
/// HTTP response (WebSocket upgrade, OTA answer), `tls` the TLS records (allocated on the first
/// TLS connection only, so a device without a hub CA never holds them).
pub struct Buffers<'b> {
    pub rx: &'b mut [u8],
    pub http: &'b mut [u8],
    pub tls: &'b mut TlsBuffers,
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
) -> End<LinkError<T::Error>>
where
    T: TcpConnect,
    D: Dns,
    M: RawMutex,
{
    let url = match HubUrl::parse(hub_url) {
        Ok(u) => u,
        Err(e) => return End::Unusable(alloc::format!("{hub_url}: {e}")),
    };
    if let Err(e) = allowed(hub_url, url.scheme.is_tls(), board.trust) {
        return e;
    }
    let directions = match url.scheme {
        Scheme::Http | Scheme::Https => {
            let addr = match resolve(dns, url.host, url.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            loop {
                let pos = Cell::new(RecordPos::default());
                let stream = match open(tcp, addr, url.host, url.scheme.is_tls(), board, timing, bufs.tls, &pos).await {
                    Ok(s) => s,
                    Err(e) => return e,
                };
                let system_info = (board.system_info)(link.server.state());
                let answer = ota::check_in(stream, &url, id, &system_info, board.user_agent, timing, bufs.http).await;
                match answer {
                    Ok(answer) => {
                        // Only a verified hub's clock counts (see `tls::Trust`).
                        if let (Some(trust), true) = (board.trust, url.scheme.is_tls()) {
                            trust.saw_time(answer.server_time_ms / 1000);
                        }
                        match answer.directions {
                            Directions::Activate(a) => {
                                if let Err(e) = activate(tcp, addr, &url, id, &a, board, timing, bufs).await {
                                    return e;
                                }
                            }
                            d => break d,
                        }
                    }
                    Err(e) => return e,
                }
            }
        }
        Scheme::Mqtt | Scheme::Mqtts => Directions::Mqtt(MqttSettings::for_broker(&url, &id.device_id, &id.token)),
        Scheme::Ws | Scheme::Wss => Directions::WebSocket { url: String::from(hub_url), token: id.token.clone() },
    };
    match directions {
        Directions::WebSocket { url: ws_url, token } => {
            let url = match HubUrl::parse(&ws_url) {
                Ok(u) => u,
                Err(e) => return End::Unusable(alloc::format!("{}: {e}", provisioning::loggable_url(&ws_url))),
            };
            if let Err(e) = allowed(&ws_url, url.scheme.is_tls(), board.trust) {
                return e;
            }
            info!("hub: WebSocket to {}", provisioning::loggable_url(&ws_url));
            let addr = match resolve(dns, url.host, url.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            let pos = Cell::new(RecordPos::default());
            let mut stream = match open(tcp, addr, url.host, url.scheme.is_tls(), board, timing, bufs.tls, &pos).await {
                Ok(s) => s,
                Err(e) => return e,
            };
            // The OTA answer's token, if it carries one, else the provisioned one.
            let id = if token.is_empty() { id.clone() } else { Identity { token, ..id.clone() } };
            link.set_transport(Transport::WebSocket { binary_version: 1 });
            ws::session(&mut stream, &url, &id, link, board, timing, bufs.rx, bufs.http, greeted).await
        }
        // Handled by the check-in loop above.
        Directions::Activate(_) => End::Protocol("activation outside an OTA check-in"),
        Directions::Mqtt(settings) => {
            let shown = alloc::format!("mqtt{}://{}:{}", if settings.tls { "s" } else { "" }, settings.host, settings.port);
            if let Err(e) = allowed(&shown, settings.tls, board.trust) {
                return e;
            }
            info!("hub: MQTT to {shown} as '{}'", settings.client_id);
            let addr = match resolve(dns, &settings.host, settings.port, timing).await {
                Ok(a) => a,
                Err(e) => return e,
            };
            let pos = Cell::new(RecordPos::default());
            let mut stream = match open(tcp, addr, &settings.host, settings.tls, board, timing, bufs.tls, &pos).await {
                Ok(s) => s,
                Err(e) => return e,
            };
            link.set_transport(Transport::Mqtt);
            mqtt::session(&mut stream, &settings, link, board, timing, bufs.rx, greeted).await
        }
    }
}

/// Whether the device may use `url` (`tls`: whether it names TLS): with a hub CA, only TLS (a
/// plain URL is a downgrade, from the record or from an OTA answer, and is refused); without
/// one, only plain (there is no CA to verify the hub with).
fn allowed<E>(url: &str, tls: bool, trust: Option<&Trust>) -> Result<(), End<E>> {
    match (tls, trust.is_some()) {
        (true, true) | (false, false) => Ok(()),
        (false, true) => Err(End::Downgrade(alloc::format!("{}", provisioning::loggable_url(url)))),
        (true, false) => Err(End::Unusable(alloc::format!("{}: {NO_CA}", provisioning::loggable_url(url)))),
    }
}

/// TCP to `addr`, then TLS for `host` when `tls`, within the connect time limit.
#[allow(clippy::too_many_arguments)]
async fn open<'b, T, S, M, const N: usize>(
    tcp: &'b T,
    addr: SocketAddr,
    host: &str,
    tls: bool,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    bufs: &'b mut TlsBuffers,
    pos: &'b Cell<RecordPos>,
) -> Result<Stream<'b, T::Socket<'b>>, End<LinkError<T::Error>>>
where
    T: TcpConnect,
    M: RawMutex,
{
    let opened = with_timeout(timing.connect, async {
        let socket = tcp.connect(addr).await.map_err(|e| End::Tcp(LinkError::Tcp(e)))?;
        match (tls, board.trust) {
            (true, Some(trust)) => tls::open(socket, host, trust, board.random, bufs, pos)
                .await
                .map_err(|f| End::Tls(tls::describe(host, &f))),
            _ => Ok(Stream::Plain(socket)),
        }
    })
    .await;
    match opened {
        Ok(r) => r,
        Err(_) => Err(End::Timeout(if tls { "connecting to the hub (TCP and TLS handshake)" } else { "connecting to the hub" })),
    }
}

/// The activation dance (reference §3.3): shows the code (in the log: no screen here), then asks
/// the activation endpoint until it says 200 or [`ota::ACTIVATION_TRIES`] polls went by; the
/// caller checks in again either way.
#[allow(clippy::too_many_arguments)]
async fn activate<T, S, M, const N: usize>(
    tcp: &T,
    addr: SocketAddr,
    url: &HubUrl<'_>,
    id: &Identity,
    a: &ota::Activation,
    board: &Board<'_, S, M, N>,
    timing: &Timing,
    bufs: &mut Buffers<'_>,
) -> Result<(), End<LinkError<T::Error>>>
where
    T: TcpConnect,
    M: RawMutex,
{
    warn!("ota: activation code {} for {}: approve this device on the hub (`mcpdev devices approve {}`); {}", a.code, id.device_id, a.code, a.message);
    for _ in 0..ota::ACTIVATION_TRIES {
        let pos = Cell::new(RecordPos::default());
        let stream = open(tcp, addr, url.host, url.scheme.is_tls(), board, timing, bufs.tls, &pos).await?;
        let status = ota::activate(stream, url, id, board.user_agent, timing, bufs.http).await?;
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

const NO_CA: &str = "TLS needs the hub's CA in the provisioning record (`mcpdev flash` writes it when the hub runs with --tls); this device has none";

/// The host's IPv4 address (an IP literal as is), within the connect time limit.
async fn resolve<D: Dns, E>(dns: &D, host: &str, port: u16, timing: &Timing) -> Result<SocketAddr, End<E>> {
    match with_timeout(timing.connect, dns.get_host_by_name(host, AddrType::IPv4)).await {
        Ok(Ok(ip @ IpAddr::V4(_))) => Ok(SocketAddr::new(ip, port)),
        Ok(Ok(_)) => Err(End::Resolve(String::from(host), "no IPv4 address")),
        Ok(Err(_)) => Err(End::Resolve(String::from(host), "the lookup failed")),
        Err(_) => Err(End::Resolve(String::from(host), "the lookup timed out")),
    }
}
