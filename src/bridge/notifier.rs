//! Who to tell when devices change: open MCP sessions (legacy, by their peer) and
//! `subscriptions/listen` streams (2026-07-28), each with the endpoint scope it came through.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, SubscriptionSink};
use serde_json::Value;

use super::Scope;
use crate::hub::Hub;
use crate::links::handle::{LinkEvent, Lifecycle};
use crate::session::Event;

/// How many device notifications each device's resource keeps.
const RECENT: usize = 50;

#[derive(Default)]
pub struct Notifier {
    peers: Mutex<Vec<(Scope, Peer<RoleServer>)>>,
    listeners: Mutex<HashMap<u64, (Scope, SubscriptionSink)>>,
    resource_subscribers: Mutex<Vec<(String, u64, Peer<RoleServer>)>>,
    recent: Mutex<HashMap<String, VecDeque<Value>>>,
    next_listener: std::sync::atomic::AtomicU64,
}

impl Notifier {
    pub fn add_peer(&self, scope: Scope, peer: Peer<RoleServer>) {
        self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((scope, peer));
    }

    pub fn add_listener(&self, scope: Scope, sink: SubscriptionSink) -> u64 {
        let key = self.next_listener.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, (scope, sink));
        key
    }

    pub fn remove_listener(&self, key: u64) {
        self.listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key);
    }

    /// `session` tells one MCP session's subscriptions from another's.
    pub fn subscribe(&self, uri: String, session: u64, peer: Peer<RoleServer>) {
        self.resource_subscribers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((uri, session, peer));
    }

    pub fn unsubscribe(&self, uri: &str, session: u64) {
        self.resource_subscribers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|(u, s, _)| !(u == uri && *s == session));
    }

    /// The device notifications kept for a device's resource.
    pub fn recent(&self, device_id: &str) -> Vec<Value> {
        self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(device_id).map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }

    /// Follows the hub's events until the hub is gone.
    pub fn spawn(self: &Arc<Self>, hub: &Arc<Hub>) {
        let mut events = hub.registry.events.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let ev = match events.recv().await {
                    Ok(ev) => ev,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                match &ev.event {
                    LinkEvent::Session(Event::Ready { .. } | Event::ToolsChanged { .. })
                    | LinkEvent::Link(Lifecycle::Disconnected { .. }) => me.tools_changed(&ev.device_id).await,
                    LinkEvent::Session(Event::Notification { method, params }) => {
                        me.device_notification(&ev.device_id, method.clone(), params.clone()).await
                    }
                    _ => {}
                }
            }
        });
    }

    async fn tools_changed(&self, device_id: &str) {
        let concerned = |s: &Scope| match s {
            Scope::All => true,
            Scope::Device(id) => id == device_id,
        };
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            peers.retain(|(_, p)| !p.is_transport_closed());
            peers.iter().filter(|(s, _)| concerned(s)).map(|(_, p)| p.clone()).collect()
        };
        for p in peers {
            let _ = p.notify_tool_list_changed().await;
        }
        let sinks: Vec<SubscriptionSink> =
            self.listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().filter(|(s, _)| concerned(s)).map(|(_, k)| k.clone()).collect();
        for s in sinks {
            let _ = s.notify_tool_list_changed().await;
        }
    }

    async fn device_notification(&self, device_id: &str, method: String, params: Value) {
        {
            let mut recent = self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let q = recent.entry(device_id.to_string()).or_default();
            if q.len() == RECENT {
                q.pop_front();
            }
            q.push_back(serde_json::json!({"method": method, "params": params, "received_at": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()}));
        }
        let uri = super::notifications_uri(device_id);
        let peers: Vec<Peer<RoleServer>> = {
            let mut subs = self.resource_subscribers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            subs.retain(|(_, _, p)| !p.is_transport_closed());
            subs.iter().filter(|(u, _, _)| *u == uri).map(|(_, _, p)| p.clone()).collect()
        };
        for p in peers {
            let _ = p.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone())).await;
        }
        let sinks: Vec<SubscriptionSink> = self.listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().map(|(_, k)| k.clone()).collect();
        for s in sinks {
            let _ = s.notify_resource_updated(uri.clone()).await;
        }
    }
}
