//! A hub that stops (SIGTERM: a restart, an upgrade) leaves the cluster without failing the
//! requests other hubs send it (issue 45.4). Rules:
//! - **Stopping refuses, typed.** From the moment the hub starts stopping
//!   ([`ClusterNode::stop_serving`]), a request of another hub is answered `hub_stopping` at
//!   once: nothing of it reached any device.
//! - **What is under way is answered.** The hub then waits, at most [`DRAIN`], for the requests
//!   already under way here to be answered, before it says goodbye to its devices and leaves.
//! - **A refused request goes where its device goes.** The asking hub waits, within the
//!   request's own deadline, for the device to be served again — by another live hub (the
//!   request is sent there) or by itself (served here, as a forwarded request is) — and sends it
//!   once more: it had never been sent. A request that names no device (a listing) gets the
//!   refusal. A request that was under way when its hub died is never sent again (it may have
//!   run): that stays `link_down`.
//! - **Nothing more is sent to a stopping hub.** Its first refusal marks it leaving here for
//!   [`LEAVING_FOR`], and a request for it is not sent but goes where its device goes; the
//!   stopping hub goes on refusing for [`LINGER`] after the drain, so the requests already on their
//!   way to it get their refusal rather than a `link_down` when it leaves.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Answer, ClusterNode, Located, Reply, lock};
use crate::hub::control;
use crate::session::Phase;

/// Longest a stopping hub waits for the requests under way to be answered.
pub const DRAIN: Duration = Duration::from_secs(3);
/// How long a stopping hub goes on refusing after the drain (requests already on their way).
pub const LINGER: Duration = Duration::from_millis(250);
/// How long a hub that said it is stopping is sent nothing more (it leaves within
/// [`DRAIN`] + [`LINGER`]; a hub that comes back with the same id later is sent to again).
pub const LEAVING_FOR: Duration = Duration::from_secs(5);

/// The answer to a request that came while this hub stops.
pub(super) fn refusal(me: &str, c: u64) -> String {
    json!({"id": c, "error": {"kind": "hub_stopping", "message": format!("hub {me} is stopping: the request reached no device; its devices are being taken over by the other hubs")}}).to_string()
}

impl ClusterNode {
    /// Starts stopping: other hubs' requests are refused from now on, and this waits (at most
    /// [`DRAIN`]) until the ones under way here have been answered.
    pub async fn stop_serving(&self) {
        {
            // Under the lock requests are admitted with: none is admitted after this unseen.
            let _calls = lock(&self.calls);
            self.stopping.store(true, std::sync::atomic::Ordering::Release);
        }
        let until = Instant::now() + DRAIN;
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if lock(&self.calls).under_way() == 0 || tokio::time::timeout_at(until, drained).await.is_err() {
                break;
            }
        }
        // Requests on their way can only come from live peers: alone, nothing to wait for.
        if !crate::hub::remote::Cluster::peers(self).is_empty() {
            tokio::time::sleep(LINGER).await;
        }
    }

    /// Whether hub `to` said it is stopping (within [`LEAVING_FOR`]).
    pub(super) fn is_leaving(&self, to: &str) -> bool {
        let mut leaving = lock(&self.leaving);
        leaving.retain(|_, at| at.elapsed() < LEAVING_FOR);
        leaving.contains_key(to)
    }

    fn mark_leaving(&self, hub: &str) {
        let mut leaving = lock(&self.leaving);
        // Bounded by the live hubs, which are few; an old mark is dropped on the next look.
        if leaving.len() < 1024 {
            leaving.insert(hub.to_string(), std::time::Instant::now());
        }
    }

    /// Where `device` is served now that hub `stopped` refused a request for it, waiting until
    /// `until`: the request's answer from there. `None` when nobody serves it by then.
    async fn again(&self, stopped: &str, device: &str, mut op: Value, until: Instant, progress: Option<mpsc::Sender<Box<RawValue>>>) -> Option<Answer> {
        let hub = self.hub.upgrade()?;
        let mut changed = self.changed.subscribe();
        loop {
            if hub.registry.get(device).is_some_and(|h| h.phase() == Some(Phase::Ready)) {
                // Taken over here: served as another hub's request is, from this hub's registry.
                op["id"] = json!(0);
                let (tx, _events) = mpsc::channel(1);
                let text = control::serve_forwarded(hub.clone(), &op.to_string(), tx).await?;
                let reply: Reply = serde_json::from_str(&text).ok()?;
                return Some(match (reply.ok, reply.error) {
                    (Some(ok), _) => Ok(ok.get().to_string()),
                    (None, Some(e)) => Err(e),
                    (None, None) => Err(json!({"kind": "link_down", "message": "no answer"})),
                });
            }
            if let Located::Remote { hub: to, device_id } = self.locate_device(device)
                && (to != stopped || !self.is_leaving(&to))
            {
                op["device"] = json!(device_id);
                return Some(self.forward_once(&to, op, until.saturating_duration_since(Instant::now()), progress).await);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = hub.registry.wait_ready(Some(device), left) => {}
            }
        }
    }

    fn locate_device(&self, device: &str) -> Located {
        lock(&self.view).locate(Some(device), &HashMap::new())
    }
}

/// A request to hub `hub` ([`ClusterNode::forward_once`]); refused because that hub is
/// stopping, sent again where its device is served next (see the module's rules).
pub(super) fn forward(node: &ClusterNode, hub: &str, op: Value, deadline: Duration, progress: Option<mpsc::Sender<Box<RawValue>>>) -> BoxFuture<'static, Answer> {
    let first = node.forward_once(hub, op.clone(), deadline, progress.clone());
    let (this, stopped) = (node.this.clone(), hub.to_string());
    async move {
        let until = Instant::now() + deadline;
        let refused = match first.await {
            // Refused by a stopping hub, or never sent (its hub is leaving, or left): it may go
            // where the device goes.
            Err(e) if e["kind"] == "hub_stopping" || e["unsent"] == true => e,
            other => return other,
        };
        let (Some(node), Some(device)) = (this.upgrade(), op["device"].as_str().map(str::to_string)) else {
            return Err(refused);
        };
        if refused["kind"] == "hub_stopping" {
            node.mark_leaving(&stopped);
        }
        tracing::debug!(hub = %stopped, device = %device, "the device's hub is stopping; the request goes where the device goes");
        node.again(&stopped, &device, op, until, progress).await.unwrap_or(Err(refused))
    }
    .boxed()
}

