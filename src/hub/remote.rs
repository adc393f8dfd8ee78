//! The rest of the cluster, as the control API sees it: devices served by *other* hubs on the
//! same broker, and the way to reach them. The hub knows no broker (layers call downward); the
//! MQTT side implements [`Cluster`] ([`crate::mqtt`] `cluster_rpc`) and sets [`Hub::cluster`].
//!
//! Rules this module enforces for every control request that leaves the hub:
//! - **local first**: a device this hub serves is always served here; only a selector that
//!   matches no local device is looked up in the cluster index;
//! - **one hop**: a request another hub forwarded is served locally only, never forwarded again
//!   (so no request loops between hubs);
//! - **an answer within the caller's deadline**: a forwarded request ends with the remote hub's
//!   answer or a typed error (`timeout`, `link_down` when the serving hub dies, `busy`), never
//!   silence; a device that is being taken over after its hub died is waited for, within the
//!   same deadline, instead of being reported missing.
//!
//! The MCP tasks a hub holds ([`TaskDesk`], set by the bridge) are reached the same way: a
//! `tasks/get|result|cancel` for a task another live hub holds is passed to that hub with the
//! requestor's owner as the asking hub saw it, and answered there exactly as a local request
//! (the `task` op, served for other hubs only: a local control client could claim any owner).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, watch};

use super::Hub;
use crate::links::DeviceHandle;

/// A control answer: the `ok` part as JSON text, or the `error` object.
pub type Answer = Result<String, Value>;

/// Where the cluster index places a selector that matches no local device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Served by this live hub, with this Device-Id.
    Remote { hub: String, device_id: String },
    /// Listed by a hub that died: the survivors are taking it over.
    Moving { device_id: String },
    /// Several devices of the cluster match.
    Ambiguous(String),
    Nowhere,
}

/// Why another hub's device has no stand-in here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    /// No live hub of the cluster serves it.
    NotServed,
    /// The hub that serves it did not answer (or answered with something unreadable): the message.
    Unanswered(String),
}

/// What a watch on another hub yields.
#[derive(Debug)]
pub enum WatchItem {
    /// Its first answer (`{"watching": …}`).
    Ok(Box<RawValue>),
    Event(Box<RawValue>),
    /// It ended or could not start (the last item).
    Error(Value),
}

/// The MCP tasks this hub holds, for a request another hub of the cluster forwarded (the bridge
/// implements it, [`crate::hub::Hub::tasks`]).
pub trait TaskDesk: Send + Sync {
    /// Answers `tasks/get`, `tasks/result` or `tasks/cancel` of `task_id` for `owner` exactly as a
    /// local request: the JSON-RPC result, or the JSON-RPC error (the one for an unknown id when
    /// `owner` does not own it). `tasks/result` resolves once the task has ended.
    /// `owner` is as the asking hub sent it (`bridge::tasks::Owner::to_wire`).
    fn answer<'a>(&'a self, owner: &'a str, method: &'a str, task_id: &'a str) -> BoxFuture<'a, Result<Value, Value>>;
}

/// The cluster, for the control API.
pub trait Cluster: Send + Sync {
    /// This hub's id in the cluster.
    fn me(&self) -> &str;
    /// The name the operator gave this hub (`serve --hub-name`), if any.
    fn name(&self) -> Option<&str> {
        None
    }
    /// Where another hub serves the device `selector` names (exact Device-Id, alias, or a
    /// unique prefix), by the cluster index.
    fn locate(&self, selector: Option<&str>, aliases: &std::collections::HashMap<String, String>) -> Located;
    /// Bumped whenever the index or the set of live hubs changes.
    fn changed(&self) -> watch::Receiver<u64>;
    /// Sends one control request (`op` and its fields, no `id`) to `hub` and waits at most
    /// `deadline` for its answer.
    fn forward(&self, hub: &str, op: Value, deadline: Duration) -> BoxFuture<'static, Answer>;
    /// Runs a `watch` on `hub`: its first answer, then every event (as JSON text), on `events`,
    /// until `events` is closed or the hub goes away.
    fn watch(
        &self,
        hub: &str,
        op: Value,
        events: mpsc::Sender<WatchItem>,
    ) -> BoxFuture<'static, ()>;
    /// Up to `limit` of the other live hubs' devices their indexes list, after the Device-Id
    /// `after`, in Device-Id order: `(device_id, row)`, the row the JSON text of `{hub,
    /// device_id, transport, phase, tool_count, connected_at_ms}`. O(limit), whatever the cluster.
    fn remote_page(&self, after: Option<&str>, limit: usize) -> Vec<(String, String)>;
    /// How many devices of the other live hubs their indexes list.
    fn remote_count(&self) -> usize;
    /// The other live hubs that serve devices their index does not list, and how many.
    fn unlisted(&self) -> Vec<(String, u64)>;
    /// Asks the hubs that do not list all their devices ([`Self::unlisted`]) whether they serve
    /// the device `selector` names, within `deadline`: where it is, or an error that names the
    /// hub that did not answer.
    fn find(
        &self,
        selector: &str,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Located, Value>>;
    /// The other live hubs.
    fn peers(&self) -> Vec<String>;
    /// Whether `hub` is another live hub of the cluster (no broker traffic).
    fn is_peer(&self, hub: &str) -> bool {
        hub != self.me() && self.peers().iter().any(|p| p == hub)
    }
    /// Hands every hub of the cluster `device_id`'s admission decision made here: a sealed
    /// record ([`crate::hub::admission::Record`]), kept by the broker for hubs that come later.
    fn publish_admission(&self, device_id: &str, record: &str);
    /// A device another hub serves, as a local handle (its requests are forwarded), made with
    /// its description if needed; why not if no live hub serves it or its hub did not answer.
    fn proxy(&self, device_id: &str) -> BoxFuture<'static, Result<DeviceHandle, ProxyError>>;
    /// The proxy [`Self::proxy`] made for a device, while it lives.
    fn cached_proxy(&self, device_id: &str) -> Option<DeviceHandle>;
    /// Every live proxy: the other hubs' ready devices, as `/mcp` offers them (made in the
    /// background as the index changes, up to a cap).
    fn proxies(&self) -> Vec<DeviceHandle>;
    /// Whether this hub is stopping (it refuses other hubs' requests, and its index keeps
    /// listing the devices it is leaving, so the others see them move rather than vanish).
    fn is_stopping(&self) -> bool {
        false
    }
}

/// The cluster of a hub, if it runs in one.
pub fn of(hub: &Hub) -> Option<Arc<dyn Cluster>> {
    hub.cluster.get().cloned()
}

/// Where a request for `selector` goes: `Ok(None)` here, `Ok(Some((hub, device_id)))` to
/// another hub, `Err(())` when neither has it (the caller reports its local error). Waits, up to
/// `deadline`, for a device the index says is moving.
pub async fn route(hub: &Hub, cluster: Option<&Arc<dyn Cluster>>, selector: Option<&str>, deadline: Duration) -> Result<Option<(String, String)>, Value> {
    use super::registry::SelectError;
    let Some(cluster) = cluster else { return Ok(None) };
    match hub.registry.select(selector) {
        Ok(_) | Err(SelectError::NotReady(_) | SelectError::Ambiguous { .. } | SelectError::AmbiguousPrefix { .. }) => return Ok(None),
        Err(SelectError::NotFound(_) | SelectError::NoDevices) => {}
    }
    let until = tokio::time::Instant::now() + deadline;
    let mut changed = cluster.changed();
    loop {
        let located = match cluster.locate(selector, hub.registry.aliases()) {
            // Not in any index: asked of the hubs that leave some of their devices out.
            Located::Nowhere if !cluster.unlisted().is_empty() => match selector {
                Some(sel) => cluster.find(sel, deadline.min(FIND_WAIT)).await?,
                None => Located::Nowhere,
            },
            located => located,
        };
        match located {
            Located::Remote { hub, device_id } => return Ok(Some((hub, device_id))),
            Located::Ambiguous(ids) => {
                let sel = selector.unwrap_or_default();
                return Err(json!({"kind": "ambiguous", "message": format!("{sel:?} matches several devices of the cluster ({ids}); give more of the id")}));
            }
            Located::Nowhere => return Ok(None),
            Located::Moving { device_id } => {
                // Taken over here (it joins this registry), or listed again by a survivor (the
                // index changes): whichever comes first. A device taken over here no index
                // lists yet, so the index alone would keep the request waiting to its deadline.
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                tokio::select! {
                    here = hub.registry.wait_present(&device_id, left) => {
                        if here {
                            return Ok(None);
                        }
                        return Err(json!({"kind": "link_down", "message": format!("device {device_id} was served by a hub that went away, and no other hub has taken it over yet; try again in a few seconds")}));
                    }
                    _ = changed.changed() => {}
                }
            }
        }
    }
}

/// Longest a forwarded request waits beyond the caller's own deadline (the hop there and back).
pub const HOP_GRACE: Duration = Duration::from_secs(2);

/// Longest a lookup of a device no index lists waits for the hubs that leave devices out.
pub const FIND_WAIT: Duration = Duration::from_secs(2);

/// `text` (a JSON object) with `"hub": hub` as its first field.
pub fn with_hub(text: &str, hub: &str) -> String {
    with_field(text, "hub", hub)
}

/// `text` (a JSON object, a device of this hub) with this hub's id (`"hub"`) first and, when the
/// operator named the hub (`serve --hub-name`), its name (`"hub_name"`) after it.
pub fn with_this_hub(text: &str, cluster: &dyn Cluster) -> String {
    match cluster.name() {
        Some(name) => with_hub(&with_field(text, "hub_name", name), cluster.me()),
        None => with_hub(text, cluster.me()),
    }
}

fn with_field(text: &str, key: &str, value: &str) -> String {
    match text.strip_prefix('{') {
        Some(rest) => {
            let sep = if rest.trim_start().starts_with('}') { "" } else { "," };
            format!("{{{}:{}{sep}{rest}", Value::from(key), Value::from(value))
        }
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_goes_first_in_an_object() {
        assert_eq!(with_hub(r#"{"a":1}"#, "h1"), r#"{"hub":"h1","a":1}"#);
        assert_eq!(with_hub("{}", "h\"2"), r#"{"hub":"h\"2"}"#);
        assert_eq!(with_hub("null", "h"), "null");
        let v: Value = serde_json::from_str(&with_hub(r#"{"device_id":"aa"}"#, "x")).unwrap();
        assert_eq!(v, json!({"hub": "x", "device_id": "aa"}));
    }
}
