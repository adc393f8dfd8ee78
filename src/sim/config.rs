//! What a virtual device is given and what ends it: its settings ([`SimConfig`]), the broker and
//! topics of an MQTT device ([`MqttTarget`]), and the final refusals that stop it ([`Stopped`]),
//! shared by the WebSocket loop, the MQTT loop and the OTA bootstrap.

use std::time::Duration;

use crate::mqtt::conn::BrokerUrl;
use crate::mqtt::topics;

/// What one virtual device needs to connect.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub url: String,
    pub device_id: String,
    pub client_id: String,
    /// The secret sent with OTA check-ins and activation polls ([`super::identity`]).
    pub device_key: Option<String>,
    /// Sent as `Authorization: Bearer <token>` when not empty (a token with a space verbatim).
    pub token: Option<String>,
    pub extra_tools: usize,
    pub profile: super::tools::Profile,
    /// The binary protocol version announced in `Protocol-Version` and the hello.
    pub protocol_version: u8,
    /// First reconnect delay; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// Connect over MQTT instead of WebSocket.
    pub mqtt: Option<MqttTarget>,
    /// Bootstrap from this OTA URL first (the answer decides WebSocket or MQTT).
    pub ota: Option<String>,
    /// Connect from this local address ([`super::source`]; `ws://` only).
    pub source_addr: Option<std::net::IpAddr>,
    /// What a `wss://` hub is verified with; `None`: the process's trust ([`crate::tls::client`]).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Becomes `true` when the device is to stop: an MQTT device then says goodbye and
    /// disconnects from its broker (an MQTT DISCONNECT), so the hub drops it at once.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

impl SimConfig {
    pub fn new(url: impl Into<String>, device_id: impl Into<String>) -> Self {
        let identity = crate::device_identity::DeviceIdentity::random();
        Self {
            url: url.into(),
            device_id: device_id.into(),
            client_id: identity.client_id,
            device_key: Some(identity.device_key),
            token: None,
            extra_tools: 0,
            profile: super::tools::Profile::StockTools,
            protocol_version: 1,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            mqtt: None,
            ota: None,
            source_addr: None,
            tls: None,
            stop: None,
        }
    }
}

/// Where an MQTT device connects and which topics it uses (the OTA answer's `mqtt` section).
#[derive(Debug, Clone)]
pub struct MqttTarget {
    pub broker: BrokerUrl,
    pub client_id: String,
    pub publish_topic: String,
    pub subscribe_topic: String,
    pub keepalive: u16,
}

impl MqttTarget {
    /// mcpdev's own scheme for a device (what the hub's OTA answer would say).
    pub fn direct(broker: BrokerUrl, device_id: &str) -> Result<Self, String> {
        let key = topics::key_for(device_id)?;
        Ok(Self { broker, publish_topic: topics::uplink(&key), subscribe_topic: topics::downlink(&key), client_id: key, keepalive: 240 })
    }
}

/// Why a virtual device gave up: an answer that trying again cannot change (credentials refused,
/// a URL no server can take). Everything else is retried with a backoff, as a device would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Stopped {
    /// The credentials were refused (HTTP 401/403, MQTT return code 4 or 5).
    pub auth: bool,
    /// The URL or settings cannot work (a scheme that is not ws/wss, HTTP 404).
    pub usage: bool,
    /// Another device has this Device-Id on the backend (HTTP 409): another id may get in.
    pub taken: bool,
    pub message: String,
}

impl Stopped {
    pub(crate) fn auth(message: String) -> Self {
        Self { auth: true, usage: false, taken: false, message }
    }

    pub(crate) fn usage(message: String) -> Self {
        Self { auth: false, usage: true, taken: false, message }
    }

    /// A usage error's message and its help, in one line.
    pub(super) fn from_usage(e: crate::exit::CodedError) -> Self {
        Self::usage(format!("{}: {}", e.message, e.help.unwrap_or_default()))
    }
}
