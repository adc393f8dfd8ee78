//! A device another hub of the cluster serves, as a local [`DeviceHandle`]: what the MCP bridge
//! (`/devices/<id>/mcp`) needs to offer and call it like a device of this hub.
//!
//! The proxy's link task holds the device's description as its hub gave it (fetched once with a
//! forwarded `device` request) and turns each request into a forwarded `rpc`
//! ([`super::cluster_rpc`]), so the same deadlines and caps hold. Rules:
//! - a proxy ends, and its handle says the device is gone, as soon as the cluster index no longer
//!   lists the device as it was when the proxy was made (it moved, its hub died, its tools or its
//!   session changed); a new one is made with the new description;
//! - at most [`MAX_PROXIES`] live at once: beyond that no proxy is made, and the endpoint says
//!   the device is not reachable from this hub;
//! - every request ends within its timeout plus the hop's grace, with the device's answer or a
//!   [`CallError`] that says what happened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::cluster_rpc::ClusterNode;
use crate::hub::remote::{Cluster, Located};
use crate::links::DeviceHandle;
use crate::links::handle::{Command, spawn_link};
use crate::session::{CallError, DeviceInfo, Phase, ToolEntry, ToolList};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::{RawResult, RpcError};

/// Proxies alive at once.
pub const MAX_PROXIES: usize = 1024;
/// How long fetching the device's description may take.
const FETCH: Duration = Duration::from_secs(5);
/// The hop's grace beyond a request's own timeout.
const HOP_GRACE: Duration = Duration::from_secs(2);

/// The live proxies, by Device-Id.
#[derive(Default)]
pub struct Proxies(Mutex<HashMap<String, DeviceHandle>>);

impl Proxies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DeviceHandle>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live proxy of a device, if there is one.
    pub fn get(&self, device_id: &str) -> Option<DeviceHandle> {
        self.lock().get(device_id).filter(|h| h.is_connected()).cloned()
    }

    /// Every live proxy, by Device-Id.
    pub fn all(&self) -> Vec<DeviceHandle> {
        let mut v: Vec<DeviceHandle> = self.lock().values().filter(|h| h.is_connected()).cloned().collect();
        v.sort_by(|a, b| a.device_id.cmp(&b.device_id));
        v
    }

    /// The device's proxy, made (with its description fetched from its hub) if needed.
    pub async fn make(&self, node: &Arc<ClusterNode>, device_id: &str) -> Option<DeviceHandle> {
        if let Some(h) = self.get(device_id) {
            return Some(h);
        }
        let Located::Remote { hub, device_id } = node.locate(Some(device_id), &HashMap::new()) else { return None };
        let row = node.row(&device_id)?;
        {
            let mut map = self.lock();
            map.retain(|_, h| h.is_connected());
            if map.len() >= MAX_PROXIES {
                tracing::warn!("{MAX_PROXIES} devices of other hubs are offered through this hub already; not offering {device_id}");
                return None;
            }
        }
        let answer = node.forward(&hub, json!({"op": "device", "device": device_id, "wait_ms": 0}), FETCH).await.ok()?;
        let info = description(&serde_json::from_str(&answer).ok()?)?;
        let handle = spawn(node.clone(), row, info);
        let mut map = self.lock();
        // Another caller may have made one meanwhile: keep the first.
        if let Some(h) = map.get(&device_id).filter(|h| h.is_connected()) {
            let h = h.clone();
            drop(map);
            let spare = handle.clone();
            tokio::spawn(async move { spare.close(crate::links::handle::CloseReason::Replaced).await });
            return Some(h);
        }
        map.insert(device_id, handle.clone());
        Some(handle)
    }
}

/// A device's description from its hub's `device` answer (the fields the bridge reads).
fn description(v: &Value) -> Option<DeviceInfo> {
    let device_id = v["device_id"].as_str()?.to_string();
    let identity = Identity { device_id, client_id: v["client_id"].as_str().map(str::to_string), token: None, protocol_version: v["protocol_version"].as_u64().unwrap_or(1) as u8 };
    let mut info = DeviceInfo::new(identity, v["transport"].as_str().unwrap_or("remote"), v["session_id"].as_str().unwrap_or_default());
    info.phase = match v["phase"].as_str() {
        Some("ready") => Phase::Ready,
        Some("initializing") => Phase::Initializing,
        Some("listing") => Phase::Listing,
        Some("awaiting_hello") => Phase::AwaitingHello,
        _ => return None,
    };
    let raw = |f: &str| v.get(f).filter(|x| !x.is_null()).and_then(|x| RawValue::from_string(x.to_string()).ok()).map(Arc::from);
    (info.hello, info.server_info, info.capabilities, info.system_info) = (raw("hello"), raw("server_info"), raw("capabilities"), raw("system_info"));
    info.mcp_protocol_version = v["mcp_protocol_version"].as_str().map(str::to_string);
    info.connected_at_ms = v["connected_at_ms"].as_u64().unwrap_or(0);
    info.tools = ToolList::shared(v["tools"].as_array().into_iter().flatten().filter_map(ToolEntry::from_value).collect());
    Some(info)
}

/// The proxy's task; it lives while the index lists the device as `listed` (hub and row).
fn spawn(node: Arc<ClusterNode>, listed: (String, super::presence::Row), info: DeviceInfo) -> DeviceHandle {
    let device_id = info.device_id.clone();
    let hub = listed.0.clone();
    let info = Arc::new(info);
    spawn_link(device_id.clone(), 0, move |mut commands, mut publisher| async move {
        publisher.update(&info, Instant::now());
        let mut changed = node.changed();
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd.map(|c| *c) {
                    Some(Command::Request(r)) => {
                        let op = json!({"op": "rpc", "device": device_id, "method": r.method, "params": r.params, "timeout_ms": r.timeout.as_millis() as u64});
                        let call = node.forward(&hub, op, r.timeout + HOP_GRACE);
                        let timeout = r.timeout;
                        tokio::spawn(async move {
                            let _ = r.reply.send(call.await.map_err(|e| call_error(&e, timeout)).and_then(result));
                        });
                    }
                    // A cancelled request's answer is dropped by its caller.
                    Some(Command::Cancel(_)) => {}
                    Some(Command::Close(_)) | None => break,
                },
                r = changed.changed() => {
                    if r.is_err() || node.row(&device_id).as_ref() != Some(&listed) {
                        break;
                    }
                }
            }
        }
        publisher.gone();
    }, || {})
}

fn result(text: String) -> Result<RawResult, CallError> {
    RawValue::from_string(text).map(|raw| RawResult::from_checked(&raw)).map_err(|e| CallError::Link(format!("another hub sent an unreadable answer: {e}")))
}

/// A control API error from the serving hub, as the call error a local device gives.
fn call_error(e: &Value, timeout: Duration) -> CallError {
    let message = e["message"].as_str().unwrap_or_default().to_string();
    match e["kind"].as_str() {
        Some("device_error") => {
            let rpc = &e["rpc"];
            CallError::Device(RpcError { code: rpc["code"].as_i64(), message: rpc["message"].as_str().unwrap_or(&message).to_string(), data: rpc.get("data").cloned() })
        }
        Some("timeout") => CallError::Timeout(timeout),
        Some("disconnected") => CallError::Disconnected,
        _ => CallError::Link(message),
    }
}
