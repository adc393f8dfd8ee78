//! The hub with what lives above it, assembled: the MQTT side (`--mqtt`), and the MCP bridge and
//! the dashboard (with `/metrics`) on the host listener. The hub itself knows neither (layers call downward only); it is bound
//! first, these are attached, then it serves.

use std::sync::Arc;

use crate::bridge::BridgeConfig;
use crate::hub::{self, HubConfig, RunningHub};
use crate::mqtt::hub::{MqttHub, MqttSettings};

/// Everything `serve` runs.
pub struct StackConfig {
    pub hub: HubConfig,
    /// The MCP endpoints (`/mcp`, `/devices/<id>/mcp`, `/sse`).
    pub bridge: BridgeConfig,
    /// MQTT devices, through a broker; off when `None`.
    pub mqtt: Option<MqttSettings>,
    /// Whether `serve` reports device events (its event log): if so, the stack subscribes to
    /// them before any device can connect, so a fleet that reconnects the moment the hub is
    /// back has its first events reported too.
    pub event_log: bool,
}

/// A serving hub, its MQTT side when it has one, and its dashboard.
pub struct Stack {
    pub running: RunningHub,
    pub mqtt: Option<Arc<MqttHub>>,
    pub dashboard: Arc<crate::dashboard::Dashboard>,
    /// Every device event since the hub was bound, for the event log (with `event_log`).
    pub events: Option<crate::links::ring::Receiver>,
}

/// Binds the hub, starts its MQTT side (before any device can check in, so every OTA answer
/// carries the `mqtt` block), and serves it with the bridge's routes.
pub async fn start(config: StackConfig) -> anyhow::Result<Stack> {
    let StackConfig { mut hub, bridge, mqtt, event_log } = config;
    hub.mcp_token_set = bridge.token.is_some();
    let bound = hub::bind(hub).await?;
    // Before the MQTT side starts and the listeners serve: no device is connected yet.
    let events = event_log.then(|| bound.hub.registry.events.subscribe());
    let mqtt = match mqtt {
        Some(settings) => {
            let m = crate::mqtt::hub::start(bound.hub.clone(), settings).await?;
            let _ = bound.hub.mqtt.set(Arc::new(m.clone()));
            let _ = bound.hub.cluster.set(m.cluster.clone());
            Some(m)
        }
        None => None,
    };
    let dashboard = crate::dashboard::Dashboard::start(bound.hub.clone(), bound.device_addr, bound.host_addr, bridge.token.clone());
    let routes = crate::bridge::http::router(bound.hub.clone(), bridge).merge(crate::dashboard::router(dashboard.clone()));
    Ok(Stack { running: bound.serve(routes), mqtt, dashboard, events })
}
