//! A device link's start and its place in the registry, for every kind of WebSocket device (a
//! direct one, [`super::devices`]; a relayed one, [`super::relayed`]).
//!
//! Rules it enforces: one link per Device-Id; a newer connection replaces the older one, which is
//! closed ("replaced"); a link that ended before it was registered is not left in the registry.

use std::net::IpAddr;
use std::sync::Arc;

use tracing::info;

use super::Hub;
use crate::links::handle::LinkSetup;
use crate::session::SessionConfig;
use crate::wire::identity::Identity;

/// What a device's link starts from: its session's configuration, with the hub's settings and
/// what the hub knows of the device.
pub(super) fn setup(hub: &Hub, identity: Identity, local: Option<IpAddr>, remote: Option<String>, until_hello: Option<Box<dyn crate::links::handle::UntilHello>>) -> LinkSetup {
    let session_id = uuid::Uuid::new_v4().to_string();
    let mut cfg = SessionConfig::new(&session_id, crate::session::ServerHello::WebSocket);
    (cfg.vision_url, cfg.vision_token) = hub.vision_for(&identity.device_id, local);
    cfg.keepalive = hub.config.keepalive;
    cfg.onboarding_timeout = hub.config.onboarding_timeout;
    cfg.system_info = hub.registry.ota.system_info(&identity.device_id);
    cfg.known_tools = hub.registry.known_tools(&identity.device_id);
    let generation = hub.registry.next_generation();
    LinkSetup {
        identity,
        session: cfg,
        events: hub.registry.events.clone(),
        tracing: hub.registry.tracing.clone(),
        generation,
        remote,
        until_hello,
        hello_timeout: Some(hub.config.hello_timeout),
    }
}

/// Keeps a device's new link in the registry, closing the connection it replaces.
pub(super) fn register(hub: &Arc<Hub>, handle: crate::links::DeviceHandle, device_id: &str, generation: u64) {
    let log = crate::metrics::log_limit::allow(crate::metrics::log_limit::Kind::Connect, &device_id);
    if log {
        info!(device = %device_id, "device connected");
    }
    if let Some(old) = hub.registry.insert(handle.clone()) {
        if log {
            info!(device = %device_id, "replacing the previous session of this device");
        }
        tokio::spawn(async move { old.close(crate::links::handle::CloseReason::Replaced).await });
    }
    // A link that ended before it was registered found nothing to remove when it ended.
    if !handle.is_connected() {
        hub.registry.remove(device_id, generation);
    }
}
