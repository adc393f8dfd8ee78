//! A device another hub of the cluster serves, as a local [`DeviceHandle`]: what the MCP bridge
//! (`/devices/<id>/mcp`) needs to offer and call it like a device of this hub.
//!
//! The proxy's link task holds the device's description as its hub gave it (fetched once with a
//! forwarded `device` request) and turns each request into a forwarded `rpc`
//! ([`super::cluster_rpc`]), so the same deadlines and caps hold. Rules:
//! - a proxy ends, and its handle says the device is gone, as soon as the cluster index no longer
//!   lists the device as it was when the proxy was made (it moved, its hub died, its tools or its
//!   session changed); a new one is made with the new description;
//! - at most `--cluster-stand-ins` live at once ([`DEFAULT_MAX_PROXIES`]): a new one, beyond
//!   that, ends the one used least recently (made again when it is next asked for), so any
//!   device of the cluster is reachable whatever the cap, the cap bounding only memory;
//! - a proxy that cannot be made says why: no live hub serves the device, or the hub that serves
//!   it did not answer (never "not connected" for a device that is);
//! - every request ends within its timeout plus the hop's grace, with the device's answer or a
//!   [`CallError`] that says what happened;
//! - a request whose caller goes away (a cancel, a task's TTL, a host that left) is cancelled
//!   on the serving hub at once, so the device hears `notifications/cancelled` as it does from
//!   its own hub, over the direct link and over the broker alike.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::cluster_rpc::ClusterNode;
use super::stand_ins::close;
pub use super::stand_ins::{DEFAULT_MAX_PROXIES, Proxies};
use crate::hub::remote::{Cluster, Located, ProxyError};
use crate::links::DeviceHandle;
use crate::links::handle::{Command, spawn_link};
use crate::session::{CallError, DeviceInfo, Phase, ToolEntry, ToolList};
use crate::wire::identity::Identity;
use crate::wire::jsonrpc::{RawResult, RpcError};

/// How long fetching the device's description may take.
const FETCH: Duration = Duration::from_secs(5);

impl Proxies {
    /// The device's proxy, made (with its description fetched from its hub) if needed.
    pub async fn make(
        &self,
        node: &Arc<ClusterNode>,
        device_id: &str,
    ) -> Result<DeviceHandle, ProxyError> {
        self.make_as(node, device_id, false).await
    }

    /// [`Self::make`]; `offered_only`: made to offer every device of the others, not asked for
    /// ([`Proxies::end_unasked_offers`]).
    pub async fn make_as(
        &self,
        node: &Arc<ClusterNode>,
        device_id: &str,
        offered_only: bool,
    ) -> Result<DeviceHandle, ProxyError> {
        if let Some(h) = self.get(device_id) {
            return Ok(h);
        }
        let (hub, device_id) = match node.locate(Some(device_id), &HashMap::new()) {
            Located::Remote { hub, device_id } => (hub, device_id),
            Located::Nowhere if !node.unlisted().is_empty() => {
                match node.find(device_id, crate::hub::remote::FIND_WAIT).await {
                    Ok(Located::Remote { hub, device_id }) => (hub, device_id),
                    Ok(_) => return Err(ProxyError::NotServed),
                    Err(e) => {
                        return Err(ProxyError::Unanswered(
                            e["message"].as_str().unwrap_or_default().to_string(),
                        ));
                    }
                }
            }
            _ => return Err(ProxyError::NotServed),
        };
        let unanswered = |why: String| {
            ProxyError::Unanswered(format!(
                "device {device_id} is served by hub {hub}, which did not answer: {why}"
            ))
        };
        let answer = node
            .forward(
                &hub,
                json!({"op": "device", "device": device_id, "wait_ms": 0}),
                FETCH,
            )
            .await
            .map_err(|e| match e["kind"].as_str() {
                Some("not_found" | "no_devices") => ProxyError::NotServed,
                _ => unanswered(e["message"].as_str().unwrap_or_default().to_string()),
            })?;
        let info = serde_json::from_str(&answer)
            .ok()
            .and_then(|v| description(&v))
            .ok_or_else(|| unanswered("its description could not be read".into()))?;
        // Listed (the index row it lives by) or, beyond the index, found on demand (lives until
        // its hub goes away or is evicted).
        let listed = node
            .row(&device_id)
            .map(|(h, r)| (h.to_string(), Some(r)))
            .unwrap_or((hub, None));
        let handle = spawn(node.clone(), listed, info);
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        // Another caller may have made one meanwhile: keep the first.
        if let Some(k) = map.get_mut(&device_id).filter(|k| k.handle.is_connected()) {
            k.offered_only &= offered_only;
            let h = k.handle.clone();
            drop(map);
            close(handle);
            return Ok(h);
        }
        map.retain(|_, k| k.handle.is_connected());
        let evicted = if map.len() >= self.max {
            let oldest = map
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(id, _)| id.clone());
            oldest.and_then(|id| map.remove(&id)).map(|k| k.handle)
        } else {
            None
        };
        map.insert(device_id, super::stand_ins::Kept { handle: handle.clone(), used: now, offered_only });
        drop(map);
        if let Some(old) = evicted {
            tracing::debug!(device = %old.device_id, "{} stand-ins for other hubs' devices are kept (--cluster-stand-ins): ended the one used least recently", self.max);
            close(old);
        }
        Ok(handle)
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

/// The proxy's task; it lives while the index lists the device as `listed` (hub and row; a
/// device found beyond the index: while its hub is alive).
fn spawn(
    node: Arc<ClusterNode>,
    listed: (String, Option<super::presence::Row>),
    info: DeviceInfo,
) -> DeviceHandle {
    let device_id = info.device_id.clone();
    let hub = listed.0.clone();
    let info = Arc::new(info);
    spawn_link(
        device_id.clone(),
        0,
        move |mut commands, mut publisher| {
            // Published before the handle is handed out: whoever made it reads its description at once.
            publisher.update(&info, Instant::now());
            async move {
                let mut changed = node.changed();
                // The id progress reports are published under (one allocation for the proxy's life).
                let shown: std::sync::Arc<str> = device_id.as_str().into();
                let still_there = |node: &ClusterNode| match &listed.1 {
                    Some(row) => node
                        .row(&device_id)
                        .is_some_and(|(h, r)| *h == *listed.0 && r == *row),
                    None => node.is_alive(&listed.0) && node.row(&device_id).is_none(),
                };
                loop {
                    tokio::select! {
                        cmd = commands.recv() => match cmd.map(|c| *c) {
                            Some(Command::Request(r)) => {
                                // A call whose host asked for progress (the bridge gave it a
                                // token): the device's reports come back while it runs.
                                let wants = r.params.as_ref().and_then(|p| p.pointer("/_meta/progressToken")).is_some();
                                let op = json!({"op": "rpc", "device": device_id, "method": r.method, "params": r.params, "timeout_ms": r.timeout.as_millis() as u64});
                                let deadline = r.timeout + crate::hub::remote::HOP_GRACE;
                                let (reports, mut heard) = tokio::sync::mpsc::channel(16);
                                let mut call = if wants { node.forward_with_progress(&hub, op, deadline, reports) } else { node.forward(&hub, op, deadline) };
                                let (timeout, mut reply, node, id) = (r.timeout, r.reply, node.clone(), shown.clone());
                                tokio::spawn(async move {
                                    loop {
                                        tokio::select! {
                                            answer = &mut call => {
                                                let _ = reply.send(answer.map_err(|e| call_error(&e, timeout)).and_then(result));
                                                return;
                                            }
                                            Some(report) = heard.recv() => node.relay_progress(&id, &report),
                                            // The caller went away (a host's cancel, a task's TTL, a
                                            // host that left): dropping the forwarded request cancels
                                            // it on the serving hub, which tells the device, as a
                                            // local device is told (issue 45.2).
                                            () = reply.closed() => return,
                                        }
                                    }
                                });
                            }
                            // Its caller dropped the reply's receiver with it: handled above.
                            Some(Command::Cancel(_)) => {}
                            Some(Command::Close(_)) | None => break,
                        },
                        r = changed.changed() => {
                            if r.is_err() || !still_there(&node) {
                                break;
                            }
                        }
                    }
                }
                publisher.gone();
            }
        },
        || {},
    )
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
        // The serving hub itself did not answer: said as such, not as the device's silence.
        Some("timeout") if e.get("hub").is_some() => CallError::Link(message),
        Some("timeout") => CallError::Timeout(timeout),
        Some("disconnected") => CallError::Disconnected,
        _ => CallError::Link(message),
    }
}
