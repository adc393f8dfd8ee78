//! One virtual device's connection loop: WebSocket with the xiaozhi headers, hello, MCP through
//! `mcp-device`, reconnect with backoff.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use mcp_device::{DeviceLink, Inbound, Transport};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tracing::{debug, info, warn};

pub use super::config::{SimConfig, Stopped};
use super::tools::{SimState, build_server_with};

/// Small buffers: a hub benchmark runs thousands of these in one process.
pub(crate) fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20))
}

/// Runs one virtual device until the task is dropped: bootstrap from the OTA URL if one is given,
/// then serve over MQTT or WebSocket as configured (or as the OTA answer said). Returns only when
/// the backend's answer is final ([`Stopped`]).
pub async fn run_device(mut cfg: SimConfig) -> Result<(), Stopped> {
    if let Some(url) = cfg.ota.take() {
        cfg = super::ota::bootstrap(cfg, &url).await?;
    }
    match cfg.mqtt.clone() {
        Some(target) => super::mqtt::run_device(cfg, target).await,
        None => run_websocket(cfg).await,
    }
}

/// Whether a failed WebSocket connection is final: the server refused the handshake with a 4xx
/// (its body says why), or the URL cannot be used at all.
fn permanent(url: &str, e: &anyhow::Error) -> Option<Stopped> {
    use tokio_tungstenite::tungstenite::Error as WsError;
    match e.downcast_ref::<WsError>()? {
        WsError::Http(response) => {
            let status = response.status();
            // The hub's host listener: say which port a device wants.
            let answered = response.headers().get(crate::links::listeners::HEADER).and_then(|v| v.to_str().ok());
            if let Some(wrong) = crate::links::listeners::wrong_listener(crate::links::listeners::Client::Device, url, answered) {
                return Some(Stopped::from_usage(wrong));
            }
            let body = response.body().as_deref().map(String::from_utf8_lossy).map(|b| b.trim().to_string()).filter(|b| !b.is_empty());
            let reason = body.map_or_else(|| status.to_string(), |b| format!("{status}: {b}"));
            match status.as_u16() {
                401 | 403 => Some(Stopped::auth(format!("{url} refused this device ({reason})"))),
                400 | 404 | 405 | 410 => Some(Stopped::usage(format!("{url} refused the connection ({reason})"))),
                // Another device has this Device-Id: the answer says which to choose.
                409 => Some(Stopped { taken: true, ..Stopped::usage(format!("{url} refused this device ({reason})")) }),
                _ => None,
            }
        }
        WsError::Url(why) => Some(Stopped::usage(format!("{url} cannot be used: {why} (a device URL looks like ws://HOST:8000/xiaozhi/v1/)"))),
        // Not HTTP in answer to ws://: a TLS port (another server's alert); trying again cannot
        // change it.
        _ if url.starts_with("ws://") && crate::links::listeners::is_not_http(e.as_ref()) => Some(Stopped::from_usage(crate::links::listeners::plain_at_tls(url))),
        // A server that does not prove who it is gets no hello and no token, and trying again
        // cannot change its certificate: the person must act (exit 3).
        other => crate::tls::client::explain(other).map(|what| Stopped::auth(format!("{url} did not prove who it is: {what}"))),
    }
}

/// WebSocket: connect, serve, and on any disconnect reconnect after a backoff (reset once a
/// server hello has been received); a final refusal ends it.
async fn run_websocket(cfg: SimConfig) -> Result<(), Stopped> {
    let mut server = Some(build_server_with(cfg.profile, &cfg.device_id, cfg.extra_tools));
    let mut backoff = cfg.min_backoff;
    loop {
        let mut link = DeviceLink::new(server.take().expect("server is returned after each session"), Transport::WebSocket {
            binary_version: cfg.protocol_version,
        });
        match session(&cfg, &mut link).await {
            Ok(true) => backoff = cfg.min_backoff,
            Ok(false) => {}
            Err(e) => match permanent(&cfg.url, &e) {
                Some(stop) => return Err(stop),
                None => warn!(device = %cfg.device_id, "connection failed: {e:#}"),
            },
        }
        server = Some(link.server);
        let jitter = fastrand::f64() * 0.2 + 0.9;
        let delay = backoff.mul_f64(jitter);
        debug!(device = %cfg.device_id, ?delay, "reconnecting");
        tokio::time::sleep(delay).await;
        backoff = (backoff * 2).min(cfg.max_backoff);
    }
}

/// The WebSocket request of a device: the xiaozhi headers, and `Authorization` when there is a
/// token (`Bearer <token>`, or verbatim when it holds a space, as the stock firmware does).
pub(crate) fn device_request(
    url: &str,
    token: Option<&str>,
    device_id: &str,
    client_id: Option<&str>,
    protocol_version: u8,
) -> anyhow::Result<tokio_tungstenite::tungstenite::handshake::client::Request> {
    let mut request = url.into_client_request().map_err(anyhow::Error::new)?;
    let headers = request.headers_mut();
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        let value = if token.contains(' ') { token.to_string() } else { format!("Bearer {token}") };
        headers.insert("Authorization", HeaderValue::from_str(&value)?);
    }
    headers.insert("Protocol-Version", HeaderValue::from(u16::from(protocol_version)));
    headers.insert("Device-Id", HeaderValue::from_str(device_id)?);
    if let Some(c) = client_id {
        headers.insert("Client-Id", HeaderValue::from_str(c)?);
    }
    Ok(request)
}

/// One connection. `Ok(true)` if the server said hello (the backoff starts over).
async fn session(cfg: &SimConfig, link: &mut DeviceLink<SimState>) -> anyhow::Result<bool> {
    let request = device_request(&cfg.url, cfg.token.as_deref(), &cfg.device_id, Some(&cfg.client_id), cfg.protocol_version)?;
    let ws = match cfg.source_addr {
        None => crate::links::ws_client::connect(request, ws_config(), cfg.tls.clone()).await.map_err(anyhow::Error::new)?,
        Some(from) => {
            let host = request.uri().host().unwrap_or("127.0.0.1").to_string();
            let port = request.uri().port_u16().unwrap_or(if request.uri().scheme_str() == Some("wss") { 443 } else { 80 });
            let tcp = super::source::connect_from(from, &host, port).await?;
            crate::links::ws_client::over(tcp, request, ws_config(), cfg.tls.clone()).await.map_err(anyhow::Error::new)?
        }
    };
    let (mut tx, mut rx) = ws.split();
    tx.send(Message::text(link.hello())).await?;
    let mut greeted = false;
    let mut out = String::new();
    while let Some(msg) = rx.next().await {
        let text = match msg? {
            Message::Text(t) => t,
            Message::Close(_) => break,
            _ => continue,
        };
        out.clear();
        match super::stock::on_text_as(cfg.profile, link, &text, &mut out) {
            Inbound::Hello { session_id } => {
                greeted = true;
                info!(device = %cfg.device_id, session_id, "connected");
            }
            Inbound::BadHello(why) => anyhow::bail!("{why}"),
            Inbound::Mcp { replied: true } => tx.send(Message::text(out.clone())).await?,
            Inbound::Ignored(why) => debug!(device = %cfg.device_id, why, "ignored a message"),
            _ => {}
        }
        while {
            out.clear();
            link.next_notification(&mut out)
        } {
            tx.send(Message::text(out.clone())).await?;
        }
        if std::mem::take(&mut link.server.state_mut().reboot_requested) {
            // The stock firmware reboots 1 s after answering `self.reboot`.
            tokio::time::sleep(Duration::from_secs(1)).await;
            info!(device = %cfg.device_id, "rebooting");
            let _ = tx.close().await;
            break;
        }
    }
    Ok(greeted)
}
